#include "worker/reference.h"

#include <algorithm>
#include <cstdint>

#include "worker/parallel.h"

namespace scantune {

LinearScanForwardRef LinearScanForward(const Shape& shape, std::span<const double> a, std::span<const double> x,
                                       std::span<const double> h0) {
  const int64_t L = shape.length, W = shape.width;
  LinearScanForwardRef out;
  out.h.resize(static_cast<size_t>(shape.batch * L * W));
  out.h_final.resize(static_cast<size_t>(shape.batch * W));
  ForEachChannelRange(shape, [&](int64_t b, int64_t c0, int64_t c1) {
    std::vector<double> carry(static_cast<size_t>(c1 - c0));
    for (int64_t c = c0; c < c1; ++c) carry[c - c0] = h0.empty() ? 0.0 : h0[b * W + c];
    // Walking time in the outer loop keeps each step's channels contiguous.
    for (int64_t t = 0; t < L; ++t) {
      const int64_t row = (b * L + t) * W;
      for (int64_t c = c0; c < c1; ++c) {
        double& h = carry[c - c0];
        h = a[row + c] * h + x[row + c];
        out.h[row + c] = h;
      }
    }
    for (int64_t c = c0; c < c1; ++c) out.h_final[b * W + c] = carry[c - c0];
  });
  return out;
}

LinearScanReverseRef LinearScanReverse(const Shape& shape, std::span<const double> a, std::span<const double> dh) {
  const int64_t L = shape.length, W = shape.width;
  LinearScanReverseRef out;
  out.g.resize(static_cast<size_t>(shape.batch * L * W));
  out.dh0.resize(static_cast<size_t>(shape.batch * W));
  ForEachChannelRange(shape, [&](int64_t b, int64_t c0, int64_t c1) {
    std::vector<double> g(static_cast<size_t>(c1 - c0), 0.0);
    for (int64_t t = L - 1; t >= 0; --t) {
      const int64_t row = (b * L + t) * W;
      const int64_t next = row + W;  // (b, t+1, c)
      for (int64_t c = c0; c < c1; ++c) {
        double& gc = g[c - c0];
        const double carried = t + 1 < L ? a[next + c] * gc : 0.0;
        gc = dh[row + c] + carried;
        out.g[row + c] = gc;
      }
    }
    for (int64_t c = c0; c < c1; ++c) out.dh0[b * W + c] = a[b * L * W + c] * g[c - c0];
  });
  return out;
}

LinearScanBackwardRef LinearScanBackward(const Shape& shape, std::span<const double> a, std::span<const double> h,
                                         std::span<const double> h0, std::span<const double> dh) {
  const int64_t L = shape.length, W = shape.width;
  LinearScanReverseRef reverse = LinearScanReverse(shape, a, dh);
  LinearScanBackwardRef out;
  out.da.resize(reverse.g.size());
  ForEachChannelRange(shape, [&](int64_t b, int64_t c0, int64_t c1) {
    for (int64_t t = 0; t < L; ++t) {
      const int64_t row = (b * L + t) * W;
      for (int64_t c = c0; c < c1; ++c) {
        out.da[row + c] = reverse.g[row + c] * LinearScanPreviousH(shape, h, h0, b, t, c);
      }
    }
  });
  out.dx = std::move(reverse.g);
  out.dh0 = std::move(reverse.dh0);
  return out;
}

}  // namespace scantune
