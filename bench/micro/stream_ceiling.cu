// What is the fastest any kernel can move linear_scan's forward bytes on this card?
// Issue 3 asks the linear_scan forward to be 1.5x faster than DEVICE.md's public forward at every seed
// shape. At 1x32768x2048 that is 146 / 1.5 = 97.3 us for 6 B per element (a, x in; h out, bf16): 4.14 TB/s,
// 97% of the 4.25 TB/s that a 2 GB cudaMemcpy measured on the H200. This asks whether a kernel with no scan
// at all, h = a * x elementwise with the same three (B, L, W) bf16 streams, gets there, and so whether any
// scan could. Measured beside it: the cudaMemcpy ceiling itself (DEVICE.md's method) and a copy kernel.
//   - Elementwise forms: 16-byte vectors; ITEMS vectors a thread (one-shot grid) or a grid-stride loop over
//     2 x SMs x blocks/SM blocks; loads plain or ld.global.nc.L1::no_allocate; stores plain or st.global.cs.
//   - Every input set is rotated so that each launch reads buffers no launch touched for > 2 L2 sizes.
//   - CUDA events around kInner launches, median of kSamples samples; GB/s counts the bytes the forward
//     must move (6 per element at bf16), as FloorBytes does.
// Build and run on the GPU:
//   nvcc -O3 -arch=sm_90 -o /tmp/stream_ceiling bench/micro/stream_ceiling.cu && /tmp/stream_ceiling
#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <vector>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "cuda_check.h"

namespace {

constexpr int kSamples = 15, kInner = 10;

__device__ __forceinline__ uint4 LoadPlain(const uint4* p) { return *p; }
__device__ __forceinline__ uint4 LoadStream(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}
__device__ __forceinline__ void StorePlain(uint4* p, uint4 v) { *p = v; }
__device__ __forceinline__ void StoreStream(uint4* p, uint4 v) {
  asm volatile("st.global.cs.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}

// Eight bf16 products of a pack each (fp32 math, as the scan's step is).
__device__ __forceinline__ uint4 Mul8(uint4 a, uint4 x) {
  const unsigned* pa = reinterpret_cast<const unsigned*>(&a);
  const unsigned* px = reinterpret_cast<const unsigned*>(&x);
  uint4 r;
  unsigned* pr = reinterpret_cast<unsigned*>(&r);
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const float2 fa = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&pa[q]));
    const float2 fx = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&px[q]));
    const __nv_bfloat162 h = __floats2bfloat162_rn(fa.x * fx.x, fa.y * fx.y);
    pr[q] = *reinterpret_cast<const unsigned*>(&h);
  }
  return r;
}

// h = a * x over n packs: block b takes packs [b x THREADS x ITEMS, ...), all loads first.
template <int THREADS, int ITEMS, bool kStreamLoad, bool kStreamStore>
__global__ void __launch_bounds__(THREADS) MulOneShot(const uint4* __restrict__ a, const uint4* __restrict__ x,
                                                      uint4* __restrict__ h, long long n) {
  const long long base = static_cast<long long>(blockIdx.x) * THREADS * ITEMS + threadIdx.x;
  uint4 va[ITEMS], vx[ITEMS];
#pragma unroll
  for (int k = 0; k < ITEMS; ++k) {
    const long long i = base + static_cast<long long>(k) * THREADS;
    if (i < n) {
      va[k] = kStreamLoad ? LoadStream(a + i) : LoadPlain(a + i);
      vx[k] = kStreamLoad ? LoadStream(x + i) : LoadPlain(x + i);
    }
  }
#pragma unroll
  for (int k = 0; k < ITEMS; ++k) {
    const long long i = base + static_cast<long long>(k) * THREADS;
    if (i < n) {
      if (kStreamStore) {
        StoreStream(h + i, Mul8(va[k], vx[k]));
      } else {
        StorePlain(h + i, Mul8(va[k], vx[k]));
      }
    }
  }
}

// The same with a grid-stride loop, ITEMS packs in flight per trip.
template <int THREADS, int ITEMS, bool kStreamLoad, bool kStreamStore>
__global__ void __launch_bounds__(THREADS) MulStride(const uint4* __restrict__ a, const uint4* __restrict__ x,
                                                     uint4* __restrict__ h, long long n) {
  const long long stride = static_cast<long long>(gridDim.x) * THREADS * ITEMS;
  for (long long base = static_cast<long long>(blockIdx.x) * THREADS * ITEMS + threadIdx.x; base < n;
       base += stride) {
    uint4 va[ITEMS], vx[ITEMS];
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
      const long long i = base + static_cast<long long>(k) * THREADS;
      if (i < n) {
        va[k] = kStreamLoad ? LoadStream(a + i) : LoadPlain(a + i);
        vx[k] = kStreamLoad ? LoadStream(x + i) : LoadPlain(x + i);
      }
    }
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
      const long long i = base + static_cast<long long>(k) * THREADS;
      if (i < n) {
        if (kStreamStore) {
          StoreStream(h + i, Mul8(va[k], vx[k]));
        } else {
          StorePlain(h + i, Mul8(va[k], vx[k]));
        }
      }
    }
  }
}

// A copy kernel (one read, one write), for the 1:1 mix the memcpy ceiling has.
template <int THREADS, int ITEMS>
__global__ void __launch_bounds__(THREADS) CopyOneShot(const uint4* __restrict__ x, uint4* __restrict__ y,
                                                       long long n) {
  const long long base = static_cast<long long>(blockIdx.x) * THREADS * ITEMS + threadIdx.x;
  uint4 v[ITEMS];
#pragma unroll
  for (int k = 0; k < ITEMS; ++k) {
    const long long i = base + static_cast<long long>(k) * THREADS;
    if (i < n) v[k] = LoadStream(x + i);
  }
#pragma unroll
  for (int k = 0; k < ITEMS; ++k) {
    const long long i = base + static_cast<long long>(k) * THREADS;
    if (i < n) StoreStream(y + i, v[k]);
  }
}

struct Shape {
  long long b, l, w;
  double public_fwd_us;  // DEVICE.md's fastest public forward
  double ours_fwd_us;    // our selected forward on the H200 (README; bench/results/2026-12-02-s18-final)
  long long elements() const { return b * l * w; }
};

// Sets of (a, x, h) buffers, rotated per launch so that each launch's bytes come from DRAM.
struct Sets {
  std::vector<uint4*> a, x, h;
  int count = 0;
  ~Sets() {
    for (auto* p : a) cudaFree(p);
    for (auto* p : x) cudaFree(p);
    for (auto* p : h) cudaFree(p);
  }
};

template <typename Launch>
int Median(Launch launch, int sets, float* median_us) {
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  for (int k = 0; k < 3; ++k) launch(k % sets);  // warm-up
  CHECK(cudaGetLastError());
  std::vector<float> samples;
  int next = 0;
  for (int s = 0; s < kSamples; ++s) {
    CHECK(cudaEventRecord(e0));
    for (int k = 0; k < kInner; ++k) launch(next++ % sets);
    CHECK(cudaEventRecord(e1));
    CHECK(cudaEventSynchronize(e1));
    float ms = 0.0f;
    CHECK(cudaEventElapsedTime(&ms, e0, e1));
    samples.push_back(ms * 1000.0f / kInner);
  }
  CHECK(cudaGetLastError());
  std::sort(samples.begin(), samples.end());
  *median_us = samples[samples.size() / 2];
  CHECK(cudaEventDestroy(e0));
  CHECK(cudaEventDestroy(e1));
  return 0;
}

template <int THREADS, int ITEMS, bool kSL, bool kSS>
int TimeOneShot(const Sets& s, long long packs, const char* name, double bytes, double* best, const char** best_name) {
  const long long blocks = (packs + THREADS * ITEMS - 1) / (THREADS * ITEMS);
  float us = 0.0f;
  if (Median(
          [&](int k) {
            MulOneShot<THREADS, ITEMS, kSL, kSS><<<static_cast<unsigned>(blocks), THREADS>>>(s.a[k], s.x[k], s.h[k],
                                                                                             packs);
          },
          s.count, &us))
    return 1;
  std::printf("  %-44s %8.1f us  %6.0f GB/s\n", name, us, bytes / us * 1e-3);
  if (us < *best) {
    *best = us;
    *best_name = name;
  }
  return 0;
}

template <int THREADS, int ITEMS, bool kSL, bool kSS>
int TimeStride(const Sets& s, long long packs, int sms, int per_sm, const char* name, double bytes, double* best,
               const char** best_name) {
  const long long need = (packs + THREADS * ITEMS - 1) / (THREADS * ITEMS);
  const long long blocks = std::min<long long>(need, static_cast<long long>(sms) * per_sm);
  float us = 0.0f;
  if (Median(
          [&](int k) {
            MulStride<THREADS, ITEMS, kSL, kSS><<<static_cast<unsigned>(blocks), THREADS>>>(s.a[k], s.x[k], s.h[k],
                                                                                            packs);
          },
          s.count, &us))
    return 1;
  std::printf("  %-44s %8.1f us  %6.0f GB/s\n", name, us, bytes / us * 1e-3);
  if (us < *best) {
    *best = us;
    *best_name = name;
  }
  return 0;
}

}  // namespace

int main() {
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  std::printf("gpu: %s, %d SMs, L2 %d MB\n", prop.name, sms, prop.l2CacheSize >> 20);

  // DEVICE.md's ceiling: a 2 GB device-to-device copy, (read + write) bytes over its time.
  {
    const size_t bytes = 2ull << 30;
    void *src, *dst;
    CHECK(cudaMalloc(&src, bytes));
    CHECK(cudaMalloc(&dst, bytes));
    CHECK(cudaMemset(src, 1, bytes));
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice));
    std::vector<float> ms(9);
    for (float& m : ms) {
      CHECK(cudaEventRecord(e0));
      CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice));
      CHECK(cudaEventRecord(e1));
      CHECK(cudaEventSynchronize(e1));
      CHECK(cudaEventElapsedTime(&m, e0, e1));
    }
    std::sort(ms.begin(), ms.end());
    std::printf("cudaMemcpy D2D 2 GB: %.3f ms, %.0f GB/s (read + write)\n", ms[4], 2.0 * bytes / (ms[4] * 1e6));
    // The copy kernel on the same 2 GB.
    const long long packs = bytes / 16;
    float us = 0.0f;
    if (Median(
            [&](int) {
              CopyOneShot<256, 4><<<static_cast<unsigned>(packs / 1024), 256>>>(static_cast<const uint4*>(src),
                                                                                 static_cast<uint4*>(dst), packs);
            },
            1, &us))
      return 1;
    std::printf("copy kernel 2 GB (t256, 4 packs, streaming hints): %.1f us, %.0f GB/s\n", us, 2.0 * bytes / us * 1e-3);
    CHECK(cudaFree(src));
    CHECK(cudaFree(dst));
  }

  const Shape shapes[] = {{4, 2048, 2048, 54.0, 29.0},
                          {1, 8192, 2560, 60.0, 36.9},
                          {1, 32768, 1024, 106.0, 58.7},
                          {1, 32768, 2048, 146.0, 106.1}};
  const long long l2 = prop.l2CacheSize;
  for (const Shape& sh : shapes) {
    const long long n = sh.elements();
    const long long packs = n / 8;
    const double bytes = 6.0 * n;  // a, x in; h out (bf16)
    Sets s;
    // Enough sets that a launch's buffers were last touched > 2 L2 sizes of traffic ago.
    s.count = static_cast<int>(std::max<long long>(2, (4 * l2) / static_cast<long long>(bytes) + 2));
    for (int k = 0; k < s.count; ++k) {
      uint4 *a, *x, *h;
      CHECK(cudaMalloc(&a, n * 2));
      CHECK(cudaMalloc(&x, n * 2));
      CHECK(cudaMalloc(&h, n * 2));
      CHECK(cudaMemset(a, 0x3f, n * 2));
      CHECK(cudaMemset(x, 0x3f, n * 2));
      s.a.push_back(a);
      s.x.push_back(x);
      s.h.push_back(h);
    }
    const double floor_us = bytes / 4.25e6;
    std::printf("\n%lldx%lldx%lld: %.0f MB, floor %.1f us at 4.25 TB/s; public fwd %.0f us, 1.5x faster = %.1f us; "
                "ours %.1f us (%d input sets)\n",
                sh.b, sh.l, sh.w, bytes / 1e6, floor_us, sh.public_fwd_us, sh.public_fwd_us / 1.5, sh.ours_fwd_us,
                s.count);
    double best = 1e30;
    const char* best_name = "";
    int rc = 0;
    rc |= TimeOneShot<256, 1, false, false>(s, packs, "one-shot t256 i1 plain", bytes, &best, &best_name);
    rc |= TimeOneShot<256, 2, false, false>(s, packs, "one-shot t256 i2 plain", bytes, &best, &best_name);
    rc |= TimeOneShot<256, 4, false, false>(s, packs, "one-shot t256 i4 plain", bytes, &best, &best_name);
    rc |= TimeOneShot<256, 2, true, true>(s, packs, "one-shot t256 i2 nc-no-allocate / cs", bytes, &best, &best_name);
    rc |= TimeOneShot<256, 4, true, true>(s, packs, "one-shot t256 i4 nc-no-allocate / cs", bytes, &best, &best_name);
    rc |= TimeOneShot<256, 8, true, true>(s, packs, "one-shot t256 i8 nc-no-allocate / cs", bytes, &best, &best_name);
    rc |= TimeOneShot<512, 4, true, true>(s, packs, "one-shot t512 i4 nc-no-allocate / cs", bytes, &best, &best_name);
    rc |= TimeOneShot<128, 8, true, true>(s, packs, "one-shot t128 i8 nc-no-allocate / cs", bytes, &best, &best_name);
    rc |= TimeOneShot<256, 4, true, false>(s, packs, "one-shot t256 i4 nc-no-allocate / plain", bytes, &best,
                                           &best_name);
    rc |= TimeStride<256, 4, true, true>(s, packs, sms, 8, "stride t256 i4 8/SM nc / cs", bytes, &best, &best_name);
    rc |= TimeStride<256, 2, true, true>(s, packs, sms, 8, "stride t256 i2 8/SM nc / cs", bytes, &best, &best_name);
    rc |= TimeStride<512, 4, true, true>(s, packs, sms, 4, "stride t512 i4 4/SM nc / cs", bytes, &best, &best_name);
    rc |= TimeStride<256, 8, true, true>(s, packs, sms, 4, "stride t256 i8 4/SM nc / cs", bytes, &best, &best_name);
    if (rc) return 1;
    std::printf("  best elementwise: %.1f us (%s), %.0f GB/s = %.3fx the floor; 1.5x the public forward needs %.1f us\n",
                best, best_name, bytes / best * 1e-3, best / floor_us, sh.public_fwd_us / 1.5);
  }
  return 0;
}
