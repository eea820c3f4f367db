#include "worker/reference_ssm.h"

#include <algorithm>
#include <cmath>

#include "worker/parallel.h"

namespace scantune {
namespace {

// The backward's fixed work units: (batch, block of this many channels).
// Each unit sums dBm and dCm over its channels into its own slice; the
// slices are then added in unit order, so the thread count never matters.
constexpr int64_t kChannelBlock = 64;

struct Dims {
  int64_t B, L, D, N;
  explicit Dims(const SsmRefInputs& in)
      : B(in.shape.batch), L(in.shape.length), D(in.shape.width), N(in.state) {}
  size_t Tok(int64_t b, int64_t t, int64_t d) const { return static_cast<size_t>((b * L + t) * D + d); }
  size_t TokN(int64_t b, int64_t t, int64_t n) const { return static_cast<size_t>((b * L + t) * N + n); }
  size_t State(int64_t b, int64_t d, int64_t n) const { return static_cast<size_t>((b * D + d) * N + n); }
};

double DeltaOf(const SsmRefInputs& in, double raw) { return in.delta_softplus ? SsmSoftplus(raw) : raw; }
double RawDelta(const SsmRefInputs& in, const Dims& k, int64_t b, int64_t t, int64_t d) {
  return in.delta[k.Tok(b, t, d)] + (in.delta_bias.empty() ? 0.0 : in.delta_bias[static_cast<size_t>(d)]);
}
double Silu(double z) { return z * SsmSigmoid(z); }

// Forward of one channel: h_t for every t into `hs` (L x N), y into `y` if given.
void ForwardChannel(const SsmRefInputs& in, const Dims& k, int64_t b, int64_t d, std::vector<double>& hs,
                    std::vector<double>* y, std::vector<double>* h_final) {
  const int64_t N = k.N;
  std::vector<double> h(static_cast<size_t>(N), 0.0);
  if (!in.h0.empty()) {
    for (int64_t n = 0; n < N; ++n) h[n] = in.h0[k.State(b, d, n)];
  }
  for (int64_t t = 0; t < k.L; ++t) {
    const double dl = DeltaOf(in, RawDelta(in, k, b, t, d));
    const double u = in.u[k.Tok(b, t, d)];
    double acc = in.Dv[static_cast<size_t>(d)] * u;
    for (int64_t n = 0; n < N; ++n) {
      h[n] = std::exp(dl * in.A[static_cast<size_t>(d * N + n)]) * h[n] + dl * in.Bm[k.TokN(b, t, n)] * u;
      acc += in.Cm[k.TokN(b, t, n)] * h[n];
      if (!hs.empty()) hs[static_cast<size_t>(t * N + n)] = h[n];
    }
    if (y) (*y)[k.Tok(b, t, d)] = in.z.empty() ? acc : acc * Silu(in.z[k.Tok(b, t, d)]);
  }
  if (h_final) {
    for (int64_t n = 0; n < N; ++n) (*h_final)[k.State(b, d, n)] = h[n];
  }
}

}  // namespace

double SsmSoftplus(double x) { return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }

double SsmSigmoid(double x) {
  if (x >= 0) return 1.0 / (1.0 + std::exp(-x));
  const double e = std::exp(x);
  return e / (1.0 + e);
}

SsmForwardRef SelectiveScanForward(const SsmRefInputs& in) {
  const Dims k(in);
  SsmForwardRef ref;
  ref.y.assign(static_cast<size_t>(k.B * k.L * k.D), 0.0);
  ref.h_final.assign(static_cast<size_t>(k.B * k.D * k.N), 0.0);
  ForEachChannelRange(in.shape, [&](int64_t b, int64_t c0, int64_t c1) {
    std::vector<double> none;
    for (int64_t d = c0; d < c1; ++d) ForwardChannel(in, k, b, d, none, &ref.y, &ref.h_final);
  });
  return ref;
}

SsmBackwardRef SelectiveScanBackward(const SsmRefInputs& in, std::span<const double> dy) {
  const Dims k(in);
  const int64_t N = k.N;
  const bool bias = !in.delta_bias.empty(), gate = !in.z.empty();
  SsmBackwardRef ref;
  const size_t tokens = static_cast<size_t>(k.B * k.L * k.D);
  ref.du.assign(tokens, 0.0);
  ref.ddelta.assign(tokens, 0.0);
  if (gate) ref.dz.assign(tokens, 0.0);
  ref.dh0.assign(static_cast<size_t>(k.B * k.D * N), 0.0);

  const int64_t blocks = (k.D + kChannelBlock - 1) / kChannelBlock;
  const size_t units = static_cast<size_t>(k.B * blocks);
  const size_t bn = static_cast<size_t>(k.L * N);
  // Per-unit partial sums: dBm, dCm over the unit's channels (L x N each);
  // per (b, d) partials of dA (N), dDv and ddelta_bias.
  std::vector<double> part_b(units * bn, 0.0), part_c(units * bn, 0.0);
  std::vector<double> part_dA(static_cast<size_t>(k.B * k.D * N), 0.0);
  std::vector<double> part_dDv(static_cast<size_t>(k.B * k.D), 0.0), part_bias(static_cast<size_t>(k.B * k.D), 0.0);

  ParallelFor(units, 1, [&](size_t, size_t begin, size_t end) {
    std::vector<double> hs(bn), g(static_cast<size_t>(N));
    for (size_t unit = begin; unit < end; ++unit) {
      const int64_t b = static_cast<int64_t>(unit) / blocks, blk = static_cast<int64_t>(unit) % blocks;
      double* pb = &part_b[unit * bn];
      double* pc = &part_c[unit * bn];
      for (int64_t d = blk * kChannelBlock; d < std::min(k.D, (blk + 1) * kChannelBlock); ++d) {
        ForwardChannel(in, k, b, d, hs, nullptr, nullptr);
        std::fill(g.begin(), g.end(), 0.0);  // dA_{t+1} g_{t+1}
        const double dv = in.Dv[static_cast<size_t>(d)];
        double* pdA = &part_dA[k.State(b, d, 0)];
        double dDv = 0, dbias = 0;
        for (int64_t t = k.L - 1; t >= 0; --t) {
          const size_t at = k.Tok(b, t, d);
          const double raw = RawDelta(in, k, b, t, d);
          const double dl = DeltaOf(in, raw);
          const double u = in.u[at];
          double dyg = dy[at], ypre = dv * u;
          for (int64_t n = 0; n < N; ++n) ypre += in.Cm[k.TokN(b, t, n)] * hs[static_cast<size_t>(t * N + n)];
          if (gate) {
            const double zt = in.z[at], sig = SsmSigmoid(zt);
            ref.dz[at] = dy[at] * ypre * sig * (1.0 + zt * (1.0 - sig));
            dyg *= zt * sig;
          }
          double du = dv * dyg, dd = 0;
          for (int64_t n = 0; n < N; ++n) {
            const double a = in.A[static_cast<size_t>(d * N + n)];
            const double bt = in.Bm[k.TokN(b, t, n)], ct = in.Cm[k.TokN(b, t, n)];
            const double da = std::exp(dl * a);
            const double gt = ct * dyg + g[n];
            const double hprev = t > 0 ? hs[static_cast<size_t>((t - 1) * N + n)]
                                       : (in.h0.empty() ? 0.0 : in.h0[k.State(b, d, n)]);
            du += gt * dl * bt;
            dd += gt * (bt * u + a * da * hprev);
            pdA[n] += gt * dl * da * hprev;
            pb[t * N + n] += gt * dl * u;
            pc[t * N + n] += dyg * hs[static_cast<size_t>(t * N + n)];
            g[n] = da * gt;
          }
          const double draw = in.delta_softplus ? dd * SsmSigmoid(raw) : dd;
          ref.du[at] = du;
          ref.ddelta[at] = draw;
          dbias += draw;
          dDv += dyg * u;
        }
        for (int64_t n = 0; n < N; ++n) ref.dh0[k.State(b, d, n)] = g[n];
        part_dDv[static_cast<size_t>(b * k.D + d)] = dDv;
        part_bias[static_cast<size_t>(b * k.D + d)] = dbias;
      }
    }
  });

  ref.dBm.assign(static_cast<size_t>(k.B) * bn, 0.0);
  ref.dCm.assign(static_cast<size_t>(k.B) * bn, 0.0);
  for (int64_t b = 0; b < k.B; ++b) {
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const size_t unit = static_cast<size_t>(b * blocks + blk);
      for (size_t i = 0; i < bn; ++i) {
        ref.dBm[static_cast<size_t>(b) * bn + i] += part_b[unit * bn + i];
        ref.dCm[static_cast<size_t>(b) * bn + i] += part_c[unit * bn + i];
      }
    }
  }
  ref.dA.assign(static_cast<size_t>(k.D * N), 0.0);
  ref.dDv.assign(static_cast<size_t>(k.D), 0.0);
  if (bias) ref.ddelta_bias.assign(static_cast<size_t>(k.D), 0.0);
  for (int64_t b = 0; b < k.B; ++b) {
    for (int64_t d = 0; d < k.D; ++d) {
      for (int64_t n = 0; n < N; ++n) ref.dA[static_cast<size_t>(d * N + n)] += part_dA[k.State(b, d, n)];
      ref.dDv[static_cast<size_t>(d)] += part_dDv[static_cast<size_t>(b * k.D + d)];
      if (bias) ref.ddelta_bias[static_cast<size_t>(d)] += part_bias[static_cast<size_t>(b * k.D + d)];
    }
  }
  return ref;
}

}  // namespace scantune
