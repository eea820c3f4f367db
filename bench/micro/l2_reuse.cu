// How much of a buffer that one kernel has just read does the next kernel find in L2?
// Session 38 measured (Nsight Compute, no cache flush between kernels) that every kernel of
// samu's fwd_bwd chain reads its inputs whole from DRAM, even the x (33.5 MB) the control pass
// read just before the held forward, at 4x2048x2048, under a 50 MB L2. This isolates that: kernel
// A streams X (S bytes) in one order; kernel B then streams X again (the same order or the
// reverse), optionally also writing a Y of S bytes as it goes (as the held forward writes y).
// B's time against the same B after a flush (a 256 MB read of another buffer) says how much came
// from L2. Hints: A's loads plain or evict_last, B's plain or evict_first (its last read of X).
// Each line: median of 9 samples, CUDA events around B alone.
// Build and run on the GPU:
//   nvcc -O3 -arch=sm_90 -o /tmp/l2_reuse bench/micro/l2_reuse.cu && /tmp/l2_reuse
#include <algorithm>
#include <cstdio>
#include <vector>
#include <cuda_runtime.h>

#include "cuda_check.h"

// Block i takes the i-th chunk of 16 KB (reverse: the chunk from the end), so blocks are
// dispatched through the buffer in that order, as the scans' tiles are.
constexpr int kThreads = 256;
constexpr int kPerThread = 4;  // uint4 per thread per chunk: 256 x 4 x 16 B = 16 KB
constexpr long long kChunk = kThreads * kPerThread;  // uint4 per chunk

// Loads with an L2 eviction priority (createpolicy + ld.global.L2::cache_hint): 0 none, 1 evict_last, 2 evict_first.
__device__ __forceinline__ uint4 Load(const uint4* p, int policy) {
  if (policy == 0) return __ldg(p);
  unsigned long long pol;
  if (policy == 1) {
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(pol));
  } else {
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
  }
  uint4 v;
  asm volatile("ld.global.nc.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p), "l"(pol));
  return v;
}

__global__ void Stream(const uint4* __restrict__ x, uint4* __restrict__ y, long long chunks, int reverse,
                       unsigned* sink, int policy = 0) {
  const long long c = reverse ? chunks - 1 - blockIdx.x : blockIdx.x;
  const uint4* src = x + c * kChunk + threadIdx.x;
  uint4 v[kPerThread];
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) v[k] = Load(src + k * kThreads, policy);
  unsigned acc = 0;
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) acc ^= v[k].x ^ v[k].y ^ v[k].z ^ v[k].w;
  if (y != nullptr) {
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) y[c * kChunk + threadIdx.x + k * kThreads] = v[k];
  }
  if (acc == 0x12345678u) *sink = acc;  // keeps the loads
}

int main() {
  const long long kFlushBytes = 256ll << 20, kMaxBytes = 64ll << 20;
  uint4 *x, *y, *flush;
  unsigned* sink;
  CHECK(cudaMalloc(&x, kMaxBytes));
  CHECK(cudaMalloc(&y, kMaxBytes));
  CHECK(cudaMalloc(&flush, kFlushBytes));
  CHECK(cudaMalloc(&sink, 4));
  CHECK(cudaMemset(x, 1, kMaxBytes));
  CHECK(cudaMemset(flush, 2, kFlushBytes));
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s, L2 %d MB, persisting max %d MB\n", prop.name, prop.l2CacheSize >> 20,
              prop.persistingL2CacheMaxSize >> 20);
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  const long long flush_chunks = kFlushBytes / 16 / kChunk;
  // Pass 0 with no L2 set-aside for persisting accesses (the default); pass 1 with the largest
  // (cudaLimitPersistingL2CacheSize), in case evict_last lines only persist there.
  for (int setaside : {0, 1}) {
    CHECK(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, setaside ? prop.persistingL2CacheMaxSize : 0));
    size_t limit = 0;
    CHECK(cudaDeviceGetLimit(&limit, cudaLimitPersistingL2CacheSize));
    std::printf("persisting L2 set-aside: %zu MB\n", limit >> 20);
    std::printf("%8s %-9s %-7s %-11s %10s %10s %8s\n", "MB", "B order", "B", "A / B hint", "cold us", "after A us",
                "ratio");
    const char* kHints[] = {"- / -", "last / -", "last / first"};
    for (long long mb : {8, 16, 24, 32, 40, 48, 64}) {
      const long long chunks = (mb << 20) / 16 / kChunk;
      for (int hint = setaside ? 1 : 0; hint < 3; ++hint) {
        for (int reverse : {0, 1}) {
          for (int write : {0, 1}) {
            float med[2];
            for (int warm : {0, 1}) {
              std::vector<float> t;
              for (int s = 0; s < 9; ++s) {
                Stream<<<flush_chunks, kThreads>>>(flush, nullptr, flush_chunks, 0, sink);
                if (warm) Stream<<<chunks, kThreads>>>(x, nullptr, chunks, 0, sink, hint > 0 ? 1 : 0);  // A
                CHECK(cudaEventRecord(e0));
                Stream<<<chunks, kThreads>>>(x, write ? y : nullptr, chunks, reverse, sink, hint == 2 ? 2 : 0);  // B
                CHECK(cudaEventRecord(e1));
                CHECK(cudaEventSynchronize(e1));
                float ms;
                CHECK(cudaEventElapsedTime(&ms, e0, e1));
                t.push_back(ms * 1000.0f);
              }
              std::sort(t.begin(), t.end());
              med[warm] = t[t.size() / 2];
            }
            std::printf("%8lld %-9s %-7s %-11s %10.1f %10.1f %8.2f\n", mb, reverse ? "reverse" : "same",
                        write ? "read+wr" : "read", kHints[hint], med[0], med[1], med[1] / med[0]);
          }
        }
      }
    }
  }
  CHECK(cudaGetLastError());
  return 0;
}
