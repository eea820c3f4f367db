// The listening rules and the token check of server/listen_security.h, as
// pure functions (tests/integration/tls_daemon_test.cc runs them in a real
// daemon on a real socket).
#include "server/listen_security.h"
#include "server/grpc_status.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace scantune {
namespace {

using ::testing::HasSubstr;

ListenSecurity Full() { return {"daemon.pem", "daemon.key", "tokens"}; }

TEST(ListenSecurity, LoopbackAndUnixNeedNothingAndElsewhereNeedsTlsAndTokens) {
  for (const char* address : {"unix:///tmp/s.sock", "unix:s.sock", "127.0.0.1:5000", "localhost:5000", "[::1]:5000"}) {
    EXPECT_TRUE(CheckListenSecurity(address, {}).ok()) << address;
  }
  for (const char* address : {"0.0.0.0:5000", "10.0.0.7:5000", "[::]:5000", "gpu-box:5000", "127.0.0.1:"}) {
    const Status refused = CheckListenSecurity(address, {});
    EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument) << address;
    EXPECT_THAT(refused.message(), HasSubstr("needs TLS and tokens")) << address;
    EXPECT_TRUE(CheckListenSecurity(address, Full()).ok()) << address;
  }
  EXPECT_TRUE(CheckListenSecurity("127.0.0.1:5000", Full()).ok());
  EXPECT_THAT(CheckListenSecurity("unix:///tmp/s.sock", Full()).message(), HasSubstr("file mode"));
  EXPECT_THAT(CheckListenSecurity("unix:", {}).message(), HasSubstr("empty socket path"));
}

TEST(ListenSecurity, TlsAndTokensComeTogether) {
  EXPECT_THAT(CheckListenSecurity("0.0.0.0:1", {"daemon.pem", "", "tokens"}).message(), HasSubstr("both"));
  EXPECT_THAT(CheckListenSecurity("0.0.0.0:1", {"", "daemon.key", "tokens"}).message(), HasSubstr("both"));
  EXPECT_THAT(CheckListenSecurity("127.0.0.1:1", {"daemon.pem", "daemon.key", ""}).message(),
              HasSubstr("--token-file"));
  EXPECT_THAT(CheckListenSecurity("127.0.0.1:1", {"", "", "tokens"}).message(), HasSubstr("needs TLS"));
}

class TokenFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (std::filesystem::path(::testing::TempDir()) / ("scantune_tokens_" + std::to_string(getpid()))).string();
  }
  void TearDown() override { std::filesystem::remove(path_); }
  void Write(const std::string& text, mode_t mode = 0600) {
    std::ofstream(path_, std::ios::trunc) << text;
    chmod(path_.c_str(), mode);
  }
  std::string path_;
};

TEST_F(TokenFileTest, ReadsTokensSkippingCommentsAndBlankLines) {
  Write("# ci\n\n  first-token-0123456789  \r\nsecond.token~+/=_-XYZ\n");
  StatusOr<std::vector<std::string>> tokens = LoadTokens(path_);
  ASSERT_TRUE(tokens.ok()) << tokens.status().ToString();
  EXPECT_EQ(*tokens, (std::vector<std::string>{"first-token-0123456789", "second.token~+/=_-XYZ"}));
}

TEST_F(TokenFileTest, RefusesUnsafeOrMalformedFiles) {
  Write("first-token-0123456789\n", 0640);
  EXPECT_THAT(LoadTokens(path_).status().message(), HasSubstr("chmod 600"));
  Write("0123456789abcde\n");  // 15 characters
  EXPECT_THAT(LoadTokens(path_).status().message(), HasSubstr("line 1: a token needs at least 16"));
  Write("# a comment\nfirst token with spaces 01\n");
  EXPECT_THAT(LoadTokens(path_).status().message(), HasSubstr("line 2: tokens use only"));
  Write("# only a comment\n");
  EXPECT_THAT(LoadTokens(path_).status().message(), HasSubstr("holds no token"));
  EXPECT_EQ(LoadTokens(path_ + ".missing").status().code(), StatusCode::kNotFound);
}

TEST(TokenAuthenticator, AcceptsOnlyOneBearerValueWithAKnownToken) {
  const TokenAuthenticator auth({"first-token-0123456789", "second-token-0123456789"});
  EXPECT_TRUE(auth.Check({"Bearer first-token-0123456789"}).ok());
  EXPECT_TRUE(auth.Check({"Bearer second-token-0123456789"}).ok());
  const std::vector<std::pair<std::vector<std::string>, const char*>> refused = {
      {{}, "none was sent"},
      {{"Bearer first-token-0123456789", "Bearer first-token-0123456789"}, "more than one"},
      {{"first-token-0123456789"}, "Bearer TOKEN"},
      {{"Basic first-token-0123456789"}, "Bearer TOKEN"},
      {{"Bearer first-token-012345678"}, "not one this daemon accepts"},
      {{"Bearer first-token-01234567890"}, "not one this daemon accepts"},
      {{"Bearer "}, "not one this daemon accepts"},
  };
  for (const auto& [values, says] : refused) {
    const Status st = auth.Check(values);
    EXPECT_EQ(st.code(), StatusCode::kUnauthenticated) << says;
    EXPECT_THAT(st.message(), HasSubstr(says));
  }
}

// The token check's refusal keeps its code across the wire both ways.
TEST(TokenAuthenticator, UnauthenticatedCrossesTheGrpcBoundary) {
  const grpc::Status wire = ToGrpcStatus(Unauthenticated("no token"));
  EXPECT_EQ(wire.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  const Status back = FromGrpcStatus(wire);
  EXPECT_EQ(back.code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(back.ToString(), "UNAUTHENTICATED: no token");
}

}  // namespace
}  // namespace scantune
