#include "worker/candidate_module.h"

namespace scantune {

StatusOr<std::unique_ptr<CandidateModule>> CandidateModule::Load(const GpuContext& ctx,
                                                                 const v1::Candidate& candidate,
                                                                 CudaFailure* failure) {
  std::unique_ptr<CandidateModule> m(new CandidateModule(ctx));
  const auto& api = ctx.api();
  const auto& driver = ctx.driver();
  if (candidate.cubin().empty()) return InvalidArgument("candidate " + candidate.variant() + " carries no cubin");
  if (candidate.launches().empty()) return InvalidArgument("candidate " + candidate.variant() + " has no launches");
  RETURN_IF_ERROR(driver.Check(api.ModuleLoadData(&m->module_, candidate.cubin().data()), "cuModuleLoadData",
                               CudaCallSite::kModuleLoad, failure));
  m->workspace_bytes_ = candidate.workspace_bytes();
  m->workspace_zero_bytes_ = candidate.workspace_zero_bytes();
  m->workspace_zero_once_ = candidate.workspace_zero_once();
  if (m->workspace_zero_bytes_ > m->workspace_bytes_) {
    return InvalidArgument("candidate " + candidate.variant() + ": workspace_zero_bytes exceeds workspace_bytes");
  }
  for (const v1::KernelLaunch& launch : candidate.launches()) {
    Kernel k;
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
      return InvalidArgument("candidate " + candidate.variant() + ": kernel " + k.entry + " has grid.x " +
                             std::to_string(k.grid[0]) + ", not a multiple of its cluster of " +
                             std::to_string(k.cluster_x));
    }
    const bool ex = k.dependent_launch || k.cluster_x > 1;
    k.launch_call = (ex ? "cuLaunchKernelEx(" : "cuLaunchKernel(") + k.entry + ")";
    const std::string call = "cuModuleGetFunction(" + k.entry + ")";
    RETURN_IF_ERROR(driver.Check(api.ModuleGetFunction(&k.function, m->module_, k.entry.c_str()), call.c_str(),
                                 CudaCallSite::kModuleLoad, failure));
    // Static and dynamic shared memory together may not pass 48 KB without the
    // opt-in, and the static part is the kernel's: opt in for any dynamic size.
    if (k.shared_bytes > 0) {
      RETURN_IF_ERROR(driver.Check(api.FuncSetAttribute(k.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                        static_cast<int>(k.shared_bytes)),
                                   "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)", CudaCallSite::kModuleLoad,
                                   failure));
    }
    if (k.cluster_x > 8) {
      RETURN_IF_ERROR(driver.Check(api.FuncSetAttribute(k.function, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1),
                                   "cuFuncSetAttribute(NON_PORTABLE_CLUSTER_SIZE_ALLOWED)", CudaCallSite::kModuleLoad,
                                   failure));
    }
    if (k.shared_bytes > 0) {
      // The driver sizes the SM's shared/L1 split from this preference; ask
      // for the most shared memory so that several blocks fit per SM (the
      // kernels that use dynamic shared memory bypass L1 for their streams).
      RETURN_IF_ERROR(driver.Check(api.FuncSetAttribute(k.function, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
                                                        CU_SHAREDMEM_CARVEOUT_MAX_SHARED),
                                   "cuFuncSetAttribute(PREFERRED_SHARED_MEMORY_CARVEOUT)", CudaCallSite::kModuleLoad,
                                   failure));
    }
    m->kernels_.push_back(std::move(k));
  }
  return m;
}

CandidateModule::~CandidateModule() {
  if (module_ != nullptr && !ctx_.lost()) (void)ctx_.api().ModuleUnload(module_);
}

bool CandidateModule::HasPhase(const std::string& phase) const {
  for (const Kernel& k : kernels_) {
    if (k.phase == phase) return true;
  }
  return false;
}

Status CandidateModule::PrepareWorkspace(CUdeviceptr workspace, CudaFailure* failure) const {
  if (!workspace_zero_once_ || workspace_zero_bytes_ == 0) return Status::Ok();
  return ctx_.driver().Check(ctx_.api().MemsetD8Async(workspace, 0, workspace_zero_bytes_, ctx_.stream()),
                             "cuMemsetD8Async(workspace, once)", CudaCallSite::kSetup, failure);
}

Status CandidateModule::Enqueue(const std::string& phase, const void* params, CUdeviceptr workspace,
                                CudaFailure* failure) const {
  const auto& api = ctx_.api();
  const auto& driver = ctx_.driver();
  if (workspace_zero_bytes_ > 0 && !workspace_zero_once_) {
    RETURN_IF_ERROR(driver.Check(api.MemsetD8Async(workspace, 0,
                                                   workspace_zero_bytes_, ctx_.stream()),
                                 "cuMemsetD8Async(workspace)", CudaCallSite::kSetup, failure));
  }
  // The driver copies the parameter struct at launch.
  void* args[] = {const_cast<void*>(params)};
  for (const Kernel& k : kernels_) {
    if (k.phase != phase) continue;
    if (!k.dependent_launch && k.cluster_x == 1) {
      RETURN_IF_ERROR(driver.Check(api.LaunchKernel(k.function, k.grid[0], k.grid[1], k.grid[2], k.block[0],
                                                    k.block[1], k.block[2], k.shared_bytes, ctx_.stream(), args,
                                                    nullptr),
                                   k.launch_call.c_str(), CudaCallSite::kLaunch, failure));
      continue;
    }
    CUlaunchAttribute attributes[2] = {};
    unsigned count = 0;
    if (k.dependent_launch) {
      attributes[count].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
      attributes[count++].value.programmaticStreamSerializationAllowed = 1;
    }
    if (k.cluster_x > 1) {
      attributes[count].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
      attributes[count].value.clusterDim.x = k.cluster_x;
      attributes[count].value.clusterDim.y = 1;
      attributes[count++].value.clusterDim.z = 1;
    }
    CUlaunchConfig config = {};
    config.gridDimX = k.grid[0];
    config.gridDimY = k.grid[1];
    config.gridDimZ = k.grid[2];
    config.blockDimX = k.block[0];
    config.blockDimY = k.block[1];
    config.blockDimZ = k.block[2];
    config.sharedMemBytes = k.shared_bytes;
    config.hStream = ctx_.stream();
    config.attrs = attributes;
    config.numAttrs = count;
    RETURN_IF_ERROR(driver.Check(api.LaunchKernelEx(&config, k.function, args, nullptr), k.launch_call.c_str(),
                                 CudaCallSite::kLaunch, failure));
  }
  return Status::Ok();
}

}  // namespace scantune
