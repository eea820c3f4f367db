// selective_scan (Mamba S6) kernels, token-major. One family of templates
// serves every variant (compiler/plan_ssm.cc):
//   T       storage dtype of u, delta, z, Bm, Cm, y and their gradients
//   N       states per channel (8, 16, 32, 64)
//   DB      channels per block
//   SPLIT   lanes per channel; lane `sub` holds states [sub*S, sub*S + S), S = N/SPLIT
//   SEG     timesteps per time segment (0: the whole sequence, one segment)
//   CHUNK   time tile: Bm/Cm of CHUNK steps staged in shared memory (double
//           buffered, next tile's loads in flight during the current one),
//           and the backward's recompute window (CHUNK x S states in registers)
//   BIAS, SOFTPLUS, GATE: delta_bias, delta_softplus, z gate
// Variants: sequential = SPLIT 1, SEG 0; chunked = SPLIT 1, SEG > 0;
// fused = SPLIT > 1, SEG 0; fusedseg = SPLIT > 1, SEG > 0.
//
// Forward with S segments > 1: (1) selective_scan_fwd_local: each segment's
// end state from zero and its sum of delta (the segment's transition is
// exp(A * sum delta)); (2) selective_scan_carry: per (b, d, n) the state at
// every segment start; (3) selective_scan_fwd_main: each segment rescans from
// its start state and writes y (and h_final). One segment: (3) only.
// Backward: (1) selective_scan_bwd_local: segment end states and the local
// adjoint at each segment start; (2) carry of both; (3) selective_scan_bwd_main:
// recompute forward over the segment storing one (D, N) checkpoint per
// chunk, then walk the chunks in reverse: recompute the chunk's states into
// registers, reverse-scan the adjoint g_t = C_t dyg_t + dA_{t+1} g_{t+1} and
// form the gradients; reductions over n (du, ddelta, dz) and over channels
// (dBm, dCm) by warp reduce-scatter, over time and batch (dA, dDv,
// ddelta_bias) in registers; cross-block sums by fp32 atomics into the zeroed
// workspace prefix; (4) selective_scan_bwd_finalize converts them.
// exp(delta A) is exp2(delta * A log2 e) with the log2 e folded into A once (Ex2: one MUFU.EX2).
#pragma once

#include "scan_common.cuh"
#include "selective_scan_params.h"

namespace ssm {

constexpr float kLog2e = 1.4426950408889634f;

// 2^x as one MUFU.EX2 (exp2f without fast math adds a range fix-up of ~3
// instructions around it). ftz: results below 2^-126 flush to zero, which
// no fp32 tolerance can see in a decay factor.
__device__ __forceinline__ float Ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// exp(x) to about 1 ulp without MUFU: Cody-Waite reduction by ln 2, a
// degree-7 Taylor polynomial on |r| <= ln(2)/2 (truncation 5e-9), the
// exponent added to the bits (x clamped to [-86, 88]: 2^-124 .. 2^127).
__device__ __forceinline__ float ExpAccurate(float x) {
  x = fminf(fmaxf(x, -86.f), 88.f);
  const float j = fmaf(x, 1.44269504f, 12582912.f);  // 1.5 * 2^23 + rint(x log2 e)
  const float m = j - 12582912.f;
  float r = fmaf(m, -0.693145751953125f, x);
  r = fmaf(m, -1.42860682e-6f, r);
  const float q = scan::TaylorTail<0, 7>(r);
  return __int_as_float(__float_as_int(q) + (__float_as_int(j) << 23));
}

template <typename T>
__device__ __forceinline__ float Ld(const void* p, long long i) {
  return scan::ToFloat(static_cast<const T*>(p)[i]);
}
template <typename T>
__device__ __forceinline__ void St(void* p, long long i, float v) {
  static_cast<T*>(p)[i] = scan::FromFloat<T>(v);
}

__device__ __forceinline__ float Softplus(float x) { return x <= 20.f ? log1pf(expf(x)) : x; }
__device__ __forceinline__ float Sigmoid(float x) { return 1.f / (1.f + expf(-x)); }

constexpr int Log2(int v) { return v <= 1 ? 0 : 1 + Log2(v / 2); }

// Sums v over the lanes that differ in lane bits [BIT0, BIT0 + NBITS) and
// scatters the result: afterwards v[0 .. K >> NBITS) hold the sums of the
// original indices offset .. offset + (K >> NBITS) - 1, offset returned.
// About K shuffles per lane in all (K/2 + K/4 + ...), instead of K * NBITS.
template <int K, int BIT0, int NBITS>
__device__ __forceinline__ int ReduceScatter(float (&v)[K]) {
  static_assert((K >> NBITS) << NBITS == K, "K must be divisible by 2^NBITS");
  const int lane = threadIdx.x & 31;
  int offset = 0;
#pragma unroll
  for (int s = 0; s < NBITS; ++s) {
    const int half = K >> (s + 1);
    const bool hi = (lane >> (BIT0 + s)) & 1;
#pragma unroll
    for (int j = 0; j < half; ++j) {
      const float send = hi ? v[j] : v[j + half];
      const float keep = hi ? v[j + half] : v[j];
      v[j] = keep + __shfl_xor_sync(0xffffffffu, send, 1 << (BIT0 + s));
    }
    if (hi) offset += half;
  }
  return offset;
}

template <int N_, int DB_, int SPLIT_, int SEG_, int CHUNK_>
struct Cfg {
  static constexpr int N = N_, DB = DB_, SPLIT = SPLIT_, SEG = SEG_, CHUNK = CHUNK_;
  static constexpr int S = N / SPLIT;
  static constexpr int THREADS = DB * SPLIT;
  static constexpr int SPLIT_BITS = Log2(SPLIT);
  static constexpr int CHANNEL_BITS = 5 - SPLIT_BITS;  // channel bits of a lane within its warp
  // Steps per channel reduce-scatter of (dBm, dCm): 2*S*G values must split over 2^CHANNEL_BITS lanes.
  static constexpr int G = (2 * S >= (1 << CHANNEL_BITS)) ? 1 : (1 << CHANNEL_BITS) / (2 * S);
  static constexpr int BC = 2 * CHUNK * N;  // Bm and Cm values of one tile
  static constexpr int BC_PER_THREAD = (BC + THREADS - 1) / THREADS;
  static_assert(N == 8 || N == 16 || N == 32 || N == 64, "N must be 8, 16, 32 or 64");
  static_assert(SPLIT >= 1 && SPLIT <= 32 && (SPLIT & (SPLIT - 1)) == 0 && N % SPLIT == 0,
                "state_split must be a power of two dividing N");
  static_assert(THREADS % 32 == 0 && THREADS <= 1024, "dim_block x state_split must be a multiple of 32, <= 1024");
  static_assert(CHUNK % SPLIT == 0 && CHUNK % G == 0, "chunk must be a multiple of state_split");
  static_assert(SEG % CHUNK == 0, "segment must be a multiple of chunk");
};

// One block's place: batch, channel, lane, segment [t0, t1).
template <typename C>
struct Where {
  long long B, L, D, seg_len, segs, t0, t1, b, seg;
  int sub, ch;
  long long d;
  bool valid;
  __device__ explicit Where(const SelectiveScanParams& p) {
    B = p.batch;
    L = p.length;
    D = p.dim;
    seg_len = SsmSegmentLength(L, C::SEG, C::CHUNK);
    segs = (L + seg_len - 1) / seg_len;
    b = blockIdx.z;
    seg = blockIdx.y;
    t0 = seg * seg_len;
    t1 = min(L, t0 + seg_len);
    sub = threadIdx.x % C::SPLIT;
    ch = threadIdx.x / C::SPLIT;
    d = static_cast<long long>(blockIdx.x) * C::DB + ch;
    valid = d < D;
  }
  __device__ long long Token(long long t) const { return b * L + t; }
  __device__ long long State(int s) const { return (b * D + d) * C::N + sub * C::S + s; }
  __device__ long long SegState(int s) const { return ((b * segs + seg) * D + d) * C::N + sub * C::S + s; }
};

// The per-channel inputs of one tile in registers (steps outside [t0, t1)
// and channels >= D are the identity: delta 0, u 0, dy 0), and the tile's Bm
// and Cm as this thread's share, committed to shared memory after use of the
// current tile: a tile's loads are in flight while the previous one computes.
template <typename T, typename C, bool BIAS, bool SOFTPLUS, bool GATE, bool BWD>
struct Tile {
  float dl[C::CHUNK];   // delta after bias and softplus
  float raw[C::CHUNK];  // delta + bias (softplus derivative), bwd only
  float u[C::CHUNK];
  float z[C::CHUNK];
  float dy[C::CHUNK];
  float bc[C::BC_PER_THREAD];

  __device__ __forceinline__ void Load(const SelectiveScanParams& p, const Where<C>& w, long long tc, float bias) {
#pragma unroll
    for (int i = 0; i < C::CHUNK; ++i) {
      const long long t = tc + i;
      const bool ok = w.valid && t < w.t1;
      const long long at = w.Token(t) * w.D + w.d;
      float r = ok ? Ld<T>(p.delta, at) + bias : 0.f;
      raw[i] = r;
      dl[i] = ok ? (SOFTPLUS ? Softplus(r) : r) : 0.f;
      u[i] = ok ? Ld<T>(p.u, at) : 0.f;
      if (GATE) z[i] = ok ? Ld<T>(p.z, at) : 0.f;
      if (BWD) dy[i] = ok ? Ld<T>(p.dy, at) : 0.f;
    }
#pragma unroll
    for (int k = 0; k < C::BC_PER_THREAD; ++k) {
      const int idx = k * C::THREADS + threadIdx.x;  // [which][i][n]
      float v = 0.f;
      if (idx < C::BC) {
        const int which = idx / (C::CHUNK * C::N);
        const int i = (idx / C::N) % C::CHUNK;
        const int n = idx % C::N;
        const long long t = tc + i;
        if (t < w.t1) v = Ld<T>(which ? p.Cm : p.Bm, w.Token(t) * C::N + n);
      }
      bc[k] = v;
    }
  }
  __device__ __forceinline__ void Commit(float* smem) const {
#pragma unroll
    for (int k = 0; k < C::BC_PER_THREAD; ++k) {
      const int idx = k * C::THREADS + threadIdx.x;
      if (idx < C::BC) smem[idx] = bc[k];
    }
  }
};

// Walks the tiles of [t0, t1) forward (REVERSE false) or backward, calling
// body(tile, sB, sC, tc) with the tile's Bm, Cm in shared memory.
template <typename T, typename C, bool BIAS, bool SOFTPLUS, bool GATE, bool BWD, bool REVERSE, typename Body>
__device__ __forceinline__ void ForEachTile(const SelectiveScanParams& p, const Where<C>& w, float bias,
                                            float (*smem)[C::BC], Body&& body) {
  const long long tiles = (w.t1 - w.t0 + C::CHUNK - 1) / C::CHUNK;
  if (tiles <= 0) return;
  auto start = [&](long long k) { return w.t0 + (REVERSE ? tiles - 1 - k : k) * C::CHUNK; };
  Tile<T, C, BIAS, SOFTPLUS, GATE, BWD> next;
  next.Load(p, w, start(0), bias);
  __syncthreads();  // the previous walk's readers of smem are done
  next.Commit(smem[0]);
  __syncthreads();
  for (long long k = 0; k < tiles; ++k) {
    const Tile<T, C, BIAS, SOFTPLUS, GATE, BWD> cur = next;
    if (k + 1 < tiles) next.Load(p, w, start(k + 1), bias);
    const float* buf = smem[k & 1];
    body(cur, buf, buf + C::CHUNK * C::N, start(k));
    if (k + 1 < tiles) next.Commit(smem[(k + 1) & 1]);
    __syncthreads();
  }
}

template <typename C>
struct Channel {
  float A2[C::S];  // A * log2 e
  float A[C::S];
  float Dv = 0.f, bias = 0.f;
  __device__ Channel(const SelectiveScanParams& p, const Where<C>& w, bool has_bias) {
#pragma unroll
    for (int s = 0; s < C::S; ++s) {
      A[s] = w.valid ? p.A[w.d * C::N + w.sub * C::S + s] : 0.f;
      A2[s] = A[s] * kLog2e;
    }
    if (w.valid) {
      Dv = p.Dv[w.d];
      if (has_bias) bias = p.delta_bias[w.d];
    }
  }
};

// exp(delta A) of one step of the state-blocked families. Where one segment spans the
// whole sequence (sequential, fused: SEG 0) up to L of these factors multiply into a
// state, and ex2.approx's one-signed error compounds: dA missed 1e-5 at L = 8192
// (bench/NOTES.md, session 4). Those take the accurate exp; time segments (chunked,
// fusedseg) restart from exact carries and keep the one-MUFU Ex2.
template <typename C>
__device__ __forceinline__ float StepDecay(const Channel<C>& chn, int s, float dl) {
  if constexpr (C::SEG == 0) {
    return ExpAccurate(dl * chn.A[s]);
  } else {
    return Ex2(dl * chn.A2[s]);
  }
}

template <typename C>
__device__ __forceinline__ void InitialState(const SelectiveScanParams& p, const Where<C>& w, const SsmWorkspace& ws,
                                             float (&h)[C::S]) {
  const float* wsf = static_cast<const float*>(p.workspace);
#pragma unroll
  for (int s = 0; s < C::S; ++s) {
    h[s] = 0.f;
    if (!w.valid) continue;
    if (w.segs > 1) {
      h[s] = wsf[ws.hseg + w.SegState(s)];
    } else if (p.h0) {
      h[s] = p.h0[w.State(s)];
    }
  }
}

// One segment from zero (selective_scan_fwd_local, _bwd_local): the forward's end state -> hseg and
// sum of delta -> sdelta (the segment's transition is exp(A sum)); BWD also dA_{t0} g_{t0} of the
// adjoint scanned from zero -> gseg.
template <typename T, typename C, bool BIAS, bool SOFTPLUS, bool GATE, bool BWD>
__device__ __forceinline__ void SegmentLocal(const SelectiveScanParams& p) {
  __shared__ __align__(16) float smem[2][C::BC];
  const Where<C> w(p);
  const Channel<C> chn(p, w, BIAS);
  const SsmWorkspace ws = SsmWorkspaceLayout(w.B, w.L, w.D, C::N, C::SEG, C::CHUNK);
  float h[C::S] = {};
  float sum = 0.f;
  ForEachTile<T, C, BIAS, SOFTPLUS, GATE, false, false>(
      p, w, chn.bias, smem, [&](const auto& tile, const float* sB, const float*, long long) {
#pragma unroll
        for (int i = 0; i < C::CHUNK; ++i) {
          const float x = tile.dl[i] * tile.u[i];
          sum += tile.dl[i];
#pragma unroll
          for (int s = 0; s < C::S; ++s) {
            const float dA = StepDecay(chn, s, tile.dl[i]);
            h[s] = fmaf(dA, h[s], x * sB[i * C::N + w.sub * C::S + s]);
          }
        }
      });
  float g[C::S] = {};  // dA_{t+1} g_{t+1} entering step t
  if constexpr (BWD) {
    ForEachTile<T, C, BIAS, SOFTPLUS, GATE, true, true>(
        p, w, chn.bias, smem, [&](const auto& tile, const float*, const float* sC, long long) {
#pragma unroll
          for (int i = C::CHUNK - 1; i >= 0; --i) {
            const float dyg = GATE ? tile.dy[i] * tile.z[i] * Sigmoid(tile.z[i]) : tile.dy[i];
#pragma unroll
            for (int s = 0; s < C::S; ++s) {
              const float dA = StepDecay(chn, s, tile.dl[i]);
              g[s] = dA * fmaf(sC[i * C::N + w.sub * C::S + s], dyg, g[s]);
            }
          }
        });
  }
  if (!w.valid) return;
  float* wsf = static_cast<float*>(p.workspace);
#pragma unroll
  for (int s = 0; s < C::S; ++s) {
    wsf[ws.hseg + w.SegState(s)] = h[s];
    if (BWD) wsf[ws.gseg + w.SegState(s)] = g[s];
  }
  if (w.sub == 0) wsf[ws.sdelta + (w.b * w.segs + w.seg) * w.D + w.d] = sum;
}

}  // namespace ssm

#define SSM_TEMPLATE \
  template <typename T, int N, int DB, int SPLIT, int SEG, int CHUNK, bool BIAS, bool SOFTPLUS, bool GATE>
#define SSM_CFG ssm::Cfg<N, DB, SPLIT, SEG, CHUNK>

// Segment-local forward from zero: end state -> hseg, sum of delta -> sdelta.
SSM_TEMPLATE
__global__ void __launch_bounds__(SSM_CFG::THREADS) selective_scan_fwd_local(SelectiveScanParams p) {
  ssm::SegmentLocal<T, SSM_CFG, BIAS, SOFTPLUS, GATE, false>(p);
}

namespace ssm {

// In place over one (b, d, n)'s per-segment values v[s * stride]: each becomes the value entering
// segment s in walk order (ascending; REVERSE descending), carry' = exp2(a2 sum delta_s) carry +
// v[s]. A segment's loads do not depend on the carry, so kBatch of them are read ahead of their
// stores: one L2 round trip serves kBatch segments (v4; ptxas kept one round trip per segment,
// its loads behind the previous in-place store: ~10-20 us at 64 segments, 4 x 8192 x 256 c128).
template <bool REVERSE>
__device__ __forceinline__ void CarryWalk(float* v, long long stride, const float* sdelta, long long sstride,
                                          long long segs, float a2, float carry) {
  constexpr int kBatch = 8;
  for (long long k0 = 0; k0 < segs; k0 += kBatch) {
    float local[kBatch], sd[kBatch];
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const long long s = REVERSE ? segs - 1 - (k0 + i) : k0 + i;
      const bool ok = k0 + i < segs;
      local[i] = ok ? v[s * stride] : 0.f;
      sd[i] = ok ? sdelta[s * sstride] : 0.f;
    }
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const long long s = REVERSE ? segs - 1 - (k0 + i) : k0 + i;
      if (k0 + i < segs) {
        v[s * stride] = carry;
        carry = fmaf(Ex2(a2 * sd[i]), carry, local[i]);
      }
    }
  }
}

}  // namespace ssm

// Per (b, d, n): the forward state at each segment start (in place over hseg)
// and, BWD, the adjoint entering each segment from the right (over gseg).
template <int N, int SEG, int CHUNK, bool BWD>
__global__ void __launch_bounds__(256) selective_scan_carry(SelectiveScanParams p) {
  const long long B = p.batch, L = p.length, D = p.dim;
  const long long e = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= B * D * N) return;
  const SsmWorkspace ws = SsmWorkspaceLayout(B, L, D, N, SEG, CHUNK);
  const long long seg_len = SsmSegmentLength(L, SEG, CHUNK);
  const long long segs = (L + seg_len - 1) / seg_len;
  const long long b = e / (D * N), dn = e % (D * N), d = dn / N;
  const float a2 = p.A[dn] * ssm::kLog2e;
  float* wsf = static_cast<float*>(p.workspace);
  const float* sdelta = wsf + ws.sdelta + b * segs * D + d;
  ssm::CarryWalk<false>(wsf + ws.hseg + b * segs * D * N + dn, D * N, sdelta, D, segs, a2, p.h0 ? p.h0[e] : 0.f);
  if (BWD) ssm::CarryWalk<true>(wsf + ws.gseg + b * segs * D * N + dn, D * N, sdelta, D, segs, a2, 0.f);
}

// The forward proper: from the segment's start state, y for every step of the
// segment; the last segment writes h_final.
SSM_TEMPLATE
__global__ void __launch_bounds__(SSM_CFG::THREADS) selective_scan_fwd_main(SelectiveScanParams p) {
  using C = SSM_CFG;
  __shared__ __align__(16) float smem[2][C::BC];
  const ssm::Where<C> w(p);
  const ssm::Channel<C> chn(p, w, BIAS);
  const SsmWorkspace ws = SsmWorkspaceLayout(w.B, w.L, w.D, N, SEG, CHUNK);
  float h[C::S];
  ssm::InitialState<C>(p, w, ws, h);
  ssm::ForEachTile<T, C, BIAS, SOFTPLUS, GATE, false, false>(
      p, w, chn.bias, smem, [&](const auto& tile, const float* sB, const float* sC, long long tc) {
        float yv[CHUNK];
#pragma unroll
        for (int i = 0; i < CHUNK; ++i) {
          const float x = tile.dl[i] * tile.u[i];
          float acc = w.sub == 0 ? chn.Dv * tile.u[i] : 0.f;
#pragma unroll
          for (int s = 0; s < C::S; ++s) {
            const int n = w.sub * C::S + s;
            const float dA = ssm::StepDecay(chn, s, tile.dl[i]);
            h[s] = fmaf(dA, h[s], x * sB[i * N + n]);
            acc = fmaf(sC[i * N + n], h[s], acc);
          }
          if (GATE) acc *= tile.z[i] * ssm::Sigmoid(tile.z[i]);  // linear: partials may be gated
          yv[i] = acc;
        }
        const int offset = ssm::ReduceScatter<CHUNK, 0, C::SPLIT_BITS>(yv);
#pragma unroll
        for (int j = 0; j < CHUNK / SPLIT; ++j) {
          const long long t = tc + offset + j;
          if (w.valid && t < w.t1) ssm::St<T>(p.y, w.Token(t) * w.D + w.d, yv[j]);
        }
      });
  if (w.valid && p.h_final && w.t1 == w.L) {
#pragma unroll
    for (int s = 0; s < C::S; ++s) p.h_final[w.State(s)] = h[s];
  }
}

// Segment-local backward pieces: the forward end state from zero (hseg,
// sdelta) and dA_{t0} * g_{t0} of the adjoint scanned from zero (gseg).
SSM_TEMPLATE
__global__ void __launch_bounds__(SSM_CFG::THREADS) selective_scan_bwd_local(SelectiveScanParams p) {
  ssm::SegmentLocal<T, SSM_CFG, BIAS, SOFTPLUS, GATE, true>(p);
}

SSM_TEMPLATE
__global__ void __launch_bounds__(SSM_CFG::THREADS) selective_scan_bwd_main(SelectiveScanParams p) {
  using C = SSM_CFG;
  constexpr int S = C::S;
  __shared__ __align__(16) float smem[2][C::BC];
  __shared__ float sred[CHUNK * 2 * N];  // the tile's (dBm, dCm) partial sums over the block's channels: [i][which][n]
  const ssm::Where<C> w(p);
  const ssm::Channel<C> chn(p, w, BIAS);
  const SsmWorkspace ws = SsmWorkspaceLayout(w.B, w.L, w.D, N, SEG, CHUNK);
  float* wsf = static_cast<float*>(p.workspace);
  constexpr long long kInterval = SsmCheckpointInterval(CHUNK);
  static_assert(kInterval % CHUNK == 0, "the checkpoint interval must be a multiple of chunk");
  static_assert(SEG % kInterval == 0, "segment must be a multiple of the checkpoint interval");
  const long long ckpt_count = (w.L + kInterval - 1) / kInterval;
  auto ckpt_at = [&](long long tc, int s) {
    return ws.ckpt + ((w.b * ckpt_count + tc / kInterval) * w.D + w.d) * N + w.sub * S + s;
  };
  for (int k = threadIdx.x; k < CHUNK * 2 * N; k += C::THREADS) sred[k] = 0.f;

  // Pass 1: forward from the segment's start state, one checkpoint per tile.
  float h[S];
  ssm::InitialState<C>(p, w, ws, h);
  ssm::ForEachTile<T, C, BIAS, SOFTPLUS, GATE, false, false>(
      p, w, chn.bias, smem, [&](const auto& tile, const float* sB, const float*, long long tc) {
        if (w.valid && tc % kInterval == 0) {
#pragma unroll
          for (int s = 0; s < S; ++s) wsf[ckpt_at(tc, s)] = h[s];
        }
#pragma unroll
        for (int i = 0; i < CHUNK; ++i) {
          const float x = tile.dl[i] * tile.u[i];
#pragma unroll
          for (int s = 0; s < S; ++s) {
            const float dA = ssm::StepDecay(chn, s, tile.dl[i]);
            h[s] = fmaf(dA, h[s], x * sB[i * N + w.sub * S + s]);
          }
        }
      });

  // Pass 2: the tiles in reverse.
  float g[S];  // dA_{t+1} g_{t+1} entering step t
#pragma unroll
  for (int s = 0; s < S; ++s) g[s] = (w.valid && w.segs > 1) ? wsf[ws.gseg + w.SegState(s)] : 0.f;
  // Sums over the whole segment (thousands of steps): each tile's partial is
  // added with Kahan compensation, so the fp32 error stays near one tile's.
  float dA_acc[S] = {}, dA_comp[S] = {};
  float dDv_acc = 0.f, dDv_comp = 0.f, dbias_acc = 0.f, dbias_comp = 0.f;
  auto kahan = [](float& sum, float& comp, float v) {
    const float y = v - comp;
    const float t = sum + y;
    comp = (t - sum) - y;
    sum = t;
  };
  ssm::ForEachTile<T, C, BIAS, SOFTPLUS, GATE, true, true>(
      p, w, chn.bias, smem, [&](const auto& tile, const float* sB, const float* sC, long long tc) {
        float hs[CHUNK][S], dAs[CHUNK][S], h_start[S];
#pragma unroll
        for (int s = 0; s < S; ++s) h_start[s] = w.valid ? wsf[ckpt_at(tc, s)] : 0.f;
        // From the checkpoint to the tile's start (tiles between checkpoints; global loads, all in [t0, t1)).
        for (long long t = tc - tc % kInterval; w.valid && t < tc; ++t) {
          const long long at = w.Token(t) * w.D + w.d;
          const float r = ssm::Ld<T>(p.delta, at) + chn.bias;
          const float dl = SOFTPLUS ? ssm::Softplus(r) : r;
          const float x = dl * ssm::Ld<T>(p.u, at);
#pragma unroll
          for (int s = 0; s < S; ++s) {
            const float bn = ssm::Ld<T>(p.Bm, w.Token(t) * N + w.sub * S + s);
            h_start[s] = fmaf(ssm::StepDecay(chn, s, dl), h_start[s], x * bn);
          }
        }
#pragma unroll
        for (int i = 0; i < CHUNK; ++i) {
          const float x = tile.dl[i] * tile.u[i];
#pragma unroll
          for (int s = 0; s < S; ++s) {
            dAs[i][s] = ssm::StepDecay(chn, s, tile.dl[i]);
            hs[i][s] = fmaf(dAs[i][s], i ? hs[i - 1][s] : h_start[s], x * sB[i * N + w.sub * S + s]);
          }
        }
        // Per step partials over this lane's states, [quantity][i]: du, ddelta (raw), dz.
        float red[3 * CHUNK];
        float dA_tile[S] = {};
        float dDv_tile = 0.f, dbias_tile = 0.f;
#pragma unroll
        for (int i0 = CHUNK - C::G; i0 >= 0; i0 -= C::G) {
          float bcv[C::G * 2 * S];  // [gi][which][s]: dBm, dCm partials of steps i0 + gi
#pragma unroll
          for (int gi = C::G - 1; gi >= 0; --gi) {
            const int i = i0 + gi;
            float sig_z = 0.f, gate = 1.f;
            if (GATE) {
              sig_z = ssm::Sigmoid(tile.z[i]);
              gate = tile.z[i] * sig_z;
            }
            const float dyg = tile.dy[i] * gate;
            const float dl = tile.dl[i], u = tile.u[i];
            float du = w.sub == 0 ? chn.Dv * dyg : 0.f;
            float dd = 0.f;
            float yp = w.sub == 0 ? chn.Dv * u : 0.f;
#pragma unroll
            for (int s = 0; s < S; ++s) {
              const int n = w.sub * S + s;
              const float Bn = sB[i * N + n], Cn = sC[i * N + n];
              const float gt = fmaf(Cn, dyg, g[s]);
              const float hprev = i ? hs[i - 1][s] : h_start[s];
              const float gdh = gt * dAs[i][s] * hprev;  // d/d(delta A) of step i
              du = fmaf(gt * dl, Bn, du);
              dd = fmaf(gt, Bn * u, fmaf(chn.A[s], gdh, dd));
              dA_tile[s] = fmaf(dl, gdh, dA_tile[s]);
              yp = fmaf(Cn, hs[i][s], yp);
              bcv[(gi * 2 + 0) * S + s] = gt * dl * u;
              bcv[(gi * 2 + 1) * S + s] = dyg * hs[i][s];
              g[s] = dAs[i][s] * gt;
            }
            if (w.sub == 0) dDv_tile = fmaf(dyg, u, dDv_tile);
            const float dsoft = SOFTPLUS ? ssm::Sigmoid(tile.raw[i]) : 1.f;
            dd *= dsoft;
            dbias_tile += dd;
            red[0 * CHUNK + i] = du;
            red[1 * CHUNK + i] = dd;
            // dz = dy * ypre * silu'(z); silu'(z) = sig (1 + z (1 - sig)). Linear in the partial ypre.
            red[2 * CHUNK + i] = GATE ? yp * tile.dy[i] * sig_z * (1.f + tile.z[i] * (1.f - sig_z)) : 0.f;
          }
          // Sum (dBm, dCm) over the warp's channels, then over the block's warps in shared memory.
          const int off = ssm::ReduceScatter<C::G * 2 * S, C::SPLIT_BITS, C::CHANNEL_BITS>(bcv);
#pragma unroll
          for (int j = 0; j < (C::G * 2 * S) >> C::CHANNEL_BITS; ++j) {
            const int idx = off + j;  // [gi][which][s]
            const int gi = idx / (2 * S), which = (idx / S) % 2, s = idx % S;
            atomicAdd(&sred[((i0 + gi) * 2 + which) * N + w.sub * S + s], bcv[j]);
          }
        }
#pragma unroll
        for (int s = 0; s < S; ++s) kahan(dA_acc[s], dA_comp[s], dA_tile[s]);
        kahan(dDv_acc, dDv_comp, dDv_tile);
        if (BIAS) kahan(dbias_acc, dbias_comp, dbias_tile);
        const int off = ssm::ReduceScatter<3 * CHUNK, 0, C::SPLIT_BITS>(red);
#pragma unroll
        for (int j = 0; j < 3 * CHUNK / SPLIT; ++j) {
          const int idx = off + j;
          const int q = idx / CHUNK;
          const long long t = tc + idx % CHUNK;
          if (!w.valid || t >= w.t1 || (q == 2 && !GATE)) continue;
          const long long at = w.Token(t) * w.D + w.d;
          ssm::St<T>(q == 0 ? p.du : q == 1 ? p.ddelta : p.dz, at, red[j]);
        }
        __syncthreads();
        for (int k = threadIdx.x; k < CHUNK * 2 * N; k += C::THREADS) {
          const int i = k / (2 * N), which = (k / N) % 2, n = k % N;
          const long long t = tc + i;
          if (t < w.t1) atomicAdd(&wsf[(which ? ws.dC : ws.dB) + w.Token(t) * N + n], sred[k]);
          sred[k] = 0.f;
        }
        // ForEachTile's barrier follows before sred is written again.
      });
  if (!w.valid) return;
  if (w.seg == 0 && p.dh0) {
#pragma unroll
    for (int s = 0; s < S; ++s) p.dh0[w.State(s)] = g[s];
  }
#pragma unroll
  for (int s = 0; s < S; ++s) atomicAdd(&wsf[ws.dA + w.d * N + w.sub * S + s], dA_acc[s]);
  if (w.sub == 0) atomicAdd(&wsf[ws.dDv + w.d], dDv_acc);
  if (BIAS) atomicAdd(&wsf[ws.dbias + w.d], dbias_acc);
}

// The reductions' fp32 sums to the outputs (dBm, dCm in the dtype). DB > 0 (tscan `_f1`, the
// backward's channels per block; TC its chunk, after whose layout the partials start): each
// output the sum of its partials (SsmFixedSums) in a fixed order, dBm, dCm over the channel
// groups, dA, dDv, ddelta_bias over the batch; 0: the atomics' sums in the zeroed prefix.
template <typename T, int N, int DB = 0, int TC = 0>
__global__ void __launch_bounds__(256) selective_scan_bwd_finalize(SelectiveScanParams p) {
  // tscan's plan launches it dependent (PDL); the state-blocked plans do not.
  scan::GridDependencyWait();
  scan::LaunchDependents();
  constexpr bool kFixed = DB > 0;
  const long long B = p.batch, L = p.length, D = p.dim;
  // (the prefix does not depend on segment or chunk; _f1's partials start after the whole layout)
  const SsmWorkspace ws = SsmWorkspaceLayout(B, L, D, N, 0, kFixed ? TC : 1);
  const SsmFixedSums fx = SsmFixedSumsLayout(B, L, D, N, kFixed ? DB : 1, ws.total);
  const float* wsf = static_cast<const float*>(p.workspace);
  const long long tokens = B * L * N, params = D * N;
  const long long n = tokens > params ? tokens : params;
  // The sum of `count` partials `stride` apart from `at`, in order.
  auto ordered = [&](long long at, long long count, long long stride) {
    float s = 0.f;
    for (long long k = 0; k < count; ++k) s += wsf[at + k * stride];
    return s;
  };
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    if (i < tokens) {
      ssm::St<T>(p.dBm, i, kFixed ? ordered(fx.dB + i, fx.groups, tokens) : wsf[ws.dB + i]);
      ssm::St<T>(p.dCm, i, kFixed ? ordered(fx.dC + i, fx.groups, tokens) : wsf[ws.dC + i]);
    }
    if (i < params) p.dA[i] = kFixed ? ordered(fx.dA + i, B, params) : wsf[ws.dA + i];
    if (i < D) {
      p.dDv[i] = kFixed ? ordered(fx.dDv + i, B, D) : wsf[ws.dDv + i];
      // (_f1's dbias partials exist only with the bias)
      if (p.ddelta_bias) p.ddelta_bias[i] = kFixed ? ordered(fx.dbias + i, B, D) : wsf[ws.dbias + i];
    }
  }
}

#undef SSM_TEMPLATE
#undef SSM_CFG

// ---------------------------------------------------------------------------
// tscan: lanes along time, the loop over states outside (Mamba's own layout
// of the work, here token-major). A block holds DB channels x SW state
// groups x TW warps per channel and group; lane tpos = tw * 32 + lane of a
// (channel, group) holds the K consecutive timesteps tpos * K .. tpos * K +
// K - 1 of a chunk of TC = 32 * TW * K steps, and loops over the group's N /
// SW states (SW > 1: more warps in flight for the same channels, where B * D
// is small; the groups' partial y, du, ddelta meet in shared memory once per
// chunk). Per chunk the block stages delta, u (, z, dy) [DB][TC] and Bm, Cm
// [N][TC] in shared memory (coalesced: each timestep's DB channels are
// contiguous), at slot k * (32 TW) + tpos so that a warp reads consecutive
// slots. Per state n: each lane composes its K affine steps (P, H), a warp
// scan (and, TW > 1, a scan over the channel's warps in shared memory) gives
// every lane its entering state from the chunk's carry, and a second sweep
// over the K registers forms h and y. One ex2.approx per (t, d, n), reused by
// both sweeps. The decays that carry a state far are not products of those
// factors (ex2.approx errs in one direction: over the hundreds of steps a
// slow state remembers, A = -0.01, that moved dA by 1.1e-5 in v2; bench/
// NOTES.md v3): a lane's decay P is one ex2.approx of A * (its sum of delta),
// and the chunk's, which carries the state (forward) and the adjoint
// (backward) from chunk to chunk, exp(A * the chunk's sum of delta) to ~1 ulp
// (ExpAccurate, once per chunk and state, lane l holding state l (, l + 32)).
// Forward: selective_scan_tscan_fwd (OUT bit 0: y and h_final; bit 1: the
// state at every chunk start into the workspace's checkpoints). Backward:
// selective_scan_tscan_bwd walks the chunks in reverse; per state it
// recomputes the chunk's states from its checkpoint (one exp, kept in
// registers for the adjoint), scans the adjoint q_t = dA_t (C_t dyg_t +
// q_{t+1}) in reverse the same way, and forms the gradients; dBm, dCm are
// summed over the block's channels in shared memory (double buffered: one
// barrier per state) and leave as one coalesced atomic per (t, n) per block
// and chunk; dA per (d, n) sums in shared memory over the whole sequence
// (one atomic per block). `_f1` stores those as partials instead, summed in a
// fixed order by selective_scan_bwd_finalize<..., DB, TC> (the same bits every run).
namespace ssm {

constexpr unsigned kFull = 0xffffffffu;


// fp32 inputs are staged by cp.async (4 bytes, zero-filled outside the sequence or the channels):
// the forward copies the next chunk while the current one computes (no registers held).
template <typename T>
struct IsF32 {
  static constexpr bool value = false;
};
template <>
struct IsF32<float> {
  static constexpr bool value = true;
};
__device__ __forceinline__ void CpAsync4(float* smem, const float* gmem, bool ok) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile(
      "{\n\t.reg .u64 g;\n\tcvta.to.global.u64 g, %1;\n\tcp.async.ca.shared.global [%0], [g], 4, %2;\n\t}" ::"r"(s),
      "l"(gmem), "r"(ok ? 4 : 0)
      : "memory");
}
__device__ __forceinline__ void CpAsyncCommit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int PENDING>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(PENDING) : "memory");
}

template <int N_, int DB_, int TW_, int K_, int SW_>
struct TCfg {
  static constexpr int N = N_, DB = DB_, TW = TW_, K = K_, SW = SW_;
  static constexpr int NPG = N / SW;   // states per group
  static constexpr int TPC = 32 * TW;  // lanes per channel and group
  static constexpr int TC = TPC * K;   // timesteps per chunk
  static constexpr int STAGERS = DB * TPC;  // threads of one group: (channel, position) pairs
  static constexpr int THREADS = STAGERS * SW;
  static constexpr int RS = static_cast<int>(SsmTscanRowStride(DB, TW, K));  // staged row stride (bank-conflict pad)
  static constexpr int NS = TC + 1;                                            // Bm / Cm row stride
  static_assert(N == 8 || N == 16 || N == 32 || N == 64, "N must be 8, 16, 32 or 64");
  static_assert(DB >= 1 && DB <= 32 && (DB & (DB - 1)) == 0, "dim_block must be a power of two <= 32");
  static_assert(THREADS <= 1024, "dim_block x state groups x 32 x warps must be <= 1024");
  static_assert(TW == 1 || TW == 2 || TW == 4, "warps along time: 1, 2 or 4");
  static_assert(SW == 1 || SW == 2 || SW == 4, "state groups: 1, 2 or 4");
  static_assert(SW == 1 || TW == 1, "state groups need one warp along time");
  static_assert(NPG >= 2 && NPG % 2 == 0, "every state group holds an even number of states");
  static_assert(THREADS % N == 0 && (TC * N) % THREADS == 0, "Bm/Cm staging: threads must divide N x chunk");
  // Blocks per SM the register budget aims at (__launch_bounds__): fp32 values a
  // thread keeps live are about 24 + 10 K forward, 32 + 24 K backward.
  static constexpr int MinBlocks(int live) {
    return 65536 / (THREADS * live) < 1 ? 1 : 65536 / (THREADS * live);
  }
  static constexpr int FWD_BLOCKS = MinBlocks(24 + 10 * K);
  static constexpr int BWD_BLOCKS = MinBlocks(32 + 24 * K);
  // The forward interleaves two states' scans (ILP over the shuffle latency) where registers
  // allow (ptxas -v: no spills at N 8..64, all options, with one warp along time and K >= 4; with
  // checkpoints, K = 4 at its 64 registers does not: the kernel unrolls 1 there).
  // Four states where about 11 K + 48 registers fit (dl, x, y and four states' dA, bu) and N <= 16
  // (N = 32 with the gate spilled): the 256-thread I = 16 forward (one block per SM, 255 registers;
  // bench/NOTES.md v4).
  static constexpr int FWD_REGS =
      65536 / (THREADS * FWD_BLOCKS) > 255 ? 255 : 65536 / (THREADS * FWD_BLOCKS);
  static constexpr int FWD_STATE_UNROLL = K >= 4 && TW == 1 ? (11 * K + 48 <= FWD_REGS && N <= 16 ? 4 : 2) : 1;
};

// Staged rows: element (ch, step pos * K + k) at ch * RS + k * TPC + pos.
// Thread tid stages channel tid % DB at position (tid % STAGERS) / DB, steps
// k = tid / STAGERS, + SW, .. < K: a warp's loads cover 32 / DB timesteps x
// DB channels. FULL: the chunk lies inside the sequence and the block's
// channels inside D (ChunkIsFull), so no element needs a bounds check and
// the addresses are one base plus constant steps (v4: the checked form
// cost ~10 instructions per element, ~500 per thread and chunk at I = 8);
// StageRows, StoreRows and StageBC below pick the form per chunk.
template <typename T, typename C, int NSRC, bool ASYNC, bool FULL>
__device__ __forceinline__ void StageRowsAs(float* rows, const void* const (&src)[NSRC], long long b, long long L,
                                          long long D, long long d0, long long tc) {
  const int st = threadIdx.x % C::STAGERS, k0 = C::SW == 1 ? 0 : threadIdx.x / C::STAGERS;
  const int ch = st % C::DB, pos = st / C::DB;
  const long long t0 = tc + pos * C::K;
  const bool dok = d0 + ch < D;
  const long long base = (b * L + t0) * D + d0 + ch;
  float* dst = rows + ch * C::RS + pos;
#pragma unroll
  for (int kk = 0; kk < (C::K + C::SW - 1) / C::SW; ++kk) {
    const int k = kk * C::SW + k0;
    if (C::K % C::SW != 0 && k >= C::K) break;
    const bool ok = FULL || (dok && t0 + k < L);
#pragma unroll
    for (int a = 0; a < NSRC; ++a) {
      if constexpr (ASYNC) {
        const float* g = static_cast<const float*>(src[a]);
        CpAsync4(dst + a * C::DB * C::RS + k * C::TPC, ok ? g + base + k * D : g, ok);
      } else {
        dst[a * C::DB * C::RS + k * C::TPC] = ok ? Ld<T>(src[a], base + k * D) : 0.f;
      }
    }
  }
}

template <typename T, typename C, bool FULL>
__device__ __forceinline__ void StoreRowsAs(void* dst, const float* row, long long b, long long L, long long D,
                                          long long d0, long long tc) {
  const int st = threadIdx.x % C::STAGERS, k0 = C::SW == 1 ? 0 : threadIdx.x / C::STAGERS;
  const int ch = st % C::DB, pos = st / C::DB;
  const long long t0 = tc + pos * C::K;
  const bool dok = d0 + ch < D;
  const long long base = (b * L + t0) * D + d0 + ch;
  const float* src = row + ch * C::RS + pos;
#pragma unroll
  for (int kk = 0; kk < (C::K + C::SW - 1) / C::SW; ++kk) {
    const int k = kk * C::SW + k0;
    if (C::K % C::SW != 0 && k >= C::K) break;
    if (FULL || (dok && t0 + k < L)) St<T>(dst, base + k * D, src[k * C::TPC]);
  }
}

// Bm, Cm of the chunk: (n, step pos * K + k) at n * NS + k * TPC + pos.
// The chunk's (t, n) are contiguous in (B, L, N): thread tid takes n = tid % N.
// Its step tl = r kStep + tl0 of iteration r: K and kStep are powers of two, so
// one divides the other and the slot is the thread's slot at r = 0 plus a
// constant: (tl0 % K) TPC + tl0 / K + ((r kStep) % K) TPC + (r kStep) / K.
template <typename T, typename C, bool ASYNC, bool FULL>
__device__ __forceinline__ void StageBCAs(float* sB, float* sC, const SelectiveScanParams& p, long long b, long long L,
                                        long long tc) {
  constexpr int kIters = C::TC * C::N / C::THREADS;
  constexpr int kStep = C::THREADS / C::N;  // timesteps per iteration
  static_assert(kStep % C::K == 0 || C::K % kStep == 0, "steps per iteration and K: one divides the other");
  const int n = threadIdx.x % C::N, tl0 = threadIdx.x / C::N;
  const long long base = (b * L + tc) * C::N + threadIdx.x;
  const long long left = L - tc;  // steps of the chunk inside the sequence
  const int slot0 = n * C::NS + (tl0 % C::K) * C::TPC + tl0 / C::K;
#pragma unroll
  for (int r = 0; r < kIters; ++r) {
    const int tl = r * kStep + tl0;
    // FULL: the thread's slot at r = 0 plus a constant. The checked form keeps v3's per-r formula
    // (there the decomposition changed ptxas's allocation and spilled 4-12 bytes at N = 64).
    const int slot = FULL ? slot0 + ((r * kStep) % C::K) * C::TPC + (r * kStep) / C::K
                          : n * C::NS + (tl % C::K) * C::TPC + tl / C::K;
    const bool ok = FULL || tl < left;
    if constexpr (ASYNC) {
      const float* gB = static_cast<const float*>(p.Bm);
      const float* gC = static_cast<const float*>(p.Cm);
      CpAsync4(sB + slot, ok ? gB + base + r * C::THREADS : gB, ok);
      CpAsync4(sC + slot, ok ? gC + base + r * C::THREADS : gC, ok);
    } else {
      sB[slot] = ok ? Ld<T>(p.Bm, base + r * C::THREADS) : 0.f;
      sC[slot] = ok ? Ld<T>(p.Cm, base + r * C::THREADS) : 0.f;
    }
  }
}

// Whether the chunk at tc lies inside the sequence and the block's channels inside D (the
// staging and stores then need no bounds checks). Uniform over the block.
template <typename C>
__device__ __forceinline__ bool ChunkIsFull(long long tc, long long L, long long d0, long long D) {
  return tc + C::TC <= L && d0 + C::DB <= D;
}

// The above, unchecked where the chunk is full and the caller allows it (LEAN). The unchecked
// forms let ptxas keep more addresses live (ptxas -v: 4-28 bytes of spills in 37 of 312 modules,
// all at 64-128 registers with N >= 32, 16-bit inputs or 4 items), so the kernels ask for them only
// where they were spill-free: fp32 inputs at N <= 32 (tscan_fwd: also 128+ registers; kLeanTscan).
template <typename T, typename C, int NSRC, bool ASYNC, bool LEAN>
__device__ __forceinline__ void StageRows(float* rows, const void* const (&src)[NSRC], long long b, long long L,
                                          long long D, long long d0, long long tc) {
  if (LEAN && ChunkIsFull<C>(tc, L, d0, D)) {
    StageRowsAs<T, C, NSRC, ASYNC, true>(rows, src, b, L, D, d0, tc);
  } else {
    StageRowsAs<T, C, NSRC, ASYNC, false>(rows, src, b, L, D, d0, tc);
  }
}
template <typename T, typename C, bool LEAN>
__device__ __forceinline__ void StoreRows(void* dst, const float* row, long long b, long long L, long long D,
                                          long long d0, long long tc) {
  if (LEAN && ChunkIsFull<C>(tc, L, d0, D)) {
    StoreRowsAs<T, C, true>(dst, row, b, L, D, d0, tc);
  } else {
    StoreRowsAs<T, C, false>(dst, row, b, L, D, d0, tc);
  }
}
template <typename T, typename C, bool ASYNC, bool LEAN>
__device__ __forceinline__ void StageBC(float* sB, float* sC, const SelectiveScanParams& p, long long b, long long L,
                                        long long tc) {
  if (LEAN && tc + C::TC <= L) {
    StageBCAs<T, C, ASYNC, true>(sB, sC, p, b, L, tc);
  } else {
    StageBCAs<T, C, ASYNC, false>(sB, sC, p, b, L, tc);
  }
}

// Whether a tscan kernel uses v4's lean forms (unchecked staging of full chunks; the forward's
// chunk-end states in registers): fp32 at N <= 32, and for the forward 128+ registers per thread.
template <typename T, typename C, bool FWD>
constexpr bool kLeanTscan = IsF32<T>::value && C::N <= 32 && (!FWD || C::FWD_REGS >= 128);

// A chunk's delta, u (, z) rows and Bm, Cm of fp32 inputs into one buffer by cp.async, as one group.
template <typename T, typename C, bool GATE, bool LEAN>
__device__ __forceinline__ void StageChunk(float* rows, float* bc, const SelectiveScanParams& p, long long b,
                                           long long d0, long long tc) {
  if (GATE) {
    const void* const srcs[3] = {p.delta, p.u, p.z};
    StageRows<T, C, 3, true, LEAN>(rows, srcs, b, p.length, p.dim, d0, tc);
  } else {
    const void* const srcs[2] = {p.delta, p.u};
    StageRows<T, C, 2, true, LEAN>(rows, srcs, b, p.length, p.dim, d0, tc);
  }
  StageBC<T, C, true, LEAN>(bc, bc + C::N * C::NS, p, b, p.length, tc);
  CpAsyncCommit();
}

// Scan of the affine maps h -> P h + H of a channel's lanes over the chunk,
// forward in time (REV false: lane order) or in reverse. (P, H): the lane's
// own composition. start: the value entering the chunk. Returns the value
// entering this lane; end: the value leaving the chunk, Pend * start + (the
// chunk's H) (meaningful at the last lane in scan order: lane 31 of warp TW -
// 1, or lane 0 of warp 0 REV). TW > 1: agg is this channel's [TW][2] slot
// (double buffered by the caller); every thread of the block must call (one
// __syncthreads).
template <int TW, bool REV>
__device__ __forceinline__ float ChunkScan(float P, float H, float start, float Pend, float* agg, int tw, int lane,
                                           float& end) {
#pragma unroll
  for (int off = 1; off < 32; off <<= 1) {
    const float Po = REV ? __shfl_down_sync(kFull, P, off) : __shfl_up_sync(kFull, P, off);
    const float Ho = REV ? __shfl_down_sync(kFull, H, off) : __shfl_up_sync(kFull, H, off);
    if (REV ? lane + off < 32 : lane >= off) {
      H = fmaf(P, Ho, H);
      P *= Po;
    }
  }
  float Pe = REV ? __shfl_down_sync(kFull, P, 1) : __shfl_up_sync(kFull, P, 1);
  float He = REV ? __shfl_down_sync(kFull, H, 1) : __shfl_up_sync(kFull, H, 1);
  if (lane == (REV ? 31 : 0)) {
    Pe = 1.f;
    He = 0.f;
  }
  float from_zero = 0.f;  // the state entering this warp from a zero chunk start
  const float start0 = start;
  if (TW > 1) {
    if (lane == (REV ? 0 : 31)) {
      agg[tw * 2] = P;
      agg[tw * 2 + 1] = H;
    }
    __syncthreads();
    if (REV) {
      for (int j = TW - 1; j > tw; --j) {
        start = fmaf(agg[j * 2], start, agg[j * 2 + 1]);
        from_zero = fmaf(agg[j * 2], from_zero, agg[j * 2 + 1]);
      }
    } else {
      for (int j = 0; j < tw; ++j) {
        start = fmaf(agg[j * 2], start, agg[j * 2 + 1]);
        from_zero = fmaf(agg[j * 2], from_zero, agg[j * 2 + 1]);
      }
    }
  }
  end = fmaf(Pend, start0, TW > 1 ? fmaf(P, from_zero, H) : H);
  return fmaf(Pe, start, He);
}

__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(kFull, v, off);
  return v;
}

// The chunk's decays exp(A[ch, n] sum delta) to ~1 ulp into this warp's dec[N] (read back by the
// same warp: __syncwarp): dsum is this lane's sum of delta; TW > 1 adds the other warps' lanes at
// the same lane (bias and softplus again from the staged rows). Every lane of the warp must call.
template <typename C, bool SOFTPLUS>
__device__ __forceinline__ void ChunkDecays(float dsum, const float* delta_row, const float* sA, float bias, bool valid,
                                            long long tc, long long L, int tw, int lane, float* dec) {
  float sum = dsum;
#pragma unroll
  for (int w = 0; w < C::TW; ++w) {
    if (w == tw) continue;
#pragma unroll
    for (int k = 0; k < C::K; ++k) {
      const int tpos = w * 32 + lane;
      const bool ok = valid && tc + tpos * C::K + k < L;
      const float r = delta_row[k * C::TPC + tpos] + bias;
      sum += ok ? (SOFTPLUS ? Softplus(r) : r) : 0.f;
    }
  }
  sum = WarpSum(sum);
#pragma unroll 1
  for (int n = lane; n < C::N; n += 32) dec[n] = ExpAccurate(sA[n] * sum);
  __syncwarp();
}

// A thread's place in a tscan block: warp = (ch * SW + group) * TW + tw.
template <typename C>
struct TPlace {
  int lane, ch, sg, tw, tpos;
  __device__ TPlace() {
    lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    tw = warp % C::TW;
    sg = (warp / C::TW) % C::SW;
    ch = warp / (C::TW * C::SW);
    tpos = tw * 32 + lane;
  }
};

}  // namespace ssm

#define SSM_T_TEMPLATE \
  template <typename T, int N, int DB, int TW, int K, int SW, bool BIAS, bool SOFTPLUS, bool GATE>

// OUT bit 0: y (and h_final when asked); bit 1: the checkpoints (the state at every chunk start).
template <typename T, int N, int DB, int TW, int K, int SW, bool BIAS, bool SOFTPLUS, bool GATE, int OUT>
__global__ void __launch_bounds__(DB * SW * TW * 32, (ssm::TCfg<N, DB, TW, K, SW>::FWD_BLOCKS))
    selective_scan_tscan_fwd(SelectiveScanParams p) {
  scan::GridDependencyWait();  // programmatic dependent launch: before any memory access
  scan::LaunchDependents();
  using C = ssm::TCfg<N, DB, TW, K, SW>;
  constexpr int RS = C::RS, NS = C::NS, TPC = C::TPC, NPG = C::NPG;
  constexpr long long TC = C::TC;
  // fp32 (where shared memory allows): the next chunk's inputs by cp.async during this one.
  constexpr bool PF = ssm::IsF32<T>::value && SsmTscanPrefetch(N, DB, TW, K, SW, GATE, true);
  constexpr bool kLean = ssm::kLeanTscan<T, C, true>;
  constexpr SsmTscanSmem kLay = SsmTscanSmemLayout(N, DB, TW, K, SW, GATE, false, PF);
  extern __shared__ __align__(16) float smem[];
  float* rows = smem + kLay.rows;  // delta, u (, z); y over u (PF: this chunk's buffer)
  float* sB = smem + kLay.bc;
  float* sC = sB + N * NS;
  float* sCarry = smem + kLay.carry;  // [2][DB][N]
  float* sA2 = smem + kLay.a2;        // [DB][N]
  float* sA = smem + kLay.a;          // [DB][N]
  float* sAgg = smem + kLay.agg;      // [2][DB][TW][2]
  float* sRedY = smem + kLay.red;     // [SW - 1][DB][RS]: the other state groups' partial y
  float* sDec = smem + kLay.dec + (threadIdx.x >> 5) * N;  // this warp's chunk decays [N]
  const long long B = p.batch, L = p.length, D = p.dim;
  const long long b = blockIdx.z, d0 = static_cast<long long>(blockIdx.x) * DB;
  const ssm::TPlace<C> at;
  const int lane = at.lane, ch = at.ch, sg = at.sg, tw = at.tw, tpos = at.tpos;
  const long long d = d0 + ch;
  const bool valid = d < D;
  for (int i = threadIdx.x; i < DB * N; i += C::THREADS) {
    const long long di = d0 + i / N;
    const bool ok = di < D;
    const float a = ok ? p.A[di * N + i % N] : 0.f;
    sA[i] = a;
    sA2[i] = a * ssm::kLog2e;
    sCarry[i] = ok && p.h0 ? p.h0[(b * D + di) * N + i % N] : 0.f;
  }
  const float Dv = valid && sg == 0 ? p.Dv[d] : 0.f;  // the skip term: group 0's partial only
  const float bias = BIAS && valid ? p.delta_bias[d] : 0.f;
  const long long chunks = (L + TC - 1) / TC;
  const SsmWorkspace ws = SsmWorkspaceLayout(B, L, D, N, 0, TC);
  float* ckpt = static_cast<float*>(p.workspace) + ws.ckpt + b * chunks * D * N;  // this batch's (chunks, D, N)
  const void* const srcs_g[3] = {p.delta, p.u, p.z};
  const void* const srcs[2] = {p.delta, p.u};
  if constexpr (PF) ssm::StageChunk<T, C, GATE, kLean>(smem + kLay.rows, smem + kLay.bc, p, b, d0, 0);
  int par = 0;
  for (long long c = 0; c < chunks; ++c, par ^= 1) {
    const long long tc = c * TC;
    const int buf = PF ? static_cast<int>(c & 1) : 0;
    __syncthreads();  // the previous chunk's readers are done (of buffer buf ^ 1 too); the initial carry is visible
    if constexpr (PF) {
      if (c + 1 < chunks) {
        ssm::StageChunk<T, C, GATE, kLean>(smem + (buf ? kLay.rows : kLay.rows2), smem + (buf ? kLay.bc : kLay.bc2), p,
                                           b, d0, tc + TC);
        ssm::CpAsyncWait<1>();  // this chunk's group has landed (the next one may be in flight)
      } else {
        ssm::CpAsyncWait<0>();
      }
      rows = smem + (buf ? kLay.rows2 : kLay.rows);
      sB = smem + (buf ? kLay.bc2 : kLay.bc);
      sC = sB + N * NS;
    } else {
      if (GATE) {
        ssm::StageRows<T, C, 3, false, kLean>(rows, srcs_g, b, L, D, d0, tc);
      } else {
        ssm::StageRows<T, C, 2, false, kLean>(rows, srcs, b, L, D, d0, tc);
      }
      ssm::StageBC<T, C, false, kLean>(sB, sC, p, b, L, tc);
    }
    if (OUT & 2) {  // the block's states entering the chunk, coalesced: (d0 .. d0 + DB, N) are contiguous
      for (int i = threadIdx.x; i < DB * N; i += C::THREADS) {
        if (d0 + i / N < D) ckpt[c * D * N + d0 * N + i] = sCarry[par * DB * N + i];
      }
    }
    __syncthreads();
    float dl[K], x[K], y[K], zz[K];
    float dsum = 0.f;  // the lane's sum of delta: its decay is exp(A dsum)
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int slot = ch * RS + k * TPC + tpos;
      const bool ok = valid && tc + tpos * K + k < L;
      const float r = rows[slot] + bias;
      dl[k] = ok ? (SOFTPLUS ? ssm::Softplus(r) : r) : 0.f;
      dsum += dl[k];
      const float u = rows[DB * RS + slot];
      x[k] = dl[k] * u;
      y[k] = Dv * u;
      if (GATE) zz[k] = rows[2 * DB * RS + slot];
    }
    ssm::ChunkDecays<C, SOFTPLUS>(dsum, rows + ch * RS, sA + ch * N, bias, valid, tc, L, tw, lane, sDec);
    const float* cur = sCarry + par * DB * N + ch * N;
    float* nxt = sCarry + (par ^ 1) * DB * N + ch * N;
    // TW = 1 (lean): the chunk's end states stay in registers (lane l: state sg NPG + l + 32 i) and reach
    // shared memory after the loop. The loop then stores nothing, so ptxas may hoist the next
    // state's loads over this state's scan and interleave the unrolled states' warp scans (with a
    // store of nxt in between it did neither: v3's SASS ran the two scans one after the other).
    constexpr bool kRegEnds = TW == 1 && kLean;
    constexpr int kEnds = kRegEnds ? (NPG + 31) / 32 : 1;
    float ends[kEnds];
#pragma unroll
    for (int i = 0; i < kEnds; ++i) ends[i] = 0.f;
#pragma unroll((OUT & 2) && K <= 4 ? 1 : C::FWD_STATE_UNROLL)
    for (int j = 0; j < NPG; ++j) {
      const int n = sg * NPG + j;
      const float a2 = sA2[ch * N + n];
      const float start = cur[n];
      const float* Bn = sB + n * NS + tpos;
      const float* Cn = sC + n * NS + tpos;
      float dA[K], bu[K];
      float H = 0.f;
#pragma unroll
      for (int k = 0; k < K; ++k) {
        dA[k] = ssm::Ex2(dl[k] * a2);
        bu[k] = x[k] * Bn[k * TPC];
        H = fmaf(dA[k], H, bu[k]);
      }
      const float P = ssm::Ex2(a2 * dsum);
      float end;
      const float hin =
          ssm::ChunkScan<TW, false>(P, H, start, sDec[n], sAgg + ((n & 1) * DB + ch) * TW * 2, tw, lane, end);
      if constexpr (kRegEnds) {
        const float e = __shfl_sync(ssm::kFull, end, 31);
#pragma unroll
        for (int i = 0; i < kEnds; ++i) ends[i] = j == lane + 32 * i ? e : ends[i];
      } else if (tpos == TPC - 1) {
        nxt[n] = end;
      }
      float h = hin;
#pragma unroll
      for (int k = 0; k < K; ++k) {
        h = fmaf(dA[k], h, bu[k]);
        y[k] = fmaf(Cn[k * TPC], h, y[k]);
      }
    }
    if constexpr (kRegEnds) {
#pragma unroll
      for (int i = 0; i < kEnds; ++i) {
        if (lane + 32 * i < NPG) nxt[sg * NPG + lane + 32 * i] = ends[i];
      }
    }
    if (OUT & 1) {
      if (SW > 1) {
        if (sg > 0) {
#pragma unroll
          for (int k = 0; k < K; ++k) sRedY[((sg - 1) * DB + ch) * RS + k * TPC + tpos] = y[k];
        }
        __syncthreads();  // the partials are written; every group has read its delta and u
      }
      if (sg == 0) {
#pragma unroll
        for (int k = 0; k < K; ++k) {
          float v = y[k];
#pragma unroll
          for (int g = 1; g < SW; ++g) v += sRedY[((g - 1) * DB + ch) * RS + k * TPC + tpos];
          if (GATE) v *= zz[k] * ssm::Sigmoid(zz[k]);
          rows[DB * RS + ch * RS + k * TPC + tpos] = v;  // this thread's own slots of u
        }
      }
      __syncthreads();
      ssm::StoreRows<T, C, kLean>(p.y, rows + DB * RS, b, L, D, d0, tc);
    }
  }
  if ((OUT & 1) && p.h_final) {
    __syncthreads();
    const float* fin = sCarry + par * DB * N;  // the buffer the last chunk wrote
    for (int i = threadIdx.x; i < DB * N; i += C::THREADS) {
      const long long di = d0 + i / N;
      if (di < D) p.h_final[(b * D + di) * N + i % N] = fin[i];
    }
  }
}

// FIXED 1 (`_f1`, one warp along time: TW 1): the reductions leave as partials, each element
// written by this block alone (SsmFixedSums), for selective_scan_bwd_finalize<T, N, DB, TC> to sum in a
// fixed order; 0: float atomics into the zeroed prefix.
template <typename T, int N, int DB, int TW, int K, int SW, bool BIAS, bool SOFTPLUS, bool GATE, int FIXED = 0>
__global__ void __launch_bounds__(DB * SW * TW * 32, (ssm::TCfg<N, DB, TW, K, SW>::BWD_BLOCKS))
    selective_scan_tscan_bwd(SelectiveScanParams p) {
  static_assert(FIXED == 0 || TW == 1, "_f1: one writer of dDv per (b, d) needs one warp along time");
  scan::GridDependencyWait();  // programmatic dependent launch: before any memory access
  scan::LaunchDependents();
  using C = ssm::TCfg<N, DB, TW, K, SW>;
  constexpr int RS = C::RS, NS = C::NS, TPC = C::TPC, NPG = C::NPG;
  constexpr long long TC = C::TC;
  constexpr SsmTscanSmem kLay = SsmTscanSmemLayout(N, DB, TW, K, SW, GATE, true);
  constexpr bool kLean = ssm::kLeanTscan<T, C, false>;
  extern __shared__ __align__(16) float smem[];
  float* rows = smem + kLay.rows;  // delta, u, dy (, z); then du, ddelta, dz
  float* sB = smem + kLay.bc;
  float* sC = sB + N * NS;
  float* sSum = sC + N * NS;  // [2][N][NS]: the chunk's dBm, dCm summed over the block's channels
  float* sG = smem + kLay.carry;  // [2][DB][N]: adjoint entering the chunk from the right
  float* sA2 = smem + kLay.a2;
  float* sA = smem + kLay.a;
  float* sdA = smem + kLay.da;     // [DB][TW][N]: dA summed over the chunks (Kahan: compensation in sdAc)
  float* sdAc = sdA + DB * TW * N;
  float* sAgg = smem + kLay.agg;   // [2 directions][2 parities][DB][TW][2]
  float* sCk = smem + kLay.ck;     // [DB][N]: the chunk's start states (checkpoints)
  float* sRed = smem + kLay.red;   // [2 buffers][SW][2][DB][TC]: per-channel (g x, dyg h) of one state per group
  float* sDec = smem + kLay.dec + (threadIdx.x >> 5) * N;  // this warp's chunk decays [N]
  const long long B = p.batch, L = p.length, D = p.dim;
  const long long b = blockIdx.z, d0 = static_cast<long long>(blockIdx.x) * DB;
  const ssm::TPlace<C> at;
  const int lane = at.lane, ch = at.ch, sg = at.sg, tw = at.tw, tpos = at.tpos;
  const long long d = d0 + ch;
  const bool valid = d < D;
  for (int i = threadIdx.x; i < DB * N; i += C::THREADS) {
    const long long di = d0 + i / N;
    const float a = di < D ? p.A[di * N + i % N] : 0.f;
    sA[i] = a;
    sA2[i] = a * ssm::kLog2e;
    sG[i] = 0.f;
  }
  for (int i = threadIdx.x; i < 2 * DB * TW * N; i += C::THREADS) sdA[i] = 0.f;
  const float Dv = valid ? p.Dv[d] : 0.f;
  const float Dv0 = sg == 0 ? Dv : 0.f;  // the skip term: group 0's partial only
  const float bias = BIAS && valid ? p.delta_bias[d] : 0.f;
  const long long chunks = (L + TC - 1) / TC;
  const SsmWorkspace ws = SsmWorkspaceLayout(B, L, D, N, 0, TC);
  float* wsf = static_cast<float*>(p.workspace);
  const float* ckpt = wsf + ws.ckpt;
  const void* const srcs_g[4] = {p.delta, p.u, p.dy, p.z};
  const void* const srcs[3] = {p.delta, p.u, p.dy};
  // Sums over the whole sequence (up to thousands of chunks): each chunk's partial is added with
  // Kahan compensation, so the fp32 error stays near one chunk's.
  float dDv_acc = 0.f, dDv_comp = 0.f, dbias_acc = 0.f, dbias_comp = 0.f;
  auto kahan = [](float& sum, float& comp, float v) {
    const float y = v - comp;
    const float t = sum + y;
    comp = (t - sum) - y;
    sum = t;
  };
  int par = 0;
  for (long long c = chunks - 1; c >= 0; --c, par ^= 1) {
    const long long tc = c * TC;
    __syncthreads();  // the previous chunk's readers are done; the initial values are visible
    if (GATE) {
      ssm::StageRows<T, C, 4, false, kLean>(rows, srcs_g, b, L, D, d0, tc);
    } else {
      ssm::StageRows<T, C, 3, false, kLean>(rows, srcs, b, L, D, d0, tc);
    }
    ssm::StageBC<T, C, false, kLean>(sB, sC, p, b, L, tc);
    for (int i = threadIdx.x; i < DB * N; i += C::THREADS) {
      const long long di = d0 + i / N;
      sCk[i] = di < D ? ckpt[((b * chunks + c) * D + di) * N + i % N] : 0.f;
    }
    __syncthreads();
    float dl[K], u[K], x[K], dyg[K], du[K], dd[K], dsoft[K], gz[K], yp[K];
    float dDv_chunk = 0.f, dsum = 0.f;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int slot = ch * RS + k * TPC + tpos;
      const bool ok = valid && tc + tpos * K + k < L;
      const float r = rows[slot] + bias;
      dl[k] = ok ? (SOFTPLUS ? ssm::Softplus(r) : r) : 0.f;
      dsum += dl[k];
      dsoft[k] = SOFTPLUS ? ssm::Sigmoid(r) : 1.f;
      u[k] = rows[DB * RS + slot];
      const float dy = rows[2 * DB * RS + slot];
      if (GATE) {
        const float z = rows[3 * DB * RS + slot];
        const float sig = ssm::Sigmoid(z);
        dyg[k] = dy * z * sig;
        gz[k] = dy * sig * (1.f + z * (1.f - sig));  // dz = ypre * gz
        yp[k] = Dv0 * u[k];
      } else {
        dyg[k] = dy;
      }
      x[k] = dl[k] * u[k];
      du[k] = Dv0 * dyg[k];
      dd[k] = 0.f;
      dDv_chunk = fmaf(dyg[k], u[k], dDv_chunk);
    }
    if (sg == 0) kahan(dDv_acc, dDv_comp, dDv_chunk);
    ssm::ChunkDecays<C, SOFTPLUS>(dsum, rows + ch * RS, sA + ch * N, bias, valid, tc, L, tw, lane, sDec);
    const float* gcur = sG + par * DB * N + ch * N;
    float* gnxt = sG + (par ^ 1) * DB * N + ch * N;
#pragma unroll 1
    for (int j = 0; j < NPG; ++j) {
      const int n = sg * NPG + j;
      const float a2 = sA2[ch * N + n], an = sA[ch * N + n];
      const float hstart = sCk[ch * N + n];
      const float* Bn = sB + n * NS + tpos;
      const float* Cn = sC + n * NS + tpos;
      float dA[K], hs[K], cdy[K];
      float H = 0.f;
#pragma unroll
      for (int k = 0; k < K; ++k) {
        dA[k] = ssm::Ex2(dl[k] * a2);
        hs[k] = x[k] * Bn[k * TPC];
        H = fmaf(dA[k], H, hs[k]);
      }
      // The lane's decay, both directions; the chunk's carries the adjoint to the previous chunk.
      const float P = ssm::Ex2(a2 * dsum), Pc = sDec[n];
      float unused;
      const float hin = ssm::ChunkScan<TW, false>(P, H, hstart, Pc, sAgg + (((0 * 2 + (n & 1)) * DB + ch) * TW) * 2,
                                                  tw, lane, unused);
      float h = hin;
#pragma unroll
      for (int k = 0; k < K; ++k) {
        h = fmaf(dA[k], h, hs[k]);
        hs[k] = h;
      }
      // The lane's reverse composition q -> dA_k (C_k dyg_k + q).
      float R = 0.f;
#pragma unroll
      for (int k = K - 1; k >= 0; --k) {
        cdy[k] = Cn[k * TPC] * dyg[k];
        R = dA[k] * (cdy[k] + R);
      }
      float qend;
      const float qin =
          ssm::ChunkScan<TW, true>(P, R, gcur[n], Pc, sAgg + (((1 * 2 + (n & 1)) * DB + ch) * TW) * 2, tw, lane, qend);
      if (tpos == 0) gnxt[n] = qend;
      float q = qin, dAn = 0.f;
      float* red = sRed + ((((j & 1) * SW + sg) * 2) * DB + ch) * TC + tpos;  // [which][DB][TC] of this buffer, group
#pragma unroll
      for (int k = K - 1; k >= 0; --k) {
        const float g = cdy[k] + q;  // total adjoint of h_t
        const float hprev = k ? hs[k - 1] : hin;
        q = dA[k] * g;
        const float gdh = q * hprev;  // d/d(delta A) of step t
        const float gB = g * Bn[k * TPC];
        du[k] = fmaf(gB, dl[k], du[k]);
        dd[k] = fmaf(gB, u[k], fmaf(an, gdh, dd[k]));
        dAn = fmaf(dl[k], gdh, dAn);
        if (GATE) yp[k] = fmaf(Cn[k * TPC], hs[k], yp[k]);
        red[k * TPC] = g * x[k];
        red[DB * TC + k * TPC] = dyg[k] * hs[k];
      }
      dAn = ssm::WarpSum(dAn);
      if (lane == 0) {
        const int at_n = (ch * TW + tw) * N + n;
        float sum = sdA[at_n], comp = sdAc[at_n];
        kahan(sum, comp, dAn);
        sdA[at_n] = sum;
        sdAc[at_n] = comp;
      }
      // One barrier per state: the next state writes the other buffer, whose readers (the previous
      // state's reduction) finished before this barrier.
      __syncthreads();
      constexpr int kRedIters = (2 * TC * SW + C::THREADS - 1) / C::THREADS;
      const float* rbuf = sRed + (j & 1) * SW * 2 * DB * TC;
#pragma unroll
      for (int r = 0; r < kRedIters; ++r) {
        const int i = r * C::THREADS + threadIdx.x;
        if ((2 * TC * SW) % C::THREADS != 0 && i >= 2 * TC * SW) break;
        const int g = i / (2 * TC), which = (i / TC) % 2, slot = i % TC;
        float s = 0.f;
#pragma unroll
        for (int cc = 0; cc < DB; ++cc) s += rbuf[((g * 2 + which) * DB + cc) * TC + slot];
        sSum[(which * N + g * NPG + j) * NS + slot] = s;
      }
    }
    __syncthreads();  // the last state's reduction is in sSum; sRed is free
    // The chunk's (dBm, dCm): one coalesced atomic per (t, n) and block (the chunk's (t, n) are
    // contiguous in the (B, L, N) sums: one base pointer, 32-bit offsets); FIXED: a plain store
    // into this channel group's own (B, L, N) partial.
    {
      const SsmFixedSums fx = SsmFixedSumsLayout(B, L, D, N, DB, ws.total);
      float* dst = FIXED ? wsf + fx.dB + ((static_cast<long long>(blockIdx.x) * B + b) * L + tc) * N
                         : wsf + ws.dB + (b * L + tc) * N;
      const long long to_dC = FIXED ? fx.dC - fx.dB : ws.dC - ws.dB;
      const int inside = static_cast<int>(min(static_cast<long long>(TC), L - tc)) * N;
      for (int i = threadIdx.x; i < 2 * TC * N; i += C::THREADS) {
        const int which = i / (TC * N), r = i % (TC * N);
        const int tl = r / N, n = r % N;
        if (r >= inside) continue;
        const float v = sSum[(which * N + n) * NS + (tl % K) * TPC + tl / K];
        if (FIXED) {
          dst[(which ? to_dC : 0) + r] = v;
        } else {
          atomicAdd(dst + (which ? to_dC : 0) + r, v);
        }
      }
    }
    // The state groups' partial du, ddelta (, y) meet in group 0.
    constexpr int kParts = GATE ? 3 : 2;
    if (SW > 1) {
      if (sg > 0) {
#pragma unroll
        for (int k = 0; k < K; ++k) {
          float* dst = sRed + (((sg - 1) * kParts) * DB + ch) * TC + k * TPC + tpos;
          dst[0] = du[k];
          dst[DB * TC] = dd[k];
          if (GATE) dst[2 * DB * TC] = yp[k];
        }
      }
      __syncthreads();
    }
    float dbias_chunk = 0.f;
    if (sg == 0) {
#pragma unroll
      for (int k = 0; k < K; ++k) {
#pragma unroll
        for (int g = 1; g < SW; ++g) {
          const float* src = sRed + (((g - 1) * kParts) * DB + ch) * TC + k * TPC + tpos;
          du[k] += src[0];
          dd[k] += src[DB * TC];
          if (GATE) yp[k] += src[2 * DB * TC];
        }
        const int slot = ch * RS + k * TPC + tpos;
        const bool ok = valid && tc + tpos * K + k < L;
        const float ddl = ok ? dd[k] * dsoft[k] : 0.f;
        dbias_chunk += ddl;
        rows[slot] = du[k];
        rows[DB * RS + slot] = ddl;
        if (GATE) rows[2 * DB * RS + slot] = yp[k] * gz[k];
      }
      if (BIAS) kahan(dbias_acc, dbias_comp, dbias_chunk);
    }
    __syncthreads();
    ssm::StoreRows<T, C, kLean>(p.du, rows, b, L, D, d0, tc);
    ssm::StoreRows<T, C, kLean>(p.ddelta, rows + DB * RS, b, L, D, d0, tc);
    if (GATE) ssm::StoreRows<T, C, kLean>(p.dz, rows + 2 * DB * RS, b, L, D, d0, tc);
  }
  __syncthreads();
  const SsmFixedSums fx = SsmFixedSumsLayout(B, L, D, N, DB, ws.total);
  const float* fin = sG + par * DB * N;  // q entering step 0 = d/dh0
  for (int i = threadIdx.x; i < DB * N; i += C::THREADS) {
    const long long di = d0 + i / N;
    if (di >= D) continue;
    if (p.dh0) p.dh0[(b * D + di) * N + i % N] = fin[i];
    float s = 0.f;
    for (int j = 0; j < TW; ++j) s += sdA[((i / N) * TW + j) * N + i % N];
    if (FIXED) {
      wsf[fx.dA + (b * D + di) * N + i % N] = s;
    } else {
      atomicAdd(&wsf[ws.dA + di * N + i % N], s);
    }
  }
  dDv_acc = ssm::WarpSum(dDv_acc);
  dbias_acc = ssm::WarpSum(dbias_acc);
  if (valid && sg == 0 && lane == 0) {
    if (FIXED) {
      wsf[fx.dDv + b * D + d] = dDv_acc;
      if (BIAS) wsf[fx.dbias + b * D + d] = dbias_acc;
    } else {
      atomicAdd(&wsf[ws.dDv + d], dDv_acc);
      if (BIAS) atomicAdd(&wsf[ws.dbias + d], dbias_acc);
    }
  }
}

#undef SSM_T_TEMPLATE
