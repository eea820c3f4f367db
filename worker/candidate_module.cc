#include "worker/candidate_module.h"

#include <algorithm>

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
    ASSIGN_OR_RETURN(PlannedKernel k,
                     PlannedKernel::Resolve(driver, m->module_, launch, "candidate " + candidate.variant(), failure));
    m->kernels_.push_back(std::move(k));
  }
  return m;
}

CandidateModule::~CandidateModule() {
  if (module_ != nullptr && !ctx_.lost()) (void)ctx_.api().ModuleUnload(module_);
}

bool CandidateModule::HasPhase(const std::string& phase) const {
  for (const PlannedKernel& k : kernels_) {
    if (k.phase == phase) return true;
  }
  return false;
}

Status CandidateModule::PrepareWorkspace(CUdeviceptr workspace, CudaFailure* failure) const {
  if (!workspace_zero_once_ || workspace_zero_bytes_ == 0) return Status::Ok();
  return ctx_.driver().Check(ctx_.api().MemsetD8Async(workspace, 0, workspace_zero_bytes_, ctx_.stream()),
                             "cuMemsetD8Async(workspace, once)", CudaCallSite::kSetup, failure);
}

namespace {

// `skip` names the kernels left out: entries containing one of its
// '|'-separated names, or with a leading '!', every kernel but those (kernels
// alone in their chain).
bool Skipped(const std::string& entry, const std::string& skip) {
  if (skip.empty()) return false;
  const bool only = skip[0] == '!';
  bool match = false;
  size_t at = only ? 1 : 0;
  while (at <= skip.size() && !match) {
    const size_t bar = std::min(skip.find('|', at), skip.size());
    const std::string name = skip.substr(at, bar - at);
    match = !name.empty() && entry.find(name) != std::string::npos;
    at = bar + 1;
  }
  return match != only;
}

}  // namespace

Status CandidateModule::Enqueue(const std::string& phase, const void* params, CUdeviceptr workspace,
                                CudaFailure* failure, const std::string& skip) const {
  const auto& api = ctx_.api();
  const auto& driver = ctx_.driver();
  if (workspace_zero_bytes_ > 0 && !workspace_zero_once_) {
    RETURN_IF_ERROR(driver.Check(api.MemsetD8Async(workspace, 0,
                                                   workspace_zero_bytes_, ctx_.stream()),
                                 "cuMemsetD8Async(workspace)", CudaCallSite::kSetup, failure));
  }
  // The driver copies the parameter struct at launch.
  void* args[] = {const_cast<void*>(params)};
  for (const PlannedKernel& k : kernels_) {
    if (k.phase != phase || Skipped(k.entry, skip)) continue;
    RETURN_IF_ERROR(k.Launch(driver, ctx_.stream(), args, failure));
  }
  return Status::Ok();
}

}  // namespace scantune
