// Verifier: the legality check of candidates on one problem. For each
// candidate it allocates every buffer in its own allocation with guard
// regions, poisons the outputs (NaN bytes), runs the plan's phases on fresh
// random inputs from the job's seed, and checks that every output element
// was written, that no guard (and no input) changed, and that each output
// matches the float64 reference within the dtype's tolerance. It also
// measures the candidate's device memory on one input set.
//
// Phases: fwd checks h and h_final; bwd checks da, dx (and dh0 with h0).
// In fwd_bwd the backward reads the h that the candidate's own forward
// stored, and the reference backward uses those same values, so a forward
// rounding difference is never charged to the backward. In bwd-only mode the
// h buffer is filled with the reference forward rounded to the dtype.
//
// Thread safety: not thread-safe; one GPU thread.
#pragma once

#include <cstdint>
#include <optional>

#include "common/problem.h"
#include "common/status.h"
#include "proto/worker.pb.h"
#include "worker/candidate_outcome.h"
#include "worker/gpu_context.h"
#include "worker/input_generator.h"
#include "worker/reference.h"

namespace scantune {

// max|out-ref| / max|ref| that still passes, per input dtype.
double Tolerance(DType dtype);

class Verifier {
 public:
  struct Options {
    double kernel_timeout_ms = 10000.0;
    // false: run and measure memory, but do not compare (time-only jobs
    // still learn faults, timeouts and memory before timing).
    bool check = true;
  };

  Verifier(const GpuContext& ctx, const Problem& problem, uint64_t seed, Options options);

  // A Status error means the worker, not the candidate, failed.
  StatusOr<CandidateOutcome> Verify(const v1::Candidate& candidate);

 private:
  const LinearScanForwardRef& ForwardRef();

  const GpuContext& ctx_;
  Problem problem_;
  Options options_;
  LinearScanInputs inputs_;
  // The inputs as the kernels read them, encoded once for every candidate.
  std::vector<uint8_t> a_bytes_, x_bytes_, dh_bytes_, h0_bytes_;
  std::optional<LinearScanForwardRef> forward_ref_;  // computed on first use, shared by all candidates
};

}  // namespace scantune
