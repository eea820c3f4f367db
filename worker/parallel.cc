#include "worker/parallel.h"

#include <sched.h>

#include <atomic>

namespace scantune {
namespace {

// 0: no override.
std::atomic<int> g_thread_override{0};

}  // namespace

int HostThreads() {
  const int forced = g_thread_override.load(std::memory_order_relaxed);
  if (forced > 0) return forced;
  // Read once: neither answer changes while the worker runs.
  static const int hardware = [] {
    int n = static_cast<int>(std::thread::hardware_concurrency());
    // hardware_concurrency counts the machine's online CPUs; a container
    // pinned to fewer (cpuset) would be oversubscribed, so take the
    // affinity mask's count when it is smaller.
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) {
      n = n > 0 ? std::min(n, CPU_COUNT(&set)) : CPU_COUNT(&set);
    }
    return std::max(1, n);
  }();
  return hardware;
}

ScopedHostThreads::ScopedHostThreads(int threads)
    : previous_(g_thread_override.exchange(std::max(threads, 1), std::memory_order_relaxed)) {}

ScopedHostThreads::~ScopedHostThreads() { g_thread_override.store(previous_, std::memory_order_relaxed); }

}  // namespace scantune
