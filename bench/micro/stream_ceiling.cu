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
// Part 2 asks the same of samu's fwd_bwd: its chain's passes (control reads x; the forward reads x and writes y;
// the backward's agg reads dy; its rescan reads x, y and dy and writes dx: 16 B per element) as elementwise
// passes with no scan and no math, back to back, so their sum is what the chain's bytes cost with nothing else.
// Build and run on the GPU:
//   nvcc -O3 -arch=sm_90 -o /tmp/stream_ceiling bench/micro/stream_ceiling.cu && /tmp/stream_ceiling
#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <cstring>
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

// h = a * x over the ITEMS packs of one thread from `base` (THREADS apart), all loads first.
template <int THREADS, int ITEMS, bool kStreamLoad, bool kStreamStore>
__device__ __forceinline__ void MulPacks(const uint4* __restrict__ a, const uint4* __restrict__ x,
                                         uint4* __restrict__ h, long long base, long long n) {
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

// One-shot grid: block b takes packs [b x THREADS x ITEMS, ...).
template <int THREADS, int ITEMS, bool kStreamLoad, bool kStreamStore>
__global__ void __launch_bounds__(THREADS) MulOneShot(const uint4* __restrict__ a, const uint4* __restrict__ x,
                                                      uint4* __restrict__ h, long long n) {
  MulPacks<THREADS, ITEMS, kStreamLoad, kStreamStore>(
      a, x, h, static_cast<long long>(blockIdx.x) * THREADS * ITEMS + threadIdx.x, n);
}

// The same with a grid-stride loop, ITEMS packs in flight per trip.
template <int THREADS, int ITEMS, bool kStreamLoad, bool kStreamStore>
__global__ void __launch_bounds__(THREADS) MulStride(const uint4* __restrict__ a, const uint4* __restrict__ x,
                                                     uint4* __restrict__ h, long long n) {
  const long long stride = static_cast<long long>(gridDim.x) * THREADS * ITEMS;
  for (long long base = static_cast<long long>(blockIdx.x) * THREADS * ITEMS + threadIdx.x; base < n;
       base += stride) {
    MulPacks<THREADS, ITEMS, kStreamLoad, kStreamStore>(a, x, h, base, n);
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

// One elementwise pass of NIN inputs: with an output, out = the XOR of the inputs' packs; without, each block
// XORs its packs into one word (so its loads stay live), a read-only pass.
template <int NIN, bool kWrite>
__global__ void __launch_bounds__(256) Pass(const uint4* __restrict__ in0, const uint4* __restrict__ in1,
                                           const uint4* __restrict__ in2, uint4* __restrict__ out,
                                           unsigned* __restrict__ sink, long long n) {
  constexpr int kItems = 4;
  const long long base = static_cast<long long>(blockIdx.x) * 256 * kItems + threadIdx.x;
  const uint4* in[3] = {in0, in1, in2};
  uint4 v[kItems];
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    const long long i = base + static_cast<long long>(k) * 256;
    v[k] = make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int j = 0; j < NIN; ++j) {
      if (i < n) {
        const uint4 w = LoadStream(in[j] + i);
        v[k].x ^= w.x;
        v[k].y ^= w.y;
        v[k].z ^= w.z;
        v[k].w ^= w.w;
      }
    }
  }
  if constexpr (kWrite) {
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      const long long i = base + static_cast<long long>(k) * 256;
      if (i < n) StoreStream(out + i, v[k]);
    }
  } else {
    unsigned acc = 0;
#pragma unroll
    for (int k = 0; k < kItems; ++k) acc ^= v[k].x ^ v[k].y ^ v[k].z ^ v[k].w;
    if (acc == 0x9e3779b9u) sink[blockIdx.x] = acc;
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

// One form of h = a * x timed and printed; the best so far kept. per_sm 0: the one-shot grid; else a grid-stride
// loop over sms x per_sm blocks.
template <int THREADS, int ITEMS, bool kSL, bool kSS>
int TimeForm(const Sets& s, long long packs, int sms, int per_sm, const char* name, double bytes, double* best,
             const char** best_name) {
  const long long need = (packs + THREADS * ITEMS - 1) / (THREADS * ITEMS);
  const unsigned blocks =
      static_cast<unsigned>(per_sm == 0 ? need : std::min<long long>(need, static_cast<long long>(sms) * per_sm));
  float us = 0.0f;
  if (Median(
          [&](int k) {
            if (per_sm == 0) {
              MulOneShot<THREADS, ITEMS, kSL, kSS><<<blocks, THREADS>>>(s.a[k], s.x[k], s.h[k], packs);
            } else {
              MulStride<THREADS, ITEMS, kSL, kSS><<<blocks, THREADS>>>(s.a[k], s.x[k], s.h[k], packs);
            }
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

// The forms of h = a * x that main times at each shape, in order: {name, blocks per SM (0: one-shot grid), its
// TimeForm instance}.
struct Form {
  const char* name;
  int per_sm;
  int (*time)(const Sets&, long long, int, int, const char*, double, double*, const char**);
};
constexpr Form kForms[] = {
    {"one-shot t256 i1 plain", 0, &TimeForm<256, 1, false, false>},
    {"one-shot t256 i2 plain", 0, &TimeForm<256, 2, false, false>},
    {"one-shot t256 i4 plain", 0, &TimeForm<256, 4, false, false>},
    {"one-shot t256 i2 nc-no-allocate / cs", 0, &TimeForm<256, 2, true, true>},
    {"one-shot t256 i4 nc-no-allocate / cs", 0, &TimeForm<256, 4, true, true>},
    {"one-shot t256 i8 nc-no-allocate / cs", 0, &TimeForm<256, 8, true, true>},
    {"one-shot t512 i4 nc-no-allocate / cs", 0, &TimeForm<512, 4, true, true>},
    {"one-shot t128 i8 nc-no-allocate / cs", 0, &TimeForm<128, 8, true, true>},
    {"one-shot t256 i4 nc-no-allocate / plain", 0, &TimeForm<256, 4, true, false>},
    {"stride t256 i4 8/SM nc / cs", 8, &TimeForm<256, 4, true, true>},
    {"stride t256 i2 8/SM nc / cs", 8, &TimeForm<256, 2, true, true>},
    {"stride t512 i4 4/SM nc / cs", 4, &TimeForm<512, 4, true, true>},
    {"stride t256 i8 4/SM nc / cs", 4, &TimeForm<256, 8, true, true>},
};

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
    std::printf(
        "\n%lldx%lldx%lld: %.0f MB, floor %.1f us at 4.25 TB/s; public fwd %.0f us, 1.5x faster = %.1f us; "
        "ours %.1f us (%d input sets)\n",
        sh.b, sh.l, sh.w, bytes / 1e6, floor_us, sh.public_fwd_us, sh.public_fwd_us / 1.5, sh.ours_fwd_us, s.count);
    double best = 1e30;
    const char* best_name = "";
    for (const Form& f : kForms) {
      if (f.time(s, packs, sms, f.per_sm, f.name, bytes, &best, &best_name)) return 1;
    }
    std::printf(
        "  best elementwise: %.1f us (%s), %.0f GB/s = %.3fx the floor; 1.5x the public forward needs %.1f us\n", best,
        best_name, bytes / best * 1e-3, best / floor_us, sh.public_fwd_us / 1.5);
  }
  // Part 2: samu's fwd_bwd chain as elementwise passes (bf16), each shape with rotated sets of x, y, dy, dx.
  // Our selections' fwd_bwd on this card model: the H200's from session 36, the H100's from session 39's baseline.
  const bool h100 = std::strstr(prop.name, "H100") != nullptr;
  const double h200_us[] = {98.6, 126.8, 179.5, 309.2}, h100_us[] = {118.3, 144.4, 223.7, 405.2};
  const double* samu_us = h100 ? h100_us : h200_us;
  std::printf("\nsamu fwd_bwd's passes with no scan (16 B per element; floor at 4.25 TB/s; our selection: %s)\n",
              h100 ? "H100, session 39" : "H200, session 36");
  unsigned* sink;
  CHECK(cudaMalloc(&sink, 1 << 24));
  for (int si = 0; si < 4; ++si) {
    const Shape& sh = shapes[si];
    const long long n = sh.elements(), packs = n / 8;
    const unsigned blocks = static_cast<unsigned>((packs + 1023) / 1024);
    const double set_bytes = 8.0 * n;
    const int sets = static_cast<int>(std::max<long long>(2, (4 * l2) / static_cast<long long>(set_bytes) + 2));
    std::vector<uint4*> x(sets), y(sets), dy(sets), dx(sets);
    for (int k = 0; k < sets; ++k) {
      CHECK(cudaMalloc(&x[k], n * 2));
      CHECK(cudaMalloc(&y[k], n * 2));
      CHECK(cudaMalloc(&dy[k], n * 2));
      CHECK(cudaMalloc(&dx[k], n * 2));
      CHECK(cudaMemset(x[k], 0x3f, n * 2));
      CHECK(cudaMemset(dy[k], 0x3f, n * 2));
    }
    auto control = [&](int k) { Pass<1, false><<<blocks, 256>>>(x[k], nullptr, nullptr, nullptr, sink, packs); };
    auto forward = [&](int k) { Pass<1, true><<<blocks, 256>>>(x[k], nullptr, nullptr, y[k], sink, packs); };
    auto agg = [&](int k) { Pass<1, false><<<blocks, 256>>>(dy[k], nullptr, nullptr, nullptr, sink, packs); };
    auto rescan = [&](int k) { Pass<3, true><<<blocks, 256>>>(x[k], y[k], dy[k], dx[k], sink, packs); };
    float t_control = 0, t_forward = 0, t_agg = 0, t_rescan = 0, t_chain = 0;
    if (Median(control, sets, &t_control) || Median(forward, sets, &t_forward) || Median(agg, sets, &t_agg) ||
        Median(rescan, sets, &t_rescan) ||
        Median(
            [&](int k) {
              control(k);
              forward(k);
              agg(k);
              rescan(k);
            },
            sets, &t_chain))
      return 1;
    const double bytes = 16.0 * n;
    std::printf("%lldx%lldx%lld: control %.1f + forward %.1f + agg %.1f + rescan %.1f us alone; the chain %.1f us "
                "(%.0f GB/s; floor %.1f us); our selection %.1f us = %.2fx the chain; 1.5x of the 14 B floor %.1f us = "
                "%.2fx the chain\n",
                sh.b, sh.l, sh.w, t_control, t_forward, t_agg, t_rescan, t_chain, bytes / t_chain * 1e-3,
                bytes / 4.25e6, samu_us[si], samu_us[si] / t_chain, 1.5 * 14.0 * n / 4.25e6,
                1.5 * 14.0 * n / 4.25e6 / t_chain);
    for (int k = 0; k < sets; ++k) {
      CHECK(cudaFree(x[k]));
      CHECK(cudaFree(y[k]));
      CHECK(cudaFree(dy[k]));
      CHECK(cudaFree(dx[k]));
    }
  }
  CHECK(cudaFree(sink));
  return 0;
}
