#include "client/scantune_client.h"

#include <unistd.h>

#include <cstdlib>
#include <sstream>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "client/health.grpc.pb.h"
#include "common/file_util.h"
#include "server/grpc_status.h"

namespace scantune {

std::string ScantuneClient::ResolveAddress(const std::string& address) {
  if (!address.empty()) return address;
  if (const char* env = std::getenv("SCANTUNE_ADDRESS"); env && *env) return env;
  return "unix:///tmp/scantune.sock";
}

std::string ScantuneClient::DefaultClientId() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  return std::string(host[0] ? host : "localhost") + ":" + std::to_string(getpid());
}

namespace {

std::string OrEnv(const std::string& value, const char* name) {
  if (!value.empty()) return value;
  const char* env = std::getenv(name);
  return env ? env : "";
}

// The first token line of a token file (as scantuned reads its own: blank
// and '#' lines skipped, surrounding space trimmed).
StatusOr<std::string> FirstToken(const std::string& path) {
  StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) return text.status().Annotate("token file");
  std::istringstream lines(*text);
  std::string line;
  while (std::getline(lines, line)) {
    const size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    return line.substr(first, line.find_last_not_of(" \t\r") - first + 1);
  }
  return InvalidArgument("token file '" + path + "' holds no token");
}

// Plaintext without a CA; else TLS trusting the CA, with the token (if any)
// as call credentials ("authorization: Bearer TOKEN" on every call).
StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentialsFor(const ClientOptions& options,
                                                                          bool* tls) {
  const std::string ca_file = OrEnv(options.tls_ca_file, "SCANTUNE_TLS_CA");
  std::string token = options.token;
  if (token.empty()) {
    const std::string token_file = OrEnv(options.token_file, "SCANTUNE_TOKEN_FILE");
    if (!token_file.empty()) {
      StatusOr<std::string> first = FirstToken(token_file);
      if (!first.ok()) return first.status();
      token = *first;
    }
  }
  *tls = !ca_file.empty();
  if (ca_file.empty()) {
    if (!token.empty()) {
      return InvalidArgument("a token is sent only over TLS: give the daemon's CA certificate too (--tls-ca or "
                             "$SCANTUNE_TLS_CA)");
    }
    return grpc::InsecureChannelCredentials();
  }
  StatusOr<std::string> ca = ReadFileToString(ca_file);
  if (!ca.ok()) return ca.status().Annotate("TLS CA");
  if (ca->find("-----BEGIN CERTIFICATE-----") == std::string::npos) {
    return InvalidArgument("TLS CA '" + ca_file + "' holds no PEM certificate");
  }
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = *ca;
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::SslCredentials(ssl);
  if (token.empty()) return credentials;
  return grpc::CompositeChannelCredentials(credentials, grpc::AccessTokenCredentials(token));
}

}  // namespace

ScantuneClient::ScantuneClient(const ClientOptions& options)
    : address_(ResolveAddress(options.address)),
      client_id_(options.client_id.empty() ? DefaultClientId() : options.client_id),
      options_(options) {
  StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials = ChannelCredentialsFor(options, &tls_);
  if (!credentials.ok()) {
    setup_ = credentials.status();
    return;
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  channel_ = grpc::CreateCustomChannel(address_, *credentials, args);
  stub_ = v1::Scantune::NewStub(channel_);
}

ScantuneClient::~ScantuneClient() = default;

Status ScantuneClient::Prepare(grpc::ClientContext* context, bool long_running) const {
  RETURN_IF_ERROR(setup_);
  context->AddMetadata(kClientMetadataKey, client_id_);
  if (long_running || options_.deadline.count() <= 0) return Status::Ok();
  context->set_deadline(std::chrono::system_clock::now() + options_.deadline);
  return Status::Ok();
}

Status ScantuneClient::CheckHealth() {
  RETURN_IF_ERROR(setup_);
  auto health = grpc::health::v1::Health::NewStub(channel_);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(v1::Scantune::service_full_name());
  grpc::health::v1::HealthCheckResponse response;
  RETURN_IF_ERROR(FromGrpcStatus(health->Check(&context, request, &response)));
  if (response.status() != grpc::health::v1::HealthCheckResponse::SERVING) {
    return Unavailable("daemon at " + address_ + " is " +
                       grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status()));
  }
  return Status::Ok();
}

Status ScantuneClient::WaitUntilServing(std::chrono::milliseconds timeout) {
  RETURN_IF_ERROR(setup_);
  auto give_up = std::chrono::steady_clock::now() + timeout;
  Status last = Unavailable("no answer");
  while (true) {
    // Blocks until the channel connects or the remaining time is spent, so
    // the loop does not spin while the daemon is still starting.
    auto remaining = give_up - std::chrono::steady_clock::now();
    if (remaining <= std::chrono::steady_clock::duration::zero()) break;
    channel_->WaitForConnected(std::chrono::system_clock::now() +
                               std::min<std::chrono::steady_clock::duration>(remaining, std::chrono::milliseconds(200)));
    last = CheckHealth();
    if (last.ok()) return last;
    // A refused connection fails at once; pause briefly before the next try.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return Unavailable("daemon at " + address_ + " did not become ready: " + last.message());
}

StatusOr<v1::ListDevicesResponse> ScantuneClient::ListDevices() {
  grpc::ClientContext context;
  RETURN_IF_ERROR(Prepare(&context, false));
  v1::ListDevicesResponse response;
  RETURN_IF_ERROR(FromGrpcStatus(stub_->ListDevices(&context, v1::ListDevicesRequest(), &response)));
  return response;
}

StatusOr<v1::Selection> ScantuneClient::Select(const v1::SelectRequest& request) {
  grpc::ClientContext context;
  RETURN_IF_ERROR(Prepare(&context, request.on_miss() == v1::TUNE_NOW));
  v1::SelectResponse response;
  RETURN_IF_ERROR(FromGrpcStatus(stub_->Select(&context, request, &response)));
  return response.selection();
}

StatusOr<v1::KernelResponse> ScantuneClient::GetKernel(const v1::GetKernelRequest& request) {
  grpc::ClientContext context;
  RETURN_IF_ERROR(Prepare(&context, request.on_miss() == v1::TUNE_NOW));
  v1::KernelResponse response;
  RETURN_IF_ERROR(FromGrpcStatus(stub_->GetKernel(&context, request, &response)));
  return response;
}

StatusOr<v1::Selection> ScantuneClient::Tune(const v1::TuneRequest& request,
                                             const std::function<void(const v1::TuneProgress&)>& progress) {
  grpc::ClientContext context;
  RETURN_IF_ERROR(Prepare(&context, true));
  std::unique_ptr<grpc::ClientReader<v1::TuneProgress>> reader = stub_->Tune(&context, request);
  v1::TuneProgress update;
  std::optional<v1::Selection> selection;
  while (reader->Read(&update)) {
    if (progress) progress(update);
    if (update.stage() == v1::TuneProgress::DONE && update.has_selection()) selection = update.selection();
  }
  RETURN_IF_ERROR(FromGrpcStatus(reader->Finish()));
  if (!selection) return Internal("tune stream ended without a DONE update carrying the selection");
  return *selection;
}

StatusOr<v1::BenchmarkResponse> ScantuneClient::Benchmark(const v1::BenchmarkRequest& request) {
  grpc::ClientContext context;
  RETURN_IF_ERROR(Prepare(&context, true));
  v1::BenchmarkResponse response;
  RETURN_IF_ERROR(FromGrpcStatus(stub_->Benchmark(&context, request, &response)));
  return response;
}

StatusOr<v1::ListRecordsResponse> ScantuneClient::ListRecords(const v1::ListRecordsRequest& request) {
  grpc::ClientContext context;
  RETURN_IF_ERROR(Prepare(&context, false));
  v1::ListRecordsResponse response;
  RETURN_IF_ERROR(FromGrpcStatus(stub_->ListRecords(&context, request, &response)));
  return response;
}

StatusOr<v1::Record> ScantuneClient::GetRecord(int64_t id) {
  grpc::ClientContext context;
  RETURN_IF_ERROR(Prepare(&context, false));
  v1::GetRecordRequest request;
  request.set_id(id);
  v1::Record response;
  RETURN_IF_ERROR(FromGrpcStatus(stub_->GetRecord(&context, request, &response)));
  return response;
}

StatusOr<v1::ListSelectionsResponse> ScantuneClient::ListSelections(const v1::ListSelectionsRequest& request) {
  grpc::ClientContext context;
  RETURN_IF_ERROR(Prepare(&context, false));
  v1::ListSelectionsResponse response;
  RETURN_IF_ERROR(FromGrpcStatus(stub_->ListSelections(&context, request, &response)));
  return response;
}

StatusOr<v1::ExportResponse> ScantuneClient::Export(const v1::ExportRequest& request) {
  grpc::ClientContext context;
  RETURN_IF_ERROR(Prepare(&context, false));
  v1::ExportResponse response;
  RETURN_IF_ERROR(FromGrpcStatus(stub_->Export(&context, request, &response)));
  return response;
}

StatusOr<v1::ImportResponse> ScantuneClient::Import(const v1::ImportRequest& request) {
  grpc::ClientContext context;
  RETURN_IF_ERROR(Prepare(&context, false));
  v1::ImportResponse response;
  RETURN_IF_ERROR(FromGrpcStatus(stub_->Import(&context, request, &response)));
  return response;
}

}  // namespace scantune
