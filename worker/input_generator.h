// InputGenerator: the random inputs of one problem, reproducible from the
// job's seed and already rounded to the problem's dtype (the reference runs
// on exactly the values the kernel reads). The generator is splitmix64 with
// Box-Muller, written out here so that a seed gives the same inputs on every
// platform and standard library. Every element's draws are computed from
// its index (splitmix64 is counter-based), so generation runs on all host
// threads and the values never depend on the thread count. Pure; thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "common/problem.h"

namespace scantune {

struct LinearScanInputs {
  std::vector<double> a;   // (B, L, W): every 4th channel in [0.99, 1.0), the rest in [0.5, 0.99): stable, never 0
  std::vector<double> x;   // (B, L, W): standard normal
  std::vector<double> h0;  // (B, W): standard normal, fp32; empty without h0
  std::vector<double> dh;  // (B, L, W): standard normal (the upstream gradient)
};

LinearScanInputs GenerateInputs(const Problem& problem, uint64_t seed);

// The counter-based generator every operator's inputs come from (worker/op_io_*.cc).
// splitmix64's output function: the k-th draw (k = 1, 2, ...) of stream `seed`
// is SplitMix(seed + k * golden ratio), so any draw is computed from its
// index, every thread fills its own range, and the values are the ones a
// sequential SplitMix64 stream gives, whatever the thread count.
uint64_t SplitMix(uint64_t z);
// Draw `draw` (>= 1) of stream `seed`, uniform in (0, 1): never exactly 0.
double UniformAt(uint64_t seed, uint64_t draw);
// Element i of a stream of standard normals: Box-Muller on draws 2i+1 and
// 2i+2, one value per pair.
double NormalAt(uint64_t seed, uint64_t i);

}  // namespace scantune
