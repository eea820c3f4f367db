// The float64 CPU reference of linear_scan, which every candidate must match.
// It runs on inputs already rounded to the problem's dtype, so the only
// difference left between a kernel and the reference is the kernel's own
// arithmetic and output rounding. The scans run on all host threads, split
// by (batch, channel) ranges (each channel's scan is independent); results
// are bit-identical for any thread count. Pure functions; thread-safe.
//
// Layout is token-major (B, L, W): element (b, t, c) at (b*L + t)*W + c;
// states (h0, h_final, dh0) are (B, W).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/problem.h"

namespace scantune {

struct LinearScanForwardRef {
  std::vector<double> h;        // (B, L, W)
  std::vector<double> h_final;  // (B, W)
};

struct LinearScanBackwardRef {
  std::vector<double> da;   // (B, L, W)
  std::vector<double> dx;   // (B, L, W)
  std::vector<double> dh0;  // (B, W); d/dh0, filled whether or not the problem has h0
};

// h_t = a_t * h_{t-1} + x_t, h_{-1} = h0 (empty span: zero).
LinearScanForwardRef LinearScanForward(const Shape& shape, std::span<const double> a, std::span<const double> x,
                                       std::span<const double> h0);

// The part of the backward that does not read h: the reverse scan
// g_t = dh_t + a_{t+1} g_{t+1} (which is dx) and dh0 = a_0 * g_0. A job
// computes it once; each candidate's da reference is then g_t * h_{t-1} with
// the h that candidate's backward read (LinearScanPreviousH).
struct LinearScanReverseRef {
  std::vector<double> g;    // (B, L, W); equals dx
  std::vector<double> dh0;  // (B, W)
};
LinearScanReverseRef LinearScanReverse(const Shape& shape, std::span<const double> a, std::span<const double> dh);

// h_{t-1} at (b, t, c) as da_t reads it: h[(b, t-1, c)], or at t = 0 the
// initial state h0[(b, c)] (empty span: zero).
inline double LinearScanPreviousH(const Shape& shape, std::span<const double> h, std::span<const double> h0,
                                  int64_t b, int64_t t, int64_t c) {
  const int64_t W = shape.width;
  if (t > 0) return h[static_cast<size_t>((b * shape.length + t - 1) * W + c)];
  return h0.empty() ? 0.0 : h0[static_cast<size_t>(b * W + c)];
}

// g_t = dh_t + a_{t+1} g_{t+1}; dx_t = g_t; da_t = g_t * h_{t-1}; dh0 = a_0 * g_0.
// `h` is the forward output the backward reads (h_{t-1} for da), h_{-1} = h0
// (empty span: zero). Passing the h a kernel's forward actually stored makes
// the backward check independent of forward rounding. LinearScanReverse
// plus one multiply per element: bit-identical to computing the two apart.
LinearScanBackwardRef LinearScanBackward(const Shape& shape, std::span<const double> a, std::span<const double> h,
                                         std::span<const double> h0, std::span<const double> dh);

}  // namespace scantune
