// ParallelFor: the worker's host-side passes (input generation, the float64
// reference, dtype conversions, output comparisons) split over the host's
// cores. At the shapes that matter (tens of millions of elements) one core
// needs seconds per candidate for them while the GPU needs milliseconds.
//
// [0, n) is cut into contiguous chunks, at most HostThreads() of them and
// none smaller than `grain` (small inputs run inline on the caller's thread:
// a thread start costs more than a short pass). Callers keep results
// independent of the chunking: each element is computed the same way
// whatever chunk holds it, and per-chunk partial results are merged with
// order-independent rules (max, smallest index), so the thread count never
// changes a verdict, a rel_err or an input value.
//
// Thread safety: ParallelFor may be called from any thread; `fn` runs
// concurrently on disjoint chunks and must not touch shared state except
// through its own chunk's slots.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

#include "common/problem.h"

namespace scantune {

// std::thread::hardware_concurrency(), or the CPUs this process may run on
// when fewer (at least 1), unless overridden.
int HostThreads();

// Overrides HostThreads() while alive (tests check that results do not
// depend on the thread count; benchmarks compare counts). Not nestable
// across threads: set it from the test's main thread only.
class ScopedHostThreads {
 public:
  explicit ScopedHostThreads(int threads);
  ~ScopedHostThreads();
  ScopedHostThreads(const ScopedHostThreads&) = delete;
  ScopedHostThreads& operator=(const ScopedHostThreads&) = delete;

 private:
  int previous_;
};

// How many chunks ParallelFor(n, grain, ...) uses: size per-chunk result
// slots with it.
inline size_t ParallelChunks(size_t n, size_t grain) {
  if (n == 0) return 0;
  const size_t by_grain = std::max<size_t>(1, n / std::max<size_t>(grain, 1));
  return std::min(static_cast<size_t>(HostThreads()), by_grain);
}

// Calls fn(chunk, begin, end) for each chunk of [0, n); returns when all are
// done. Chunk k is [n*k/K, n*(k+1)/K) for K = ParallelChunks(n, grain).
template <typename Fn>
void ParallelFor(size_t n, size_t grain, Fn&& fn) {
  const size_t chunks = ParallelChunks(n, grain);
  if (chunks == 0) return;
  auto bound = [&](size_t k) { return static_cast<size_t>(static_cast<unsigned __int128>(n) * k / chunks); };
  if (chunks == 1) {
    fn(size_t{0}, size_t{0}, n);
    return;
  }
  std::vector<std::jthread> threads;
  threads.reserve(chunks - 1);
  for (size_t k = 1; k < chunks; ++k) threads.emplace_back([&fn, k, b = bound(k), e = bound(k + 1)] { fn(k, b, e); });
  fn(size_t{0}, size_t{0}, bound(1));
  // jthread joins on destruction.
}

// Per-channel scans are independent, so they split over (batch, channel)
// pairs: a chunk is a contiguous run of the flattened index b * W + c, walked
// batch by batch, and fn(b, c0, c1) is called for each batch's slice [c0, c1)
// of it. Per element the arithmetic is the same whatever chunk holds it, so
// results are bit-identical for any thread count. The grain keeps a chunk's
// slice of a row at least a few cache lines wide.
inline constexpr size_t kChannelGrain = 32;

template <typename Fn>
void ForEachChannelRange(const Shape& shape, Fn&& fn) {
  const int64_t W = shape.width;
  ParallelFor(static_cast<size_t>(shape.batch * W), kChannelGrain, [&](size_t, size_t begin, size_t end) {
    for (int64_t pair = static_cast<int64_t>(begin); pair < static_cast<int64_t>(end);) {
      const int64_t b = pair / W, c0 = pair % W;
      const int64_t c1 = std::min<int64_t>(W, c0 + (static_cast<int64_t>(end) - pair));
      fn(b, c0, c1);
      pair += c1 - c0;
    }
  });
}

}  // namespace scantune
