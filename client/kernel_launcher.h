// KernelLauncher: a backend as GetKernel serves it (v1::KernelResponse:
// cubin, launches per phase, parameter layout, workspace sizes), loaded into
// the calling thread's current CUDA context and launched on the caller's own
// buffers and stream. This is what a C++ training job links
// (scantune_launcher) to run the kernel the service selected; the mixer bench
// runs its backends through it too. Kernels launch exactly as the worker
// timed them (worker/planned_kernel.h: the same shared-memory opt-ins, PDL
// and thread-block clusters) under the same workspace contract:
//   - allocate at least workspace_bytes() of device memory (the launcher
//     never allocates: the job owns its memory);
//   - call PrepareWorkspace once per allocation (it zeroes the prefix of a
//     backend whose kernels keep it ready between launches);
//   - Enqueue each phase ("fwd", then "bwd") with the packed struct; every
//     launch that shares a workspace must be ordered on one stream.
// libcuda is the caller's CudaDriver (dlopen'ed at run time, never linked).
//
// Thread safety: immutable after Load. Enqueue may be called from any thread
// whose current context is the one Load ran in; destroy it with that context
// current (cuModuleUnload).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "client/param_pack.h"
#include "common/status.h"
#include "proto/scantune.pb.h"
#include "worker/cuda_driver.h"
#include "worker/planned_kernel.h"

namespace scantune {

class KernelLauncher {
 public:
  // cuModuleLoadData into the current context and every launch resolved.
  // FAILED_PRECONDITION without a current context; INVALID_ARGUMENT when the
  // response has no cubin or no launches, zero > workspace bytes, or a launch
  // the plan cannot run (grid.x not a multiple of its cluster).
  static StatusOr<std::unique_ptr<KernelLauncher>> Load(const CudaDriver& driver, const v1::KernelResponse& kernel);
  ~KernelLauncher();
  KernelLauncher(const KernelLauncher&) = delete;
  KernelLauncher& operator=(const KernelLauncher&) = delete;

  const v1::KernelResponse& response() const { return response_; }
  bool HasPhase(const std::string& phase) const;
  // Bytes of scratch the caller allocates (at least 256: a workspace field
  // may refuse null).
  uint64_t workspace_bytes() const;

  // The by-value parameter struct (PackParams over the served layout). The
  // "workspace" field gets `workspace` unless `values` names one. Sizes other
  // than the served problem's are refused (CheckServedSizes).
  StatusOr<std::vector<uint8_t>> Pack(ParamValues values, CUdeviceptr workspace) const;

  // Zeroes the workspace prefix on `stream` where the backend zeroes it once
  // per allocation (workspace_zero_once); otherwise nothing.
  Status PrepareWorkspace(CUdeviceptr workspace, CUstream stream) const;

  // Queues the phase on `stream`: the workspace prefix zeroed (unless
  // zero-once), then the phase's kernels in order. NOT_FOUND for a phase the
  // backend has no launch for; INVALID_ARGUMENT for a struct of the wrong size.
  Status Enqueue(const std::string& phase, const std::vector<uint8_t>& params, CUdeviceptr workspace,
                 CUstream stream) const;

 private:
  explicit KernelLauncher(const CudaDriver& driver) : driver_(driver) {}

  const CudaDriver& driver_;
  v1::KernelResponse response_;  // without the cubin (loaded, then dropped)
  CUmodule module_ = nullptr;
  std::vector<PlannedKernel> kernels_;
};

}  // namespace scantune
