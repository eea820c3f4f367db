#include "worker/planned_kernel.h"

namespace scantune {

StatusOr<PlannedKernel> PlannedKernel::Resolve(const CudaDriver& driver, CUmodule module, const v1::KernelLaunch& launch,
                                               const std::string& owner, CudaFailure* failure) {
  const auto& api = driver.api();
  PlannedKernel k;
  k.entry = launch.entry();
  k.phase = launch.phase();
  for (int i = 0; i < 3; ++i) {
    k.grid[i] = i < launch.grid_size() ? launch.grid(i) : 1;
    k.block[i] = i < launch.block_size() ? launch.block(i) : 1;
  }
  k.shared_bytes = launch.shared_bytes();
  k.dependent_launch = launch.dependent_launch();
  k.cluster_x = launch.cluster_x() > 1 ? launch.cluster_x() : 1;
  if (k.grid[0] % k.cluster_x != 0) {
    return InvalidArgument(owner + ": kernel " + k.entry + " has grid.x " + std::to_string(k.grid[0]) +
                           ", not a multiple of its cluster of " + std::to_string(k.cluster_x));
  }
  const bool ex = k.dependent_launch || k.cluster_x > 1;
  k.launch_call = (ex ? "cuLaunchKernelEx(" : "cuLaunchKernel(") + k.entry + ")";
  const std::string call = "cuModuleGetFunction(" + k.entry + ")";
  RETURN_IF_ERROR(driver.Check(api.ModuleGetFunction(&k.function, module, k.entry.c_str()), call.c_str(),
                               CudaCallSite::kModuleLoad, failure));
  if (k.shared_bytes > 0) {
    // Static and dynamic shared memory together may not pass 48 KB without
    // the opt-in, and the static part is the kernel's: opt in for any size.
    RETURN_IF_ERROR(driver.Check(api.FuncSetAttribute(k.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                      static_cast<int>(k.shared_bytes)),
                                 "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)", CudaCallSite::kModuleLoad,
                                 failure));
    // The driver sizes the SM's shared/L1 split from this preference; ask for
    // the most shared memory so that several blocks fit per SM (the kernels
    // that use dynamic shared memory bypass L1 for their streams).
    RETURN_IF_ERROR(driver.Check(api.FuncSetAttribute(k.function, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
                                                      CU_SHAREDMEM_CARVEOUT_MAX_SHARED),
                                 "cuFuncSetAttribute(PREFERRED_SHARED_MEMORY_CARVEOUT)", CudaCallSite::kModuleLoad,
                                 failure));
  }
  if (k.cluster_x > 8) {
    RETURN_IF_ERROR(driver.Check(api.FuncSetAttribute(k.function, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1),
                                 "cuFuncSetAttribute(NON_PORTABLE_CLUSTER_SIZE_ALLOWED)", CudaCallSite::kModuleLoad,
                                 failure));
  }
  return k;
}

Status PlannedKernel::Launch(const CudaDriver& driver, CUstream stream, void** args, CudaFailure* failure) const {
  const auto& api = driver.api();
  if (!dependent_launch && cluster_x == 1) {
    return driver.Check(api.LaunchKernel(function, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                                         shared_bytes, stream, args, nullptr),
                        launch_call.c_str(), CudaCallSite::kLaunch, failure);
  }
  CUlaunchAttribute attributes[2] = {};
  unsigned count = 0;
  if (dependent_launch) {
    attributes[count].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attributes[count++].value.programmaticStreamSerializationAllowed = 1;
  }
  if (cluster_x > 1) {
    attributes[count].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attributes[count].value.clusterDim.x = cluster_x;
    attributes[count].value.clusterDim.y = 1;
    attributes[count++].value.clusterDim.z = 1;
  }
  CUlaunchConfig config = {};
  config.gridDimX = grid[0];
  config.gridDimY = grid[1];
  config.gridDimZ = grid[2];
  config.blockDimX = block[0];
  config.blockDimY = block[1];
  config.blockDimZ = block[2];
  config.sharedMemBytes = shared_bytes;
  config.hStream = stream;
  config.attrs = attributes;
  config.numAttrs = count;
  return driver.Check(api.LaunchKernelEx(&config, function, args, nullptr), launch_call.c_str(),
                      CudaCallSite::kLaunch, failure);
}

}  // namespace scantune
