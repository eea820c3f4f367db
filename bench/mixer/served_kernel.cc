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
    ASSIGN_OR_RETURN(PlannedKernel e, PlannedKernel::Resolve(ctx, k->module_, launch, name, nullptr));
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
  for (const PlannedKernel& k : kernels_) {
    if (k.phase == phase) RETURN_IF_ERROR(k.Launch(ctx_, args, nullptr));
  }
  return Status::Ok();
}

}  // namespace scantune::mixer
