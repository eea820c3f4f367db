// scantuned: the scantune daemon. Parses flags, opens the Engine (database,
// compiler, one worker per GPU), serves scantune.v1.Scantune and the standard
// health service (on a local address, or beyond the host with TLS and bearer
// tokens: server/listen_security.h), and shuts down cleanly on SIGINT/SIGTERM
// (a second signal exits at once).
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include "common/log.h"
#include "server/engine.h"
#include "server/listen_security.h"
#include "server/service.h"

namespace scantune {
namespace {

constexpr const char* kDefaultAddress = "unix:///tmp/scantune.sock";
constexpr int kDefaultMaxReceiveBytes = 4 << 20;
// Replies carry cubins and record pages; they may be larger than requests.
constexpr int kMaxSendBytes = 64 << 20;

struct Flags {
  std::string listen;
  std::string db = "./scantune.db";
  std::string worker;
  bool enable_test_variants = false;
  bool enable_benchmark = false;
  int compile_threads = 2;
  double candidate_timeout_s = 60.0;
  int max_message_bytes = kDefaultMaxReceiveBytes;
  int max_queued_jobs = EngineOptions().max_queued_jobs;
  int max_jobs_per_client = EngineOptions().max_jobs_per_client;
  ListenSecurity security;
};

void PrintUsage(std::ostream& out) {
  out << "usage: scantuned [flags]\n"
         "  --listen ADDR              unix:PATH, unix:///PATH, 127.0.0.1:PORT, localhost:PORT or [::1]:PORT\n"
         "                             (default $SCANTUNE_ADDRESS or "
      << kDefaultAddress
      << ");\n"
         "                             any other HOST:PORT (0.0.0.0:PORT) only with TLS and tokens:\n"
         "  --tls-cert PATH            PEM certificate chain of the daemon (with --tls-key and --token-file)\n"
         "  --tls-key PATH             PEM private key of that certificate\n"
         "  --token-file PATH          bearer tokens accepted, one per line, '#' comments; mode 600\n"
         "                             (clients send 'authorization: Bearer TOKEN'; others get UNAUTHENTICATED)\n"
         "  --db PATH                  SQLite database (default ./scantune.db)\n"
         "  --worker PATH              GPU worker binary (default: scantune-worker next to scantuned)\n"
         "  --enable-test-variants     allow test_fault / test_hang (for tests of the daemon itself)\n"
         "  --enable-benchmark         accept remote Benchmark requests (off by default)\n"
         "  --compile-threads N        NVRTC compile threads (default 2)\n"
         "  --candidate-timeout-s S    a worker silent this long on one candidate is hung (default 60)\n"
         "  --max-message-bytes N      largest request accepted (default 4194304; replies up to 64 MiB)\n"
         "  --max-queued-jobs N        tunes and benchmarks queued or running at once, all clients (default "
      << EngineOptions().max_queued_jobs
      << ")\n"
         "  --max-jobs-per-client N    of those, one client's (default "
      << EngineOptions().max_jobs_per_client
      << "; a client is its scantune-client call metadata, else its peer address)\n"
         "  --help                     this text\n"
         "Log levels come from SPDLOG_LEVEL (e.g. SPDLOG_LEVEL=debug).\n";
}

// Parses --name=value and --name value. Returns false with `error` set on a
// bad flag or value.
bool ParseFlags(int argc, char** argv, Flags* flags, bool* help, std::string* error) {
  std::vector<std::string> args(argv + 1, argv + argc);
  for (size_t i = 0; i < args.size(); ++i) {
    std::string name = args[i];
    std::string value;
    bool has_value = false;
    if (name.rfind("--", 0) != 0) {
      *error = "unexpected argument '" + name + "'";
      return false;
    }
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    auto take = [&](std::string* out) {
      if (!has_value) {
        if (i + 1 >= args.size()) {
          *error = name + " needs a value";
          return false;
        }
        value = args[++i];
      }
      *out = value;
      return true;
    };
    auto take_number = [&](auto* out) {
      std::string text;
      if (!take(&text)) return false;
      try {
        size_t used = 0;
        double number = std::stod(text, &used);
        if (used != text.size() || !(number > 0)) throw std::invalid_argument(text);
        *out = static_cast<std::remove_pointer_t<decltype(out)>>(number);
        return true;
      } catch (const std::exception&) {
        *error = name + " needs a positive number, got '" + text + "'";
        return false;
      }
    };
    auto boolean = [&](bool* out) {
      if (has_value) {
        *error = name + " takes no value";
        return false;
      }
      *out = true;
      return true;
    };
    bool ok;
    if (name == "--help" || name == "-h") {
      *help = true;
      return true;
    } else if (name == "--listen") {
      ok = take(&flags->listen);
    } else if (name == "--tls-cert") {
      ok = take(&flags->security.tls_cert_file);
    } else if (name == "--tls-key") {
      ok = take(&flags->security.tls_key_file);
    } else if (name == "--token-file") {
      ok = take(&flags->security.token_file);
    } else if (name == "--db") {
      ok = take(&flags->db);
    } else if (name == "--worker") {
      ok = take(&flags->worker);
    } else if (name == "--enable-test-variants") {
      ok = boolean(&flags->enable_test_variants);
    } else if (name == "--enable-benchmark") {
      ok = boolean(&flags->enable_benchmark);
    } else if (name == "--compile-threads") {
      ok = take_number(&flags->compile_threads);
    } else if (name == "--candidate-timeout-s") {
      ok = take_number(&flags->candidate_timeout_s);
    } else if (name == "--max-message-bytes") {
      ok = take_number(&flags->max_message_bytes);
    } else if (name == "--max-queued-jobs") {
      ok = take_number(&flags->max_queued_jobs);
    } else if (name == "--max-jobs-per-client") {
      ok = take_number(&flags->max_jobs_per_client);
    } else {
      *error = "unknown flag '" + name + "'";
      return false;
    }
    if (!ok) return false;
  }
  return true;
}

// The unix socket path of a unix: address, or empty for a TCP one.
std::string UnixPath(const std::string& address) {
  if (address.rfind("unix://", 0) == 0) return address.substr(7);
  if (address.rfind("unix:", 0) == 0) return address.substr(5);
  return "";
}

// A socket file left by a daemon that died is removed; one that still answers
// belongs to a live daemon and is left alone.
Status PrepareUnixSocket(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return Status::Ok();
  if (!S_ISSOCK(st.st_mode)) return FailedPrecondition(path + " exists and is not a socket; not removing it");
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Internal(std::string("socket: ") + std::strerror(errno));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    close(fd);
    return InvalidArgument("socket path too long: " + path);
  }
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  int rc = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  int err = errno;
  close(fd);
  if (rc == 0) return FailedPrecondition("another daemon is listening on " + path);
  if (err != ECONNREFUSED && err != ENOENT) {
    return FailedPrecondition("cannot tell whether " + path + " is in use: " + std::strerror(err));
  }
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    return FailedPrecondition("cannot remove stale socket " + path + ": " + std::strerror(errno));
  }
  Logger("server")->info("removed stale socket {}", path);
  return Status::Ok();
}

// scantune-worker next to this binary; in a build tree the worker sits in
// ../worker/ instead, which is tried second.
std::string DefaultWorkerPath() {
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "scantune-worker";
  std::filesystem::path dir = self.parent_path();
  std::filesystem::path beside = dir / "scantune-worker";
  if (std::filesystem::exists(beside)) return beside.string();
  std::filesystem::path build_tree = dir.parent_path() / "worker" / "scantune-worker";
  if (std::filesystem::exists(build_tree)) return build_tree.string();
  return beside.string();
}

// Signal handling through a self-pipe: the handler only writes a byte, the
// main thread does the shutdown. A second signal exits at once.
int g_signal_pipe[2] = {-1, -1};
std::atomic<int> g_signals{0};  // lock-free, so safe in a signal handler

void OnSignal(int signo) {
  if (g_signals.fetch_add(1) > 0) _exit(128 + signo);
  char byte = static_cast<char>(signo);
  ssize_t ignored = write(g_signal_pipe[1], &byte, 1);
  (void)ignored;
}

Status InstallSignalHandlers() {
  if (pipe2(g_signal_pipe, O_CLOEXEC) != 0) return Internal(std::string("pipe2: ") + std::strerror(errno));
  struct sigaction sa{};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  // A worker that dies mid-write must not take the daemon with it.
  signal(SIGPIPE, SIG_IGN);
  return Status::Ok();
}

int WaitForSignal() {
  char byte = 0;
  while (read(g_signal_pipe[0], &byte, 1) < 0 && errno == EINTR) {
  }
  return byte;
}

int Run(int argc, char** argv) {
  InitLogging();
  auto log = Logger("server");

  Flags flags;
  if (const char* env = std::getenv("SCANTUNE_ADDRESS"); env && *env) flags.listen = env;
  if (flags.listen.empty()) flags.listen = kDefaultAddress;
  bool help = false;
  std::string error;
  if (!ParseFlags(argc, argv, &flags, &help, &error)) {
    std::cerr << "scantuned: " << error << "\n";
    PrintUsage(std::cerr);
    return 2;
  }
  if (help) {
    PrintUsage(std::cout);
    return 0;
  }
  if (Status st = CheckListenSecurity(flags.listen, flags.security); !st.ok()) {
    std::cerr << "scantuned: " << st.message() << "\n";
    return 2;
  }
  // Read before anything starts: a bad certificate, key or token file stops the daemon with its reason.
  StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials = MakeServerCredentials(flags.security);
  if (!credentials.ok()) {
    std::cerr << "scantuned: " << credentials.status().message() << "\n";
    return 2;
  }
  if (flags.worker.empty()) flags.worker = DefaultWorkerPath();
  if (Status st = InstallSignalHandlers(); !st.ok()) {
    log->critical("{}", st.ToString());
    return 1;
  }

  EngineOptions options;
  options.db_path = flags.db;
  options.worker_path = flags.worker;
  options.enable_test_variants = flags.enable_test_variants;
  options.enable_benchmark = flags.enable_benchmark;
  options.compile_threads = flags.compile_threads;
  options.candidate_timeout_s = flags.candidate_timeout_s;
  options.max_queued_jobs = flags.max_queued_jobs;
  options.max_jobs_per_client = flags.max_jobs_per_client;
  log->info("database {}, worker {}", flags.db, flags.worker);
  StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(options);
  if (!engine.ok()) {
    log->critical("cannot start: {}", engine.status().ToString());
    return 1;
  }

  if (auto devices = (*engine)->ListDevices(); devices.ok()) {
    for (const v1::DeviceInfo& d : devices->devices()) {
      log->info("device {}: {} ({}), sm_{}{}, {} SMs, {} MiB", d.ordinal(), d.name(), d.uuid(), d.cc_major(),
                d.cc_minor(), d.sm_count(), d.memory_bytes() >> 20);
    }
    if (devices->devices_size() == 0) log->warn("{}", devices->note().empty() ? "no GPU found" : devices->note());
  } else {
    log->warn("listing devices: {}", devices.status().ToString());
  }

  std::string socket_path = UnixPath(flags.listen);
  if (!socket_path.empty()) {
    if (Status st = PrepareUnixSocket(socket_path); !st.ok()) {
      log->critical("cannot listen on {}: {}", flags.listen, st.message());
      return 1;
    }
  }

  auto service = std::make_unique<ScantuneService>(engine->get());
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int selected_port = 0;
  builder.AddListeningPort(flags.listen, *credentials,
                           socket_path.empty() ? &selected_port : nullptr);
  builder.SetMaxReceiveMessageSize(flags.max_message_bytes);
  builder.SetMaxSendMessageSize(kMaxSendBytes);
  builder.RegisterService(service.get());
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || (socket_path.empty() && selected_port == 0)) {
    log->critical("cannot listen on {}{}", flags.listen,
                  flags.security.tls() ? " (or the TLS certificate and key do not belong together)" : "");
    return 1;
  }
  if (!socket_path.empty()) chmod(socket_path.c_str(), 0600);
  grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
  health->SetServingStatus(true);
  health->SetServingStatus(v1::Scantune::service_full_name(), true);
  log->info("listening on {}{}", flags.listen, flags.security.tls() ? " (TLS, bearer tokens)" : "");

  int signo = WaitForSignal();
  log->info("signal {}: shutting down (again to exit at once)", signo);
  health->SetServingStatus(false);
  // Running calls get a few seconds to answer; after that gRPC cancels them.
  // Tuning jobs are not cancelled with their calls: their threads are
  // awaited below so that what they measured is stored. With nothing running
  // the grace is short, because gRPC otherwise spends the whole deadline on
  // idle client connections (a training job keeps its channel open).
  const int running = service->CallsInFlight();
  server->Shutdown(std::chrono::system_clock::now() +
                   (running > 0 ? std::chrono::milliseconds(5000) : std::chrono::milliseconds(200)));
  if (int still = service->CallsInFlight(); still > 0) {
    log->info("waiting for {} running engine call(s) to end", still);
  }
  service->WaitForCalls();
  server.reset();
  service.reset();
  engine->reset();
  if (!socket_path.empty()) unlink(socket_path.c_str());
  log->info("stopped");
  return 0;
}

}  // namespace
}  // namespace scantune

int main(int argc, char** argv) { return scantune::Run(argc, argv); }
