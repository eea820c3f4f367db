// Verifier: the legality check of candidates on one problem. For each
// candidate it allocates every buffer in its own allocation with guard
// regions, poisons the outputs (NaN bytes), uploads the job's random inputs,
// runs the plan's phases, and checks that every output element was written,
// that no guard (and no input) changed, and that each output matches the
// float64 reference within the dtype's tolerance. It also measures the
// candidate's device memory on one input set.
//
// Once per job (in the constructor): the operator's inputs from the job's
// seed (fresh per job; the daemon gives each job a new seed), their encoded
// bytes, and the float64 reference of every output (OpIo::Prepare). Every
// candidate then re-uploads those bytes (a buggy kernel may write anywhere,
// so nothing it could have touched on the device is reused) and pays only
// for its GPU work, the device->host copies of its outputs (into host
// buffers reused across candidates) and one comparison pass per output on
// all host threads (worker/output_check.h).
//
// Tensors by role (worker/op_io.h): fwd checks the kFwdOut tensors and the
// kSaved ones that have a reference; bwd checks the kBwdOut tensors, and that
// the kSaved tensors it read are unchanged. In fwd_bwd the backward reads
// what the candidate's own forward saved; in bwd-only mode it reads the
// reference forward rounded to the dtype. Inputs must be unchanged at the end.
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
    // With check: fold every compared output's bytes into the outcome's
    // output_digest (the GPU suite's same-bits-every-run check).
    bool digest_outputs = false;
  };

  Verifier(const GpuContext& ctx, const Problem& problem, uint64_t seed, Options options);

  // A Status error means the worker, not the candidate, failed.
  StatusOr<CandidateOutcome> Verify(const v1::Candidate& candidate);

  // The job's inputs and reference (built by the constructor).
  // The Timer takes the inputs from here instead of generating them again.
  const OpCase* prepared() const { return job_ ? &*job_ : nullptr; }

 private:
  // Builds job_ on first use (the constructor).
  const OpCase& Job();

  const GpuContext& ctx_;
  Problem problem_;
  uint64_t seed_;
  Options options_;
  std::optional<OpCase> job_;
  // Host copies of what comes back from the device, one per tensor, reused
  // by every candidate: allocated (and their pages touched) once per job.
  std::vector<std::vector<uint8_t>> host_;
  std::vector<uint8_t> saved_after_host_;
};

}  // namespace scantune
