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
#include <thread>
#include <vector>

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

}  // namespace scantune
