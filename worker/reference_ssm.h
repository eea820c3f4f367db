// The float64 CPU reference of selective_scan (Mamba S6; DESIGN.md,
// "Operators"), which its GPU kernels must match. Same conventions as
// reference.h: it runs on inputs already rounded to the problem's dtype, all
// math in double, work split over host threads in a fixed partition with
// every sum taken in a fixed order, so results are bit-identical for any
// thread count. Pure functions; thread-safe.
//
// Layout (token-major): u, delta, z, y and their gradients (B, L, D), element
// (b, t, d) at (b*L + t)*D + d; Bm, Cm, dBm, dCm (B, L, N) at (b*L + t)*N + n;
// A, dA (D, N); Dv, delta_bias and their gradients (D); h0, h_final, dh0
// (B, D, N) at (b*D + d)*N + n.
//
//   delta'_t = softplus?(delta_t + bias);   dA_t = exp(delta'_t A[d, n])
//   h_t[d, n] = dA_t h_{t-1}[d, n] + delta'_t Bm_t[n] u_t[d],   h_{-1} = h0 (or 0)
//   y_t[d] = (sum_n Cm_t[n] h_t[d, n] + Dv[d] u_t[d]) * (silu(z_t[d]) with the gate)
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/problem.h"

namespace scantune {

struct SsmRefInputs {
  Shape shape;                          // (B, L, D)
  int state = 16;                       // N
  bool delta_softplus = false;
  std::span<const double> u, delta;     // (B, L, D)
  std::span<const double> A;            // (D, N)
  std::span<const double> Bm, Cm;       // (B, L, N)
  std::span<const double> Dv;           // (D)
  std::span<const double> delta_bias;   // (D) or empty: none
  std::span<const double> z;            // (B, L, D) or empty: no gate
  std::span<const double> h0;           // (B, D, N) or empty: zero
};

struct SsmForwardRef {
  std::vector<double> y;        // (B, L, D)
  std::vector<double> h_final;  // (B, D, N)
};

struct SsmBackwardRef {
  std::vector<double> du, ddelta;  // (B, L, D); ddelta is d/d(delta) before bias and softplus
  std::vector<double> dA;          // (D, N), summed over batch and time
  std::vector<double> dBm, dCm;    // (B, L, N), summed over channels
  std::vector<double> dDv;         // (D)
  std::vector<double> ddelta_bias; // (D); empty without delta_bias
  std::vector<double> dz;          // (B, L, D); empty without the gate
  std::vector<double> dh0;         // (B, D, N); filled whether or not there is an h0
};

// log(1 + exp(x)) without overflow, and its derivative.
double SsmSoftplus(double x);
double SsmSigmoid(double x);

SsmForwardRef SelectiveScanForward(const SsmRefInputs& in);

// Gradients of sum(y * dy) (no gradient flows into h_final).
SsmBackwardRef SelectiveScanBackward(const SsmRefInputs& in, std::span<const double> dy);

}  // namespace scantune
