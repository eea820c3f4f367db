// CPU emulations of the session-5 changes to rglru's `lookback` kernels
// (kernels_src/gated_held.cuh; bench/NOTES.md "rglru fwd_bwd to 1.5x"):
//   - TileStager: the interior staging's per-thread address math (first chunk
//     once, then a fixed stride per pass) copies every 16-byte chunk of the
//     tile exactly once, from the element StageRows would copy;
//   - the lean _o3 gate (RgLruLa, RgLruGateLean): la as one FFMA of
//     tanh(ga / 2) and om clamped at 1e-30 give the same (a, b) as the o3
//     gate it replaces, to fp32 rounding; so does the backward's regrouped
//     element (G = (a g) la (hprev - a v / s));
//   - the forward's b in the staging: each thread's fp32 b slots lie in its
//     own ga / gx packs;
//   - the forward without the per-row range test: rows past L of a partial
//     last tile (staged as zeros) are never read by a stored row, h_final or
//     another tile, whatever they hold.
// Deterministic: fixed seeds; no GPU.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "worker/reference_gated.h"

namespace scantune {
namespace {

// ---- TileStager (host twin of its index math) ----------------------------------

struct StagerCase {
  int elem_bytes, threads, strip, tile;
};

// Counts, per staged chunk of a [tile][strip] tile, how often the block's
// threads copy it, and checks each copy's source element offset.
void CheckStager(const StagerCase& c, int64_t batch, int64_t length, int64_t width, int64_t b, int64_t base,
                 int64_t c_strip, int shift) {
  const int kE = 16 / c.elem_bytes;
  const int kPerRow = c.strip / kE;
  ASSERT_EQ(c.threads % kPerRow, 0);
  const int kRowStep = c.threads / kPerRow;
  const int kPasses = (c.tile + kRowStep - 1) / kRowStep;
  std::vector<int> copies(static_cast<size_t>(c.tile * kPerRow), 0);
  const int64_t first = (b * length + base) * width + c_strip;
  for (int tid = 0; tid < c.threads; ++tid) {
    const int r0 = tid / kPerRow;
    const int cc = (tid % kPerRow) * kE;
    const int64_t goff = first + static_cast<int64_t>(r0) * width + cc;
    const int64_t step = static_cast<int64_t>(kRowStep) * width;
    const int soff = r0 * c.strip + cc;
    int64_t g = goff - (shift != 0 ? width : 0);
    for (int i = 0; i < kPasses; ++i, g += step) {
      if (!(c.tile % kRowStep == 0 || r0 + i * kRowStep < c.tile)) continue;
      const int s = soff + i * kRowStep * c.strip;  // staged element offset
      const int row = s / c.strip, col = s % c.strip;
      ASSERT_LT(row, c.tile);
      ASSERT_EQ(col % kE, 0);
      ++copies[static_cast<size_t>(row * kPerRow + col / kE)];
      // StageRows: row r is source time base + r - shift, channel c_strip + col.
      EXPECT_EQ(g, (b * length + base + row - shift) * width + c_strip + col);
    }
  }
  for (size_t k = 0; k < copies.size(); ++k) EXPECT_EQ(copies[k], 1) << "chunk " << k;
}

TEST(RgLruTileStager, CopiesEveryChunkOnceFromItsSource) {
  // Every enumerated lookback geometry (plan_gated.cc kHeld) x dtype, plus odd ones.
  const StagerCase cases[] = {
      {2, 256, 64, 64}, {2, 256, 32, 128}, {2, 256, 64, 128}, {2, 256, 32, 256}, {2, 128, 64, 64}, {2, 256, 16, 512},
      {4, 256, 64, 64}, {4, 256, 32, 128}, {4, 256, 64, 128}, {4, 256, 32, 256}, {4, 128, 64, 64}, {4, 256, 16, 512},
      {2, 64, 64, 24},  {4, 96, 32, 9},    {2, 32, 128, 3},
  };
  for (const StagerCase& c : cases) {
    SCOPED_TRACE("elem " + std::to_string(c.elem_bytes) + " threads " + std::to_string(c.threads) + " strip " +
                 std::to_string(c.strip) + " tile " + std::to_string(c.tile));
    const int64_t width = 3 * c.strip + 8, length = 5 * c.tile + 3;
    for (int shift : {0, 1}) CheckStager(c, 2, length, width, 1, 2 * c.tile + 1, c.strip, shift);
  }
}

// The forward's b in the staging (RgLruBInStaging): thread (seg, lane)
// writes b of (row, channel j) as fp32 at float index j % (VEC / 2) of its own
// 16-bit pack of ga (j < VEC / 2) or gx (the others) in that row: every slot
// lies inside bytes only that thread reads (its packs), and no two (row,
// channel) pairs share one.
TEST(RgLruBInStaging, SlotsAreTheThreadsOwnGateSlots) {
  for (const auto& [vec, threads, strip, tile] : {std::tuple{2, 256, 64, 64}, std::tuple{2, 256, 64, 128},
                                                  std::tuple{2, 256, 32, 128}, std::tuple{2, 256, 32, 256},
                                                  std::tuple{4, 128, 64, 64}}) {
    const int lanes = strip / vec, segs = threads / lanes, steps = tile / segs;
    const int elem = 2;  // bytes (16-bit dtypes only)
    std::vector<int> owner(static_cast<size_t>(3 * tile * strip * elem), -1), slot_used(owner.size(), 0);
    for (int tid = 0; tid < threads; ++tid) {  // the bytes each thread's packs cover
      const int lane = tid % lanes, seg = tid / lanes;
      for (int input = 0; input < 3; ++input) {
        for (int i = 0; i < steps; ++i) {
          const int row = seg * steps + i;
          for (int b = 0; b < vec * elem; ++b) {
            owner[static_cast<size_t>(((input * tile + row) * strip + lane * vec) * elem + b)] = tid;
          }
        }
      }
    }
    for (int tid = 0; tid < threads; ++tid) {
      const int lane = tid % lanes, seg = tid / lanes;
      for (int i = 0; i < steps; ++i) {
        const int row = seg * steps + i;
        for (int j = 0; j < vec; ++j) {
          const int input = j < vec / 2 ? 0 : 1;  // ga or gx, never x
          const int byte = ((input * tile + row) * strip + lane * vec) * elem + 4 * (j % (vec / 2));
          for (int b = 0; b < 4; ++b) {
            EXPECT_EQ(owner[static_cast<size_t>(byte + b)], tid) << tid << " " << row << " " << j;
            EXPECT_EQ(++slot_used[static_cast<size_t>(byte + b)], 1) << tid << " " << row << " " << j;
          }
        }
      }
    }
  }
}

// ---- the forward's lean _o3 gate ------------------------------------------------

// fp32 emulation; tanh / exp2 / rsqrt stand in for the MUFU approximations
// (their error is GatedTanhGate's subject, unchanged here).
struct Ab {
  float a, b;
};
Ab GateO3(float sp, float ga, float gx, float x) {  // the o3 forward until session 5
  const float r = std::fma(0.5f, std::tanh(0.5f * ga), 0.5f);
  const float la = sp * r;
  const float a = std::exp2(la * 1.44269504088896341f);
  const float om = std::tanh(-la) * std::fma(a, a, 1.0f);
  const float rs = 1.0f / std::sqrt(om);
  const float s = om > 1e-30f ? om * rs : 0.0f;
  return {a, s * std::fma(0.5f, std::tanh(0.5f * gx), 0.5f) * x};
}
Ab GateLean(float sp, float ga, float gx, float x) {  // the forward's kLean element
  const float sph = 0.5f * sp;
  const float la = std::fma(sph, std::tanh(0.5f * ga), sph);  // RgLruLa
  const float a = std::exp2(la * 1.44269504088896341f);       // ExpDecay
  const float om = std::max(std::tanh(-la) * std::fma(a, a, 1.0f), 1e-30f);  // RgLruGateLean
  const float s = om * (1.0f / std::sqrt(om));
  return {a, s * std::fma(0.5f, std::tanh(0.5f * gx), 0.5f) * x};
}

TEST(RgLruLeanGate, MatchesTheO3GateAndTheReference) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> ulam(-12.0, 12.0), uz(-90.0, 90.0), ux(-3.0, 3.0);
  std::normal_distribution<double> nz(0.0, 3.0);
  double worst_a = 0.0, worst_b = 0.0;
  for (int n = 0; n < 200000; ++n) {
    const double lam = ulam(rng);
    const double ga = n % 2 == 0 ? nz(rng) : uz(rng), gx = nz(rng), x = ux(rng);
    const float sp = static_cast<float>(-kGatedC * GatedSoftplus(lam));
    const Ab o = GateO3(sp, float(ga), float(gx), float(x));
    const Ab l = GateLean(sp, float(ga), float(gx), float(x));
    ASSERT_TRUE(std::isfinite(l.a) && std::isfinite(l.b)) << lam << " " << ga;
    // Against the o3 gate: la to a few ulps (one FFMA instead of FMUL + FMUL),
    // so a to (1 + |la|) 2^-20 relative; b to 1e-5 relative, or 1e-15 |x|
    // where om is clamped (la > -5e-31: the o3 gate's s = 0 there).
    const double la_o = double(sp) * std::fma(0.5f, std::tanh(0.5f * float(ga)), 0.5f);
    EXPECT_NEAR(l.a, o.a, (std::fabs(la_o) + 1.0) * std::ldexp(1.0, -20) * o.a + 1e-37) << lam << " " << ga;
    EXPECT_NEAR(l.b, o.b, 1e-5 * std::fabs(o.b) + 1.01e-15 * std::fabs(x)) << lam << " " << ga << " " << gx;
    // Against float64 truth on the same fp32 inputs: both gates share
    // sigmoid = (1 + tanh(z / 2)) / 2, whose fp32 rounding near tanh = -1
    // leaves r an absolute error of ~2^-25: a off by up to |sp| 2^-25 and
    // s = sqrt(1 - a^2) by up to sqrt(2 |sp| 2^-25) where a is near 1.
    const double la = double(sp) * GatedSigmoid(float(ga));
    const double a = std::exp(la);
    const double b = GatedInputScale(la) * GatedSigmoid(float(gx)) * float(x);
    worst_a = std::max(worst_a, std::fabs(l.a - a));
    worst_b = std::max(worst_b, std::fabs(l.b - b) / std::max(std::fabs(double(x)), 1e-30));
  }
  EXPECT_LT(worst_a, 2e-6);
  EXPECT_LT(worst_b, 2.5e-3);  // per unit |x|: sqrt(2 x 96 x 2^-25) = 2.4e-3 at Lambda = 12
  std::printf("lean gate vs float64: max |a - a64| %.3g, max |b - b64| / |x| %.3g\n", worst_a, worst_b);
}

// The backward's lean _o3 element (RgLruBackwardHeld, kLean): with v =
// sigmoid(gx) x and rs = 1 / s, G = (a g) la (hprev - a v rs) and dgx = g s v
// (1 - sigmoid(gx)) against the o3 form G = g (a hprev la - v a^2 q), q = la
// rs: the same up to fp32 rounding of the larger term, for every gate from
// a = 0 to a = 1 (la -> 0, where 1 / s grows as 1 / sqrt(-2 la)).
struct Grads {
  double dx, dga, dgx, big_g;
};
template <typename F>
Grads BackwardElement(float sp, float ga, float gx, float x, float hprev, float g, bool lean) {
  const F th = F(std::tanh(0.5f * ga)), ti = F(std::tanh(0.5f * gx));
  const F la = std::fma(F(0.5f * sp), th, F(0.5f * sp));  // RgLruLa (o3: sp sigmoid(ga), equal in F = double)
  const F rc = std::fma(F(-0.5), th, F(0.5));
  const F is = std::fma(F(0.5), ti, F(0.5)), ic = std::fma(F(-0.5), ti, F(0.5));
  const F a = std::exp(la);
  const F om = std::max(F(std::tanh(-la)) * std::fma(a, a, F(1)), F(1e-30f));
  const F rs = F(1) / std::sqrt(om);
  const F s = om * rs;
  const F gs = F(g) * s;
  Grads out;
  out.dx = gs * is;
  if (lean) {
    const F v = is * F(x);
    out.dgx = gs * v * ic;
    out.big_g = (a * F(g) * la) * std::fma(-v * rs, a, F(hprev));
  } else {
    const F q = la * rs;
    out.dgx = gs * F(x) * (is * ic);
    out.big_g = F(g) * (a * F(hprev) * la - is * F(x) * a * a * q);
  }
  out.dga = out.big_g * rc;
  return out;
}

TEST(RgLruLeanGate, BackwardElementMatchesTheO3Form) {
  std::mt19937 rng(9);
  std::uniform_real_distribution<double> ulam(-12.0, 12.0), uz(-30.0, 30.0), uv(-3.0, 3.0);
  std::normal_distribution<double> nz(0.0, 3.0);
  for (int n = 0; n < 200000; ++n) {
    const float sp = static_cast<float>(-kGatedC * GatedSoftplus(ulam(rng)));
    const float ga = float(n % 2 == 0 ? nz(rng) : uz(rng)), gx = float(nz(rng));
    const float x = float(uv(rng)), hprev = float(uv(rng)), g = float(uv(rng));
    const Grads lean = BackwardElement<float>(sp, ga, gx, x, hprev, g, true);
    const Grads o3 = BackwardElement<float>(sp, ga, gx, x, hprev, g, false);
    const Grads ref = BackwardElement<double>(sp, ga, gx, x, hprev, g, false);
    // G's scale: its two terms, |g a la| (|hprev| + a |v| / s).
    const double la = 0.5 * sp * (1.0 + std::tanh(0.5 * double(ga)));
    const double a = std::exp(la), s = std::sqrt(std::max(-std::expm1(2.0 * la), 1e-30));
    const double v = std::fabs(x) / (1.0 + std::exp(-double(gx)));
    // (+1e-18: where a is an fp32 denormal, e^-80 and below, it has few
    // bits; the GPU flushes it to 0.)
    const double scale = std::fabs(g * a * la) * (std::fabs(hprev) + a * v / s) + 1e-18;
    for (const Grads* got : {&lean, &o3}) {
      ASSERT_TRUE(std::isfinite(got->big_g) && std::isfinite(got->dgx)) << sp << " " << ga;
      EXPECT_NEAR(got->big_g, ref.big_g, 2e-6 * scale) << sp << " " << ga << " " << gx;
      EXPECT_NEAR(got->dga, ref.dga, 2e-6 * scale) << sp << " " << ga << " " << gx;
      EXPECT_NEAR(got->dgx, ref.dgx, 1e-6 * std::fabs(ref.dgx) + 1e-30) << sp << " " << ga << " " << gx;
      EXPECT_NEAR(got->dx, ref.dx, 1e-6 * std::fabs(ref.dx) + 1e-30) << sp << " " << ga << " " << gx;
    }
  }
}

// ---- the forward without the per-row range test -------------------------------------

// The held forward of one (b, channel) at tile level, in float64: each
// segment composes its rows' (a, b) (rows past L taken as staged: `junk`
// inputs), the segments combine into exclusive prefixes, the tile's carry-in
// is the previous tile's inclusive state (what the look-back returns), and
// the rescan stores rows < L and h_final at L - 1.
void HeldForward(const Shape& s, const std::vector<double>& x, const std::vector<double>& ga,
                 const std::vector<double>& gx, const std::vector<double>& lambda, const std::vector<double>& h0,
                 int tile, int segs, double junk, std::vector<double>& h, std::vector<double>& h_final) {
  const int steps = tile / segs;
  const int64_t tiles = (s.length + tile - 1) / tile;
  h.assign(static_cast<size_t>(s.elements()), std::nan(""));
  h_final.assign(static_cast<size_t>(s.batch * s.width), std::nan(""));
  std::mt19937 rng(77);
  std::uniform_real_distribution<double> uj(-junk, junk);
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t c = 0; c < s.width; ++c) {
      const double sp = -kGatedC * GatedSoftplus(lambda[static_cast<size_t>(c)]);
      double carry = h0.empty() ? 0.0 : h0[static_cast<size_t>(b * s.width + c)];
      for (int64_t k = 0; k < tiles; ++k) {
        std::vector<double> av(static_cast<size_t>(tile)), bv(static_cast<size_t>(tile));
        for (int r = 0; r < tile; ++r) {
          const int64_t t = k * tile + r;
          double vga = 0.0, vgx = 0.0, vx = 0.0;  // staged zeros past L ...
          if (t < s.length) {
            const size_t e = static_cast<size_t>((b * s.length + t) * s.width + c);
            vga = ga[e];
            vgx = gx[e];
            vx = x[e];
          } else if (junk > 0.0) {  // ... or anything finite
            vga = uj(rng);
            vgx = uj(rng);
            vx = uj(rng);
          }
          const double la = sp * GatedSigmoid(vga);
          av[static_cast<size_t>(r)] = std::exp(la);
          bv[static_cast<size_t>(r)] = GatedInputScale(la) * GatedSigmoid(vgx) * vx;
        }
        std::vector<double> segA(static_cast<size_t>(segs), 1.0), segH(static_cast<size_t>(segs), 0.0);
        for (int g = 0; g < segs; ++g) {
          for (int i = 0; i < steps; ++i) {
            const size_t r = static_cast<size_t>(g * steps + i);
            segA[static_cast<size_t>(g)] *= av[r];
            segH[static_cast<size_t>(g)] = av[r] * segH[static_cast<size_t>(g)] + bv[r];
          }
        }
        double exA = 1.0, exH = 0.0;  // exclusive prefix over segments
        for (int g = 0; g < segs; ++g) {
          double state = exA * carry + exH;
          for (int i = 0; i < steps; ++i) {
            const int r = g * steps + i;
            const int64_t t = k * tile + r;
            state = av[static_cast<size_t>(r)] * state + bv[static_cast<size_t>(r)];
            if (t < s.length) h[static_cast<size_t>((b * s.length + t) * s.width + c)] = state;
            if (t == s.length - 1) h_final[static_cast<size_t>(b * s.width + c)] = state;
          }
          exH = segA[static_cast<size_t>(g)] * exH + segH[static_cast<size_t>(g)];
          exA *= segA[static_cast<size_t>(g)];
        }
        carry = exA * carry + exH;  // the tile's inclusive state
      }
    }
  }
}

TEST(RgLruHeldForward, RowsPastLAreNeverRead) {
  struct Run {
    Shape shape;
    int tile, segs;
  };
  for (const Run& r : {Run{{2, 37, 5}, 16, 4}, Run{{1, 1, 3}, 64, 8}, Run{{3, 130, 4}, 128, 16}, Run{{1, 65, 2}, 64, 8},
                       Run{{2, 64, 3}, 64, 8}}) {
    const Shape& s = r.shape;
    std::mt19937 rng(static_cast<uint32_t>(s.length));
    std::normal_distribution<double> n(0.0, 1.5);
    std::uniform_real_distribution<double> u(-4.0, 4.0);
    std::vector<double> x, ga, gx, lambda, h0;
    for (int64_t i = 0; i < s.elements(); ++i) {
      x.push_back(n(rng));
      ga.push_back(n(rng));
      gx.push_back(n(rng));
    }
    for (int64_t c = 0; c < s.width; ++c) lambda.push_back(u(rng));
    for (int64_t i = 0; i < s.batch * s.width; ++i) h0.push_back(n(rng));
    const StatusOr<RgLruForwardRef> ref = RgLruForward(s, {x, ga, gx, lambda, h0});
    ASSERT_TRUE(ref.ok());
    for (double junk : {0.0, 50.0}) {
      std::vector<double> h, hf;
      HeldForward(s, x, ga, gx, lambda, h0, r.tile, r.segs, junk, h, hf);
      for (size_t i = 0; i < h.size(); ++i) ASSERT_NEAR(h[i], ref->h[i], 1e-12 * (1.0 + std::fabs(ref->h[i]))) << i;
      for (size_t i = 0; i < hf.size(); ++i) {
        ASSERT_NEAR(hf[i], ref->h_final[i], 1e-12 * (1.0 + std::fabs(ref->h_final[i]))) << i;
      }
    }
  }
}

}  // namespace
}  // namespace scantune
