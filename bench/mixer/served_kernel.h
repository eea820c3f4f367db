// ServedKernel: a backend as GetKernel serves it (cubin, launches per phase,
// parameter layout, workspace sizes) loaded into the bench's context. Owns
// the CUmodule. Enqueue follows the plan's contract, as the worker's
// CandidateModule does (both through PlannedKernel): zero the workspace
// prefix, then launch the phase's kernels in order with the by-value
// parameter struct, with PDL and thread-block clusters where the plan says.
//
// (CandidateModule loads a worker.proto Candidate; this loads the public
// KernelResponse a training job would get, which is the point of the bench.)
//
// Thread safety: not thread-safe; used from the bench's one GPU thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "proto/scantune.pb.h"
#include "worker/gpu_context.h"
#include "worker/planned_kernel.h"

namespace scantune::mixer {

class ServedKernel {
 public:
  // cuModuleLoadData + PlannedKernel::Resolve per launch. INVALID_ARGUMENT
  // when the response lacks a cubin, a "fwd" or a "bwd" launch, or has
  // zero > workspace bytes.
  static StatusOr<std::unique_ptr<ServedKernel>> Load(const GpuContext& ctx, const v1::KernelResponse& kernel);
  ~ServedKernel();
  ServedKernel(const ServedKernel&) = delete;
  ServedKernel& operator=(const ServedKernel&) = delete;

  const v1::KernelResponse& response() const { return response_; }
  uint64_t workspace_bytes() const { return response_.workspace_bytes(); }

  // `params` must be params_size_bytes long (PackParams' output).
  Status Enqueue(const std::string& phase, const std::vector<uint8_t>& params, CUdeviceptr workspace) const;

 private:
  explicit ServedKernel(const GpuContext& ctx) : ctx_(ctx) {}

  const GpuContext& ctx_;
  v1::KernelResponse response_;
  CUmodule module_ = nullptr;
  std::vector<PlannedKernel> kernels_;
};

}  // namespace scantune::mixer
