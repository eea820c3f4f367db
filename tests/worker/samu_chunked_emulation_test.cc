// CPU emulations of session 8's changes to samu's `chunked` kernels
// (kernels_src/gated_chunked.cuh, gated_samu.cuh; bench/NOTES.md "Session 8"):
//   - the forward gate in two MUFU: 1 - a^2 from its series on x = 2 la in
//     [-0.05, 0], else fma(-a, a, 1), with a off by ex2.approx's error, stays
//     within 2e-5 of -expm1(2 la) at every decay (the tanh.approx form it
//     replaced was within ~5e-4);
//   - DecayRatio(lambda) from the softplus the backward holds,
//     -expm1(-softplus) / softplus, matches sigmoid(lambda) / softplus(lambda);
//   - SumControllerRows' warp butterfly leaves the same bits in every lane.
// Deterministic: fixed seeds; no GPU.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>

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

}  // namespace
}  // namespace scantune
