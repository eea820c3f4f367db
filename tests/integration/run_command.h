// RunCommand: runs a program as a child process with extra environment
// variables and captures its exit code, stdout and stderr (through files in a
// temp dir, so a chatty child can never block on a full pipe). Used by the
// integration tests to drive the real `scantune` CLI. Thread-compatible.
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace scantune::testing {

struct CommandResult {
  int exit_code = -1;   // 128 + signal if killed by one
  std::string out;
  std::string err;
  bool timed_out = false;
};

using Env = std::vector<std::pair<std::string, std::string>>;

// Spawns argv[0] with argv; `env` is added to (and overrides) this process's
// environment. A child still running after `limit` is killed (a safety net for
// a hung test, not a timing assertion).
CommandResult RunCommand(const std::vector<std::string>& argv, const Env& env = {},
                         std::chrono::seconds limit = std::chrono::seconds(300));

// The environment of this process plus `extra`, as posix_spawn wants it.
std::vector<std::string> MergedEnvironment(const Env& extra);

}  // namespace scantune::testing
