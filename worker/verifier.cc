#include "worker/verifier.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <tuple>
#include <utility>

#include "worker/candidate_module.h"
#include "worker/device_buffer.h"
#include "worker/dtype_convert.h"

namespace scantune {
namespace {

struct Buffers {
  DeviceBuffer a, x, h, h0, h_final, dh, da, dx, dh0, workspace;
};

std::string FormatDouble(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// "(b=1, t=6, c=32)" for a (B, L, W) tensor, "(b=1, c=32)" for a (B, W) state.
std::string Position(size_t index, const Shape& shape, bool is_state) {
  const size_t W = static_cast<size_t>(shape.width), L = static_cast<size_t>(shape.length);
  if (is_state) return "(b=" + std::to_string(index / W) + ", c=" + std::to_string(index % W) + ")";
  return "(b=" + std::to_string(index / (L * W)) + ", t=" + std::to_string(index / W % L) +
         ", c=" + std::to_string(index % W) + ")";
}

struct Comparison {
  v1::ResultState state = v1::OK;
  double rel_err = 0.0;
  std::string detail;
};

// Checks one output read back as raw bytes of `dtype` against the reference.
Comparison Compare(const char* name, DType dtype, const std::vector<uint8_t>& raw, const std::vector<double>& ref,
                   const Shape& shape, bool is_state, double tolerance) {
  Comparison c;
  const size_t bytes = static_cast<size_t>(ElementBytes(dtype));
  const std::vector<double> out = DecodeFrom(dtype, raw.data(), ref.size());
  double max_ref = 0.0, max_diff = 0.0;
  size_t worst = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(out[i])) {
      const bool poison = std::all_of(raw.begin() + static_cast<std::ptrdiff_t>(i * bytes),
                                      raw.begin() + static_cast<std::ptrdiff_t>((i + 1) * bytes),
                                      [](uint8_t b) { return b == DeviceBuffer::kPoisonByte; });
      c.state = v1::WRONG_RESULT;
      c.rel_err = INFINITY;
      c.detail = std::string(name) + "[" + std::to_string(i) + "] " + Position(i, shape, is_state) +
                 (poison ? " was never written (poison left)" : " is " + FormatDouble(out[i]) + " (not finite)");
      return c;
    }
    max_ref = std::max(max_ref, std::fabs(ref[i]));
    const double diff = std::fabs(out[i] - ref[i]);
    if (diff > max_diff) {
      max_diff = diff;
      worst = i;
    }
  }
  // An all-zero reference (never with these inputs) falls back to absolute error.
  c.rel_err = max_diff / (max_ref > 0.0 ? max_ref : 1.0);
  if (!(c.rel_err <= tolerance)) {
    c.state = v1::WRONG_RESULT;
    c.detail = std::string(name) + ": max|out-ref|/max|ref| = " + FormatDouble(c.rel_err) + " > " +
               FormatDouble(tolerance) + "; worst at " + name + "[" + std::to_string(worst) + "] " +
               Position(worst, shape, is_state) + ": out " + FormatDouble(out[worst]) + ", ref " +
               FormatDouble(ref[worst]);
  }
  return c;
}

std::vector<uint8_t> EncodeF32(const std::vector<double>& values) { return EncodeAs(DType::kF32, values); }

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
    : ctx_(ctx),
      problem_(problem),
      options_(options),
      inputs_(GenerateInputs(problem, seed)),
      a_bytes_(EncodeAs(problem.dtype, inputs_.a)),
      x_bytes_(EncodeAs(problem.dtype, inputs_.x)),
      dh_bytes_(EncodeAs(problem.dtype, inputs_.dh)),
      h0_bytes_(EncodeF32(inputs_.h0)) {}

const LinearScanForwardRef& Verifier::ForwardRef() {
  if (!forward_ref_) forward_ref_ = LinearScanForward(problem_.shape, inputs_.a, inputs_.x, inputs_.h0);
  return *forward_ref_;
}

StatusOr<CandidateOutcome> Verifier::Verify(const v1::Candidate& candidate) {
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
  const std::vector<uint8_t>& a_bytes = a_bytes_;
  const std::vector<uint8_t>& x_bytes = x_bytes_;
  const std::vector<uint8_t>& dh_bytes = dh_bytes_;
  const std::vector<uint8_t>& h0_bytes = h0_bytes_;
  for (auto [b, bytes] : {std::pair{&buf.a, &a_bytes}, {&buf.x, &x_bytes}, {&buf.dh, &dh_bytes}, {&buf.h0, &h0_bytes}}) {
    Status st = b->Upload(bytes->data(), bytes->size(), &failure);
    if (!st.ok()) return fail(st);
  }
  // The h the backward reads: the reference forward in bwd-only mode, the
  // candidate's own forward otherwise (downloaded after the fwd phase).
  std::vector<uint8_t> h_bytes;
  if (!wants_fwd) {
    h_bytes = EncodeAs(problem_.dtype, ForwardRef().h);
    Status st = buf.h.Upload(h_bytes.data(), h_bytes.size(), &failure);
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
  auto download = [&](const DeviceBuffer& b, uint64_t bytes, std::vector<uint8_t>* host) -> Status {
    host->resize(bytes);
    return b.Download(host->data(), bytes, &failure);
  };
  auto record = [&](const Comparison& c) {
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
    std::vector<uint8_t> h_final_bytes;
    st = download(buf.h, n * e, &h_bytes);
    if (st.ok()) st = download(buf.h_final, states * 4, &h_final_bytes);
    if (!st.ok()) return fail(st);
    if (options_.check) {
      const LinearScanForwardRef& ref = ForwardRef();
      record(Compare("h", problem_.dtype, h_bytes, ref.h, shape, false, tolerance));
      record(Compare("h_final", DType::kF32, h_final_bytes, ref.h_final, shape, true, tolerance));
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
    std::vector<uint8_t> da_bytes, dx_bytes, dh0_bytes, h_after;
    st = download(buf.da, n * e, &da_bytes);
    if (st.ok()) st = download(buf.dx, n * e, &dx_bytes);
    if (st.ok() && problem_.has_h0) st = download(buf.dh0, states * 4, &dh0_bytes);
    if (st.ok()) st = download(buf.h, n * e, &h_after);
    if (!st.ok()) return fail(st);
    if (h_after != h_bytes) {
      out.state = v1::GUARD_VIOLATION;
      out.detail = "the bwd phase wrote into its input h";
      return out;
    }
    if (options_.check && !h_bytes.empty()) {
      const std::vector<double> h_read = DecodeFrom(problem_.dtype, h_bytes.data(), n);
      const LinearScanBackwardRef ref = LinearScanBackward(shape, inputs_.a, h_read, inputs_.h0, inputs_.dh);
      record(Compare("dx", problem_.dtype, dx_bytes, ref.dx, shape, false, tolerance));
      record(Compare("da", problem_.dtype, da_bytes, ref.da, shape, false, tolerance));
      if (problem_.has_h0) record(Compare("dh0", DType::kF32, dh0_bytes, ref.dh0, shape, true, tolerance));
      if (!out.ok()) return out;
    }
  }

  // Inputs are read-only: a kernel that scribbles on them breaks its caller.
  for (auto [name, b, bytes] : {std::tuple{"a", &buf.a, &a_bytes}, {"x", &buf.x, &x_bytes},
                                {"dh", &buf.dh, &dh_bytes}, {"h0", &buf.h0, &h0_bytes}}) {
    std::vector<uint8_t> now;
    Status st = download(*b, bytes->size(), &now);
    if (!st.ok()) return fail(st);
    if (now != *bytes) {
      out.state = v1::GUARD_VIOLATION;
      out.detail = std::string("the candidate wrote into its input ") + name;
      return out;
    }
  }
  return out;
}

}  // namespace scantune
