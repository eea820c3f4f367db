#include "worker/verifier.h"

#include <algorithm>
#include <chrono>
#include <span>
#include <tuple>
#include <utility>

#include "common/log.h"
#include "worker/candidate_module.h"
#include "worker/device_buffer.h"
#include "worker/parallel.h"

namespace scantune {
namespace {

struct Buffers {
  DeviceBuffer a, x, h, h0, h_final, dh, da, dx, dh0, workspace;
};

}  // namespace

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

const VerificationData& Verifier::Job() {
  if (!job_) {
    const auto start = std::chrono::steady_clock::now();
    job_ = PrepareVerification(problem_, seed_, options_.check);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    // Once per job; worth seeing next to the per-candidate lines.
    Logger("worker")->info("{}: inputs and reference prepared in {:.0f} ms on {} host threads", problem_.Key(), ms,
                           HostThreads());
  }
  return *job_;
}

StatusOr<CandidateOutcome> Verifier::Verify(const v1::Candidate& candidate) {
  const VerificationData& job = Job();
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

  const Shape& shape = problem_.shape;
  const uint64_t n = static_cast<uint64_t>(shape.elements());
  const uint64_t e = static_cast<uint64_t>(ElementBytes(problem_.dtype));
  const uint64_t states = static_cast<uint64_t>(shape.batch * shape.width);
  Buffers buf;
  struct Named {
    const char* name;
    DeviceBuffer* buffer;
    uint64_t bytes;
  };
  const std::vector<Named> all = {
      {"a", &buf.a, n * e},          {"x", &buf.x, n * e},       {"h", &buf.h, n * e},
      {"h0", &buf.h0, states * 4},   {"h_final", &buf.h_final, states * 4},
      {"dh", &buf.dh, n * e},        {"da", &buf.da, n * e},     {"dx", &buf.dx, n * e},
      {"dh0", &buf.dh0, states * 4}, {"workspace", &buf.workspace, candidate.workspace_bytes()}};
  for (const Named& b : all) {
    auto allocated = DeviceBuffer::Allocate(ctx_, b.bytes, /*guarded=*/true, &failure);
    if (!allocated.ok()) return fail(allocated.status().Annotate(std::string("allocating ") + b.name));
    *b.buffer = std::move(*allocated);
    Status st = b.buffer->Fill(DeviceBuffer::kPoisonByte, &failure);
    if (!st.ok()) return fail(st);
  }
  // The same bytes for every candidate, uploaded afresh: the previous
  // candidate's buffers are gone, whatever it wrote with them.
  for (auto [b, bytes] : {std::pair{&buf.a, &job.a}, {&buf.x, &job.x}, {&buf.dh, &job.dh}, {&buf.h0, &job.h0}}) {
    Status st = b->Upload(bytes->data(), bytes->size(), &failure);
    if (!st.ok()) return fail(st);
  }
  // The h the backward reads: the reference forward in bwd-only mode, the
  // candidate's own forward otherwise (downloaded after the fwd phase).
  std::span<const uint8_t> h_read;
  if (!wants_fwd) {
    h_read = job.h_for_bwd;
    Status st = buf.h.Upload(h_read.data(), h_read.size(), &failure);
    if (!st.ok()) return fail(st);
  }
  {
    Status st = sample_memory();
    if (!st.ok()) return st;
    update_memory(candidate.workspace_bytes());
  }

  LinearScanParams params{};
  params.a = buf.a.void_ptr();
  params.x = buf.x.void_ptr();
  params.h = buf.h.void_ptr();
  params.h0 = problem_.has_h0 ? static_cast<const float*>(buf.h0.void_ptr()) : nullptr;
  params.h_final = static_cast<float*>(buf.h_final.void_ptr());
  params.dh = buf.dh.void_ptr();
  params.da = buf.da.void_ptr();
  params.dx = buf.dx.void_ptr();
  params.dh0 = problem_.has_h0 ? static_cast<float*>(buf.dh0.void_ptr()) : nullptr;
  params.workspace = buf.workspace.void_ptr();
  params.batch = shape.batch;
  params.length = shape.length;
  params.width = shape.width;

  const double tolerance = Tolerance(problem_.dtype);
  auto run_phase = [&](const char* phase) -> Status {
    RETURN_IF_ERROR(module.Enqueue(phase, params, &failure));
    const std::string what = std::string(phase) + " phase of " + candidate.variant();
    RETURN_IF_ERROR(ctx_.WaitStream(options_.kernel_timeout_ms, what.c_str(), &failure));
    RETURN_IF_ERROR(sample_memory());
    update_memory(candidate.workspace_bytes());
    return Status::Ok();
  };
  // Empty: all guards intact; otherwise the GUARD_VIOLATION detail.
  auto check_guards = [&](const char* phase) -> StatusOr<std::string> {
    std::string report;
    for (const Named& b : all) {
      ASSIGN_OR_RETURN(std::string broken, b.buffer->CheckGuards(&failure));
      if (!broken.empty()) report += std::string(report.empty() ? "" : "; ") + b.name + ": " + broken;
    }
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

  if (wants_fwd) {
    Status st = run_phase("fwd");
    if (!st.ok()) return fail(st);
    auto guards = check_guards("fwd");
    if (!guards.ok()) return fail(guards.status());
    if (!guards->empty()) {
      out.state = v1::GUARD_VIOLATION;
      out.detail = *guards;
      return out;
    }
    std::span<const uint8_t> h_final;
    st = download(buf.h, n * e, &h_host_, &h_read);
    if (st.ok()) st = download(buf.h_final, states * 4, &h_final_host_, &h_final);
    if (!st.ok()) return fail(st);
    if (options_.check) {
      record(CheckOutput({"h", problem_.dtype}, h_read, job.forward.h, shape, tolerance));
      record(CheckOutput({"h_final", DType::kF32, /*is_state=*/true}, h_final, job.forward.h_final, shape, tolerance));
      if (!out.ok()) return out;
    }
  }

  if (wants_bwd) {
    Status st = run_phase("bwd");
    if (!st.ok()) return fail(st);
    auto guards = check_guards("bwd");
    if (!guards.ok()) return fail(guards.status());
    if (!guards->empty()) {
      out.state = v1::GUARD_VIOLATION;
      out.detail = *guards;
      return out;
    }
    // The gradients come back only to be compared; a time-only job needs
    // just h (the phase's faults already surfaced in WaitStream).
    std::span<const uint8_t> h_after, da, dx, dh0;
    st = download(buf.h, n * e, &h_after_host_, &h_after);
    if (st.ok() && options_.check) st = download(buf.da, n * e, &da_host_, &da);
    if (st.ok() && options_.check) st = download(buf.dx, n * e, &dx_host_, &dx);
    if (st.ok() && options_.check && problem_.has_h0) st = download(buf.dh0, states * 4, &dh0_host_, &dh0);
    if (!st.ok()) return fail(st);
    if (options_.check) {
      // One pass: dx, da (against g * the h this backward read) and h unchanged.
      const BackwardCheck bwd =
          CheckBackward(problem_.dtype, dx, da, job.reverse.g, h_read, h_after, job.h0_values, shape, tolerance);
      if (bwd.h_changed) {
        out.state = v1::GUARD_VIOLATION;
        out.detail = "the bwd phase wrote into its input h";
        return out;
      }
      record(bwd.dx);
      record(bwd.da);
      if (problem_.has_h0) {
        record(CheckOutput({"dh0", DType::kF32, /*is_state=*/true}, dh0, job.reverse.dh0, shape, tolerance));
      }
      if (!out.ok()) return out;
    } else if (!SameBytes(h_after, h_read)) {
      out.state = v1::GUARD_VIOLATION;
      out.detail = "the bwd phase wrote into its input h";
      return out;
    }
  }

  // Inputs are read-only: a kernel that scribbles on them breaks its caller.
  // One host buffer serves all four in turn.
  for (auto [name, b, bytes] : {std::tuple{"a", &buf.a, &job.a}, {"x", &buf.x, &job.x}, {"dh", &buf.dh, &job.dh},
                                {"h0", &buf.h0, &job.h0}}) {
    std::span<const uint8_t> now;
    Status st = download(*b, bytes->size(), &input_host_, &now);
    if (!st.ok()) return fail(st);
    if (!SameBytes(now, *bytes)) {
      out.state = v1::GUARD_VIOLATION;
      out.detail = std::string("the candidate wrote into its input ") + name;
      return out;
    }
  }
  return out;
}

}  // namespace scantune
