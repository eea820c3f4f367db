#include "bench/mixer/mixers.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

namespace scantune::mixer {
namespace {

constexpr uint64_t kBf16 = 2;
constexpr uint64_t kF32 = 4;
// Wait bound for the synchronous steps (setup, the check).
constexpr double kSyncTimeoutMs = 120000.0;

double Bf16ToDouble(uint16_t v) {
  const uint32_t bits = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

}  // namespace

void Mixer::Release() {
  params_.clear();
  buffers_.clear();
  requested_bytes_ = 0;
  sets_ = 0;
  workspace_ = 0;
}

StatusOr<CUdeviceptr> Mixer::Allocate(uint64_t bytes) {
  ASSIGN_OR_RETURN(DeviceBuffer b, DeviceBuffer::Allocate(*tools_.ctx, bytes, false, nullptr));
  const CUdeviceptr p = b.ptr();
  requested_bytes_ += bytes;
  buffers_.push_back(std::move(b));
  return p;
}

bool Mixer::MayPassNull(const std::string& field) const {
  for (const v1::ParamField& f : kernel_->response().params()) {
    if (f.name() == field) return FieldAllowsNull(f);
  }
  return true;
}

// ---------------------------------------------------------------------------

uint64_t RgLruMixer::set_bytes() const {
  // x, dy, ga, gx, h, dx, dga, dgx (bf16) and h_final (fp32).
  return 8 * elements() * kBf16 + states() * kF32;
}

Status RgLruMixer::Setup(int sets, uint64_t seed) {
  Release();
  set_.clear();
  const GlueKernels& glue = *tools_.glue;
  const BlockDiagShape g = gemm_shape();
  RETURN_IF_ERROR(ValidateShape(g));
  const uint64_t w = static_cast<uint64_t>(shape_.width);
  const uint64_t d = static_cast<uint64_t>(g.head_dim());
  const uint64_t weights = 2 * w * d;  // both maps, all heads
  ASSIGN_OR_RETURN(w_, Allocate(weights * kF32));
  ASSIGN_OR_RETURN(w16_, Allocate(weights * kBf16));
  ASSIGN_OR_RETURN(dw_, Allocate(weights * kF32));
  ASSIGN_OR_RETURN(bias_, Allocate(2 * w * kF32));
  ASSIGN_OR_RETURN(dbias_, Allocate(2 * w * kF32));
  ASSIGN_OR_RETURN(lambda_, Allocate(w * kF32));
  ASSIGN_OR_RETURN(dlambda_, Allocate(w * kF32));
  ASSIGN_OR_RETURN(ones_, Allocate(tokens() * kBf16));
  // Never null: a workspace field need not accept it.
  ASSIGN_OR_RETURN(workspace_, Allocate(kernel_->workspace_bytes()));
  RETURN_IF_ERROR(kernel_->PrepareWorkspace(workspace_, tools_.ctx->stream()));
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  RETURN_IF_ERROR(glue.FillF32(w_, weights, seed * 16 + 1, -scale, scale));
  RETURN_IF_ERROR(glue.FillF32(bias_, 2 * w, seed * 16 + 2, -0.5f, 0.5f));
  // softplus(Lambda) in about [1e-3, 0.05]: decays a = exp(-8 sp r) in [0.67, 1).
  RETURN_IF_ERROR(glue.FillF32(lambda_, w, seed * 16 + 3, -7.0f, -3.0f));
  RETURN_IF_ERROR(glue.FillBf16(ones_, tokens(), 0, 1.0f, 1.0f));
  const bool null_final = MayPassNull("h_final");
  for (int s = 0; s < sets; ++s) {
    Set set;
    ASSIGN_OR_RETURN(set.x, Allocate(elements() * kBf16));
    ASSIGN_OR_RETURN(set.dy, Allocate(elements() * kBf16));
    ASSIGN_OR_RETURN(set.gates, Allocate(2 * elements() * kBf16));
    ASSIGN_OR_RETURN(set.h, Allocate(elements() * kBf16));
    ASSIGN_OR_RETURN(set.dx, Allocate(elements() * kBf16));
    ASSIGN_OR_RETURN(set.dgates, Allocate(2 * elements() * kBf16));
    if (!null_final) {
      ASSIGN_OR_RETURN(set.h_final, Allocate(states() * kF32));
    }
    RETURN_IF_ERROR(glue.FillBf16(set.x, elements(), seed * 16 + 4 + 1000 * s, -1.0f, 1.0f));
    RETURN_IF_ERROR(glue.FillBf16(set.dy, elements(), seed * 16 + 5 + 1000 * s, -1.0f, 1.0f));
    const CUdeviceptr ga = set.gates, gx = set.gates + elements() * kBf16;
    const CUdeviceptr dga = set.dgates, dgx = set.dgates + elements() * kBf16;
    ParamValues v;
    v["x"] = ParamValue::Pointer(set.x);
    v["ga"] = ParamValue::Pointer(ga);
    v["gx"] = ParamValue::Pointer(gx);
    v["lambda"] = ParamValue::Pointer(lambda_);
    v["h"] = ParamValue::Pointer(set.h);
    v["h0"] = ParamValue::Null();
    v["h_final"] = set.h_final ? ParamValue::Pointer(set.h_final, false) : ParamValue::Null();
    v["dh"] = ParamValue::Pointer(set.dy);
    v["dx"] = ParamValue::Pointer(set.dx);
    v["dga"] = ParamValue::Pointer(dga);
    v["dgx"] = ParamValue::Pointer(dgx);
    v["dlambda"] = ParamValue::Pointer(dlambda_);
    v["dh0"] = ParamValue::Null();
    v["batch"] = ParamValue::Integer(shape_.batch);
    v["length"] = ParamValue::Integer(shape_.length);
    v["width"] = ParamValue::Integer(shape_.width);
    auto packed = kernel_->Pack(v, workspace_);
    if (!packed.ok()) return packed.status().Annotate("rglru backend " + backend());
    params_.push_back(std::move(*packed));
    set_.push_back(set);
  }
  sets_ = sets;
  return tools_.ctx->WaitStream(kSyncTimeoutMs, "rglru mixer setup", nullptr);
}

Status RgLruMixer::EnqueueForward(int s) {
  const Set& set = set_[s];
  const Blas& blas = *tools_.blas;
  const BlockDiagShape g = gemm_shape();
  const uint64_t map = static_cast<uint64_t>(shape_.width) * static_cast<uint64_t>(g.head_dim());  // one map's weights
  const uint64_t w = static_cast<uint64_t>(shape_.width);
  RETURN_IF_ERROR(tools_.glue->CastToBf16(w_, w16_, 2 * map));
  const GemmSpec fwd = GateForwardGemm(g);
  const CUdeviceptr ga = set.gates, gx = set.gates + elements() * kBf16;
  RETURN_IF_ERROR(blas.Gemm(fwd, w16_, set.x, ga, GemmOut::kBf16));
  RETURN_IF_ERROR(blas.Gemm(fwd, w16_ + map * kBf16, set.x, gx, GemmOut::kBf16));
  RETURN_IF_ERROR(tools_.glue->AddBias2(ga, gx, bias_, bias_ + w * kF32, tokens(), w));
  return kernel_->Enqueue("fwd", params_[s], workspace_, tools_.ctx->stream());
}

Status RgLruMixer::EnqueueBackward(int s) {
  const Set& set = set_[s];
  const Blas& blas = *tools_.blas;
  const BlockDiagShape g = gemm_shape();
  const uint64_t map = static_cast<uint64_t>(shape_.width) * static_cast<uint64_t>(g.head_dim());
  const CUdeviceptr dga = set.dgates, dgx = set.dgates + elements() * kBf16;
  // The recurrence: dx (direct path), dga, dgx, dLambda.
  RETURN_IF_ERROR(kernel_->Enqueue("bwd", params_[s], workspace_, tools_.ctx->stream()));
  const GemmSpec dweight = WeightGradGemm(g);
  RETURN_IF_ERROR(blas.Gemm(dweight, set.x, dga, dw_, GemmOut::kF32));
  RETURN_IF_ERROR(blas.Gemm(dweight, set.x, dgx, dw_ + map * kF32, GemmOut::kF32));
  RETURN_IF_ERROR(blas.Gemm(BiasGradGemm(g, 2, static_cast<int64_t>(elements())), set.dgates, ones_, dbias_,
                            GemmOut::kF32));
  const GemmSpec dinput = InputGradGemm(g);
  RETURN_IF_ERROR(blas.Gemm(dinput, w16_, dga, set.dx, GemmOut::kBf16));
  return blas.Gemm(dinput, w16_ + map * kBf16, dgx, set.dx, GemmOut::kBf16);
}

StatusOr<GemmCheck> RgLruMixer::CheckGates() {
  const GpuContext& ctx = *tools_.ctx;
  RETURN_IF_ERROR(ctx.WaitStream(kSyncTimeoutMs, "rglru forward before the GEMM check", nullptr));
  const auto& api = ctx.api();
  const BlockDiagShape g = gemm_shape();
  const int64_t w = shape_.width, d = g.head_dim(), m = g.tokens;
  std::vector<uint16_t> w16(2 * static_cast<size_t>(w * d));
  std::vector<float> bias(2 * static_cast<size_t>(w));
  RETURN_IF_ERROR(ctx.driver().Check(api.MemcpyDtoH(w16.data(), w16_, w16.size() * kBf16), "cuMemcpyDtoH(w16)"));
  RETURN_IF_ERROR(ctx.driver().Check(api.MemcpyDtoH(bias.data(), bias_, bias.size() * kF32), "cuMemcpyDtoH(bias)"));
  const std::set<int64_t> rows = {0, std::min<int64_t>(1, m - 1), m / 2, m - 1};
  const std::set<int64_t> heads = {0, g.heads / 2, g.heads - 1};
  const Set& set = set_[0];
  double max_err = 0, max_ref = 0;
  std::string worst;
  std::vector<uint16_t> x(static_cast<size_t>(w)), out(static_cast<size_t>(w));
  for (int64_t r : rows) {
    RETURN_IF_ERROR(ctx.driver().Check(api.MemcpyDtoH(x.data(), set.x + r * w * kBf16, w * kBf16), "cuMemcpyDtoH(x)"));
    for (int gate = 0; gate < 2; ++gate) {
      const CUdeviceptr base = set.gates + gate * elements() * kBf16;
      RETURN_IF_ERROR(
          ctx.driver().Check(api.MemcpyDtoH(out.data(), base + r * w * kBf16, w * kBf16), "cuMemcpyDtoH(gate)"));
      for (int64_t h : heads) {
        for (int64_t j = 0; j < d; ++j) {
          double ref = bias[gate * w + h * d + j];
          const uint16_t* wrow = w16.data() + gate * w * d + h * d * d + j * d;
          for (int64_t k = 0; k < d; ++k) ref += Bf16ToDouble(x[h * d + k]) * Bf16ToDouble(wrow[k]);
          const double got = Bf16ToDouble(out[h * d + j]);
          const double err = std::isfinite(got) ? std::fabs(got - ref) : INFINITY;
          max_ref = std::max(max_ref, std::fabs(ref));
          if (err > max_err) {
            max_err = err;
            worst = std::string(gate == 0 ? "ga" : "gx") + "[row " + std::to_string(r) + ", col " +
                    std::to_string(h * d + j) + "] = " + std::to_string(got) + ", reference " + std::to_string(ref);
          }
        }
      }
    }
  }
  GemmCheck check;
  check.rel_err = max_ref > 0 ? max_err / max_ref : max_err;
  // bf16 output rounded twice (GEMM, bias add): well under 1e-2 of max|ref|.
  check.pass = std::isfinite(check.rel_err) && check.rel_err <= 1e-2;
  check.detail = "rows " + std::to_string(rows.size()) + " x heads " + std::to_string(heads.size()) +
                 " x {ga, gx}; worst " + worst;
  return check;
}

// ---------------------------------------------------------------------------

uint64_t SamuMixer::set_bytes() const {
  // x, dy, y, h, dx (bf16), ctrl (2 fp32 per token), h_final (fp32).
  return 5 * elements() * kBf16 + tokens() * 2 * kF32 + states() * kF32;
}

Status SamuMixer::Setup(int sets, uint64_t seed) {
  Release();
  const GlueKernels& glue = *tools_.glue;
  const uint64_t w = static_cast<uint64_t>(shape_.width);
  ASSIGN_OR_RETURN(params_buf_, Allocate(3 * w * kF32));
  ASSIGN_OR_RETURN(dparams_, Allocate(3 * w * kF32));
  ASSIGN_OR_RETURN(controller_, Allocate(4 * kF32));
  ASSIGN_OR_RETURN(dcontroller_, Allocate(4 * kF32));
  // Never null: a workspace field need not accept it.
  ASSIGN_OR_RETURN(workspace_, Allocate(kernel_->workspace_bytes()));
  RETURN_IF_ERROR(kernel_->PrepareWorkspace(workspace_, tools_.ctx->stream()));
  const CUdeviceptr lambda = params_buf_, beta = params_buf_ + w * kF32, gamma = params_buf_ + 2 * w * kF32;
  RETURN_IF_ERROR(glue.FillF32(lambda, w, seed * 16 + 8, -7.0f, -3.0f));
  RETURN_IF_ERROR(glue.FillF32(beta, 2 * w, seed * 16 + 9, 0.5f, 1.5f));  // beta and gamma
  RETURN_IF_ERROR(glue.FillF32(controller_, 4, seed * 16 + 10, -1.0f, 1.0f));
  const bool null_final = MayPassNull("h_final");
  for (int s = 0; s < sets; ++s) {
    ASSIGN_OR_RETURN(CUdeviceptr x, Allocate(elements() * kBf16));
    ASSIGN_OR_RETURN(CUdeviceptr dy, Allocate(elements() * kBf16));
    ASSIGN_OR_RETURN(CUdeviceptr y, Allocate(elements() * kBf16));
    ASSIGN_OR_RETURN(CUdeviceptr h, Allocate(elements() * kBf16));
    ASSIGN_OR_RETURN(CUdeviceptr dx, Allocate(elements() * kBf16));
    ASSIGN_OR_RETURN(CUdeviceptr ctrl, Allocate(tokens() * 2 * kF32));
    CUdeviceptr h_final = 0;
    if (!null_final) {
      ASSIGN_OR_RETURN(h_final, Allocate(states() * kF32));
    }
    RETURN_IF_ERROR(glue.FillBf16(x, elements(), seed * 16 + 11 + 1000 * s, -1.0f, 1.0f));
    RETURN_IF_ERROR(glue.FillBf16(dy, elements(), seed * 16 + 12 + 1000 * s, -1.0f, 1.0f));
    ParamValues v;
    v["x"] = ParamValue::Pointer(x);
    v["lambda"] = ParamValue::Pointer(lambda);
    v["beta"] = ParamValue::Pointer(beta);
    v["gamma"] = ParamValue::Pointer(gamma);
    v["controller"] = ParamValue::Pointer(controller_);
    v["y"] = ParamValue::Pointer(y);
    // The saved state and control values: a recompute backend may not have them.
    v["h"] = ParamValue::Pointer(h, false);
    v["ctrl"] = ParamValue::Pointer(ctrl, false);
    v["h0"] = ParamValue::Null();
    v["h_final"] = h_final ? ParamValue::Pointer(h_final, false) : ParamValue::Null();
    v["dy"] = ParamValue::Pointer(dy);
    v["dx"] = ParamValue::Pointer(dx);
    v["dlambda"] = ParamValue::Pointer(dparams_);
    v["dbeta"] = ParamValue::Pointer(dparams_ + w * kF32);
    v["dgamma"] = ParamValue::Pointer(dparams_ + 2 * w * kF32);
    v["dcontroller"] = ParamValue::Pointer(dcontroller_);
    v["dh0"] = ParamValue::Null();
    v["batch"] = ParamValue::Integer(shape_.batch);
    v["length"] = ParamValue::Integer(shape_.length);
    v["width"] = ParamValue::Integer(shape_.width);
    auto packed = kernel_->Pack(v, workspace_);
    if (!packed.ok()) return packed.status().Annotate("samu backend " + backend());
    params_.push_back(std::move(*packed));
  }
  sets_ = sets;
  return tools_.ctx->WaitStream(kSyncTimeoutMs, "samu mixer setup", nullptr);
}

Status SamuMixer::EnqueueForward(int s) { return kernel_->Enqueue("fwd", params_[s], workspace_, tools_.ctx->stream()); }

Status SamuMixer::EnqueueBackward(int s) { return kernel_->Enqueue("bwd", params_[s], workspace_, tools_.ctx->stream()); }

}  // namespace scantune::mixer
