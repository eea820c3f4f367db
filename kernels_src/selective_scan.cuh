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
// exp(delta A) is exp2(delta * A log2 e) with the log2 e folded into A once.
#pragma once

#include "scan_common.cuh"
#include "selective_scan_params.h"

namespace ssm {

constexpr float kLog2e = 1.4426950408889634f;

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

}  // namespace ssm

#define SSM_TEMPLATE \
  template <typename T, int N, int DB, int SPLIT, int SEG, int CHUNK, bool BIAS, bool SOFTPLUS, bool GATE>
#define SSM_CFG ssm::Cfg<N, DB, SPLIT, SEG, CHUNK>

// Segment-local forward from zero: end state -> hseg, sum of delta -> sdelta.
SSM_TEMPLATE
__global__ void __launch_bounds__(SSM_CFG::THREADS) selective_scan_fwd_local(SelectiveScanParams p) {
  using C = SSM_CFG;
  __shared__ __align__(16) float smem[2][C::BC];
  const ssm::Where<C> w(p);
  const ssm::Channel<C> chn(p, w, BIAS);
  const SsmWorkspace ws = SsmWorkspaceLayout(w.B, w.L, w.D, N, SEG, CHUNK);
  float h[C::S] = {};
  float sum = 0.f;
  ssm::ForEachTile<T, C, BIAS, SOFTPLUS, GATE, false, false>(
      p, w, chn.bias, smem, [&](const auto& tile, const float* sB, const float*, long long) {
#pragma unroll
        for (int i = 0; i < CHUNK; ++i) {
          const float x = tile.dl[i] * tile.u[i];
          sum += tile.dl[i];
#pragma unroll
          for (int s = 0; s < C::S; ++s) {
            const float dA = exp2f(tile.dl[i] * chn.A2[s]);
            h[s] = fmaf(dA, h[s], x * sB[i * N + w.sub * C::S + s]);
          }
        }
      });
  if (!w.valid) return;
  float* wsf = static_cast<float*>(p.workspace);
#pragma unroll
  for (int s = 0; s < C::S; ++s) wsf[ws.hseg + w.SegState(s)] = h[s];
  if (w.sub == 0) wsf[ws.sdelta + (w.b * w.segs + w.seg) * w.D + w.d] = sum;
}

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
  float h = p.h0 ? p.h0[e] : 0.f;
  for (long long s = 0; s < segs; ++s) {
    const long long at = (b * segs + s) * D * N + dn;
    const float local = wsf[ws.hseg + at];
    wsf[ws.hseg + at] = h;
    h = fmaf(exp2f(a2 * wsf[ws.sdelta + (b * segs + s) * D + d]), h, local);
  }
  if (BWD) {
    float r = 0.f;
    for (long long s = segs - 1; s >= 0; --s) {
      const long long at = (b * segs + s) * D * N + dn;
      const float local = wsf[ws.gseg + at];
      wsf[ws.gseg + at] = r;
      r = fmaf(exp2f(a2 * wsf[ws.sdelta + (b * segs + s) * D + d]), r, local);
    }
  }
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
            const float dA = exp2f(tile.dl[i] * chn.A2[s]);
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
  using C = SSM_CFG;
  __shared__ __align__(16) float smem[2][C::BC];
  const ssm::Where<C> w(p);
  const ssm::Channel<C> chn(p, w, BIAS);
  const SsmWorkspace ws = SsmWorkspaceLayout(w.B, w.L, w.D, N, SEG, CHUNK);
  float h[C::S] = {};
  float sum = 0.f;
  ssm::ForEachTile<T, C, BIAS, SOFTPLUS, GATE, false, false>(
      p, w, chn.bias, smem, [&](const auto& tile, const float* sB, const float*, long long) {
#pragma unroll
        for (int i = 0; i < CHUNK; ++i) {
          const float x = tile.dl[i] * tile.u[i];
          sum += tile.dl[i];
#pragma unroll
          for (int s = 0; s < C::S; ++s) {
            const float dA = exp2f(tile.dl[i] * chn.A2[s]);
            h[s] = fmaf(dA, h[s], x * sB[i * N + w.sub * C::S + s]);
          }
        }
      });
  float g[C::S] = {};  // dA_{t+1} g_{t+1} entering step t
  ssm::ForEachTile<T, C, BIAS, SOFTPLUS, GATE, true, true>(
      p, w, chn.bias, smem, [&](const auto& tile, const float*, const float* sC, long long) {
#pragma unroll
        for (int i = CHUNK - 1; i >= 0; --i) {
          const float dyg = GATE ? tile.dy[i] * tile.z[i] * ssm::Sigmoid(tile.z[i]) : tile.dy[i];
#pragma unroll
          for (int s = 0; s < C::S; ++s) {
            const float dA = exp2f(tile.dl[i] * chn.A2[s]);
            g[s] = dA * fmaf(sC[i * N + w.sub * C::S + s], dyg, g[s]);
          }
        }
      });
  if (!w.valid) return;
  float* wsf = static_cast<float*>(p.workspace);
#pragma unroll
  for (int s = 0; s < C::S; ++s) {
    wsf[ws.hseg + w.SegState(s)] = h[s];
    wsf[ws.gseg + w.SegState(s)] = g[s];
  }
  if (w.sub == 0) wsf[ws.sdelta + (w.b * w.segs + w.seg) * w.D + w.d] = sum;
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
            const float dA = exp2f(tile.dl[i] * chn.A2[s]);
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
            h_start[s] = fmaf(exp2f(dl * chn.A2[s]), h_start[s], x * bn);
          }
        }
#pragma unroll
        for (int i = 0; i < CHUNK; ++i) {
          const float x = tile.dl[i] * tile.u[i];
#pragma unroll
          for (int s = 0; s < S; ++s) {
            dAs[i][s] = exp2f(tile.dl[i] * chn.A2[s]);
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

// The reductions' fp32 sums to the outputs (dBm, dCm in the dtype).
template <typename T, int N>
__global__ void __launch_bounds__(256) selective_scan_bwd_finalize(SelectiveScanParams p) {
  const long long B = p.batch, L = p.length, D = p.dim;
  const SsmWorkspace ws = SsmWorkspaceLayout(B, L, D, N, 0, 1);  // the prefix does not depend on segment, chunk
  const float* wsf = static_cast<const float*>(p.workspace);
  const long long tokens = B * L * N, params = D * N;
  const long long n = tokens > params ? tokens : params;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    if (i < tokens) {
      ssm::St<T>(p.dBm, i, wsf[ws.dB + i]);
      ssm::St<T>(p.dCm, i, wsf[ws.dC + i]);
    }
    if (i < params) p.dA[i] = wsf[ws.dA + i];
    if (i < D) {
      p.dDv[i] = wsf[ws.dDv + i];
      if (p.ddelta_bias) p.ddelta_bias[i] = wsf[ws.dbias + i];
    }
  }
}

#undef SSM_TEMPLATE
#undef SSM_CFG
