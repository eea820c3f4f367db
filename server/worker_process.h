// WorkerProcess: one scantune-worker child process and the daemon's end of its
// socketpair. Owns the child's pid and the socket; spawns it with
// posix_spawn (the child end becomes fd kChildFd, `--fd kChildFd --device N`),
// reads its Hello, exchanges frames, and kills and reaps it. The daemon never
// touches CUDA itself: everything GPU-side happens in this child, so a fault
// there costs a child, never the daemon.
//
// Thread safety: one owner thread calls Start/Send/Read/Reap; Kill() may be
// called from any thread (shutdown uses it to unblock a Read), which is why
// the pid sits under a mutex and is only cleared by the reaping owner.
#pragma once

#include <sys/types.h>

#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"
#include "proto/worker.pb.h"

namespace scantune {

class WorkerProcess {
 public:
  // The fd number the child end is duplicated to in the child.
  static constexpr int kChildFd = 3;

  WorkerProcess() = default;
  ~WorkerProcess();  // kills and reaps a child still running
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  // Spawns `path --fd 3 --device ordinal args...` and waits up to
  // hello_timeout_ms for its Hello (returned as is, error field included).
  StatusOr<v1::Hello> Start(const std::string& path, int ordinal, const std::vector<std::string>& args,
                            int hello_timeout_ms);

  bool running() const;
  pid_t pid() const;

  Status Send(const v1::WorkerCommand& command);
  // DEADLINE_EXCEEDED when silent for timeout_ms, UNAVAILABLE on EOF.
  Status Read(v1::WorkerEvent* event, int timeout_ms);

  // SIGKILL (safe from any thread; a no-op once reaped).
  void Kill();
  // Waits for the child to exit (after Kill, or after EOF) and says how it
  // ended ("exit status 1", "signal 6 (Aborted)"); closes the socket.
  std::string Reap();
  // Polite stop: a shutdown command, up to grace_ms to exit, then SIGKILL.
  void Stop(int grace_ms);

 private:
  mutable std::mutex mu_;
  pid_t pid_ = -1;  // guarded by mu_; -1 once reaped
  int fd_ = -1;     // owner thread only
};

// Runs `path --list` (stdout captured, at most timeout_ms) and returns its
// output; best effort, used only to learn how many devices there are.
StatusOr<std::string> RunWorkerList(const std::string& path, const std::vector<std::string>& args, int timeout_ms);

}  // namespace scantune
