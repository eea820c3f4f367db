#include "worker/reference.h"

#include <cstdint>

namespace scantune {

LinearScanForwardRef LinearScanForward(const Shape& shape, std::span<const double> a, std::span<const double> x,
                                       std::span<const double> h0) {
  const int64_t B = shape.batch, L = shape.length, W = shape.width;
  LinearScanForwardRef out;
  out.h.resize(static_cast<size_t>(B * L * W));
  out.h_final.resize(static_cast<size_t>(B * W));
  std::vector<double> carry(static_cast<size_t>(W));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t c = 0; c < W; ++c) carry[c] = h0.empty() ? 0.0 : h0[b * W + c];
    // Walking time in the outer loop keeps each step's W channels contiguous.
    for (int64_t t = 0; t < L; ++t) {
      const int64_t row = (b * L + t) * W;
      for (int64_t c = 0; c < W; ++c) {
        carry[c] = a[row + c] * carry[c] + x[row + c];
        out.h[row + c] = carry[c];
      }
    }
    for (int64_t c = 0; c < W; ++c) out.h_final[b * W + c] = carry[c];
  }
  return out;
}

LinearScanBackwardRef LinearScanBackward(const Shape& shape, std::span<const double> a, std::span<const double> h,
                                         std::span<const double> h0, std::span<const double> dh) {
  const int64_t B = shape.batch, L = shape.length, W = shape.width;
  LinearScanBackwardRef out;
  out.da.resize(static_cast<size_t>(B * L * W));
  out.dx.resize(static_cast<size_t>(B * L * W));
  out.dh0.resize(static_cast<size_t>(B * W));
  std::vector<double> g(static_cast<size_t>(W));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t c = 0; c < W; ++c) g[c] = 0.0;
    for (int64_t t = L - 1; t >= 0; --t) {
      const int64_t row = (b * L + t) * W;
      const int64_t next = row + W;  // (b, t+1, c)
      for (int64_t c = 0; c < W; ++c) {
        const double carried = t + 1 < L ? a[next + c] * g[c] : 0.0;
        g[c] = dh[row + c] + carried;
        const double h_prev = t > 0 ? h[row - W + c] : (h0.empty() ? 0.0 : h0[b * W + c]);
        out.dx[row + c] = g[c];
        out.da[row + c] = g[c] * h_prev;
      }
    }
    for (int64_t c = 0; c < W; ++c) out.dh0[b * W + c] = a[b * L * W + c] * g[c];
  }
  return out;
}

}  // namespace scantune
