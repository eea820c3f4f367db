// What protects the daemon's listening address. A unix socket is protected by
// its file mode (0600) and a loopback port by staying on the host; anything
// that reaches beyond the host must carry TLS (the daemon's certificate and
// key) and bearer tokens (every call's `authorization: Bearer TOKEN`, checked
// against a token file), or the daemon refuses to start. On a loopback port
// TLS and tokens are optional (both or neither); on a unix socket they are
// refused, as they add nothing there.
//
// Stateless functions plus TokenAuthenticator, which is immutable after
// construction and so thread-safe (gRPC calls it from its own threads).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/security/auth_metadata_processor.h>
#include <grpcpp/security/server_credentials.h>

#include "common/status.h"

namespace scantune {

struct ListenSecurity {
  std::string tls_cert_file;  // PEM certificate chain of the daemon
  std::string tls_key_file;   // PEM private key of that certificate
  std::string token_file;     // accepted bearer tokens, one per line ('#' starts a comment)

  bool tls() const { return !tls_cert_file.empty() || !tls_key_file.empty(); }
};

// Kinds of address, as --listen spells them.
bool IsUnixAddress(const std::string& address);
// 127.0.0.1:PORT, localhost:PORT or [::1]:PORT.
bool IsLoopbackAddress(const std::string& address);

// The rules above: OK, or INVALID_ARGUMENT saying what is missing.
Status CheckListenSecurity(const std::string& address, const ListenSecurity& security);

// The tokens of a token file. Refused: a file others may read or write
// (mode & 077, as ssh refuses keys), no token in it, or a token shorter than
// kMinTokenChars or with characters outside [A-Za-z0-9._~+/=-].
inline constexpr size_t kMinTokenChars = 16;
StatusOr<std::vector<std::string>> LoadTokens(const std::string& path);

// Checks every call's metadata on a TLS port: one `authorization` value of
// the form "Bearer TOKEN" with TOKEN among the accepted ones, else the call
// ends UNAUTHENTICATED before it reaches the service. Comparisons take the
// same time wherever two tokens differ.
class TokenAuthenticator final : public grpc::AuthMetadataProcessor {
 public:
  explicit TokenAuthenticator(std::vector<std::string> tokens);

  bool IsBlocking() const override { return false; }
  grpc::Status Process(const InputMetadata& auth_metadata, grpc::AuthContext* context,
                       OutputMetadata* consumed_auth_metadata, OutputMetadata* response_metadata) override;

  // The check alone: OK or UNAUTHENTICATED with the reason.
  Status Check(const std::vector<std::string>& authorization_values) const;

 private:
  std::vector<std::string> tokens_;
};

// Insecure credentials without TLS; else TLS from the PEM files, with the
// token file's TokenAuthenticator on every call.
StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(const ListenSecurity& security);

}  // namespace scantune
