#include "worker/input_generator.h"

#include <cmath>
#include <numbers>

#include "worker/dtype_convert.h"

namespace scantune {
namespace {

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in (0, 1): never exactly 0, so log() below is finite.
  double Uniform() { return (static_cast<double>(Next() >> 11) + 0.5) * 0x1.0p-53; }
  double Normal() {
    // Box-Muller, one value per call: simple and deterministic.
    const double u1 = Uniform(), u2 = Uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  }

 private:
  uint64_t state_;
};

}  // namespace

LinearScanInputs GenerateInputs(const Problem& problem, uint64_t seed) {
  const size_t n = static_cast<size_t>(problem.shape.elements());
  const size_t states = static_cast<size_t>(problem.shape.batch * problem.shape.width);
  const size_t width = static_cast<size_t>(problem.shape.width);
  // One stream per tensor, so adding a tensor never changes the others.
  SplitMix64 ra(seed ^ 0x61ull), rx(seed ^ 0x78ull), rh(seed ^ 0x68ull), rd(seed ^ 0x64ull);
  LinearScanInputs in;
  in.a.resize(n);
  in.x.resize(n);
  in.dh.resize(n);
  for (size_t i = 0; i < n; ++i) {
    // Every 4th channel decays slowly (a near 1): it carries information over
    // hundreds of steps, across chunk and tile boundaries, where carry bugs
    // show. The others forget within a few steps, which keeps magnitudes
    // (and da = g * h) far from fp16's range limit at any length.
    const double u = ra.Uniform();
    const double a = (i % width) % 4 == 0 ? 0.99 + 0.0099 * u : 0.5 + 0.49 * u;
    in.a[i] = RoundToDType(a, problem.dtype);
    in.x[i] = RoundToDType(rx.Normal(), problem.dtype);
    in.dh[i] = RoundToDType(rd.Normal(), problem.dtype);
  }
  if (problem.has_h0) {
    in.h0.resize(states);
    for (size_t i = 0; i < states; ++i) in.h0[i] = static_cast<float>(rh.Normal());  // h0 is fp32
  }
  return in;
}

}  // namespace scantune
