#include "worker/reference_gated.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "worker/parallel.h"

namespace scantune {
namespace {

// Per-token passes (samu's controller) split over the B*L token rows; each
// row's sums over channels run in channel order on one thread.
constexpr size_t kTokenGrain = 16;

template <typename Fn>
void ForEachToken(const Shape& shape, Fn&& fn) {
  ParallelFor(static_cast<size_t>(shape.batch * shape.length), kTokenGrain, [&](size_t, size_t begin, size_t end) {
    for (size_t token = begin; token < end; ++token) fn(static_cast<int64_t>(token));
  });
}

// The gate at one element, from sp = softplus(decay parameter) and r.
struct Gate {
  double la;  // log a = -c * sp * r
  double a;
  double s;   // sqrt(1 - a^2), stable near a = 1
  double q;   // la / s, bounded (-> 0 as la -> 0); 0 when la underflowed to 0
};

Gate MakeGate(double sp, double r) {
  Gate g;
  g.la = -kGatedC * sp * r;
  g.a = std::exp(g.la);
  g.s = GatedInputScale(g.la);
  g.q = g.s > 0 ? g.la / g.s : 0.0;
  return g;
}

// dla/dp = la * sigmoid(p) / softplus(p) for the decay parameter p; the ratio
// tends to 1 where softplus underflows (p < about -745).
double DecayRatio(double p) {
  const double sp = GatedSoftplus(p);
  return sp > 0 ? GatedSigmoid(p) / sp : 1.0;
}

Status CheckDims(const Shape& s) {
  if (s.batch < 1 || s.length < 1 || s.width < 1) {
    return InvalidArgument("shape " + FormatShape(s) + ": every dimension must be at least 1");
  }
  return Status::Ok();
}

// A span that must hold exactly `want` values (`optional`: or be empty).
Status CheckSize(const char* what, std::span<const double> v, int64_t want, bool optional = false) {
  if (optional && v.empty()) return Status::Ok();
  if (static_cast<int64_t>(v.size()) != want) {
    return InvalidArgument(std::string(what) + " has " + std::to_string(v.size()) + " values, the shape needs " +
                           std::to_string(want) + (optional ? " (or none)" : ""));
  }
  return Status::Ok();
}

double StateAt(std::span<const double> state, int64_t i) { return state.empty() ? 0.0 : state[i]; }

// h_{t-1} at (b, t, c): h[(b, t-1, c)], or h0 at t = 0.
double PreviousH(const Shape& s, std::span<const double> h, std::span<const double> h0, int64_t b, int64_t t,
                 int64_t c) {
  if (t > 0) return h[(b * s.length + t - 1) * s.width + c];
  return StateAt(h0, b * s.width + c);
}

// Sums a (B, W) array of per-(b, c) partials over b, in batch order.
std::vector<double> SumOverBatch(const Shape& s, const std::vector<double>& partial) {
  std::vector<double> out(static_cast<size_t>(s.width), 0.0);
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t c = 0; c < s.width; ++c) out[c] += partial[b * s.width + c];
  }
  return out;
}

Status CheckRgLru(const Shape& s, const RgLruInputs& in) {
  RETURN_IF_ERROR(CheckDims(s));
  const int64_t n = s.elements(), state = s.batch * s.width;
  RETURN_IF_ERROR(CheckSize("x", in.x, n));
  RETURN_IF_ERROR(CheckSize("ga", in.ga, n));
  RETURN_IF_ERROR(CheckSize("gx", in.gx, n));
  RETURN_IF_ERROR(CheckSize("lambda", in.lambda, s.width));
  return CheckSize("h0", in.h0, state, /*optional=*/true);
}

Status CheckSamu(const Shape& s, const SamuInputs& in) {
  RETURN_IF_ERROR(CheckDims(s));
  RETURN_IF_ERROR(CheckSize("x", in.x, s.elements()));
  RETURN_IF_ERROR(CheckSize("lambda", in.lambda, s.width));
  RETURN_IF_ERROR(CheckSize("beta", in.beta, s.width));
  RETURN_IF_ERROR(CheckSize("gamma", in.gamma, s.width));
  return CheckSize("h0", in.h0, s.batch * s.width, /*optional=*/true);
}

// samu's controller for every token: (r_t, i_t) into control (B, L, 2) and m_t.
void SamuControl(const Shape& s, const SamuInputs& in, std::vector<double>& control, std::vector<double>& mean) {
  const int64_t W = s.width;
  control.resize(static_cast<size_t>(2 * s.batch * s.length));
  mean.resize(static_cast<size_t>(s.batch * s.length));
  ForEachToken(s, [&](int64_t token) {
    double sum = 0.0;
    for (int64_t c = 0; c < W; ++c) sum += in.x[token * W + c];
    const double m = sum / static_cast<double>(W);
    mean[token] = m;
    control[2 * token] = GatedSigmoid(in.ctrl.w_r * m + in.ctrl.b_r);
    control[2 * token + 1] = GatedSigmoid(in.ctrl.w_i * m + in.ctrl.b_i);
  });
}

}  // namespace

StatusOr<RgLruForwardRef> RgLruForward(const Shape& shape, const RgLruInputs& in) {
  RETURN_IF_ERROR(CheckRgLru(shape, in));
  const int64_t L = shape.length, W = shape.width;
  std::vector<double> sp(static_cast<size_t>(W));
  for (int64_t c = 0; c < W; ++c) sp[c] = GatedSoftplus(in.lambda[c]);
  RgLruForwardRef out;
  out.h.resize(static_cast<size_t>(shape.elements()));
  out.h_final.resize(static_cast<size_t>(shape.batch * W));
  ForEachChannelRange(shape, [&](int64_t b, int64_t c0, int64_t c1) {
    std::vector<double> carry(static_cast<size_t>(c1 - c0));
    for (int64_t c = c0; c < c1; ++c) carry[c - c0] = StateAt(in.h0, b * W + c);
    for (int64_t t = 0; t < L; ++t) {
      const int64_t row = (b * L + t) * W;
      for (int64_t c = c0; c < c1; ++c) {
        const int64_t k = row + c;
        const Gate g = MakeGate(sp[c], GatedSigmoid(in.ga[k]));
        double& h = carry[c - c0];
        h = g.a * h + g.s * (GatedSigmoid(in.gx[k]) * in.x[k]);
        out.h[k] = h;
      }
    }
    for (int64_t c = c0; c < c1; ++c) out.h_final[b * W + c] = carry[c - c0];
  });
  return out;
}

StatusOr<RgLruBackwardRef> RgLruBackward(const Shape& shape, const RgLruInputs& in, std::span<const double> h,
                                         std::span<const double> dh, std::span<const double> d_final) {
  RETURN_IF_ERROR(CheckRgLru(shape, in));
  const int64_t L = shape.length, W = shape.width, n = shape.elements();
  RETURN_IF_ERROR(CheckSize("h", h, n, /*optional=*/true));
  RETURN_IF_ERROR(CheckSize("dh", dh, n));
  RETURN_IF_ERROR(CheckSize("d_final", d_final, shape.batch * W, /*optional=*/true));
  // The recompute strategy: h in double from the inputs.
  std::vector<double> recomputed;
  if (h.empty()) {
    ASSIGN_OR_RETURN(RgLruForwardRef fwd, RgLruForward(shape, in));
    recomputed = std::move(fwd.h);
    h = recomputed;
  }
  std::vector<double> sp(static_cast<size_t>(W)), ratio(static_cast<size_t>(W));
  for (int64_t c = 0; c < W; ++c) {
    sp[c] = GatedSoftplus(in.lambda[c]);
    ratio[c] = DecayRatio(in.lambda[c]);
  }
  RgLruBackwardRef out;
  out.dx.resize(static_cast<size_t>(n));
  out.dga.resize(static_cast<size_t>(n));
  out.dgx.resize(static_cast<size_t>(n));
  out.dh0.resize(static_cast<size_t>(shape.batch * W));
  // dLambda per (b, c), summed over t in reverse time order; then over b.
  std::vector<double> dlambda_bc(static_cast<size_t>(shape.batch * W), 0.0);
  ForEachChannelRange(shape, [&](int64_t b, int64_t c0, int64_t c1) {
    const size_t width = static_cast<size_t>(c1 - c0);
    std::vector<double> g(width, 0.0), a_next(width, 0.0);
    for (int64_t t = L - 1; t >= 0; --t) {
      const int64_t row = (b * L + t) * W;
      for (int64_t c = c0; c < c1; ++c) {
        const int64_t k = row + c;
        double& gc = g[c - c0];
        double in_grad = dh[k];
        if (t == L - 1) in_grad += StateAt(d_final, b * W + c);
        gc = t + 1 < L ? in_grad + a_next[c - c0] * gc : in_grad;
        const double r = GatedSigmoid(in.ga[k]), r_c = GatedSigmoid(-in.ga[k]);
        const double i = GatedSigmoid(in.gx[k]), i_c = GatedSigmoid(-in.gx[k]);
        const Gate gate = MakeGate(sp[c], r);
        const double x = in.x[k], u = i * x;
        const double h_prev = PreviousH(shape, h, in.h0, b, t, c);
        out.dx[k] = gc * gate.s * i;
        out.dgx[k] = gc * gate.s * x * (i * i_c);
        // G = (dL/dla) * la, bounded as a -> 1 (see the header).
        const double big_g = gc * (gate.a * h_prev * gate.la - u * gate.a * gate.a * gate.q);
        out.dga[k] = big_g * r_c;
        dlambda_bc[b * W + c] += big_g * ratio[c];
        a_next[c - c0] = gate.a;
      }
    }
    // After the loop a_next holds a_0 and g holds g_0.
    for (int64_t c = c0; c < c1; ++c) out.dh0[b * W + c] = a_next[c - c0] * g[c - c0];
  });
  out.dlambda = SumOverBatch(shape, dlambda_bc);
  return out;
}

StatusOr<SamuForwardRef> SamuForward(const Shape& shape, const SamuInputs& in) {
  RETURN_IF_ERROR(CheckSamu(shape, in));
  const int64_t L = shape.length, W = shape.width;
  SamuForwardRef out;
  std::vector<double> mean;
  SamuControl(shape, in, out.control, mean);
  std::vector<double> sp(static_cast<size_t>(W));
  for (int64_t c = 0; c < W; ++c) sp[c] = GatedSoftplus(in.lambda[c]);
  out.y.resize(static_cast<size_t>(shape.elements()));
  out.h.resize(static_cast<size_t>(shape.elements()));
  out.h_final.resize(static_cast<size_t>(shape.batch * W));
  ForEachChannelRange(shape, [&](int64_t b, int64_t c0, int64_t c1) {
    std::vector<double> carry(static_cast<size_t>(c1 - c0));
    for (int64_t c = c0; c < c1; ++c) carry[c - c0] = StateAt(in.h0, b * W + c);
    for (int64_t t = 0; t < L; ++t) {
      const int64_t token = b * L + t, row = token * W;
      const double r = out.control[2 * token], i = out.control[2 * token + 1];
      for (int64_t c = c0; c < c1; ++c) {
        const int64_t k = row + c;
        const Gate g = MakeGate(sp[c], r);
        double& h = carry[c - c0];
        h = g.a * h + g.s * (i * in.beta[c] * in.x[k]);
        out.h[k] = h;
        out.y[k] = in.gamma[c] * h;
      }
    }
    for (int64_t c = c0; c < c1; ++c) out.h_final[b * W + c] = carry[c - c0];
  });
  return out;
}

StatusOr<SamuBackwardRef> SamuBackward(const Shape& shape, const SamuInputs& in, std::span<const double> h,
                                       std::span<const double> dy, std::span<const double> d_final) {
  RETURN_IF_ERROR(CheckSamu(shape, in));
  const int64_t L = shape.length, W = shape.width, n = shape.elements();
  RETURN_IF_ERROR(CheckSize("h", h, n, /*optional=*/true));
  RETURN_IF_ERROR(CheckSize("dy", dy, n));
  RETURN_IF_ERROR(CheckSize("d_final", d_final, shape.batch * W, /*optional=*/true));
  std::vector<double> recomputed;
  if (h.empty()) {
    ASSIGN_OR_RETURN(SamuForwardRef fwd, SamuForward(shape, in));
    recomputed = std::move(fwd.h);
    h = recomputed;
  }
  std::vector<double> control, mean;
  SamuControl(shape, in, control, mean);
  std::vector<double> sp(static_cast<size_t>(W)), ratio(static_cast<size_t>(W));
  for (int64_t c = 0; c < W; ++c) {
    sp[c] = GatedSoftplus(in.lambda[c]);
    ratio[c] = DecayRatio(in.lambda[c]);
  }
  SamuBackwardRef out;
  out.dh0.resize(static_cast<size_t>(shape.batch * W));
  // Pass 1, per (b, c) range: the reverse scan. g goes into out.dx (pass 2
  // turns it into dx in place); the per-channel parameter gradients need
  // only g, so their per-(b, c) partials are summed here over t.
  out.dx.resize(static_cast<size_t>(n));
  std::vector<double>& g_all = out.dx;
  const size_t states = static_cast<size_t>(shape.batch * W);
  std::vector<double> dlambda_bc(states, 0.0), dbeta_bc(states, 0.0), dgamma_bc(states, 0.0);
  ForEachChannelRange(shape, [&](int64_t b, int64_t c0, int64_t c1) {
    const size_t width = static_cast<size_t>(c1 - c0);
    std::vector<double> g(width, 0.0), a_next(width, 0.0);
    for (int64_t t = L - 1; t >= 0; --t) {
      const int64_t token = b * L + t, row = token * W;
      const double r = control[2 * token], i = control[2 * token + 1];
      for (int64_t c = c0; c < c1; ++c) {
        const int64_t k = row + c, bc = b * W + c;
        double& gc = g[c - c0];
        double in_grad = in.gamma[c] * dy[k];
        if (t == L - 1) in_grad += StateAt(d_final, bc);
        gc = t + 1 < L ? in_grad + a_next[c - c0] * gc : in_grad;
        g_all[k] = gc;
        const Gate gate = MakeGate(sp[c], r);
        const double x = in.x[k], v = i * in.beta[c] * x;
        const double h_prev = PreviousH(shape, h, in.h0, b, t, c);
        const double big_g = gc * (gate.a * h_prev * gate.la - v * gate.a * gate.a * gate.q);
        dlambda_bc[bc] += big_g * ratio[c];
        dbeta_bc[bc] += gc * gate.s * i * x;
        dgamma_bc[bc] += dy[k] * h[k];
        a_next[c - c0] = gate.a;
      }
    }
    for (int64_t c = c0; c < c1; ++c) out.dh0[b * W + c] = a_next[c - c0] * g[c - c0];
  });
  out.dlambda = SumOverBatch(shape, dlambda_bc);
  out.dbeta = SumOverBatch(shape, dbeta_bc);
  out.dgamma = SumOverBatch(shape, dgamma_bc);
  // Pass 2, per token: the controller's gradients need sums over the token's
  // channels (recomputing the gate from g and h), then dx = g s i beta + dm/W.
  std::vector<double> dz_r(static_cast<size_t>(shape.batch * L)), dz_i(dz_r.size());
  ForEachToken(shape, [&](int64_t token) {
    const int64_t b = token / L, t = token % L, row = token * W;
    const double r = control[2 * token], i = control[2 * token + 1];
    double sum_g = 0.0, sum_i = 0.0;
    for (int64_t c = 0; c < W; ++c) {
      const int64_t k = row + c;
      const double gc = g_all[k];
      const Gate gate = MakeGate(sp[c], r);
      const double x = in.x[k], v = i * in.beta[c] * x;
      const double h_prev = PreviousH(shape, h, in.h0, b, t, c);
      sum_g += gc * (gate.a * h_prev * gate.la - v * gate.a * gate.a * gate.q);
      sum_i += gc * gate.s * in.beta[c] * x;
    }
    const double zr = in.ctrl.w_r * mean[token] + in.ctrl.b_r;
    const double zi = in.ctrl.w_i * mean[token] + in.ctrl.b_i;
    // dla/dz_r = la * (1 - r): sum_g already carries the la.
    dz_r[token] = sum_g * GatedSigmoid(-zr);
    dz_i[token] = sum_i * (i * GatedSigmoid(-zi));
    const double dm_share = (in.ctrl.w_r * dz_r[token] + in.ctrl.w_i * dz_i[token]) / static_cast<double>(W);
    for (int64_t c = 0; c < W; ++c) {
      const int64_t k = row + c;
      const Gate gate = MakeGate(sp[c], r);
      g_all[k] = g_all[k] * gate.s * i * in.beta[c] + dm_share;
    }
  });
  // The four scalars: sums over tokens in token order (B*L values, cheap).
  for (int64_t token = 0; token < shape.batch * L; ++token) {
    out.dctrl.w_r += dz_r[token] * mean[token];
    out.dctrl.b_r += dz_r[token];
    out.dctrl.w_i += dz_i[token] * mean[token];
    out.dctrl.b_i += dz_i[token];
  }
  return out;
}

uint64_t RgLruFloorBytes(const Shape& shape, Mode mode, uint64_t e, GatedBwdStrategy strategy, bool has_h0,
                         bool has_d_final) {
  const uint64_t n = static_cast<uint64_t>(shape.elements());
  const uint64_t W = static_cast<uint64_t>(shape.width);
  const uint64_t state = static_cast<uint64_t>(shape.batch) * W * sizeof(float);
  // fwd: Lambda in; h0 in (if any); h_final out.
  const uint64_t fwd_extra = W * e + (has_h0 ? state : 0) + state;
  // bwd: Lambda in, dLambda out (fp32); h0 in and dh0 out (if any); d_final in (if any).
  const uint64_t bwd_extra = W * e + W * sizeof(float) + (has_h0 ? 2 * state : 0) + (has_d_final ? state : 0);
  const uint64_t extra = mode == Mode::kFwd ? fwd_extra : mode == Mode::kBwd ? bwd_extra : fwd_extra + bwd_extra;
  return n * RgLruBytesPerElement(mode, e, strategy) + extra;
}

uint64_t SamuFloorBytes(const Shape& shape, Mode mode, uint64_t e, GatedBwdStrategy strategy, bool has_h0,
                        bool has_d_final) {
  const uint64_t n = static_cast<uint64_t>(shape.elements());
  const uint64_t W = static_cast<uint64_t>(shape.width);
  const uint64_t tokens = static_cast<uint64_t>(shape.batch * shape.length);
  const uint64_t state = static_cast<uint64_t>(shape.batch) * W * sizeof(float);
  const uint64_t ctrl = 4 * sizeof(float);  // w_r, b_r, w_i, b_i
  // fwd: lambda, beta, gamma, controller in; (r_t, i_t) out; h0 in (if any); h_final out.
  const uint64_t fwd_extra = 3 * W * e + ctrl + tokens * kSamuControlBytesPerToken + (has_h0 ? state : 0) + state;
  // bwd: parameters in, their gradients out (fp32); h0 in and dh0 out (if any); d_final in (if any).
  const uint64_t bwd_extra = 3 * W * e + ctrl + 3 * W * sizeof(float) + ctrl + (has_h0 ? 2 * state : 0) +
                             (has_d_final ? state : 0);
  const uint64_t extra = mode == Mode::kFwd ? fwd_extra : mode == Mode::kBwd ? bwd_extra : fwd_extra + bwd_extra;
  return n * SamuBytesPerElement(mode, e, strategy) + extra;
}

}  // namespace scantune
