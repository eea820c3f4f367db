#include "client/kernel_launcher.h"

#include <algorithm>
#include <utility>

namespace scantune {

StatusOr<std::unique_ptr<KernelLauncher>> KernelLauncher::Load(const CudaDriver& driver,
                                                               const v1::KernelResponse& kernel) {
  const std::string name = "backend " + kernel.variant();
  if (kernel.cubin().empty()) return InvalidArgument(name + ": the response carries no cubin");
  if (kernel.launches().empty()) return InvalidArgument(name + ": the response has no launches");
  if (kernel.workspace_zero_bytes() > kernel.workspace_bytes()) {
    return InvalidArgument(name + ": workspace_zero_bytes exceeds workspace_bytes");
  }
  CUcontext current = nullptr;
  RETURN_IF_ERROR(driver.Check(driver.api().CtxGetCurrent(&current), "cuCtxGetCurrent"));
  if (current == nullptr) {
    return FailedPrecondition(name + ": no current CUDA context on this thread (make the job's context current "
                                     "first, e.g. cudaSetDevice and any runtime call, or cuCtxSetCurrent)");
  }
  std::unique_ptr<KernelLauncher> k(new KernelLauncher(driver));
  RETURN_IF_ERROR(driver.Check(driver.api().ModuleLoadData(&k->module_, kernel.cubin().data()),
                               ("cuModuleLoadData(" + kernel.variant() + ")").c_str(), CudaCallSite::kModuleLoad));
  for (const v1::KernelLaunch& launch : kernel.launches()) {
    ASSIGN_OR_RETURN(PlannedKernel planned, PlannedKernel::Resolve(driver, k->module_, launch, name, nullptr));
    k->kernels_.push_back(std::move(planned));
  }
  k->response_ = kernel;
  k->response_.clear_cubin();
  return k;
}

KernelLauncher::~KernelLauncher() {
  if (module_ != nullptr) (void)driver_.api().ModuleUnload(module_);
}

bool KernelLauncher::HasPhase(const std::string& phase) const {
  return std::any_of(kernels_.begin(), kernels_.end(), [&](const PlannedKernel& k) { return k.phase == phase; });
}

uint64_t KernelLauncher::workspace_bytes() const { return std::max<uint64_t>(response_.workspace_bytes(), 256); }

StatusOr<std::vector<uint8_t>> KernelLauncher::Pack(ParamValues values, CUdeviceptr workspace) const {
  RETURN_IF_ERROR(CheckServedSizes(response_, values));
  values.try_emplace("workspace", ParamValue::Pointer(workspace, false));
  return PackParams(response_.params(), response_.params_size_bytes(), values);
}

Status KernelLauncher::PrepareWorkspace(CUdeviceptr workspace, CUstream stream) const {
  if (!response_.workspace_zero_once() || response_.workspace_zero_bytes() == 0) return Status::Ok();
  return driver_.Check(driver_.api().MemsetD8Async(workspace, 0, response_.workspace_zero_bytes(), stream),
                       "cuMemsetD8Async(workspace, once)");
}

Status KernelLauncher::Enqueue(const std::string& phase, const std::vector<uint8_t>& params, CUdeviceptr workspace,
                               CUstream stream) const {
  if (!HasPhase(phase)) return NotFound("backend " + response_.variant() + " has no '" + phase + "' launch");
  if (params.size() != response_.params_size_bytes()) {
    return InvalidArgument("parameter struct of " + std::to_string(params.size()) + " bytes; backend " +
                           response_.variant() + " takes " + std::to_string(response_.params_size_bytes()));
  }
  if (response_.workspace_zero_bytes() > 0 && !response_.workspace_zero_once()) {
    RETURN_IF_ERROR(driver_.Check(driver_.api().MemsetD8Async(workspace, 0, response_.workspace_zero_bytes(), stream),
                                  "cuMemsetD8Async(workspace)"));
  }
  // The driver copies the struct at launch.
  void* args[] = {const_cast<uint8_t*>(params.data())};
  for (const PlannedKernel& k : kernels_) {
    if (k.phase == phase) RETURN_IF_ERROR(k.Launch(driver_, stream, args, nullptr));
  }
  return Status::Ok();
}

}  // namespace scantune
