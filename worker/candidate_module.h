// CandidateModule: one candidate's cubin loaded into the worker's context,
// with a function handle per launch of its plan, ready to queue the launches
// of a phase ("fwd" or "bwd") on the context's stream. Owns the CUmodule and
// unloads it on destruction.
//
// Thread safety: not thread-safe; used from the worker's one GPU thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "proto/worker.pb.h"
#include "worker/gpu_context.h"
#include "worker/planned_kernel.h"

namespace scantune {

class CandidateModule {
 public:
  // cuModuleLoadData + cuModuleGetFunction for every launch entry, and the
  // opt-in for dynamic shared memory above the 48 KiB default. Failures are
  // recorded in `failure` at site kModuleLoad (they are the candidate's).
  static StatusOr<std::unique_ptr<CandidateModule>> Load(const GpuContext& ctx, const v1::Candidate& candidate,
                                                         CudaFailure* failure);
  ~CandidateModule();
  CandidateModule(const CandidateModule&) = delete;
  CandidateModule& operator=(const CandidateModule&) = delete;

  bool HasPhase(const std::string& phase) const;
  uint64_t workspace_bytes() const { return workspace_bytes_; }

  // Queues what a freshly allocated workspace needs before its first phase:
  // the zeroed prefix of a candidate whose kernels keep their workspace ready
  // between launches (workspace_zero_once). Call it once per allocation.
  Status PrepareWorkspace(CUdeviceptr workspace, CudaFailure* failure) const;

  // Queues the phase: zero the workspace prefix (the plan's contract before
  // every phase, unless the candidate zeroes it once), then each kernel of the
  // phase with kernelParams = {params} (PlannedKernel::Launch: PDL and
  // clusters as the plan says): `params` is the operator's by-value
  // parameter struct (OpIo::Params), whose workspace field is `workspace`,
  // workspace_bytes() of device memory. `skip` (an ablation for diagnosis
  // only, never for a stored result's verification): kernels whose entry
  // contains it are left out; with a leading '!', all kernels but those.
  Status Enqueue(const std::string& phase, const void* params, CUdeviceptr workspace, CudaFailure* failure,
                 const std::string& skip = {}) const;

 private:
  explicit CandidateModule(const GpuContext& ctx) : ctx_(ctx) {}

  const GpuContext& ctx_;
  CUmodule module_ = nullptr;
  std::vector<PlannedKernel> kernels_;
  uint64_t workspace_bytes_ = 0;
  uint64_t workspace_zero_bytes_ = 0;
  bool workspace_zero_once_ = false;
};

}  // namespace scantune
