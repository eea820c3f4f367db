// TestDaemon: a real scantuned started as a child process for one test suite:
// its own temp dir holding the unix socket, the SQLite file and the daemon's
// log. Start() returns once the daemon's health service answers SERVING (no
// sleeps); the destructor stops it with SIGTERM (SIGKILL as a last resort)
// and removes the temp dir. Not thread-safe.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "client/scantune_client.h"
#include "common/status.h"
#include "tests/integration/run_command.h"

namespace scantune::testing {

struct TestDaemonOptions {
  std::string worker;               // --worker
  std::vector<std::string> flags;   // more scantuned flags
  Env env;                          // more environment (the daemon passes it to its workers)
  // Socket, database and log go here; empty: a fresh temp dir that the
  // TestDaemon removes. A given dir is left in place (a test may restart a
  // daemon in it).
  std::string dir;
  // --listen; empty: a unix socket in dir. `connect` is the address clients
  // use (empty: listen), e.g. 127.0.0.1:PORT for a daemon on 0.0.0.0:PORT.
  std::string listen;
  std::string connect;
  // What its clients (Client(), Cli()) add: TLS CA and token file.
  std::string tls_ca_file;
  std::string token_file;
};

// A TCP port on 127.0.0.1 that nothing listens on right now (bound to port 0,
// read back and released: another process could take it in between).
StatusOr<int> FreeLoopbackPort();

class TestDaemon {
 public:
  static StatusOr<std::unique_ptr<TestDaemon>> Start(const TestDaemonOptions& options);
  ~TestDaemon();

  const std::string& address() const { return address_; }
  const std::string& dir() const { return dir_; }
  pid_t pid() const { return pid_; }

  // The process has not exited.
  bool Alive();
  // Alive and its health service answers SERVING.
  Status Serving();
  // SIGTERM, then waits for the exit; OK if it exited 0.
  Status Stop();
  // Everything the daemon logged so far.
  std::string Log() const;

  // Runs the `scantune` CLI against this daemon (--address added).
  CommandResult Cli(const std::vector<std::string>& args) const;
  // A client library connection to this daemon.
  std::unique_ptr<ScantuneClient> Client() const;

 private:
  TestDaemon() = default;

  std::string dir_;
  bool owns_dir_ = false;
  std::string address_;
  std::string tls_ca_file_, token_file_;
  pid_t pid_ = -1;
  int exit_status_ = -1;
};

// One real variant of each algorithm that can run linear_scan bf16 fwd_bwd at
// `shape` (as the daemon would enumerate them), in algorithm order.
std::vector<std::string> OneVariantPerAlgorithm(const std::string& shape);

}  // namespace scantune::testing
