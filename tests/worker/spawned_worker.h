// SpawnedWorker (tests only): runs the scantune-worker binary as the daemon
// would, on one end of a socketpair passed as fd 3, so tests exercise the
// real process, its protocol and its exit codes. Owns the child and its
// socket; kills and reaps the child on destruction. Not thread-safe.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/framing.h"
#include "proto/worker.pb.h"

namespace scantune::testing {

class SpawnedWorker {
 public:
  // Spawns `path --fd 3 --device ordinal`; false if it could not be started.
  bool Start(const std::string& path, int ordinal) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return false;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, sv[1], 3);  // dup2 clears CLOEXEC on fd 3
    std::vector<std::string> args = {path, "--fd", "3", "--device", std::to_string(ordinal)};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int rc = ::posix_spawn(&pid_, path.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(sv[1]);
    fd_ = sv[0];
    return rc == 0;
  }

  ~SpawnedWorker() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      Wait();
    }
    if (fd_ >= 0) ::close(fd_);
  }

  int fd() const { return fd_; }

  Status Send(const v1::WorkerCommand& command) { return WriteFrame(fd_, command); }
  Status Receive(v1::WorkerEvent* event, int timeout_ms) { return ReadFrame(fd_, event, timeout_ms); }

  // Asks the worker to shut down and checks that it exits with status 0.
  void ShutdownAndExpectCleanExit() {
    v1::WorkerCommand shutdown;
    shutdown.set_shutdown(true);
    ASSERT_TRUE(Send(shutdown).ok());
    const int status = Wait();
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0);
  }

  // The raw wait status of the child.
  int Wait() {
    if (!reaped_) {
      while (::waitpid(pid_, &status_, 0) < 0 && errno == EINTR) {
      }
      reaped_ = true;
    }
    return status_;
  }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
  int status_ = 0;
  bool reaped_ = false;
};

}  // namespace scantune::testing
