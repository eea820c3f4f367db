// PlannedKernel: one launch of a plan (v1::KernelLaunch) resolved in a
// loaded module: the function, with the shared-memory and cluster opt-ins
// its launch needs, and how to queue it. Shared by the worker's
// CandidateModule and the client's KernelLauncher, so that a served
// backend runs exactly as it was timed.
//
// Thread safety: a resolved kernel is immutable; Launch queues on the
// stream it is given, in the context current on the calling thread.
#pragma once

#include <string>

#include "common/status.h"
#include "proto/scantune.pb.h"
#include "worker/cuda_driver.h"

namespace scantune {

struct PlannedKernel {
  CUfunction function = nullptr;
  std::string entry;
  std::string phase;
  std::string launch_call;  // built once: Launch runs in timing loops
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  unsigned shared_bytes = 0;
  bool dependent_launch = false;
  unsigned cluster_x = 1;

  // cuModuleGetFunction, the dynamic shared memory opt-in (any dynamic size:
  // the static part is the kernel's), the shared-memory carveout preference
  // and, above 8, the non-portable cluster size. INVALID_ARGUMENT for a grid.x
  // that is not a multiple of the cluster; driver failures are recorded in
  // `failure` at site kModuleLoad. `owner` names the backend in errors.
  static StatusOr<PlannedKernel> Resolve(const CudaDriver& driver, CUmodule module, const v1::KernelLaunch& launch,
                                         const std::string& owner, CudaFailure* failure);

  // Queues the kernel with kernelParams = args: cuLaunchKernel, or
  // cuLaunchKernelEx with programmatic stream serialization (PDL) where the
  // plan allows the kernel to start before its predecessor ends, and with the
  // cluster dimension where it runs in thread-block clusters.
  Status Launch(const CudaDriver& driver, CUstream stream, void** args, CudaFailure* failure) const;
};

}  // namespace scantune
