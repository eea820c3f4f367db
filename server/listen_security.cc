#include "server/listen_security.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <sstream>

#include <grpcpp/security/server_credentials.h>

#include "common/file_util.h"
#include "server/grpc_status.h"

namespace scantune {
namespace {

constexpr std::string_view kBearer = "Bearer ";

bool TokenChar(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
         std::strchr("._~+/=-", c) != nullptr;
}

// Equal strings, in a time that depends only on the lengths (a mismatch's
// position does not show).
bool SameToken(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

std::string Trimmed(const std::string& line) {
  const size_t first = line.find_first_not_of(" \t\r");
  if (first == std::string::npos) return "";
  const size_t last = line.find_last_not_of(" \t\r");
  return line.substr(first, last - first + 1);
}

}  // namespace

bool IsUnixAddress(const std::string& address) { return address.rfind("unix:", 0) == 0; }

bool IsLoopbackAddress(const std::string& address) {
  for (const char* prefix : {"127.0.0.1:", "localhost:", "[::1]:"}) {
    const std::string p(prefix);
    if (address.rfind(p, 0) == 0 && address.size() > p.size()) return true;
  }
  return false;
}

Status CheckListenSecurity(const std::string& address, const ListenSecurity& security) {
  const bool tls = security.tls();
  if (tls && (security.tls_cert_file.empty() || security.tls_key_file.empty())) {
    return InvalidArgument("TLS needs both --tls-cert and --tls-key");
  }
  if (tls != !security.token_file.empty()) {
    return InvalidArgument(tls ? "TLS without --token-file would let anyone who reaches the port call the daemon"
                               : "--token-file needs TLS (--tls-cert and --tls-key): tokens must not cross the "
                                 "network in plaintext");
  }
  if (IsUnixAddress(address)) {
    if (address == "unix:" || address == "unix://") return InvalidArgument("--listen " + address + ": empty socket path");
    if (tls) {
      return InvalidArgument("--listen " + address +
                             ": a unix socket is protected by its file mode (0600); TLS and tokens are for TCP "
                             "addresses");
    }
    return Status::Ok();
  }
  if (IsLoopbackAddress(address) || tls) return Status::Ok();
  return InvalidArgument("--listen " + address +
                         ": an address beyond the host needs TLS and tokens (--tls-cert, --tls-key, --token-file); "
                         "without them only unix:PATH, 127.0.0.1:PORT, localhost:PORT or [::1]:PORT");
}

StatusOr<std::vector<std::string>> LoadTokens(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && (st.st_mode & 077) != 0) {
    return FailedPrecondition("token file '" + path + "' is accessible by other users (mode " +
                              [&] {
                                std::ostringstream mode;
                                mode << std::oct << (st.st_mode & 0777);
                                return mode.str();
                              }() +
                              "); chmod 600 it");
  }
  StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) return text.status().Annotate("token file");
  std::vector<std::string> tokens;
  std::istringstream lines(*text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    const std::string token = Trimmed(line);
    if (token.empty() || token[0] == '#') continue;
    const std::string where = "token file '" + path + "' line " + std::to_string(number);
    if (token.size() < kMinTokenChars) {
      return InvalidArgument(where + ": a token needs at least " + std::to_string(kMinTokenChars) + " characters");
    }
    for (char c : token) {
      if (!TokenChar(c)) return InvalidArgument(where + ": tokens use only A-Z a-z 0-9 . _ ~ + / = -");
    }
    tokens.push_back(token);
  }
  if (tokens.empty()) return InvalidArgument("token file '" + path + "' holds no token");
  return tokens;
}

TokenAuthenticator::TokenAuthenticator(std::vector<std::string> tokens) : tokens_(std::move(tokens)) {}

Status TokenAuthenticator::Check(const std::vector<std::string>& authorization_values) const {
  if (authorization_values.empty()) {
    return Unauthenticated("this daemon needs a bearer token (authorization metadata); none was sent");
  }
  if (authorization_values.size() > 1) return Unauthenticated("more than one authorization value");
  const std::string& value = authorization_values.front();
  if (value.rfind(kBearer, 0) != 0) return Unauthenticated("authorization is not of the form 'Bearer TOKEN'");
  const std::string_view sent = std::string_view(value).substr(kBearer.size());
  bool known = false;
  for (const std::string& token : tokens_) known |= SameToken(sent, token);  // no early exit
  if (!known) return Unauthenticated("the bearer token is not one this daemon accepts");
  return Status::Ok();
}

grpc::Status TokenAuthenticator::Process(const InputMetadata& auth_metadata, grpc::AuthContext*,
                                         OutputMetadata* consumed_auth_metadata, OutputMetadata*) {
  std::vector<std::string> values;
  for (auto [it, end] = auth_metadata.equal_range("authorization"); it != end; ++it) {
    values.emplace_back(it->second.data(), it->second.size());
  }
  const Status checked = Check(values);
  if (!checked.ok()) return ToGrpcStatus(checked);
  // Consumed: the service never sees the token.
  consumed_auth_metadata->insert({"authorization", values.front()});
  return grpc::Status::OK;
}

StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(const ListenSecurity& security) {
  if (!security.tls()) return grpc::InsecureServerCredentials();
  StatusOr<std::string> cert = ReadFileToString(security.tls_cert_file);
  if (!cert.ok()) return cert.status().Annotate("--tls-cert");
  StatusOr<std::string> key = ReadFileToString(security.tls_key_file);
  if (!key.ok()) return key.status().Annotate("--tls-key");
  if (cert->find("-----BEGIN CERTIFICATE-----") == std::string::npos) {
    return InvalidArgument("--tls-cert '" + security.tls_cert_file + "' holds no PEM certificate");
  }
  if (key->find("PRIVATE KEY-----") == std::string::npos) {
    return InvalidArgument("--tls-key '" + security.tls_key_file + "' holds no PEM private key");
  }
  StatusOr<std::vector<std::string>> tokens = LoadTokens(security.token_file);
  if (!tokens.ok()) return tokens.status();
  grpc::SslServerCredentialsOptions options;
  options.pem_key_cert_pairs.push_back({*key, *cert});
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::SslServerCredentials(options);
  credentials->SetAuthMetadataProcessor(std::make_shared<TokenAuthenticator>(std::move(*tokens)));
  return credentials;
}

}  // namespace scantune
