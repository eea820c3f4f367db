// Engine: everything scantuned does behind its RPCs. Owns the Store, the
// NVRTC compiler (with the compile cache in the Store), one WorkerPool entry
// per GPU and the job queue. The gRPC service only converts and delegates to
// it. Thread-safe; long work (tuning, benchmarks) runs on the device's job
// thread, never on the caller's thread beyond waiting for it.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/problem.h"
#include "common/status.h"
#include "proto/scantune.pb.h"
#include "proto/worker.pb.h"

namespace scantune {

struct EngineOptions {
  std::string db_path = "scantune.db";
  std::string worker_path;                 // scantune-worker (or a test double)
  std::vector<std::string> worker_args;    // extra arguments for every worker
  bool enable_test_variants = false;       // test_fault / test_hang may be enumerated and requested
  bool enable_benchmark = false;           // remote Benchmark requests are off unless enabled
  int compile_threads = 2;
  double candidate_timeout_s = 60.0;       // watchdog: a worker silent this long on one candidate is hung
  int max_queued_jobs = 16;                // jobs (tunes, benchmarks) admitted at once, all clients
  int max_jobs_per_client = 4;             // of those, one client's (so no one client fills the queue)
  int max_variants_per_request = 512;
  int max_problems_per_benchmark = 16;
  int retime_top = 3;                      // re-timed in paired order before a selection is committed
  v1::TimingConfig timing;                 // zero fields take the worker's defaults
  ProblemLimits limits;
};

class Engine {
 public:
  static StatusOr<std::unique_ptr<Engine>> Create(const EngineOptions& options);
  ~Engine();

  using ProgressFn = std::function<void(const v1::TuneProgress&)>;

  // `client` names the caller for the per-client job bound (the service's
  // ClientId); empty: only the queue's own bound applies. Calls that may queue
  // a job (Tune, Benchmark; Select and GetKernel with on_miss TUNE_NOW) take it.
  StatusOr<v1::ListDevicesResponse> ListDevices();
  StatusOr<v1::Selection> Select(const v1::SelectRequest& request, const ProgressFn& progress = nullptr,
                                 const std::string& client = {});
  StatusOr<v1::KernelResponse> GetKernel(const v1::GetKernelRequest& request, const std::string& client = {});
  // Blocks until the job ends; progress is called from the job thread.
  StatusOr<v1::Selection> Tune(const v1::TuneRequest& request, const ProgressFn& progress,
                               const std::string& client = {});
  StatusOr<v1::BenchmarkResponse> Benchmark(const v1::BenchmarkRequest& request, const std::string& client = {});
  StatusOr<v1::Record> GetRecord(int64_t id);
  StatusOr<v1::ListRecordsResponse> ListRecords(const v1::ListRecordsRequest& request);
  // Every stored selection matching the filter, flagged stale as Select flags it.
  StatusOr<v1::ListSelectionsResponse> ListSelections(const v1::ListSelectionsRequest& request);
  // Records matching the filter, newest first, as JSON in seed 001's schema.
  StatusOr<v1::ExportResponse> Export(const v1::ExportRequest& request);
  // Stores every readable row of a seed-schema document (or an export) as an
  // "imported" record in one transaction, without touching any selection.
  StatusOr<v1::ImportResponse> Import(const v1::ImportRequest& request);

 private:
  class Impl;
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace scantune
