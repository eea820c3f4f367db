#include "bench/mixer/served_kernel.h"

namespace scantune::mixer {

StatusOr<std::unique_ptr<ServedKernel>> ServedKernel::Load(const GpuContext& ctx, const v1::KernelResponse& kernel) {
  std::unique_ptr<ServedKernel> k(new ServedKernel(ctx));
  const std::string name = "backend " + kernel.variant();
  if (kernel.cubin().empty()) return InvalidArgument(name + ": GetKernel returned no cubin");
  if (kernel.workspace_zero_bytes() > kernel.workspace_bytes()) {
    return InvalidArgument(name + ": workspace_zero_bytes exceeds workspace_bytes");
  }
  bool fwd = false, bwd = false;
  for (const v1::KernelLaunch& l : kernel.launches()) {
    fwd |= l.phase() == "fwd";
    bwd |= l.phase() == "bwd";
  }
  if (!fwd || !bwd) return InvalidArgument(name + ": GetKernel returned no " + (fwd ? "bwd" : "fwd") + " launch");
  k->response_ = kernel;
  const auto& api = ctx.api();
  const auto& driver = ctx.driver();
  RETURN_IF_ERROR(driver.Check(api.ModuleLoadData(&k->module_, k->response_.cubin().data()),
                               ("cuModuleLoadData(" + kernel.variant() + ")").c_str(), CudaCallSite::kModuleLoad));
  for (const v1::KernelLaunch& launch : kernel.launches()) {
    Kernel e;
    e.phase = launch.phase();
    for (int i = 0; i < 3; ++i) {
      e.grid[i] = i < launch.grid_size() ? launch.grid(i) : 1;
      e.block[i] = i < launch.block_size() ? launch.block(i) : 1;
    }
    e.shared_bytes = launch.shared_bytes();
    e.call = "cuLaunchKernel(" + kernel.variant() + ": " + launch.entry() + ")";
    RETURN_IF_ERROR(driver.Check(api.ModuleGetFunction(&e.function, k->module_, launch.entry().c_str()),
                                 ("cuModuleGetFunction(" + launch.entry() + ")").c_str(), CudaCallSite::kModuleLoad));
    // Static plus dynamic shared memory may not pass 48 KB without the opt-in
    // (as the worker: worker/candidate_module.cc): opt in for any dynamic size.
    if (e.shared_bytes > 0) {
      RETURN_IF_ERROR(driver.Check(api.FuncSetAttribute(e.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                        static_cast<int>(e.shared_bytes)),
                                   "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)", CudaCallSite::kModuleLoad));
    }
    if (e.shared_bytes > 0) {
      // As the worker times them: the most shared memory in the SM's split.
      RETURN_IF_ERROR(driver.Check(api.FuncSetAttribute(e.function, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
                                                        CU_SHAREDMEM_CARVEOUT_MAX_SHARED),
                                   "cuFuncSetAttribute(PREFERRED_SHARED_MEMORY_CARVEOUT)", CudaCallSite::kModuleLoad));
    }
    k->kernels_.push_back(std::move(e));
  }
  return k;
}

ServedKernel::~ServedKernel() {
  if (module_ != nullptr && !ctx_.lost()) (void)ctx_.api().ModuleUnload(module_);
}

Status ServedKernel::Enqueue(const std::string& phase, const std::vector<uint8_t>& params,
                             CUdeviceptr workspace) const {
  if (params.size() != response_.params_size_bytes()) {
    return Internal("parameter struct of " + std::to_string(params.size()) + " bytes, the backend takes " +
                    std::to_string(response_.params_size_bytes()));
  }
  const auto& api = ctx_.api();
  const auto& driver = ctx_.driver();
  if (response_.workspace_zero_bytes() > 0) {
    RETURN_IF_ERROR(driver.Check(api.MemsetD8Async(workspace, 0, response_.workspace_zero_bytes(), ctx_.stream()),
                                 "cuMemsetD8Async(workspace)"));
  }
  void* args[] = {const_cast<uint8_t*>(params.data())};
  for (const Kernel& k : kernels_) {
    if (k.phase != phase) continue;
    RETURN_IF_ERROR(driver.Check(api.LaunchKernel(k.function, k.grid[0], k.grid[1], k.grid[2], k.block[0], k.block[1],
                                                  k.block[2], k.shared_bytes, ctx_.stream(), args, nullptr),
                                 k.call.c_str(), CudaCallSite::kLaunch));
  }
  return Status::Ok();
}

}  // namespace scantune::mixer
