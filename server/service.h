// ScantuneService: the gRPC front of scantuned (scantune.v1.Scantune, callback
// API). It owns no state of its own beyond its in-flight calls: every RPC
// converts its request, delegates to the Engine and converts the answer back.
//
// Threading: gRPC's reactor threads only start and finish calls. Every Engine
// call runs on a thread of its own (tuning, benchmarks and NVRTC compiles take
// seconds to minutes; even database reads are kept off the reactor threads so
// that a slow disk never stalls the server). Tune progress is forwarded by a
// ServerWriteReactor with one write in flight and the rest queued. A client
// that cancels a Tune stops receiving progress; the job itself goes on and its
// results are stored.
//
// Thread-safe. The destructor waits for every Engine call it started, so the
// Engine must outlive the service; call Shutdown() on the grpc::Server first.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>

#include "proto/scantune.grpc.pb.h"
#include "server/engine.h"

namespace scantune {

class ScantuneService final : public v1::Scantune::CallbackService {
 public:
  // `max_concurrent_calls` bounds the Engine calls running at once (each holds
  // a thread); beyond it calls are answered RESOURCE_EXHAUSTED.
  explicit ScantuneService(Engine* engine, int max_concurrent_calls = 256);
  ~ScantuneService() override;

  ScantuneService(const ScantuneService&) = delete;
  ScantuneService& operator=(const ScantuneService&) = delete;

  // Blocks until no Engine call started by this service is running.
  void WaitForCalls();
  int CallsInFlight() const;

  grpc::ServerUnaryReactor* Select(grpc::CallbackServerContext* context, const v1::SelectRequest* request,
                                   v1::SelectResponse* response) override;
  grpc::ServerUnaryReactor* GetKernel(grpc::CallbackServerContext* context, const v1::GetKernelRequest* request,
                                      v1::KernelResponse* response) override;
  grpc::ServerWriteReactor<v1::TuneProgress>* Tune(grpc::CallbackServerContext* context,
                                                   const v1::TuneRequest* request) override;
  grpc::ServerUnaryReactor* Benchmark(grpc::CallbackServerContext* context, const v1::BenchmarkRequest* request,
                                      v1::BenchmarkResponse* response) override;
  grpc::ServerUnaryReactor* ListRecords(grpc::CallbackServerContext* context, const v1::ListRecordsRequest* request,
                                        v1::ListRecordsResponse* response) override;
  grpc::ServerUnaryReactor* GetRecord(grpc::CallbackServerContext* context, const v1::GetRecordRequest* request,
                                      v1::Record* response) override;
  grpc::ServerUnaryReactor* ListSelections(grpc::CallbackServerContext* context,
                                           const v1::ListSelectionsRequest* request,
                                           v1::ListSelectionsResponse* response) override;
  grpc::ServerUnaryReactor* ListDevices(grpc::CallbackServerContext* context, const v1::ListDevicesRequest* request,
                                        v1::ListDevicesResponse* response) override;
  grpc::ServerUnaryReactor* Export(grpc::CallbackServerContext* context, const v1::ExportRequest* request,
                                   v1::ExportResponse* response) override;
  grpc::ServerUnaryReactor* Import(grpc::CallbackServerContext* context, const v1::ImportRequest* request,
                                   v1::ImportResponse* response) override;

 private:
  // Runs `work` on a new thread counted in calls_in_flight_; false (and
  // `work` not run) when the bound is reached.
  bool Offload(std::function<void()> work);

  // Runs `call` off the reactor thread and finishes the unary reactor with its
  // status. `call` fills the response itself.
  grpc::ServerUnaryReactor* RunUnary(grpc::CallbackServerContext* context, const char* rpc,
                                     std::function<Status()> call);

  Engine* const engine_;
  const int max_concurrent_calls_;
  mutable std::mutex mu_;
  std::condition_variable idle_;
  int calls_in_flight_ = 0;
};

}  // namespace scantune
