#include "worker/input_generator.h"

#include <cmath>
#include <numbers>

#include "worker/dtype_convert.h"
#include "worker/parallel.h"

namespace scantune {
namespace {

// Below this many elements per thread a thread start costs more than it saves.
constexpr size_t kGrain = 1 << 14;

}  // namespace

uint64_t SplitMix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double UniformAt(uint64_t seed, uint64_t draw) {
  constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ull;
  return (static_cast<double>(SplitMix(seed + draw * kGolden) >> 11) + 0.5) * 0x1.0p-53;
}

double NormalAt(uint64_t seed, uint64_t i) {
  const double u1 = UniformAt(seed, 2 * i + 1), u2 = UniformAt(seed, 2 * i + 2);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

LinearScanInputs GenerateInputs(const Problem& problem, uint64_t seed) {
  const size_t n = static_cast<size_t>(problem.shape.elements());
  const size_t states = static_cast<size_t>(problem.shape.batch * problem.shape.width);
  const size_t width = static_cast<size_t>(problem.shape.width);
  // One stream per tensor, so adding a tensor never changes the others.
  const uint64_t sa = seed ^ 0x61ull, sx = seed ^ 0x78ull, sh = seed ^ 0x68ull, sd = seed ^ 0x64ull;
  LinearScanInputs in;
  in.a.resize(n);
  in.x.resize(n);
  in.dh.resize(n);
  ParallelFor(n, kGrain, [&](size_t, size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
      // Every 4th channel decays slowly (a near 1): it carries information over
      // hundreds of steps, across chunk and tile boundaries, where carry bugs
      // show. The others forget within a few steps, which keeps magnitudes
      // (and da = g * h) far from fp16's range limit at any length.
      const double u = UniformAt(sa, i + 1);
      const double a = (i % width) % 4 == 0 ? 0.99 + 0.0099 * u : 0.5 + 0.49 * u;
      in.a[i] = RoundToDType(a, problem.dtype);
      in.x[i] = RoundToDType(NormalAt(sx, i), problem.dtype);
      in.dh[i] = RoundToDType(NormalAt(sd, i), problem.dtype);
    }
  });
  if (problem.has_h0) {
    in.h0.resize(states);
    for (size_t i = 0; i < states; ++i) in.h0[i] = static_cast<float>(NormalAt(sh, i));  // h0 is fp32
  }
  return in;
}

}  // namespace scantune
