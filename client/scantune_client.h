// ScantuneClient: a typed C++ client of scantuned for the CLI and for
// training jobs. Owns one gRPC channel to the daemon; every method is a
// blocking call that returns the daemon's answer or its error as a Status
// (the gRPC code mapped back by FromGrpcStatus, the message unchanged).
//
// Thread-safe: methods may be called from several threads at once (the
// channel multiplexes them). The progress callback of Tune runs on the
// calling thread.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "common/status.h"
#include "proto/scantune.grpc.pb.h"

namespace grpc {
class Channel;
class ClientContext;
}

namespace scantune {

struct ClientOptions {
  // unix:PATH, unix:///PATH or host:port. Empty: $SCANTUNE_ADDRESS, else
  // unix:///tmp/scantune.sock.
  std::string address;
  // Per-call deadline for everything but Tune/Benchmark and Select/GetKernel
  // with TUNE_NOW, which last as long as the job (zero: no deadline).
  std::chrono::milliseconds deadline{std::chrono::seconds(60)};
  int max_receive_message_bytes = 64 << 20;
  // Who this client is to the daemon's per-client job bound (sent with every
  // call). Empty: "host:pid".
  std::string client_id;
  // A daemon beyond the host (scantuned --tls-cert ... --token-file ...):
  // the PEM file of the CA that signed its certificate, and the bearer token
  // sent with every call (or a file whose first token line is it). Empty:
  // $SCANTUNE_TLS_CA and $SCANTUNE_TOKEN_FILE; all empty: plaintext, as on a
  // unix socket or loopback port. A token is never sent without TLS.
  std::string tls_ca_file;
  std::string token;
  std::string token_file;
};

class ScantuneClient {
 public:
  // The address the options resolve to (flag, environment, default).
  static std::string ResolveAddress(const std::string& address);

  // Creates the channel; does not connect (the first call does). Where the
  // TLS or token options cannot be used (a file missing, a token without a
  // CA), no channel is made: status() and every call answer why.
  explicit ScantuneClient(const ClientOptions& options = {});
  ~ScantuneClient();

  const std::string& address() const { return address_; }
  const Status& status() const { return setup_; }
  bool tls() const { return tls_; }

  // Waits until the daemon's health service answers SERVING, retrying until
  // `timeout` has passed. UNAVAILABLE if it never did.
  Status WaitUntilServing(std::chrono::milliseconds timeout);
  // One health check: OK when SERVING.
  Status CheckHealth();

  StatusOr<v1::ListDevicesResponse> ListDevices();
  StatusOr<v1::Selection> Select(const v1::SelectRequest& request);
  StatusOr<v1::KernelResponse> GetKernel(const v1::GetKernelRequest& request);
  // Streams progress into `progress` (may be null) and returns the selection
  // carried by the final DONE update.
  StatusOr<v1::Selection> Tune(const v1::TuneRequest& request,
                               const std::function<void(const v1::TuneProgress&)>& progress);
  StatusOr<v1::BenchmarkResponse> Benchmark(const v1::BenchmarkRequest& request);
  StatusOr<v1::ListRecordsResponse> ListRecords(const v1::ListRecordsRequest& request);
  StatusOr<v1::Record> GetRecord(int64_t id);
  StatusOr<v1::ListSelectionsResponse> ListSelections(const v1::ListSelectionsRequest& request);
  StatusOr<v1::ExportResponse> Export(const v1::ExportRequest& request);
  StatusOr<v1::ImportResponse> Import(const v1::ImportRequest& request);

 private:
  // Every call's context: who calls (kClientMetadataKey) and, unless long
  // running, the deadline. Fails where the channel could not be made.
  Status Prepare(grpc::ClientContext* context, bool long_running) const;

  static std::string DefaultClientId();

  std::string address_;
  std::string client_id_;
  ClientOptions options_;
  Status setup_;
  bool tls_ = false;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Scantune::Stub> stub_;
};

}  // namespace scantune
