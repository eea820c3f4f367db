#include "worker/verifier.h"

#include <algorithm>
#include <chrono>
#include <span>
#include <utility>

#include "common/log.h"
#include "worker/candidate_module.h"
#include "worker/device_buffer.h"
#include "worker/parallel.h"

namespace scantune {

double Tolerance(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 1e-5;
    case DType::kBF16: return 1e-2;
    case DType::kF16: return 5e-3;
  }
  return 0.0;
}

Verifier::Verifier(const GpuContext& ctx, const Problem& problem, uint64_t seed, Options options)
    : ctx_(ctx), problem_(problem), seed_(seed), options_(options) {
  // Eagerly, as the inputs were before: the job's preparation happens before
  // the first CandidateStarted, so no candidate's watchdog is charged for it.
  (void)Job();
}

const OpCase& Verifier::Job() {
  if (!job_) {
    const auto start = std::chrono::steady_clock::now();
    job_ = OpIoFor(problem_.op).Prepare(problem_, seed_, options_.check);
    host_.resize(job_->tensors.size());
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    // Once per job; worth seeing next to the per-candidate lines.
    Logger("worker")->info("{}: inputs and reference prepared in {:.0f} ms on {} host threads", problem_.Key(), ms,
                           HostThreads());
  }
  return *job_;
}

StatusOr<CandidateOutcome> Verifier::Verify(const v1::Candidate& candidate) {
  const OpCase& job = Job();
  CandidateOutcome out;
  CudaFailure failure;
  const bool wants_fwd = problem_.mode != Mode::kBwd;
  const bool wants_bwd = problem_.mode != Mode::kFwd;

  ASSIGN_OR_RETURN(const uint64_t baseline, ctx_.MemoryInUse());
  uint64_t peak = baseline;
  auto update_memory = [&](uint64_t workspace) {
    out.memory.set_baseline_bytes(baseline);
    out.memory.set_peak_bytes(peak);
    out.memory.set_delta_bytes(peak - baseline);
    out.memory.set_workspace_bytes(workspace);
  };
  auto sample_memory = [&]() -> Status {
    ASSIGN_OR_RETURN(const uint64_t used, ctx_.MemoryInUse());
    peak = std::max(peak, used);
    return Status::Ok();
  };
  // A failed driver call is the candidate's (its record says which state),
  // unless it is a setup call that failed for another reason: then the
  // worker itself is broken and the job fails.
  auto fail = [&](const Status& status) -> StatusOr<CandidateOutcome> {
    if (!failure.failed()) return status;
    CandidateOutcome failed = CandidateOutcome::FromCudaFailure(failure, status);
    if (failed.state == v1::STATE_UNSPECIFIED) return status;
    // Before the buffers go out of scope: their frees must not touch a lost context.
    if (failed.context_lost) ctx_.MarkLost();
    failed.memory = out.memory;
    return failed;
  };
  update_memory(candidate.workspace_bytes());

  auto module_or = CandidateModule::Load(ctx_, candidate, &failure);
  if (!module_or.ok()) return fail(module_or.status());
  const CandidateModule& module = **module_or;
  if ((wants_fwd && !module.HasPhase("fwd")) || (wants_bwd && !module.HasPhase("bwd"))) {
    return InvalidArgument("candidate " + candidate.variant() + " has no launches for a phase of mode " +
                           ModeName(problem_.mode));
  }

  const std::vector<TensorSpec>& tensors = job.tensors;
  const size_t count = tensors.size();
  std::vector<DeviceBuffer> buffers(count);
  DeviceBuffer workspace;
  auto allocate = [&](DeviceBuffer* buffer, uint64_t bytes, const std::string& name) -> Status {
    auto allocated = DeviceBuffer::Allocate(ctx_, bytes, /*guarded=*/true, &failure);
    if (!allocated.ok()) return allocated.status().Annotate("allocating " + name);
    *buffer = std::move(*allocated);
    return buffer->Fill(DeviceBuffer::kPoisonByte, &failure);
  };
  for (size_t i = 0; i < count; ++i) {
    Status st = allocate(&buffers[i], tensors[i].bytes(), tensors[i].name);
    if (!st.ok()) return fail(st);
  }
  {
    Status st = allocate(&workspace, candidate.workspace_bytes(), "workspace");
    if (!st.ok()) return fail(st);
    st = module.PrepareWorkspace(workspace.ptr(), &failure);
    if (!st.ok()) return fail(st);
  }
  // The same bytes for every candidate, uploaded afresh: the previous
  // candidate's buffers are gone, whatever it wrote with them. In bwd-only
  // mode that includes the saved tensors the backward reads.
  for (size_t i = 0; i < count; ++i) {
    if (job.bytes[i].empty()) continue;
    Status st = buffers[i].Upload(job.bytes[i].data(), job.bytes[i].size(), &failure);
    if (!st.ok()) return fail(st);
  }
  {
    Status st = sample_memory();
    if (!st.ok()) return st;
    update_memory(candidate.workspace_bytes());
  }
  std::vector<CUdeviceptr> pointers(count);
  for (size_t i = 0; i < count; ++i) pointers[i] = buffers[i].ptr();
  const std::vector<uint8_t> params = OpIoFor(problem_.op).Params(problem_, pointers, workspace.ptr());

  const double tolerance = Tolerance(problem_.dtype);
  // Each phase runs twice on the same workspace and the second launch's
  // outputs are the ones checked: a kernel must leave its workspace ready for
  // the next launch (launch epochs), as the timing loop and users rely on.
  auto run_phase = [&](const char* phase) -> Status {
    RETURN_IF_ERROR(module.Enqueue(phase, params.data(), workspace.ptr(), &failure));
    RETURN_IF_ERROR(module.Enqueue(phase, params.data(), workspace.ptr(), &failure));
    const std::string what = std::string(phase) + " phase of " + candidate.variant();
    RETURN_IF_ERROR(ctx_.WaitStream(options_.kernel_timeout_ms, what.c_str(), &failure));
    RETURN_IF_ERROR(sample_memory());
    update_memory(candidate.workspace_bytes());
    return Status::Ok();
  };
  // Empty: all guards intact; otherwise the GUARD_VIOLATION detail.
  auto check_guards = [&](const char* phase) -> StatusOr<std::string> {
    std::string report;
    auto check = [&](const DeviceBuffer& buffer, const std::string& name) -> Status {
      ASSIGN_OR_RETURN(std::string broken, buffer.CheckGuards(&failure));
      if (!broken.empty()) report += std::string(report.empty() ? "" : "; ") + name + ": " + broken;
      return Status::Ok();
    };
    for (size_t i = 0; i < count; ++i) RETURN_IF_ERROR(check(buffers[i], tensors[i].name));
    RETURN_IF_ERROR(check(workspace, "workspace"));
    if (!report.empty()) report = std::string("after the ") + phase + " phase, " + report;
    return report;
  };
  // Into a host buffer kept across candidates, which only ever grows: after
  // the first candidate no page is allocated or zeroed again. The result is
  // the first `bytes` bytes of it.
  auto download = [&](const DeviceBuffer& b, uint64_t bytes, std::vector<uint8_t>* host,
                      std::span<const uint8_t>* got) -> Status {
    if (host->size() < bytes) host->resize(bytes);
    RETURN_IF_ERROR(b.Download(host->data(), bytes, &failure));
    *got = std::span<const uint8_t>(host->data(), bytes);
    return Status::Ok();
  };
  auto record = [&](const OutputCheck& c) {
    out.rel_err = std::max(out.rel_err, c.rel_err);
    if (c.state != v1::OK && out.state == v1::OK) {
      out.state = c.state;
      out.detail = c.detail;
    }
  };

  auto is = [&](size_t i, TensorRole role) { return tensors[i].role == role; };
  // Runs a phase and checks its guards; false: the outcome is final.
  auto phase_ok = [&](const char* phase) -> StatusOr<bool> {
    RETURN_IF_ERROR(run_phase(phase));
    ASSIGN_OR_RETURN(std::string guards, check_guards(phase));
    if (guards.empty()) return true;
    out.state = v1::GUARD_VIOLATION;
    out.detail = guards;
    return false;
  };
  auto compare = [&](size_t i) -> Status {
    std::span<const uint8_t> got;
    RETURN_IF_ERROR(download(buffers[i], tensors[i].bytes(), &host_[i], &got));
    record(CheckTensor(tensors[i], got, job.reference[i], tolerance));
    if (options_.digest_outputs) out.output_digest = out.output_digest * 31 + BytesDigest(got);
    return Status::Ok();
  };

  if (wants_fwd) {
    auto ran = phase_ok("fwd");
    if (!ran.ok()) return fail(ran.status());
    if (!*ran) return out;
    for (size_t i = 0; i < count && options_.check; ++i) {
      const bool compared = is(i, TensorRole::kFwdOut) || is(i, TensorRole::kSaved);
      if (!compared || job.reference[i].empty()) continue;
      Status st = compare(i);
      if (!st.ok()) return fail(st);
    }
    if (!out.ok()) return out;
  }

  if (wants_bwd) {
    // The saved tensors as the backward finds them, to prove it leaves them be.
    std::vector<std::span<const uint8_t>> saved_before(count);
    for (size_t i = 0; i < count; ++i) {
      if (!is(i, TensorRole::kSaved)) continue;
      Status st = download(buffers[i], tensors[i].bytes(), &host_[i], &saved_before[i]);
      if (!st.ok()) return fail(st);
    }
    auto ran = phase_ok("bwd");
    if (!ran.ok()) return fail(ran.status());
    if (!*ran) return out;
    for (size_t i = 0; i < count; ++i) {
      if (!is(i, TensorRole::kSaved)) continue;
      std::span<const uint8_t> after;
      Status st = download(buffers[i], tensors[i].bytes(), &saved_after_host_, &after);
      if (!st.ok()) return fail(st);
      if (!SameBytes(after, saved_before[i])) {
        out.state = v1::GUARD_VIOLATION;
        out.detail = "the bwd phase wrote into its input " + tensors[i].name;
        return out;
      }
    }
    for (size_t i = 0; i < count && options_.check; ++i) {
      if (!is(i, TensorRole::kBwdOut) || job.reference[i].empty()) continue;
      Status st = compare(i);
      if (!st.ok()) return fail(st);
    }
    if (!out.ok()) return out;
  }

  // Inputs are read-only: a kernel that scribbles on them breaks its caller.
  // One host buffer serves all of them in turn.
  for (size_t i = 0; i < count; ++i) {
    if (!is(i, TensorRole::kInput) && !is(i, TensorRole::kGradIn)) continue;
    std::span<const uint8_t> now;
    Status st = download(buffers[i], job.bytes[i].size(), &saved_after_host_, &now);
    if (!st.ok()) return fail(st);
    if (!SameBytes(now, job.bytes[i])) {
      out.state = v1::GUARD_VIOLATION;
      out.detail = "the candidate wrote into its input " + tensors[i].name;
      return out;
    }
  }
  return out;
}

}  // namespace scantune
