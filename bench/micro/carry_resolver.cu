// How many tiles a second can one "resolver" walk through a chain of tile aggregates? The question behind a
// single-pass rows forward for samu (bench/NOTES.md, session 38): blocks that own whole token rows publish
// their tile's aggregate (the sum of r over the tile, R_j, and W fp32 states H_j); resolver warps (each 256
// channels: 32 lanes x 8) compose them in order, inc_j = 2^(k R_j) inc_{j-1} + H_j, publish every inclusive
// state with a flag per (tile, channel group), and the tiles wait for theirs. Here every aggregate is already
// published (the flags set), so the figure is the resolver's own rate: its loads (the next round's issued
// before this one is composed), one ex2 (or a loaded decay) and one FFMA per channel and hop, its stores and
// release flags. A rows forward needs ~26 tiles a us per chain at 4x2048x2048
// (264 resident 16-token tiles over ~10 us) and more where B = 1.
// Build and run on the GPU:
//   nvcc -O3 -arch=sm_90 -o /tmp/carry_resolver bench/micro/carry_resolver.cu && /tmp/carry_resolver
#include <algorithm>
#include <cstdio>
#include <vector>
#include <cuda_runtime.h>

#include "cuda_check.h"
#include "ptx.h"

constexpr int kVec = 8;             // channels per lane
constexpr int kGroup = 32 * kVec;   // channels per resolver warp

// One warp per block, block g takes channels [g kGroup, (g + 1) kGroup). BATCH tiles per round: their flags
// polled (lane j < BATCH: tile t0 + j), their R broadcast, their H loaded, then composed in order and stored.
// The next round's flags and loads are issued before this round is composed (two rounds in registers).
// DECAY: the tiles also publish their decays 2^(k R_j) per channel (W more floats each), so the resolver
// loads them instead of one ex2 per channel and hop.
template <int BATCH, bool DECAY>
struct Round {
  float4 h[BATCH][2];
  float4 d[DECAY ? BATCH : 1][2];
  float r;
  __device__ __forceinline__ void Load(const float* __restrict__ R, const float* __restrict__ H,
                                       const float* __restrict__ D, const unsigned* __restrict__ flags, int t0,
                                       int tiles, int width, long long c0) {
    const int lane = threadIdx.x;
    if (lane < BATCH && t0 + lane < tiles) {
      while (LoadAcquire(flags + t0 + lane) == 0) {
      }
    }
    __syncwarp();
    r = lane < BATCH && t0 + lane < tiles ? R[t0 + lane] : 0.0f;
#pragma unroll
    for (int j = 0; j < BATCH; ++j) {
      const long long off = static_cast<long long>(t0 + j) * width + c0;
      const bool in = t0 + j < tiles;
      h[j][0] = in ? __ldcg(reinterpret_cast<const float4*>(H + off)) : make_float4(0, 0, 0, 0);
      h[j][1] = in ? __ldcg(reinterpret_cast<const float4*>(H + off) + 1) : make_float4(0, 0, 0, 0);
      if constexpr (DECAY) {
        d[j][0] = in ? __ldcg(reinterpret_cast<const float4*>(D + off)) : make_float4(1, 1, 1, 1);
        d[j][1] = in ? __ldcg(reinterpret_cast<const float4*>(D + off) + 1) : make_float4(1, 1, 1, 1);
      }
    }
  }
};

template <int BATCH, bool DECAY>
__global__ void __launch_bounds__(32) Resolve(const float* __restrict__ R, const float* __restrict__ H,
                                              const float* __restrict__ D, const unsigned* __restrict__ flags,
                                              float* __restrict__ incl, unsigned* __restrict__ incl_flags, int tiles,
                                              int width) {
  const int lane = threadIdx.x, g = blockIdx.x;
  const long long c0 = static_cast<long long>(g) * kGroup + lane * kVec;
  float k[kVec], inc[kVec];
#pragma unroll
  for (int c = 0; c < kVec; ++c) {
    k[c] = -0.01f * static_cast<float>((c0 + c) % 97 + 1);
    inc[c] = 0.0f;
  }
  Round<BATCH, DECAY> cur, nxt;
  cur.Load(R, H, D, flags, 0, tiles, width, c0);
  for (int t0 = 0; t0 < tiles; t0 += BATCH) {
    if (t0 + BATCH < tiles) nxt.Load(R, H, D, flags, t0 + BATCH, tiles, width, c0);
#pragma unroll
    for (int j = 0; j < BATCH; ++j) {
      const float r = __shfl_sync(0xffffffffu, cur.r, j);
      const float hv[kVec] = {cur.h[j][0].x, cur.h[j][0].y, cur.h[j][0].z, cur.h[j][0].w,
                              cur.h[j][1].x, cur.h[j][1].y, cur.h[j][1].z, cur.h[j][1].w};
      float dv[kVec];
      if constexpr (DECAY) {
        const float4 d0 = cur.d[j][0], d1 = cur.d[j][1];
        dv[0] = d0.x; dv[1] = d0.y; dv[2] = d0.z; dv[3] = d0.w;
        dv[4] = d1.x; dv[5] = d1.y; dv[6] = d1.z; dv[7] = d1.w;
      } else {
#pragma unroll
        for (int c = 0; c < kVec; ++c) dv[c] = Ex2(k[c] * r);
      }
#pragma unroll
      for (int c = 0; c < kVec; ++c) inc[c] = fmaf(dv[c], inc[c], hv[c]);
      if (t0 + j < tiles) {
        float4* dst = reinterpret_cast<float4*>(incl + static_cast<long long>(t0 + j) * width + c0);
        __stcg(dst, make_float4(inc[0], inc[1], inc[2], inc[3]));
        __stcg(dst + 1, make_float4(inc[4], inc[5], inc[6], inc[7]));
      }
    }
    __syncwarp();
    if (lane < BATCH && t0 + lane < tiles) StoreRelease(incl_flags + static_cast<long long>(t0 + lane) * gridDim.x + g, 1u);
    cur = nxt;
  }
}

template <int BATCH, bool DECAY>
int Run(int width, int tiles, float* R, float* H, float* D, unsigned* flags, float* incl, unsigned* incl_flags) {
  const int groups = width / kGroup;
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  std::vector<float> t;
  for (int s = 0; s < 9; ++s) {
    CHECK(cudaMemset(incl_flags, 0, static_cast<size_t>(tiles) * groups * sizeof(unsigned)));
    CHECK(cudaEventRecord(e0));
    Resolve<BATCH, DECAY><<<groups, 32>>>(R, H, D, flags, incl, incl_flags, tiles, width);
    CHECK(cudaEventRecord(e1));
    CHECK(cudaEventSynchronize(e1));
    float ms;
    CHECK(cudaEventElapsedTime(&ms, e0, e1));
    t.push_back(ms * 1000.0f);
  }
  CHECK(cudaGetLastError());
  std::sort(t.begin(), t.end());
  const float us = t[t.size() / 2];
  std::printf("%6d %6d %6d %-9s %10.1f %12.1f\n", width, tiles, BATCH, DECAY ? "loaded" : "ex2", us, tiles / us);
  return 0;
}

int main() {
  const int kMaxW = 2560, kMaxTiles = 2048;
  float *R, *H, *D, *incl;
  unsigned *flags, *incl_flags;
  CHECK(cudaMalloc(&R, kMaxTiles * sizeof(float)));
  CHECK(cudaMalloc(&H, static_cast<size_t>(kMaxTiles) * kMaxW * sizeof(float)));
  CHECK(cudaMalloc(&D, static_cast<size_t>(kMaxTiles) * kMaxW * sizeof(float)));
  CHECK(cudaMalloc(&incl, static_cast<size_t>(kMaxTiles) * kMaxW * sizeof(float)));
  CHECK(cudaMalloc(&flags, kMaxTiles * sizeof(unsigned)));
  CHECK(cudaMalloc(&incl_flags, static_cast<size_t>(kMaxTiles) * (kMaxW / kGroup) * sizeof(unsigned)));
  std::vector<float> r(kMaxTiles);
  for (int i = 0; i < kMaxTiles; ++i) r[i] = 0.5f + 0.25f * static_cast<float>(i % 7) / 7.0f;
  CHECK(cudaMemcpy(R, r.data(), r.size() * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemset(H, 0, static_cast<size_t>(kMaxTiles) * kMaxW * sizeof(float)));
  CHECK(cudaMemset(D, 0, static_cast<size_t>(kMaxTiles) * kMaxW * sizeof(float)));
  std::vector<unsigned> one(kMaxTiles, 1u);
  CHECK(cudaMemcpy(flags, one.data(), one.size() * sizeof(unsigned), cudaMemcpyHostToDevice));
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s: every aggregate published before the launch; median of 9\n", prop.name);
  std::printf("%6s %6s %6s %-9s %10s %12s\n", "W", "tiles", "batch", "decays", "us", "tiles / us");
  for (int width : {1024, 2048, 2560}) {
    for (int tiles : {128, 512, 2048}) {
      // (Two rounds in registers: batch 16, or 8 with the decays loaded, spilled at 255 registers.)
      if (Run<4, false>(width, tiles, R, H, D, flags, incl, incl_flags) != 0) return 1;
      if (Run<8, false>(width, tiles, R, H, D, flags, incl, incl_flags) != 0) return 1;
      if (Run<4, true>(width, tiles, R, H, D, flags, incl, incl_flags) != 0) return 1;
    }
  }
  return 0;
}
