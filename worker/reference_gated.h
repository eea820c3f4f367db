// The float64 CPU references of the gated scans rglru and samu (DESIGN.md,
// "Operators"), which their GPU kernels must match, and the floor byte counts
// those kernels are measured against. Same conventions as reference.h: the
// references run on inputs already rounded to the problem's dtype; all math
// is in double; the scans split over (batch, channel) ranges and per-token
// reductions over tokens, with every sum taken in a fixed order, so results
// are bit-identical for any thread count. Pure functions; thread-safe.
//
// Layout is token-major (B, L, W): element (b, t, c) at (b*L + t)*W + c;
// states (h0, h_final, d_final, dh0) are (B, W); per-channel parameters and
// their gradients are (W). An empty h0 means zero; an empty d_final means no
// gradient flows into the final state. c = kGatedC = 8 throughout.
//
// Numerics (both operators share the gate a = exp(la), la = -c*softplus(p)*r
// with r in (0, 1)):
// - softplus and sigmoid are evaluated in forms that neither overflow nor
//   lose the small tail (GatedSoftplus, GatedSigmoid), and 1 - r is computed
//   as sigmoid(-z), not by subtraction.
// - sqrt(1 - a^2) is sqrt(-expm1(2*la)): near a = 1 (la -> 0-) the naive
//   1 - a*a cancels to 0 (a == 1.0 exactly once |la| < 1.1e-16) while the
//   true value is about sqrt(-2*la).
// - d sqrt(1 - a^2) / d la = -a^2 / sqrt(1 - a^2) is unbounded as a -> 1, but
//   every parameter reaches la through a factor la itself (dla/dz = la*(1-r)
//   for a gate pre-activation z; dla/dp = la*sigmoid(p)/softplus(p) for the
//   decay parameter p), so the backward carries dla * la, in which
//   la / sqrt(1 - a^2) -> -sqrt(-la/2) -> 0 is bounded (taken as 0 when la
//   underflows to 0). No inf * 0 appears for any finite input.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "common/problem.h"
#include "common/status.h"

namespace scantune {

inline constexpr double kGatedC = 8.0;

// log(1 + exp(z)) without overflow for large z and without rounding the tail
// exp(z) of very negative z to 0 early.
inline double GatedSoftplus(double z) { return z > 0 ? z + std::log1p(std::exp(-z)) : std::log1p(std::exp(z)); }

// 1 / (1 + exp(-z)); exp never overflows. 1 - sigmoid(z) is GatedSigmoid(-z).
inline double GatedSigmoid(double z) {
  if (z >= 0) return 1.0 / (1.0 + std::exp(-z));
  const double e = std::exp(z);
  return e / (1.0 + e);
}

// sqrt(1 - exp(2*la)) for la <= 0, stable near la = 0 (see above).
inline double GatedInputScale(double la) { return std::sqrt(-std::expm1(2.0 * la)); }

// ---------------------------------------------------------------------------
// rglru: r = sigmoid(ga), i = sigmoid(gx), log a_t = -c*softplus(Lambda)*r_t,
// h_t = a_t h_{t-1} + sqrt(1 - a_t^2) (i_t x_t).

struct RgLruInputs {
  std::span<const double> x;       // (B, L, W)
  std::span<const double> ga;      // (B, L, W) recurrence-gate pre-activation
  std::span<const double> gx;      // (B, L, W) input-gate pre-activation
  std::span<const double> lambda;  // (W) Lambda
  std::span<const double> h0;      // (B, W) or empty (zero)
};

struct RgLruForwardRef {
  std::vector<double> h;        // (B, L, W)
  std::vector<double> h_final;  // (B, W)
};

struct RgLruBackwardRef {
  std::vector<double> dx;       // (B, L, W)
  std::vector<double> dga;      // (B, L, W)
  std::vector<double> dgx;      // (B, L, W)
  std::vector<double> dlambda;  // (W), summed over batch and time
  std::vector<double> dh0;      // (B, W); filled whether or not there is an h0
};

// InvalidArgument when a dimension is < 1 or a span's size does not match
// the shape (a caller bug that would otherwise read out of bounds).
StatusOr<RgLruForwardRef> RgLruForward(const Shape& shape, const RgLruInputs& in);

// Gradients of a loss whose gradient w.r.t. h is dh (B, L, W) and w.r.t.
// h_final is d_final (B, W; empty: none; added to dh at t = L-1). The reverse
// scan g_t = dh_t + a_{t+1} g_{t+1} gives dh0 = a_0 g_0 and
//   dx  = g s i,   dgx = g s x i (1-i),
//   dga = G (1-r), dLambda = sum_{b,t} G sigmoid(Lambda)/softplus(Lambda),
// with s = sqrt(1-a^2), G = g (a h_{t-1} la - i x a^2 la/s) = (dL/dla) la.
// `h` is the forward h the backward reads for h_{t-1} (h_{-1} = h0): pass
// the h a kernel's forward stored to make the check independent of forward
// rounding, or an empty span to recompute it here in double (what a
// recompute-strategy kernel does on chip).
StatusOr<RgLruBackwardRef> RgLruBackward(const Shape& shape, const RgLruInputs& in, std::span<const double> h,
                                         std::span<const double> dh, std::span<const double> d_final);

// ---------------------------------------------------------------------------
// samu: m_t = mean_c x_{t,c}; r_t = sigmoid(w_r m_t + b_r), i_t = sigmoid(w_i m_t + b_i);
// a_{t,c} = exp(-c*softplus(lambda_c)*r_t);
// h_{t,c} = a_{t,c} h_{t-1,c} + sqrt(1 - a_{t,c}^2) i_t beta_c x_{t,c}; y = gamma_c h.

struct SamuController {
  double w_r = 0, b_r = 0, w_i = 0, b_i = 0;
};

struct SamuInputs {
  std::span<const double> x;       // (B, L, W)
  std::span<const double> lambda;  // (W)
  std::span<const double> beta;    // (W)
  std::span<const double> gamma;   // (W)
  SamuController ctrl;
  std::span<const double> h0;  // (B, W) or empty (zero)
};

struct SamuForwardRef {
  std::vector<double> y;        // (B, L, W)
  std::vector<double> h;        // (B, L, W): the state, which a store-h backward reads (not an output of fwd)
  std::vector<double> h_final;  // (B, W)
  std::vector<double> control;  // (B, L, 2): (r_t, i_t) per token, as the benchmarks record them
};

struct SamuBackwardRef {
  std::vector<double> dx;      // (B, L, W), including the path through m_t
  std::vector<double> dlambda; // (W)
  std::vector<double> dbeta;   // (W)
  std::vector<double> dgamma;  // (W)
  SamuController dctrl;        // dw_r, db_r, dw_i, db_i
  std::vector<double> dh0;     // (B, W); filled whether or not there is an h0
};

// InvalidArgument on a dimension < 1 or a size mismatch.
StatusOr<SamuForwardRef> SamuForward(const Shape& shape, const SamuInputs& in);

// Gradients for dy (B, L, W) and d_final (B, W; empty: none). With
// g_t = gamma dy_t + [t = L-1] d_final + a_{t+1} g_{t+1} per channel:
//   dgamma = sum dy h, dbeta = sum g s i x, dlambda = sum G sigmoid(lambda)/softplus(lambda),
//   dz_r(t) = (1-r_t) sum_c G,  dz_i(t) = i_t (1-i_t) sum_c g s beta x,
//   dm_t = w_r dz_r + w_i dz_i,  dx = g s i beta + dm_t / W,
//   dw_r = sum_t dz_r m_t, db_r = sum_t dz_r (same for i), dh0 = a_0 g_0,
// with G = g (a h_{t-1} la - i beta x a^2 la/s) as for rglru. The m_t path
// couples all channels of a token: dx needs a per-token reduction over W.
// `h` as for RgLruBackward: the stored state (B, L, W) or empty (recompute).
StatusOr<SamuBackwardRef> SamuBackward(const Shape& shape, const SamuInputs& in, std::span<const double> h,
                                       std::span<const double> dy, std::span<const double> d_final);

// ---------------------------------------------------------------------------
// Floor bytes: the fewest bytes a kernel must move through device memory,
// every needed tensor read once and every output written once, as
// FloorBytes (common/problem.h) counts linear_scan. e is the problem's
// element size (4 fp32, 2 bf16/fp16). Counted:
// - (B, L, W) tensors at e bytes per element (the *PerElement constants);
// - states (h0 in, h_final out, d_final in, dh0 out) in fp32, 4 bytes per
//   (b, c), since the carry is always fp32;
// - per-channel parameters (Lambda; lambda, beta, gamma) read at e bytes per
//   channel, their gradients written as fp32 (4 bytes: they are sums over
//   B*L and are accumulated in fp32), the 4 samu controller scalars and
//   their gradients as fp32 (16 bytes each way);
// - samu's per-token control values (r_t, i_t) written by the forward as 2
//   fp32 per token (kSamuControlBytesPerToken).
//
// The backward needs h_{t-1} at every step. Two strategies:
// - kStoreH: the forward's stored h is read back (one more e per element).
//   rglru's h is its forward output, so storing costs nothing extra there;
//   samu's forward outputs only y, so fwd_bwd with kStoreH also writes h in
//   the forward (one more e per element).
// - kRecompute: the backward re-runs the forward scan from its inputs. The
//   floor assumes the recomputed h never leaves the chip and the inputs are
//   read once for both scans (chunked: chunk-boundary states in registers or
//   a small workspace, not counted). A two-pass kernel that reads the inputs
//   twice moves more: rglru +3e (x, ga, gx again), samu +1e (x again).
// Not counted: the samu backward's per-token partial sums (2 values per token
// per channel block), which a kernel whose blocks split W reduces through a
// workspace; a kernel holding whole token rows needs none.
enum class GatedBwdStrategy { kStoreH, kRecompute };

// rglru fwd: reads x, ga, gx; writes h.
inline constexpr int kRgLruFwdTensors = 4;
// rglru bwd, kStoreH: reads x, ga, gx, dh, h; writes dx, dga, dgx.
inline constexpr int kRgLruBwdStoreHTensors = 8;
// rglru bwd, kRecompute: reads x, ga, gx, dh; writes dx, dga, dgx.
inline constexpr int kRgLruBwdRecomputeTensors = 7;
// samu fwd: reads x; writes y (and, in fwd_bwd with kStoreH, also h: 3).
inline constexpr int kSamuFwdTensors = 2;
// samu bwd, kStoreH: reads x, dy, h; writes dx. (r_t, i_t are recomputed
// from x, which is read anyway; reading the stored ones instead adds
// kSamuControlBytesPerToken per token.)
inline constexpr int kSamuBwdStoreHTensors = 4;
// samu bwd, kRecompute: reads x, dy; writes dx.
inline constexpr int kSamuBwdRecomputeTensors = 3;
// samu fwd writes (r_t, i_t) as fp32 per token.
inline constexpr uint64_t kSamuControlBytesPerToken = 2 * sizeof(float);

// (B, L, W) bytes per element at element size e, as in the constants above.
// kFwdBwd is fwd + bwd (+ e for samu's h written by the forward under kStoreH).
constexpr uint64_t RgLruBytesPerElement(Mode mode, uint64_t e, GatedBwdStrategy strategy) {
  const uint64_t fwd = kRgLruFwdTensors * e;
  const uint64_t bwd =
      (strategy == GatedBwdStrategy::kStoreH ? kRgLruBwdStoreHTensors : kRgLruBwdRecomputeTensors) * e;
  return mode == Mode::kFwd ? fwd : mode == Mode::kBwd ? bwd : fwd + bwd;
}
constexpr uint64_t SamuBytesPerElement(Mode mode, uint64_t e, GatedBwdStrategy strategy) {
  const bool store = strategy == GatedBwdStrategy::kStoreH;
  const uint64_t fwd = kSamuFwdTensors * e;
  const uint64_t bwd = (store ? kSamuBwdStoreHTensors : kSamuBwdRecomputeTensors) * e;
  return mode == Mode::kFwd ? fwd : mode == Mode::kBwd ? bwd : fwd + (store ? e : 0) + bwd;
}

// Whole-problem floors: the per-element bytes times B*L*W plus states,
// parameters, parameter gradients and (samu) control values as listed above.
// fwd: h0 in (if has_h0), h_final out. bwd: h0 in and dh0 out (if has_h0, as
// linear_scan counts them), d_final in (if has_d_final), parameters in,
// parameter gradients out. kFwdBwd counts parameters once for each pass.
uint64_t RgLruFloorBytes(const Shape& shape, Mode mode, uint64_t e, GatedBwdStrategy strategy, bool has_h0,
                         bool has_d_final);
uint64_t SamuFloorBytes(const Shape& shape, Mode mode, uint64_t e, GatedBwdStrategy strategy, bool has_h0,
                        bool has_d_final);

}  // namespace scantune
