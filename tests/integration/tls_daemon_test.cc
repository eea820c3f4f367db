// scantuned beyond the host: TLS and bearer tokens (server/listen_security.h)
// on a real TCP socket, driven by the client library and the real CLI, with
// a throwaway PKI that the openssl CLI makes per suite (a CA, the daemon's
// certificate for localhost and 127.0.0.1, and a second CA that trusts
// nothing of the daemon's). The GPU is played by scantune-fake-worker.
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/problem.h"
#include "tests/integration/test_daemon.h"

namespace scantune::testing {
namespace {

using ::testing::HasSubstr;

constexpr const char* kToken = "scantune-test-token-0123456789";
constexpr const char* kShape = "2x256x512";

// The openssl binary on PATH, or empty.
std::string OpensslPath() {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::string candidate = dir + "/openssl";
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

void WriteFile(const std::string& path, const std::string& text, mode_t mode) {
  std::ofstream(path, std::ios::trunc) << text;
  chmod(path.c_str(), mode);
}

// The PEM files and token files of one suite, in `dir`.
struct TestPki {
  std::string ca, ca_key, other_ca, cert, key, tokens, wrong_tokens;

  static StatusOr<TestPki> Make(const std::string& dir) {
    const std::string openssl = OpensslPath();
    if (openssl.empty()) return FailedPrecondition("no openssl on PATH (scripts/setup.sh installs it)");
    TestPki pki;
    pki.ca = dir + "/ca.pem";
    pki.ca_key = dir + "/ca.key";
    pki.other_ca = dir + "/other_ca.pem";
    pki.cert = dir + "/daemon.pem";
    pki.key = dir + "/daemon.key";
    pki.tokens = dir + "/tokens";
    pki.wrong_tokens = dir + "/wrong_tokens";
    const std::vector<std::string> ec = {"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"};
    auto run = [&](std::vector<std::string> args) -> Status {
      args.insert(args.begin(), openssl);
      CommandResult r = RunCommand(args, {}, std::chrono::seconds(60));
      if (r.exit_code != 0) return Internal("openssl failed (" + std::to_string(r.exit_code) + "): " + r.err);
      return Status::Ok();
    };
    auto self_signed = [&](const std::string& pem, const std::string& key, const std::string& name) {
      std::vector<std::string> args = {"req", "-x509"};
      args.insert(args.end(), ec.begin(), ec.end());
      args.insert(args.end(), {"-keyout", key, "-out", pem, "-days", "7", "-subj", "/CN=" + name});
      return run(args);
    };
    RETURN_IF_ERROR(self_signed(pki.ca, pki.ca_key, "scantune test CA"));
    RETURN_IF_ERROR(self_signed(pki.other_ca, dir + "/other_ca.key", "another CA"));
    std::vector<std::string> request = {"req", "-new"};
    request.insert(request.end(), ec.begin(), ec.end());
    request.insert(request.end(), {"-keyout", pki.key, "-out", dir + "/daemon.csr", "-subj", "/CN=localhost"});
    RETURN_IF_ERROR(run(request));
    WriteFile(dir + "/san.cnf", "subjectAltName=DNS:localhost,IP:127.0.0.1\n", 0600);
    RETURN_IF_ERROR(run({"x509", "-req", "-in", dir + "/daemon.csr", "-CA", pki.ca, "-CAkey", pki.ca_key,
                         "-CAcreateserial", "-out", pki.cert, "-days", "7", "-extfile", dir + "/san.cnf"}));
    WriteFile(pki.tokens, std::string("# scantune tokens\n\n") + kToken + "\nsecond-token-abcdefghijkl\n", 0600);
    WriteFile(pki.wrong_tokens, "not-the-daemons-token-000\n", 0600);
    return pki;
  }
};

std::string MakeTempDir(const char* prefix) {
  std::string dir_template = std::string("/tmp/") + prefix + "XXXXXX";
  return mkdtemp(dir_template.data()) ? dir_template : "";
}

// One daemon for the suite on 127.0.0.1:PORT with TLS and tokens.
class TlsDaemonTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(MakeTempDir("st-tls-"));
    ASSERT_FALSE(dir_->empty());
    StatusOr<TestPki> pki = TestPki::Make(*dir_);
    ASSERT_TRUE(pki.ok()) << pki.status().ToString();
    pki_ = new TestPki(*pki);
    StatusOr<int> port = FreeLoopbackPort();
    ASSERT_TRUE(port.ok()) << port.status().ToString();
    TestDaemonOptions options;
    options.worker = SCANTUNE_FAKE_WORKER_PATH;
    options.listen = "127.0.0.1:" + std::to_string(*port);
    options.flags = {"--tls-cert", pki_->cert, "--tls-key", pki_->key, "--token-file", pki_->tokens};
    options.tls_ca_file = pki_->ca;
    options.token_file = pki_->tokens;
    auto daemon = TestDaemon::Start(options);
    ASSERT_TRUE(daemon.ok()) << daemon.status().ToString();
    daemon_ = daemon->release();
  }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
    delete pki_;
    pki_ = nullptr;
    if (dir_) {
      std::error_code ec;
      std::filesystem::remove_all(*dir_, ec);
      delete dir_;
      dir_ = nullptr;
    }
  }
  void SetUp() override {
    if (daemon_ == nullptr) GTEST_SKIP() << "the suite's daemon did not start (see SetUpTestSuite's failure)";
  }
  // A client of the suite's daemon with these TLS and token settings.
  static std::unique_ptr<ScantuneClient> ClientWith(const std::string& ca, const std::string& token) {
    ClientOptions options;
    options.address = daemon_->address();
    options.tls_ca_file = ca;
    options.token = token;
    return std::make_unique<ScantuneClient>(options);
  }

  static std::string* dir_;
  static TestPki* pki_;
  static TestDaemon* daemon_;
};
std::string* TlsDaemonTest::dir_ = nullptr;
TestPki* TlsDaemonTest::pki_ = nullptr;
TestDaemon* TlsDaemonTest::daemon_ = nullptr;

// The CA and a token get every call through: health, the CLI, and a tune
// whose progress streams back over the TLS channel.
TEST_F(TlsDaemonTest, ServesClientsThatTrustItsCaAndSendAToken) {
  CommandResult health = daemon_->Cli({"health"});
  ASSERT_EQ(health.exit_code, 0) << health.err;
  EXPECT_THAT(health.out, HasSubstr("SERVING (" + daemon_->address() + ", TLS)"));
  CommandResult devices = daemon_->Cli({"devices"});
  ASSERT_EQ(devices.exit_code, 0) << devices.err;
  EXPECT_THAT(devices.out, HasSubstr("GPU-fake-0"));

  // The token file's second token works too.
  std::unique_ptr<ScantuneClient> second = ClientWith(pki_->ca, "second-token-abcdefghijkl");
  ASSERT_TRUE(second->status().ok()) << second->status().ToString();
  EXPECT_TRUE(second->ListDevices().ok());

  const std::vector<std::string> variants = OneVariantPerAlgorithm(kShape);
  ASSERT_FALSE(variants.empty());
  Problem problem;
  problem.op = Op::kLinearScan;
  problem.shape = *ParseShape(kShape);
  problem.dtype = DType::kBF16;
  problem.mode = Mode::kFwd;
  v1::TuneRequest tune;
  *tune.mutable_problem() = ToProto(problem);
  tune.add_variants(variants.front());
  int updates = 0;
  StatusOr<v1::Selection> selection =
      ClientWith(pki_->ca, kToken)->Tune(tune, [&](const v1::TuneProgress&) { ++updates; });
  ASSERT_TRUE(selection.ok()) << selection.status().ToString() << "\n" << daemon_->Log();
  EXPECT_EQ(selection->variant(), variants.front());
  EXPECT_GT(updates, 1);
}

// A missing or wrong token ends the call UNAUTHENTICATED, health checks
// included, and the daemon goes on serving those with the right one.
TEST_F(TlsDaemonTest, RefusesCallsWithoutAnAcceptedToken) {
  std::unique_ptr<ScantuneClient> none = ClientWith(pki_->ca, "");
  StatusOr<v1::ListDevicesResponse> refused = none->ListDevices();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnauthenticated) << refused.status().ToString();
  EXPECT_THAT(refused.status().message(), HasSubstr("needs a bearer token"));
  EXPECT_EQ(none->CheckHealth().code(), StatusCode::kUnauthenticated);

  // Right up to its last character, or a prefix of an accepted token.
  for (const std::string wrong : {std::string(kToken).substr(0, 29) + "X", std::string(kToken).substr(0, 20)}) {
    StatusOr<v1::ListDevicesResponse> r = ClientWith(pki_->ca, wrong)->ListDevices();
    ASSERT_FALSE(r.ok()) << wrong;
    EXPECT_EQ(r.status().code(), StatusCode::kUnauthenticated) << r.status().ToString();
    EXPECT_THAT(r.status().message(), HasSubstr("not one this daemon accepts"));
  }

  CommandResult cli = RunCommand({SCANTUNE_CLI_PATH, "--address", daemon_->address(), "--tls-ca", pki_->ca,
                                  "--token-file", pki_->wrong_tokens, "devices"});
  EXPECT_EQ(cli.exit_code, 1) << cli.err;
  EXPECT_THAT(cli.err, HasSubstr("UNAUTHENTICATED"));

  EXPECT_TRUE(daemon_->Serving().ok());
}

// Without TLS, or trusting another CA, a client never gets a call through,
// and the client library never sends a token without TLS.
TEST_F(TlsDaemonTest, RefusesPlaintextAndClientsThatDoNotTrustItsCertificate) {
  StatusOr<v1::ListDevicesResponse> plaintext = ClientWith("", "")->ListDevices();
  ASSERT_FALSE(plaintext.ok());
  EXPECT_EQ(plaintext.status().code(), StatusCode::kUnavailable) << plaintext.status().ToString();

  StatusOr<v1::ListDevicesResponse> untrusted = ClientWith(pki_->other_ca, kToken)->ListDevices();
  ASSERT_FALSE(untrusted.ok());
  EXPECT_EQ(untrusted.status().code(), StatusCode::kUnavailable) << untrusted.status().ToString();

  std::unique_ptr<ScantuneClient> token_only = ClientWith("", kToken);
  EXPECT_EQ(token_only->status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(token_only->status().message(), HasSubstr("only over TLS"));
  EXPECT_EQ(token_only->ListDevices().status().code(), StatusCode::kInvalidArgument);
  CommandResult cli =
      RunCommand({SCANTUNE_CLI_PATH, "--address", daemon_->address(), "--token-file", pki_->tokens, "health"});
  EXPECT_EQ(cli.exit_code, 2) << cli.err;
  EXPECT_THAT(cli.err, HasSubstr("only over TLS"));

  CommandResult no_ca = RunCommand({SCANTUNE_CLI_PATH, "--address", daemon_->address(), "--tls-ca",
                                    *dir_ + "/missing.pem", "--token-file", pki_->tokens, "health"});
  EXPECT_EQ(no_ca.exit_code, 2) << no_ca.err;
  EXPECT_THAT(no_ca.err, HasSubstr("missing.pem' does not exist"));
}

// What scantuned accepts at start-up: beyond loopback only with TLS and
// tokens; each bad combination or file stops it with its reason.
class TlsStartupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("st-tlss-");
    ASSERT_FALSE(dir_.empty());
    StatusOr<TestPki> pki = TestPki::Make(dir_);
    ASSERT_TRUE(pki.ok()) << pki.status().ToString();
    pki_ = *pki;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  CommandResult RunDaemon(const std::string& listen, const std::vector<std::string>& flags) {
    std::vector<std::string> argv = {SCANTUNED_PATH, "--listen", listen, "--db", dir_ + "/scantune.db", "--worker",
                                     SCANTUNE_FAKE_WORKER_PATH};
    argv.insert(argv.end(), flags.begin(), flags.end());
    return RunCommand(argv, {}, std::chrono::seconds(60));
  }
  std::vector<std::string> Tls(const std::string& cert, const std::string& key, const std::string& tokens) const {
    return {"--tls-cert", cert, "--tls-key", key, "--token-file", tokens};
  }
  std::string dir_;
  TestPki pki_;
};

TEST_F(TlsStartupTest, ListensOnEveryInterfaceWithTlsAndTokens) {
  StatusOr<int> port = FreeLoopbackPort();
  ASSERT_TRUE(port.ok()) << port.status().ToString();
  TestDaemonOptions options;
  options.worker = SCANTUNE_FAKE_WORKER_PATH;
  options.dir = dir_;
  options.listen = "0.0.0.0:" + std::to_string(*port);
  options.connect = "127.0.0.1:" + std::to_string(*port);
  options.flags = Tls(pki_.cert, pki_.key, pki_.tokens);
  options.tls_ca_file = pki_.ca;
  options.token_file = pki_.tokens;
  auto daemon = TestDaemon::Start(options);
  ASSERT_TRUE(daemon.ok()) << daemon.status().ToString();
  EXPECT_TRUE((*daemon)->Serving().ok());
  EXPECT_THAT((*daemon)->Log(), HasSubstr("(TLS, bearer tokens)"));
  EXPECT_TRUE((*daemon)->Stop().ok()) << (*daemon)->Log();
}

TEST_F(TlsStartupTest, RefusesIncompleteOrUnsafeSettings) {
  const std::string open_tokens = dir_ + "/open_tokens";
  WriteFile(open_tokens, std::string(kToken) + "\n", 0644);
  const std::string short_tokens = dir_ + "/short_tokens";
  WriteFile(short_tokens, "short\n", 0600);
  const std::string empty_tokens = dir_ + "/empty_tokens";
  WriteFile(empty_tokens, "# nothing\n\n", 0600);
  struct Case {
    const char* name;
    std::string listen;
    std::vector<std::string> flags;
    const char* says;
  };
  const std::vector<Case> cases = {
      {"tokens without TLS", "127.0.0.1:1", {"--token-file", pki_.tokens}, "needs TLS"},
      {"TLS without tokens", "0.0.0.0:1", {"--tls-cert", pki_.cert, "--tls-key", pki_.key}, "without --token-file"},
      {"a certificate without its key", "0.0.0.0:1", {"--tls-cert", pki_.cert, "--token-file", pki_.tokens},
       "both --tls-cert and --tls-key"},
      {"TLS on a unix socket", "unix://" + dir_ + "/s.sock", Tls(pki_.cert, pki_.key, pki_.tokens), "file mode"},
      {"a token file others can read", "0.0.0.0:1", Tls(pki_.cert, pki_.key, open_tokens), "chmod 600"},
      {"a short token", "0.0.0.0:1", Tls(pki_.cert, pki_.key, short_tokens), "at least 16 characters"},
      {"no token at all", "0.0.0.0:1", Tls(pki_.cert, pki_.key, empty_tokens), "holds no token"},
      {"a missing certificate", "0.0.0.0:1", Tls(dir_ + "/none.pem", pki_.key, pki_.tokens), "does not exist"},
      {"a key where the certificate goes", "0.0.0.0:1", Tls(pki_.key, pki_.key, pki_.tokens),
       "holds no PEM certificate"},
  };
  for (const Case& c : cases) {
    CommandResult r = RunDaemon(c.listen, c.flags);
    EXPECT_EQ(r.exit_code, 2) << c.name << "\n" << r.err;
    EXPECT_THAT(r.err, HasSubstr(c.says)) << c.name;
  }
  // A key that does not belong to the certificate is found when the port opens.
  StatusOr<int> port = FreeLoopbackPort();
  ASSERT_TRUE(port.ok());
  CommandResult mismatched =
      RunDaemon("127.0.0.1:" + std::to_string(*port), Tls(pki_.cert, pki_.ca_key, pki_.tokens));
  EXPECT_EQ(mismatched.exit_code, 1) << mismatched.err;
  EXPECT_THAT(mismatched.err, HasSubstr("do not belong together"));
}

}  // namespace
}  // namespace scantune::testing
