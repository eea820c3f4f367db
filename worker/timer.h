// Timer: the timing protocol for the legal candidates of one problem.
//   - compile excluded (candidates arrive compiled and already loaded);
//   - warm-up launches at the start of every stint (a stint: one candidate's
//     samples within one round), so caches and clocks left by the previous
//     candidate do not leak into this one's first sample;
//   - CUDA events around each sample; a sample is the mean of an inner loop
//     of back-to-back launches long enough (target_sample_ms, inner count
//     calibrated once per candidate and mode, capped by max_inner) to dwarf
//     launch overhead;
//   - input sets rotated launch by launch, with k sets whose total exceeds
//     2x the L2, so no launch reads inputs a previous one left in L2;
//   - rounds in counterbalanced order: even rounds walk the candidates
//     forward, odd rounds backward (AB then BA);
//   - per mode: fwd problems time fwd, bwd problems bwd, fwd_bwd problems
//     fwd, bwd and fwd_bwd (fwd then bwd) separately.
// It owns the input sets and each candidate's workspace for the run.
//
// Thread safety: not thread-safe; one GPU thread.
#pragma once

#include <functional>
#include <vector>

#include "common/problem.h"
#include "common/status.h"
#include "proto/worker.pb.h"
#include "worker/candidate_module.h"
#include "worker/candidate_outcome.h"
#include "worker/gpu_context.h"
#include "worker/op_io.h"

namespace scantune {

// The TimingConfig with every unset (zero) field replaced by its default.
struct TimingSettings {
  int warmup_launches = 3;
  int rounds = 2;
  int samples_per_round = 5;
  double target_sample_ms = 1.0;
  int max_inner = 1000;
  bool rotate_inputs = true;
  static TimingSettings FromProto(const v1::TimingConfig& config, bool config_given);
};

struct TimedCandidate {
  const v1::Candidate* candidate = nullptr;
  const CandidateModule* module = nullptr;
};

struct TimingResult {
  CandidateOutcome outcome;  // OK, or why timing failed (OOM for workspace, a fault, a timeout)
  v1::Stats fwd, bwd, fwd_bwd;
  std::vector<v1::Round> rounds;
  uint64_t bytes_moved = 0;
  double gbps = 0.0;
  double pct_of_copy = 0.0;
};

class Timer {
 public:
  // `prepared`: the job's inputs as the Verifier generated them from the
  // same seed (Verifier::prepared()), which must outlive the Timer; null:
  // the Timer generates them itself.
  Timer(const GpuContext& ctx, const Problem& problem, TimingSettings settings, uint64_t seed, double kernel_timeout_ms,
        double copy_gbps, uint64_t l2_bytes, const OpCase* prepared = nullptr);

  // Called before each stint with the candidate's index; its error aborts the run.
  using StintCallback = std::function<Status(size_t index)>;

  // Results in candidate order. A candidate that fails stops being timed;
  // when one loses the context, Run returns at once (the remaining
  // candidates keep an outcome of STATE_UNSPECIFIED: not timed).
  StatusOr<std::vector<TimingResult>> Run(const std::vector<TimedCandidate>& candidates, const StintCallback& on_stint);

 private:
  const GpuContext& ctx_;
  Problem problem_;
  TimingSettings settings_;
  uint64_t seed_;
  double kernel_timeout_ms_;
  double copy_gbps_;
  uint64_t l2_bytes_;
  const OpCase* prepared_;
};

}  // namespace scantune
