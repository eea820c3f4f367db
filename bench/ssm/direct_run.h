// Direct runs of one candidate outside the worker, for what the daemon's
// records do not hold: outputs to compare against the sequential family
// (rel_err_vs_scan) and device memory in a fresh process (device_peak,
// max_len). A run allocates only the tensors its mode touches (no guards, no
// poisoning: legality is the daemon's verification, done before), uploads
// the inputs the caller prepared, runs the plan's phases and optionally
// downloads the compared outputs.
//
// Thread safety: not thread-safe; one GPU thread per context.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/problem.h"
#include "common/status.h"
#include "proto/scantune.pb.h"
#include "proto/worker.pb.h"
#include "worker/gpu_context.h"
#include "worker/op_io.h"

namespace scantune::ssmbench {

// The tensors rel_err_vs_scan compares: y in fwd; every gradient (kBwdOut) in
// fwd_bwd, as seed 004 ("max over y or all grads").
std::vector<size_t> ComparedTensors(const std::vector<TensorSpec>& tensors, Mode mode);

// Whether a tensor is allocated for the mode: inputs always; dy and the
// gradients with a backward; y and h_final with a forward.
bool UsedInMode(const TensorSpec& tensor, Mode mode);

// max over tensors of max|out - scan| / max|scan| (each tensor's own scale);
// +inf when an output is NaN/Inf or the lists differ.
double RelErrVsScan(const std::vector<std::vector<double>>& out, const std::vector<std::vector<double>>& scan);

struct RunResult {
  v1::ResultState state = v1::OK;  // a failure of the candidate's own work (OOM, fault, timeout)
  std::string error;
  uint64_t in_use_before = 0;      // device memory in use (cuMemGetInfo) before the module and buffers
  uint64_t in_use_peak = 0;        // the most in use after allocating and after each phase
  uint64_t allocated_bytes = 0;    // tensors + workspace asked for
  bool context_lost = false;       // a sticky error: no more work on this context
  std::vector<std::vector<double>> outputs;  // ComparedTensors, when downloaded
};

// A Status error: the harness failed, not the candidate.
StatusOr<RunResult> RunCandidate(const GpuContext& ctx, const Problem& problem, const v1::Candidate& candidate,
                                 const OpCase& inputs, bool download, double kernel_timeout_ms);

}  // namespace scantune::ssmbench
