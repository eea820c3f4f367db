// Tuner: the work of one Tune or Benchmark job, run on the device's job
// thread. Prunes the variants (CanImplement, failure records), compiles them
// through the compile cache in parallel, has the device's worker verify and
// time the legal ones, re-times the top few in paired order, decides the
// winner (Decide), and commits every record and the selection in one Store
// transaction. Reports progress through a callback on the job thread.
//
// Thread safety: the Tuner holds no mutable state of its own (the Store,
// compile cache and worker pool are thread-safe), so jobs for different
// devices may run in parallel; jobs for one device are serialized by the
// Engine's per-device queue.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/problem.h"
#include "common/status.h"
#include "common/variant.h"
#include "compiler/candidate.h"
#include "compiler/plan.h"
#include "db/store.h"
#include "proto/worker.pb.h"
#include "server/compile_cache.h"
#include "server/engine.h"
#include "server/worker_pool.h"

namespace scantune {

// A device as the tuner sees it: the pool index, its DeviceInfo (as stored in
// records) and the fingerprint its records and selections are made under.
struct TuneDevice {
  int index = 0;
  v1::DeviceInfo info;
  std::string fingerprint;
};

// Fills what the daemon owns in a record: device, source hash, daemon
// version, creation time (if missing), job id, origin (if missing), problem
// (if missing) and the derived figures the worker left out.
void FinishRecord(const TuneDevice& device, const Problem& problem, uint64_t job_id, const std::string& origin,
                  v1::Record* record);

class Tuner {
 public:
  using ProgressFn = Engine::ProgressFn;

  Tuner(const EngineOptions& options, Store* store, CompileCache* cache, WorkerPool* pool)
      : options_(options), store_(store), cache_(cache), pool_(pool) {}

  // variants empty: every enumerated variant (test variants only when enabled).
  // Named variants are expected to be validated by the caller.
  StatusOr<v1::Selection> Tune(uint64_t job_id, const TuneDevice& device, const Problem& problem,
                               const std::vector<Variant>& variants, bool force, const ProgressFn& progress);

  // Verifies and times each variant at each problem (origin "benchmark"); the
  // records are stored (one transaction) and returned with their ids. The
  // inputs come from `seed` (0: a fresh one per problem).
  StatusOr<std::vector<v1::Record>> Benchmark(uint64_t job_id, const TuneDevice& device,
                                              const std::vector<Problem>& problems,
                                              const std::vector<Variant>& variants, uint64_t seed);

 private:
  struct Evaluated {
    std::vector<v1::Record> records;   // compile failures and worker records, in variant order
    std::map<std::string, v1::Candidate> candidates;  // what the worker got, by variant name
  };
  // Runs one worker job and finishes its records (each with the job's seed); progress per event.
  StatusOr<std::vector<v1::Record>> RunWorkerJob(const TuneDevice& device, const Problem& problem, v1::Job job,
                                                 v1::TuneProgress::Stage verify_stage,
                                                 v1::TuneProgress::Stage time_stage, const ProgressFn& progress);
  // Compiles, then verifies and times in one worker job, its inputs from
  // `seed` (0: a fresh one). Records of failed compiles are made here;
  // `on_event` sees the worker's events.
  StatusOr<Evaluated> Evaluate(uint64_t job_id, const TuneDevice& device, const Problem& problem,
                               const std::vector<Variant>& variants, const std::string& origin,
                               const v1::TimingConfig& timing, uint64_t seed, const ProgressFn& progress);

  const EngineOptions& options_;
  Store* store_;
  CompileCache* cache_;
  WorkerPool* pool_;
};

}  // namespace scantune
