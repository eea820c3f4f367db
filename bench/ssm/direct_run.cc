#include "bench/ssm/direct_run.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include "worker/candidate_module.h"
#include "worker/candidate_outcome.h"
#include "worker/device_buffer.h"
#include "worker/dtype_convert.h"

namespace scantune::ssmbench {

std::vector<size_t> ComparedTensors(const std::vector<TensorSpec>& tensors, Mode mode) {
  std::vector<size_t> out;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (mode == Mode::kFwd ? tensors[i].name == "y" : tensors[i].role == TensorRole::kBwdOut) out.push_back(i);
  }
  return out;
}

bool UsedInMode(const TensorSpec& tensor, Mode mode) {
  const bool fwd = mode != Mode::kBwd, bwd = mode != Mode::kFwd;
  switch (tensor.role) {
    case TensorRole::kInput: return true;
    case TensorRole::kGradIn:
    case TensorRole::kBwdOut: return bwd;
    case TensorRole::kFwdOut: return fwd;
    case TensorRole::kSaved: return true;
  }
  return true;
}

double RelErrVsScan(const std::vector<std::vector<double>>& out, const std::vector<std::vector<double>>& scan) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (out.size() != scan.size()) return kInf;
  double worst = 0.0;
  for (size_t t = 0; t < out.size(); ++t) {
    if (out[t].size() != scan[t].size()) return kInf;
    double diff = 0.0, scale = 0.0;
    for (size_t i = 0; i < out[t].size(); ++i) {
      if (!std::isfinite(out[t][i])) return kInf;
      diff = std::max(diff, std::fabs(out[t][i] - scan[t][i]));
      scale = std::max(scale, std::fabs(scan[t][i]));
    }
    worst = std::max(worst, scale > 0.0 ? diff / scale : (diff > 0.0 ? kInf : 0.0));
  }
  return worst;
}

StatusOr<RunResult> RunCandidate(const GpuContext& ctx, const Problem& problem, const v1::Candidate& candidate,
                                 const OpCase& inputs, bool download, double kernel_timeout_ms) {
  RunResult result;
  CudaFailure failure;
  RETURN_IF_ERROR(ctx.MakeCurrent());
  ASSIGN_OR_RETURN(result.in_use_before, ctx.MemoryInUse());
  result.in_use_peak = result.in_use_before;
  auto sample = [&]() -> Status {
    ASSIGN_OR_RETURN(const uint64_t used, ctx.MemoryInUse());
    result.in_use_peak = std::max(result.in_use_peak, used);
    return Status::Ok();
  };
  // A failed driver call made for the candidate is its result (OOM, fault,
  // timeout); one that is nobody's fault (a setup call failing for another
  // reason) is the harness's error.
  auto fail = [&](const Status& status) -> StatusOr<RunResult> {
    if (!failure.failed()) return status;
    const CandidateOutcome outcome = CandidateOutcome::FromCudaFailure(failure, status);
    if (outcome.state == v1::STATE_UNSPECIFIED) return status;
    result.state = outcome.state;
    result.error = outcome.detail;
    result.context_lost = outcome.context_lost;
    if (outcome.context_lost) ctx.MarkLost();
    return result;
  };

  auto module = CandidateModule::Load(ctx, candidate, &failure);
  if (!module.ok()) return fail(module.status());

  const std::vector<TensorSpec>& tensors = inputs.tensors;
  std::vector<DeviceBuffer> buffers(tensors.size());
  std::vector<CUdeviceptr> pointers(tensors.size(), 0);
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!UsedInMode(tensors[i], problem.mode)) continue;
    result.allocated_bytes += tensors[i].bytes();
    auto buffer = DeviceBuffer::Allocate(ctx, tensors[i].bytes(), /*guarded=*/false, &failure);
    if (!buffer.ok()) return fail(buffer.status().Annotate("allocating " + tensors[i].name));
    buffers[i] = std::move(*buffer);
    pointers[i] = buffers[i].ptr();
    if (!inputs.bytes[i].empty()) {
      Status st = buffers[i].Upload(inputs.bytes[i].data(), inputs.bytes[i].size(), &failure);
      if (!st.ok()) return fail(st);
    }
  }
  result.allocated_bytes += candidate.workspace_bytes();
  auto workspace = DeviceBuffer::Allocate(ctx, candidate.workspace_bytes(), /*guarded=*/false, &failure);
  if (!workspace.ok()) return fail(workspace.status().Annotate("allocating the workspace"));
  RETURN_IF_ERROR(sample());

  const std::vector<uint8_t> params = OpIoFor(problem.op).Params(problem, pointers, workspace->ptr());
  std::vector<const char*> phases;
  if (problem.mode != Mode::kBwd) phases.push_back("fwd");
  if (problem.mode != Mode::kFwd) phases.push_back("bwd");
  for (const char* phase : phases) {
    Status st = (*module)->Enqueue(phase, params.data(), workspace->ptr(), &failure);
    if (st.ok()) {
      const std::string what = std::string(phase) + " phase of " + candidate.variant();
      st = ctx.WaitStream(kernel_timeout_ms, what.c_str(), &failure);
    }
    if (!st.ok()) return fail(st);
    RETURN_IF_ERROR(sample());
  }

  if (download) {
    std::vector<uint8_t> host;
    for (size_t i : ComparedTensors(tensors, problem.mode)) {
      host.resize(tensors[i].bytes());
      Status st = buffers[i].Download(host.data(), host.size(), &failure);
      if (!st.ok()) return fail(st);
      result.outputs.push_back(DecodeFrom(tensors[i].dtype, host.data(), tensors[i].elements));
    }
  }
  return result;
}

}  // namespace scantune::ssmbench
