// Verifier: the legality check of candidates on one problem. For each
// candidate it allocates every buffer in its own allocation with guard
// regions, poisons the outputs (NaN bytes), uploads the job's random inputs,
// runs the plan's phases, and checks that every output element was written,
// that no guard (and no input) changed, and that each output matches the
// float64 reference within the dtype's tolerance. It also measures the
// candidate's device memory on one input set.
//
// Once per job (in the constructor): the inputs from the job's seed (fresh
// per job; the daemon gives each job a new seed), their encoded bytes, and
// the float64 reference (forward h, h_final; backward g = dx, dh0). Every
// candidate then re-uploads those bytes (a buggy kernel may write anywhere,
// so nothing it could have touched on the device is reused) and pays only
// for its GPU work, the device->host copies of its outputs (one per
// output, into host buffers reused across candidates) and one pass of
// comparison per output on all host threads (worker/output_check.h).
//
// Phases: fwd checks h and h_final; bwd checks da, dx (and dh0 with h0).
// In fwd_bwd the backward reads the h that the candidate's own forward
// stored, and the da reference uses those same values, so a forward
// rounding difference is never charged to the backward: the backward
// depends on h only through da_t = g_t * h_{t-1}, and g does not depend on
// h, so g is computed once and each candidate's da reference is formed in
// its comparison pass from the h it downloaded. In bwd-only mode the h
// buffer is filled with the reference forward rounded to the dtype.
//
// Thread safety: not thread-safe; one GPU thread (host passes inside use
// more threads, see worker/parallel.h).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "common/problem.h"
#include "common/status.h"
#include "proto/worker.pb.h"
#include "worker/candidate_outcome.h"
#include "worker/gpu_context.h"
#include "worker/output_check.h"

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

  // The job's inputs and reference (built by the constructor).
  // The Timer takes the inputs from here instead of generating them again.
  const VerificationData* prepared() const { return job_ ? &*job_ : nullptr; }

 private:
  // Builds job_ on first use (the constructor).
  const VerificationData& Job();

  const GpuContext& ctx_;
  Problem problem_;
  uint64_t seed_;
  Options options_;
  std::optional<VerificationData> job_;
  // Host copies of what comes back from the device, reused by every
  // candidate: allocated (and their pages touched) once per job.
  std::vector<uint8_t> h_host_, h_final_host_, da_host_, dx_host_, dh0_host_, h_after_host_, input_host_;
};

}  // namespace scantune
