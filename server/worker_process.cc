#include "server/worker_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "common/framing.h"
#include "common/log.h"

extern char** environ;

namespace scantune {
namespace {

std::string Errno(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

std::string DescribeWaitStatus(int status) {
  if (WIFEXITED(status)) return "exit status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = strsignal(sig);
    return "signal " + std::to_string(sig) + " (" + (name ? name : "?") + ")";
  }
  return "wait status " + std::to_string(status);
}

// posix_spawn with `child_fd` duplicated to `target_fd` in the child.
// child_fd must differ from target_fd: dup2 onto itself would keep CLOEXEC.
StatusOr<pid_t> Spawn(const std::string& path, const std::vector<std::string>& argv_strings, int child_fd,
                      int target_fd) {
  std::vector<char*> argv;
  argv.reserve(argv_strings.size() + 1);
  for (const std::string& a : argv_strings) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, child_fd, target_fd);
  // The child gets default signal dispositions (the daemon ignores SIGPIPE).
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  sigset_t empty;
  sigemptyset(&empty);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);

  pid_t pid = -1;
  const int rc = posix_spawn(&pid, path.c_str(), &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return Unavailable("cannot start " + path + ": " + std::strerror(rc));
  return pid;
}

// A CLOEXEC duplicate of fd numbered >= 10, so that it never equals the target
// fd of a dup2 in the child; the original is closed.
StatusOr<int> MoveHigh(int fd) {
  const int high = fcntl(fd, F_DUPFD_CLOEXEC, 10);
  const int saved = errno;
  ::close(fd);
  if (high < 0) {
    errno = saved;
    return Internal(Errno("fcntl(F_DUPFD_CLOEXEC)"));
  }
  return high;
}

}  // namespace

WorkerProcess::~WorkerProcess() {
  if (running()) {
    Kill();
    Reap();
  } else if (fd_ >= 0) {
    ::close(fd_);
  }
}

StatusOr<v1::Hello> WorkerProcess::Start(const std::string& path, int ordinal, const std::vector<std::string>& args,
                                         int hello_timeout_ms) {
  if (running()) return Internal("worker already running");
  int fds[2];
  // CLOEXEC on both ends: a worker spawned concurrently for another device
  // must never inherit this pair (it would keep EOF from ever arriving).
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return Internal(Errno("socketpair"));
  ASSIGN_OR_RETURN(int child_fd, MoveHigh(fds[1]));

  std::vector<std::string> argv = {path, "--fd", std::to_string(kChildFd), "--device", std::to_string(ordinal)};
  argv.insert(argv.end(), args.begin(), args.end());
  StatusOr<pid_t> pid = Spawn(path, argv, child_fd, kChildFd);
  ::close(child_fd);
  if (!pid.ok()) {
    ::close(fds[0]);
    return pid.status();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    pid_ = *pid;
  }
  fd_ = fds[0];

  v1::WorkerEvent event;
  Status read = Read(&event, hello_timeout_ms);
  if (!read.ok() || !event.has_hello()) {
    Kill();
    const std::string how = Reap();
    if (read.ok()) return Unavailable("worker's first message was not a Hello");
    return Unavailable("worker sent no Hello (" + read.message() + "; " + how + ")");
  }
  return event.hello();
}

bool WorkerProcess::running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pid_ > 0;
}

pid_t WorkerProcess::pid() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pid_;
}

Status WorkerProcess::Send(const v1::WorkerCommand& command) {
  if (fd_ < 0) return Unavailable("worker not running");
  return WriteFrame(fd_, command);
}

Status WorkerProcess::Read(v1::WorkerEvent* event, int timeout_ms) {
  if (fd_ < 0) return Unavailable("worker not running");
  return ReadFrame(fd_, event, timeout_ms);
}

void WorkerProcess::Kill() {
  std::lock_guard<std::mutex> lock(mu_);
  // The pid cannot be reused before Reap: an unreaped child stays a zombie.
  if (pid_ > 0) ::kill(pid_, SIGKILL);
}

std::string WorkerProcess::Reap() {
  pid_t pid;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pid = pid_;
  }
  std::string how = "not running";
  if (pid > 0) {
    int status = 0;
    pid_t r;
    do {
      r = ::waitpid(pid, &status, 0);
    } while (r < 0 && errno == EINTR);
    how = r == pid ? DescribeWaitStatus(status) : Errno("waitpid");
    std::lock_guard<std::mutex> lock(mu_);
    pid_ = -1;
  }
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  return how;
}

void WorkerProcess::Stop(int grace_ms) {
  if (!running()) return;
  v1::WorkerCommand shutdown;
  shutdown.set_shutdown(true);
  if (Send(shutdown).ok()) {
    // Wait for EOF (the worker exiting), skipping anything it still says.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms);
    v1::WorkerEvent event;
    while (true) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
      if (left <= 0) break;
      if (!Read(&event, static_cast<int>(left)).ok()) break;
    }
  }
  // Give an exiting worker a moment to go before it is killed.
  for (int i = 0; i < 20; ++i) {
    pid_t pid = this->pid();
    int status = 0;
    if (pid <= 0) break;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      std::lock_guard<std::mutex> lock(mu_);
      pid_ = -1;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  Kill();
  Reap();
}

StatusOr<std::string> RunWorkerList(const std::string& path, const std::vector<std::string>& args, int timeout_ms) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return Internal(Errno("pipe2"));
  ASSIGN_OR_RETURN(int write_end, MoveHigh(fds[1]));
  std::vector<std::string> argv = {path, "--list"};
  argv.insert(argv.end(), args.begin(), args.end());
  StatusOr<pid_t> pid = Spawn(path, argv, write_end, STDOUT_FILENO);
  ::close(write_end);
  if (!pid.ok()) {
    ::close(fds[0]);
    return pid.status();
  }
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  bool timed_out = false;
  bool too_long = false;
  while (true) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd pfd{fds[0], POLLIN, 0};
    const int ready = ::poll(&pfd, 1, static_cast<int>(left));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    char buf[4096];
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > (1u << 20)) {  // a device list is a few hundred bytes
      too_long = true;
      break;
    }
  }
  ::close(fds[0]);
  if (timed_out || too_long) ::kill(*pid, SIGKILL);
  int status = 0;
  while (::waitpid(*pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) return DeadlineExceeded(path + " --list took longer than " + std::to_string(timeout_ms) + " ms");
  return out;
}

}  // namespace scantune
