// CPU emulations of changes to samu's `chunked` kernels (kernels_src/gated_chunked.cuh,
// gated_samu.cuh; bench/NOTES.md "Session 8" and "Session 13"):
//   - the forward gate in two MUFU: 1 - a^2 from its series on x = 2 la in
//     [-0.05, 0], else fma(-a, a, 1), with a off by ex2.approx's error, stays
//     within 2e-5 of -expm1(2 la) at every decay (the tanh.approx form it
//     replaced was within ~5e-4);
//   - DecayRatio(lambda) from the softplus the backward holds,
//     -expm1(-softplus) / softplus, matches sigmoid(lambda) / softplus(lambda);
//   - SumControllerRows' warp butterfly leaves the same bits in every lane;
//   - the `_y1` rescan in y units gives the h rescan's gradients (session 13).
// Deterministic: fixed seeds; no GPU.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace scantune {
namespace {

// ForwardGate<16-bit>'s 1 - a^2 (before its sqrt.approx), host twin: z = log2(a)
// as the kernel forms it (k r, k = -8 softplus(lambda) log2(e)); a as ex2.approx
// returns it, here exp2(z) times (1 + rel).
float GateOneMinusASquared(float z, double rel) {
  const float a = static_cast<float>(std::exp2(static_cast<double>(z)) * (1.0 + rel));
  const float x = z * 1.38629436111989061f;  // 2 ln a
  const float series = -x * std::fmaf(x, std::fmaf(x, 1.0f / 6.0f, 0.5f), 1.0f);
  return x > -0.05f ? series : std::fmaf(-a, a, 1.0f);
}

TEST(SamuChunkedGate, OneMinusASquaredWithinTwoEMinus5OfExpm1AtEveryDecay) {
  const double kEx2Error = std::ldexp(1.0, -22);  // ex2.approx.ftz.f32: ~2 ulp relative
  double worst = 0.0, worst_la = 0.0;
  for (int i = 0; i <= 4000; ++i) {
    const double la = -std::pow(10.0, -9.0 + 10.5 * i / 4000.0);  // -1e-9 ... -3e1
    const float z = static_cast<float>(la * 1.4426950408889634);
    const double exact = -std::expm1(2.0 * std::log(2.0) * static_cast<double>(z));
    for (double rel : {-kEx2Error, 0.0, kEx2Error}) {
      const double err = std::fabs(GateOneMinusASquared(z, rel) - exact) / exact;
      if (err > worst) worst = err, worst_la = la;
    }
  }
  EXPECT_LE(worst, 2e-5) << "at la = " << worst_la;
}

TEST(SamuChunkedGate, DecayRatioFromTheHeldSoftplusMatchesSigmoidOverSoftplus) {
  double worst = 0.0, worst_p = 0.0;
  for (int i = -3000; i <= 3000; ++i) {
    const double p = i / 100.0;
    // The kernel holds sp = -8 softplus(p) in fp32 and divides the 8 back out (exact: a power of two).
    const float softplus = static_cast<float>(std::log1p(std::exp(p)));
    const float sp = -8.0f * softplus;
    const float held = sp * (-1.0f / 8.0f);
    const float ratio = held > 0.0f ? -std::expm1f(-held) / held : 1.0f;
    const double want = (1.0 / (1.0 + std::exp(-p))) / std::log1p(std::exp(p));
    const double err = std::fabs(ratio - want) / want;
    if (err > worst) worst = err, worst_p = p;
  }
  EXPECT_LE(worst, 2e-6) << "at lambda = " << worst_p;
}

TEST(SamuChunkedFinalize, WarpButterflyLeavesTheSameBitsInEveryLane) {
  std::mt19937 rng(8);
  std::uniform_real_distribution<float> mag(-30.0f, 30.0f);
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  for (int trial = 0; trial < 200; ++trial) {
    float lane[32];
    for (float& v : lane) v = std::ldexp(mant(rng), static_cast<int>(mag(rng)));
    for (int o = 16; o >= 1; o /= 2) {  // __shfl_xor_sync rounds: every lane adds its partner's value
      float next[32];
      for (int l = 0; l < 32; ++l) next[l] = lane[l] + lane[l ^ o];
      std::memcpy(lane, next, sizeof(lane));
    }
    for (int l = 1; l < 32; ++l) {
      uint32_t a, b;
      std::memcpy(&a, &lane[0], 4);
      std::memcpy(&b, &lane[l], 4);
      ASSERT_EQ(a, b) << "trial " << trial << ", lane " << l;
    }
  }
}

// The `_y1` rescan in y units (session 13, gated_chunked.cuh): with hs = 1 / gamma,
// u' = u hs, gamma' = 1 and beta' = beta / hs, SamuBackStep's expressions of (y,
// g', beta') give the h rescan's dx parts, dlambda's and the token sums as they are,
// dbeta's sum divided by hs and dgamma's times 1 / hs. Host twins of both steps (the
// generic form, in double) over one channel's chunk, last token first, from the same
// entering u and h0.
struct SamuBackSums {
  std::vector<double> dx, sum_g, sum_gsbx;  // per token
  double dlambda = 0.0, dbeta = 0.0, dgamma = 0.0;
};
SamuBackSums SamuRescanOneChannel(const std::vector<double>& la, const std::vector<double>& ri,
                                  const std::vector<double>& x, const std::vector<double>& dy,
                                  const std::vector<double>& hprev, const std::vector<double>& ht, double beta,
                                  double gamma, double u) {
  const size_t n = la.size();
  SamuBackSums out;
  out.dx.assign(n, 0.0), out.sum_g.assign(n, 0.0), out.sum_gsbx.assign(n, 0.0);
  for (size_t k = 0; k < n; ++k) {
    const size_t t = n - 1 - k;
    const double a = std::exp(la[t]), s = std::sqrt(-std::expm1(2.0 * la[t])), q = la[t] / s;
    const double v = ri[t] * beta * x[t];
    const double g = gamma * dy[t] + u;
    const double big_g = g * (a * hprev[t] * la[t] - v * a * a * q);
    const double gs = g * s;
    out.dlambda += big_g;
    out.dbeta += gs * ri[t] * x[t];
    out.dgamma += dy[t] * ht[t];
    out.sum_g[t] = big_g;
    out.sum_gsbx[t] = gs * beta * x[t];
    out.dx[t] = gs * ri[t] * beta;
    u = a * g;
  }
  return out;
}

TEST(SamuChunkedYUnits, TheYUnitRescanGivesTheHRescansGradients) {
  std::mt19937 rng(13);
  std::uniform_real_distribution<double> unit(0.02, 0.98), normal(-2.0, 2.0), lam(-6.0, 3.0);
  for (int trial = 0; trial < 50; ++trial) {
    const size_t n = 64;
    const double k = -8.0 * std::log1p(std::exp(lam(rng)));  // -8 softplus(lambda)
    const double beta = normal(rng), gamma = (trial % 2 ? 1.0 : 1e-3) * normal(rng), h0 = normal(rng);
    const double u_in = normal(rng);  // the carry entering the chunk from its right
    std::vector<double> la(n), ri(n), x(n), dy(n), h(n), y(n), hprev(n), yprev(n);
    double state = h0;
    for (size_t t = 0; t < n; ++t) {
      la[t] = k * unit(rng), ri[t] = unit(rng), x[t] = normal(rng), dy[t] = normal(rng);
      const double a = std::exp(la[t]);
      hprev[t] = state, yprev[t] = gamma * state;
      state = a * state + std::sqrt(1.0 - a * a) * ri[t] * beta * x[t];
      h[t] = state, y[t] = gamma * state;
    }
    const SamuBackSums want = SamuRescanOneChannel(la, ri, x, dy, hprev, h, beta, gamma, u_in);
    const double hs = 1.0 / gamma;  // y units: h0 and the rows as gamma h (yprev, y)
    SamuBackSums got = SamuRescanOneChannel(la, ri, x, dy, yprev, y, beta / hs, 1.0, u_in * hs);
    got.dbeta /= hs;
    got.dgamma *= hs;
    auto near = [](double a, double b) { return std::fabs(a - b) <= 1e-9 * (1.0 + std::fabs(b)); };
    for (size_t t = 0; t < n; ++t) {
      ASSERT_TRUE(near(got.dx[t], want.dx[t])) << "trial " << trial << " dx[" << t << "]";
      ASSERT_TRUE(near(got.sum_g[t], want.sum_g[t])) << "trial " << trial << " G[" << t << "]";
      ASSERT_TRUE(near(got.sum_gsbx[t], want.sum_gsbx[t])) << "trial " << trial << " g s beta x[" << t << "]";
    }
    EXPECT_TRUE(near(got.dlambda, want.dlambda)) << trial;
    EXPECT_TRUE(near(got.dbeta, want.dbeta)) << trial;
    EXPECT_TRUE(near(got.dgamma, want.dgamma)) << trial;
  }
}

}  // namespace
}  // namespace scantune
