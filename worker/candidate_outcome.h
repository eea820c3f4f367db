// CandidateOutcome: what verifying or timing one candidate on one problem
// came to, before it becomes a Record. A value type; thread-compatible.
#pragma once

#include <cstdint>
#include <string>

#include "proto/scantune.pb.h"
#include "worker/cuda_driver.h"

namespace scantune {

struct CandidateOutcome {
  v1::ResultState state = v1::OK;
  std::string detail;          // why a non-OK state, for the record
  double rel_err = 0.0;        // max over outputs of max|out-ref| / max|ref|
  v1::Memory memory;
  // Verifier::Options::digest_outputs: a digest of every compared output's
  // bytes, in tensor order (0 otherwise).
  uint64_t output_digest = 0;
  // The context is unusable (sticky error, or a kernel still running past
  // its timeout): report this candidate, then the worker must exit.
  bool context_lost = false;

  bool ok() const { return state == v1::OK; }

  // The outcome of a failed driver call made for the candidate. A failure
  // that is not the candidate's (site kSetup, not out of memory) yields
  // STATE_UNSPECIFIED: the caller treats it as a worker error.
  static CandidateOutcome FromCudaFailure(const CudaFailure& failure, const Status& status) {
    CandidateOutcome out;
    out.state = ClassifyCudaFailure(failure);
    out.detail = status.message();
    out.context_lost = IsStickyCudaError(failure.result);
    return out;
  }
};

}  // namespace scantune
