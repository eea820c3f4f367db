#include "tests/integration/test_daemon.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <map>
#include <thread>

#include "common/problem.h"
#include "compiler/plan.h"

namespace scantune::testing {

StatusOr<std::unique_ptr<TestDaemon>> TestDaemon::Start(const TestDaemonOptions& options) {
  std::unique_ptr<TestDaemon> daemon(new TestDaemon());
  // Short: a unix socket path must fit in sockaddr_un (108 bytes).
  if (options.dir.empty()) {
    char dir_template[] = "/tmp/st-it-XXXXXX";
    if (!mkdtemp(dir_template)) return Internal(std::string("mkdtemp: ") + std::strerror(errno));
    daemon->dir_ = dir_template;
    daemon->owns_dir_ = true;
  } else {
    daemon->dir_ = options.dir;
  }
  const std::string listen = options.listen.empty() ? "unix://" + daemon->dir_ + "/scantune.sock" : options.listen;
  daemon->address_ = options.connect.empty() ? listen : options.connect;
  daemon->tls_ca_file_ = options.tls_ca_file;
  daemon->token_file_ = options.token_file;

  std::vector<std::string> argv = {SCANTUNED_PATH, "--listen", listen, "--db",
                                   daemon->dir_ + "/scantune.db", "--worker", options.worker};
  argv.insert(argv.end(), options.flags.begin(), options.flags.end());
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  Env env = options.env;
  env.push_back({"SPDLOG_LEVEL", "debug"});
  std::vector<std::string> merged = MergedEnvironment(env);
  std::vector<char*> envp;
  for (std::string& e : merged) envp.push_back(e.data());
  envp.push_back(nullptr);

  std::string log_path = daemon->dir_ + "/scantuned.log";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  int rc = posix_spawn(&daemon->pid_, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return Internal(std::string("posix_spawn scantuned: ") + std::strerror(rc));

  // Polls health; bails out early if the daemon exits instead of serving.
  std::unique_ptr<ScantuneClient> client = daemon->Client();
  auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (true) {
    if (!daemon->Alive()) {
      return Internal("scantuned exited with status " + std::to_string(daemon->exit_status_) +
                      " before serving; its log:\n" + daemon->Log());
    }
    Status serving = client->WaitUntilServing(std::chrono::milliseconds(250));
    if (serving.ok()) break;
    if (std::chrono::steady_clock::now() > give_up) {
      return Unavailable("scantuned did not serve within 60 s: " + serving.message() + "\nits log:\n" +
                         daemon->Log());
    }
  }
  return daemon;
}

TestDaemon::~TestDaemon() {
  if (pid_ > 0) {
    Status stopped = Stop();
    (void)stopped;
  }
  if (owns_dir_) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

bool TestDaemon::Alive() {
  if (pid_ <= 0 || exit_status_ >= 0) return false;
  int status = 0;
  pid_t done = waitpid(pid_, &status, WNOHANG);
  if (done == pid_) {
    exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return false;
  }
  return true;
}

Status TestDaemon::Serving() {
  if (!Alive()) return Unavailable("scantuned exited with status " + std::to_string(exit_status_));
  return Client()->CheckHealth();
}

Status TestDaemon::Stop() {
  if (Alive()) {
    kill(pid_, SIGTERM);
    // Generous: a clean stop waits for running jobs. SIGKILL only if hung.
    auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (Alive()) {
      if (std::chrono::steady_clock::now() > give_up) {
        kill(pid_, SIGKILL);
        int status = 0;
        waitpid(pid_, &status, 0);
        exit_status_ = 128 + SIGKILL;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  pid_ = -1;
  if (exit_status_ != 0) return Internal("scantuned exited with status " + std::to_string(exit_status_));
  return Status::Ok();
}

std::string TestDaemon::Log() const {
  std::ifstream file(dir_ + "/scantuned.log");
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

CommandResult TestDaemon::Cli(const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {SCANTUNE_CLI_PATH, "--address", address_};
  if (!tls_ca_file_.empty()) argv.insert(argv.end(), {"--tls-ca", tls_ca_file_});
  if (!token_file_.empty()) argv.insert(argv.end(), {"--token-file", token_file_});
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv);
}

std::unique_ptr<ScantuneClient> TestDaemon::Client() const {
  ClientOptions options;
  options.address = address_;
  options.tls_ca_file = tls_ca_file_;
  options.token_file = token_file_;
  return std::make_unique<ScantuneClient>(options);
}

StatusOr<int> FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Internal(std::string("socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const int err = errno;
    close(fd);
    return Internal(std::string("binding a free port: ") + std::strerror(err));
  }
  close(fd);
  return static_cast<int>(ntohs(addr.sin_port));
}

std::vector<std::string> OneVariantPerAlgorithm(const std::string& shape) {
  Problem problem;
  problem.op = Op::kLinearScan;
  problem.shape = *ParseShape(shape);
  problem.dtype = DType::kBF16;
  problem.mode = Mode::kFwdBwd;
  std::map<Algorithm, std::string> one_each;
  for (const Variant& v : EnumerateVariants(Op::kLinearScan, false)) {
    if (CanImplement(v, problem, DeviceLimits()).ok() && !one_each.count(v.algorithm)) {
      one_each[v.algorithm] = v.Name();
    }
  }
  std::vector<std::string> names;
  for (const auto& [algorithm, name] : one_each) names.push_back(name);
  return names;
}

}  // namespace scantune::testing
