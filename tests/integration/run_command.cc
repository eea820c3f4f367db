#include "tests/integration/run_command.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace scantune::testing {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

}  // namespace

std::vector<std::string> MergedEnvironment(const Env& extra) {
  std::vector<std::string> merged;
  for (char** e = environ; *e; ++e) {
    std::string entry(*e);
    std::string name = entry.substr(0, entry.find('='));
    bool overridden = false;
    for (const auto& [key, value] : extra) overridden |= (key == name);
    if (!overridden) merged.push_back(entry);
  }
  for (const auto& [key, value] : extra) merged.push_back(key + "=" + value);
  return merged;
}

CommandResult RunCommand(const std::vector<std::string>& argv, const Env& env, std::chrono::seconds limit) {
  CommandResult result;
  char dir_template[] = "/tmp/st-cmd-XXXXXX";
  const char* dir = mkdtemp(dir_template);
  if (!dir) {
    result.err = std::string("mkdtemp: ") + std::strerror(errno);
    return result;
  }
  std::string out_path = std::string(dir) + "/out";
  std::string err_path = std::string(dir) + "/err";

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> merged = MergedEnvironment(env);
  std::vector<char*> envp;
  for (std::string& e : merged) envp.push_back(e.data());
  envp.push_back(nullptr);

  pid_t pid = 0;
  int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    result.err = "posix_spawn " + argv[0] + ": " + std::strerror(rc);
    std::filesystem::remove_all(dir);
    return result;
  }
  auto give_up = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (true) {
    pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (std::chrono::steady_clock::now() > give_up) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      result.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.out = ReadFile(out_path);
  result.err = ReadFile(err_path);
  std::filesystem::remove_all(dir);
  return result;
}

}  // namespace scantune::testing
