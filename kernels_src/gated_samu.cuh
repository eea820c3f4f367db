// samu kernels of the sequential family, the shared fix-up and finalize
// (included by gated_scan.cuh, which documents the families). Forward: the
// controller kernel, then the scan. Backward: the scan (per-(token, unit)
// sums and per-part parameter sums), the fix-up (adds dm_t / W to dx,
// controller partials), finalize.
#pragma once

namespace gated {

template <typename T, int VEC>
__device__ __forceinline__ bool SamuAligned(const SamuParams& p, bool bwd) {
  bool ok = p.width % VEC == 0 && PackAligned<T, VEC>(p.x) && PackAligned<T, VEC>(p.h) && PackAligned<T, VEC>(p.y);
  if (bwd) ok = ok && PackAligned<T, VEC>(p.dy) && PackAligned<T, VEC>(p.dx);
  return ok;
}

// One warp per token: m_t = mean_c x (fp32, lanes in a fixed order), then
// (r_t, i_t) into p.ctrl.
template <typename T, int VEC>
__device__ __forceinline__ void SamuControl(const SamuParams& p) {
  const long long token = static_cast<long long>(blockIdx.x) * kFixupTokensPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (token >= p.batch * p.length) return;
  const bool aligned = p.width % VEC == 0 && PackAligned<T, VEC>(p.x);
  const T* row = static_cast<const T*>(p.x) + token * p.width;
  float sum = 0.0f;
  for (long long c0 = lane * VEC; c0 < p.width; c0 += 32 * VEC) {
    const Lanes l = MakeLanes<T, VEC>(c0, p.width, aligned);
    Pack<T, VEC> px;
    LoadPack(px, row + c0, l.wide, l.nvalid);
#pragma unroll
    for (int j = 0; j < VEC; ++j) sum += px.Get(j);
  }
  sum = RowSum<32>(sum);
  if (lane == 0) {
    const float m = sum / static_cast<float>(p.width);
    const float w_r = p.controller[0], b_r = p.controller[1], w_i = p.controller[2], b_i = p.controller[3];
    p.ctrl[2 * token] = SigmoidAccurate(fmaf(w_r, m, b_r));
    p.ctrl[2 * token + 1] = SigmoidAccurate(fmaf(w_i, m, b_i));
  }
}

// Per-channel constants of the thread's VEC channels.
template <int VEC>
struct SamuChannels {
  float sp[VEC], ratio[VEC], beta[VEC], gamma[VEC];
  __device__ __forceinline__ void Load(const SamuParams& p, const Lanes& l, bool bwd) {
    LoadChannels<VEC, false>(sp, p.lambda, l);
    LoadChannels<VEC, false>(beta, p.beta, l);
    LoadChannels<VEC, false>(gamma, p.gamma, l);
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      if (bwd) ratio[j] = DecayRatio(sp[j]);
      sp[j] = SoftplusAccurate(sp[j]);
    }
  }
};

// The backward at one element. Accumulates the parameter sums (acc[0]
// dlambda, acc[1] dbeta, acc[2] dgamma) and the token sums (sum G, sum g s
// beta x, sum x); returns the new u = a g and the dx part g s i beta.
template <typename T>
__device__ __forceinline__ float SamuBackwardAt(float sp, float ratio, float beta, float gamma, float r, float ii,
                                                float x, float dy, float hprev, float& u, float (&acc)[3],
                                                float (&sums)[3]) {
  const float la = -kC * sp * r;
  const Gate gate = MakeGate<T>(la);
  const float g = fmaf(gamma, dy, u);
  const float v = ii * beta * x;
  const float big_g = g * (gate.a * hprev * la - v * gate.a * gate.a * gate.q);
  const float gs = g * gate.s;
  acc[0] = fmaf(big_g, ratio, acc[0]);
  acc[1] = fmaf(gs * ii, x, acc[1]);
  acc[2] = fmaf(dy, fmaf(gate.a, hprev, gate.s * v), acc[2]);
  sums[0] += big_g;
  sums[1] = fmaf(gs * beta, x, sums[1]);
  sums[2] += x;
  u = gate.a * g;
  return gs * ii * beta;
}

// ---- sequential -------------------------------------------------------------------

template <typename T, int VEC, int THREADS, int P>
__device__ __forceinline__ void SamuForwardSequential(const SamuParams& p) {
  const long long b = blockIdx.y;
  const long long c0 = (static_cast<long long>(blockIdx.x) * THREADS + threadIdx.x) * VEC;
  const Lanes l = MakeLanes<T, VEC>(c0, p.width, SamuAligned<T, VEC>(p, false));
  if (l.nvalid <= 0) return;
  const T* __restrict__ xs = static_cast<const T*>(p.x);
  const float2* __restrict__ ctrl = reinterpret_cast<const float2*>(p.ctrl) + b * p.length;
  SamuChannels<VEC> ch;
  ch.Load(p, l, false);
  float h[VEC];
  LoadRow<VEC, false>(h, p.h0 != nullptr ? p.h0 + b * p.width : nullptr, l);
  for (long long t0 = 0; t0 < p.length; t0 += P) {
    Pack<T, VEC> px[P];
    float2 ri[P];
#pragma unroll
    for (int i = 0; i < P; ++i) {
      const long long t = t0 + i;
      if (t < p.length) {
        LoadPack(px[i], xs + (b * p.length + t) * p.width + c0, l.wide, l.nvalid);
        ri[i] = __ldg(ctrl + t);
      }
    }
#pragma unroll
    for (int i = 0; i < P; ++i) {
      const long long t = t0 + i;
      if (t < p.length) {
        float y[VEC];
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          const Gate g = MakeGate<T>(-kC * ch.sp[j] * ri[i].x);
          h[j] = fmaf(g.a, h[j], g.s * ri[i].y * ch.beta[j] * px[i].Get(j));
          y[j] = ch.gamma[j] * h[j];
        }
        const long long off = (b * p.length + t) * p.width + c0;
        StorePack<T, VEC>(static_cast<T*>(p.h) + off, h, l.wide, l.nvalid);
        StorePack<T, VEC>(static_cast<T*>(p.y) + off, y, l.wide, l.nvalid);
      }
    }
  }
  if (p.h_final != nullptr) StoreRow<VEC, false>(p.h_final + b * p.width, h, l);
}

// A warp's 32 x VEC channels are one unit of the token sums; every lane of
// a live warp runs every step (the sums are warp reductions).
template <typename T, int VEC, int THREADS, int P>
__device__ __forceinline__ void SamuBackwardSequential(const SamuParams& p) {
  const long long b = blockIdx.y;
  const long long c0 = (static_cast<long long>(blockIdx.x) * THREADS + threadIdx.x) * VEC;
  const Layout lay = MakeLayout(p.batch, p.length, p.width, 32 * VEC, 0, kSamuParams, true);
  const long long unit = (static_cast<long long>(blockIdx.x) * THREADS + threadIdx.x) / 32;
  if (unit >= lay.strips) return;  // the whole warp
  const Lanes l = MakeLanes<T, VEC>(c0, p.width, SamuAligned<T, VEC>(p, true));
  const T* __restrict__ xs = static_cast<const T*>(p.x);
  const T* __restrict__ hs = static_cast<const T*>(p.h);
  const T* __restrict__ dys = static_cast<const T*>(p.dy);
  const float2* __restrict__ ctrl = reinterpret_cast<const float2*>(p.ctrl) + b * p.length;
  float* tok = reinterpret_cast<float*>(static_cast<char*>(p.workspace) + lay.token_offset);
  SamuChannels<VEC> ch;
  ch.Load(p, l, true);
  float h0v[VEC], u[VEC], acc[3][VEC];
  LoadRow<VEC, false>(h0v, p.h0 != nullptr ? p.h0 + b * p.width : nullptr, l);
  Fill(u, 0.0f);
#pragma unroll
  for (int n = 0; n < 3; ++n) Fill(acc[n], 0.0f);
  for (long long t0 = p.length - 1; t0 >= 0; t0 -= P) {
    Pack<T, VEC> px[P], pd[P], ph[P];
    float2 ri[P];
#pragma unroll
    for (int i = 0; i < P; ++i) {
      const long long t = t0 - i;
      if (t >= 0) {
        const long long off = (b * p.length + t) * p.width + c0;
        LoadPack(px[i], xs + off, l.wide, l.nvalid);
        LoadPack(pd[i], dys + off, l.wide, l.nvalid);
        if (t > 0) LoadPack(ph[i], hs + off - p.width, l.wide, l.nvalid);
        ri[i] = __ldg(ctrl + t);
      }
    }
#pragma unroll
    for (int i = 0; i < P; ++i) {
      const long long t = t0 - i;
      if (t >= 0) {
        float dx[VEC], sums[3] = {0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          float a3[3] = {acc[0][j], acc[1][j], acc[2][j]};
          const float hprev = t > 0 ? ph[i].Get(j) : h0v[j];
          dx[j] = SamuBackwardAt<T>(ch.sp[j], ch.ratio[j], ch.beta[j], ch.gamma[j], ri[i].x, ri[i].y, px[i].Get(j),
                                 pd[i].Get(j), hprev, u[j], a3, sums);
          acc[0][j] = a3[0];
          acc[1][j] = a3[1];
          acc[2][j] = a3[2];
        }
#pragma unroll
        for (int n = 0; n < 3; ++n) sums[n] = RowSum<32>(sums[n]);
        const long long token = b * p.length + t;
        if (threadIdx.x % 32 == 0) {
#pragma unroll
          for (int n = 0; n < 3; ++n) tok[(token * lay.strips + unit) * kSamuTokenSums + n] = sums[n];
        }
        StorePack<T, VEC>(static_cast<T*>(p.dx) + (b * p.length + t) * p.width + c0, dx, l.wide, l.nvalid);
      }
    }
  }
  if (l.nvalid <= 0) return;
  if (p.dh0 != nullptr) StoreRow<VEC, false>(p.dh0 + b * p.width, u, l);
  float* param = reinterpret_cast<float*>(static_cast<char*>(p.workspace) + lay.param_offset);
#pragma unroll
  for (int n = 0; n < 3; ++n) {
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      if (j < l.nvalid) param[(b * kSamuParams + n) * p.width + c0 + j] = acc[n][j];
    }
  }
}

// Stores VEC fp32 values as T into this thread's own staged slot.
template <typename T, int VEC>
__device__ __forceinline__ void StoreSmemPack(T* dst, const float (&v)[VEC]) {
  Pack<T, VEC> pack;
  if constexpr (sizeof(T) == 4) {
#pragma unroll
    for (int j = 0; j < VEC; ++j) pack.u[j] = __float_as_uint(v[j]);
  } else {
#pragma unroll
    for (int k = 0; k < VEC / 2; ++k) pack.u[k] = scan::PackPair<T>(v[2 * k], v[2 * k + 1]);
  }
  *reinterpret_cast<Pack<T, VEC>*>(dst) = pack;
}

// ---- fix-up and finalize ------------------------------------------------------------

// dm_t / W of one token and its controller contributions (dz_r m, dz_r,
// dz_i m, dz_i), from the token's sums over all W channels (sum G, sum g s
// beta x, sum x).
struct SamuShare {
  float share;
  float contrib[4];
};
__device__ __forceinline__ SamuShare SamuShareOf(const SamuParams& p, const float (&sums)[3]) {
  const float w_r = p.controller[0], b_r = p.controller[1], w_i = p.controller[2], b_i = p.controller[3];
  const float m = sums[2] / static_cast<float>(p.width);
  const float zr = fmaf(w_r, m, b_r), zi = fmaf(w_i, m, b_i);
  const float dz_r = sums[0] * SigmoidAccurate(-zr);
  const float dz_i = sums[1] * (SigmoidAccurate(zi) * SigmoidAccurate(-zi));
  return {fmaf(w_r, dz_r, w_i * dz_i) / static_cast<float>(p.width), {dz_r * m, dz_r, dz_i * m, dz_i}};
}

// SamuShareOf from the token's saved control values (r_t, i_t) instead of
// from m_t: sigmoid(-z_r) = 1 - r_t and sigmoid'(z_i) = i_t (1 - i_t), no
// exp per token (the `chunked` rescan at 16 bits).
// w_r, w_i: the controller's weights; inv_w = 1 / W (the caller's, once).
__device__ __forceinline__ SamuShare SamuShareOfControl(float w_r, float w_i, float inv_w, const float (&sums)[3],
                                                        float2 ri) {
  const float m = sums[2] * inv_w;
  const float dz_r = sums[0] * (1.0f - ri.x);
  const float dz_i = sums[1] * (ri.y * (1.0f - ri.y));
  return {fmaf(w_r, dz_r, w_i * dz_i) * inv_w, {dz_r * m, dz_r, dz_i * m, dz_i}};
}

// One warp per token: reduces the token's unit sums (in unit order per lane,
// then a fixed butterfly), forms dz_r, dz_i and dm_t, adds dm_t / W to the
// token's dx row, and the block writes its controller partials.
template <typename T, int VEC, int UNIT, int TILE>
__device__ __forceinline__ void SamuFixup(const SamuParams& p) {
  __shared__ float s_ctrl[kFixupTokensPerBlock][4];
  const Layout lay = MakeLayout(p.batch, p.length, p.width, UNIT, TILE, kSamuParams, true);
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const long long token = static_cast<long long>(blockIdx.x) * kFixupTokensPerBlock + warp;
  float contrib[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  if (token < p.batch * p.length) {
    const float* tok = reinterpret_cast<const float*>(static_cast<const char*>(p.workspace) + lay.token_offset) +
                       token * lay.strips * kSamuTokenSums;
    float sums[3] = {0.0f, 0.0f, 0.0f};
    for (long long k = lane; k < lay.strips; k += 32) {
#pragma unroll
      for (int n = 0; n < 3; ++n) sums[n] += __ldcg(tok + k * kSamuTokenSums + n);
    }
#pragma unroll
    for (int n = 0; n < 3; ++n) sums[n] = RowSum<32>(sums[n]);
    const SamuShare sh = SamuShareOf(p, sums);
    const float share = sh.share;
#pragma unroll
    for (int n = 0; n < 4; ++n) contrib[n] = sh.contrib[n];
    const bool aligned = p.width % VEC == 0 && PackAligned<T, VEC>(p.dx);
    T* row = static_cast<T*>(p.dx) + token * p.width;
    for (long long c0 = lane * VEC; c0 < p.width; c0 += 32 * VEC) {
      const Lanes l = MakeLanes<T, VEC>(c0, p.width, aligned);
      Pack<T, VEC> pk;
      LoadPack(pk, row + c0, l.wide, l.nvalid);
      float v[VEC];
#pragma unroll
      for (int j = 0; j < VEC; ++j) v[j] = pk.Get(j) + share;
      StorePack<T, VEC>(row + c0, v, l.wide, l.nvalid);
    }
  }
  if (lane == 0) {
#pragma unroll
    for (int n = 0; n < 4; ++n) s_ctrl[warp][n] = contrib[n];
  }
  __syncthreads();
  if (threadIdx.x < 4) {
    float total = 0.0f;
    for (int w = 0; w < kFixupTokensPerBlock; ++w) total += s_ctrl[w][threadIdx.x];
    reinterpret_cast<float*>(static_cast<char*>(p.workspace) + lay.ctrl_offset)[blockIdx.x * 4 + threadIdx.x] = total;
  }
}

// The four controller gradients: sums over `nrows` partial rows [nrows][4]
// (16-byte aligned), together: one 16-byte load per row, each thread's rows
// in order, a butterfly per warp and the warps in order (one barrier; the
// same order per sum). One block of kFinalizeThreads threads.
__device__ __forceinline__ void SumControllerRows(const float4* rows, long long nrows, float* out) {
  __shared__ float4 s_warp[kFinalizeThreads / 32];
  float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  for (long long q = threadIdx.x; q < nrows; q += kFinalizeThreads) {
    const float4 r = __ldcg(rows + q);
    sum.x += r.x;
    sum.y += r.y;
    sum.z += r.z;
    sum.w += r.w;
  }
#pragma unroll
  for (int o = 16; o >= 1; o /= 2) {  // a + b == b + a: every lane ends with the same bits
    sum.x += __shfl_xor_sync(0xffffffffu, sum.x, o);
    sum.y += __shfl_xor_sync(0xffffffffu, sum.y, o);
    sum.z += __shfl_xor_sync(0xffffffffu, sum.z, o);
    sum.w += __shfl_xor_sync(0xffffffffu, sum.w, o);
  }
  if (threadIdx.x % 32 == 0) s_warp[threadIdx.x / 32] = sum;
  __syncthreads();
  if (threadIdx.x < 4) {
    float total = 0.0f;
    for (int w = 0; w < kFinalizeThreads / 32; ++w) {
      const float4 v = s_warp[w];
      total += threadIdx.x == 0 ? v.x : (threadIdx.x == 1 ? v.y : (threadIdx.x == 2 ? v.z : v.w));
    }
    out[threadIdx.x] = total;
  }
}

// Blocks [0, ceil(W/32)): the channel parameters; the last block: the four
// controller scalars, summed over the fix-up blocks' rows (fixed tree).
// FIXUP: the look-back's dm_t / W came from the fix-up kernel (the
// `lookback` family): one controller row per fix-up block. PACKED: its _o2
// workspace (gated_layout.h).
template <int UNIT, int TILE, bool FIXUP = false, bool PACKED = false>
__device__ __forceinline__ void SamuFinalize(const SamuParams& p) {
  const Layout lay = MakeLayout(p.batch, p.length, p.width, UNIT, TILE, kSamuParams, true, FIXUP, PACKED);
  if (static_cast<long long>(blockIdx.x) * 32 < p.width) {
    float* const out[3] = {p.dlambda, p.dbeta, p.dgamma};
    FinalizeParams<3>(reinterpret_cast<const float*>(static_cast<const char*>(p.workspace) + lay.param_offset),
                      lay.parts, p.width, out);
    return;
  }
  SumControllerRows(reinterpret_cast<const float4*>(static_cast<const char*>(p.workspace) + lay.ctrl_offset),
                    lay.ctrl_rows, p.dcontroller);
}

}  // namespace gated

// grid ceil(B*L / 8) blocks of 256 threads (one warp per token).
template <typename T, int VEC>
__global__ void __launch_bounds__(gated::kFixupThreads) samu_fwd_control(const SamuParams p) {
  gated::SamuControl<T, VEC>(p);
}
template <typename T, int VEC, int THREADS, int P>
__global__ void __launch_bounds__(THREADS) samu_fwd_sequential(const SamuParams p) {
  gated::SamuForwardSequential<T, VEC, THREADS, P>(p);
}
template <typename T, int VEC, int THREADS, int P>
__global__ void __launch_bounds__(THREADS) samu_bwd_sequential(const SamuParams p) {
  gated::SamuBackwardSequential<T, VEC, THREADS, P>(p);
}
// grid ceil(B*L / 8) blocks of 256 threads.
template <typename T, int VEC, int UNIT, int TILE>
__global__ void __launch_bounds__(gated::kFixupThreads) samu_bwd_fixup(const SamuParams p) {
  gated::SamuFixup<T, VEC, UNIT, TILE>(p);
}
// grid ceil(W / 32) + 1 blocks of 1024 threads.
template <typename T, int UNIT, int TILE>
__global__ void __launch_bounds__(gated::kFinalizeThreads) samu_bwd_finalize(const SamuParams p) {
  gated::SamuFinalize<UNIT, TILE>(p);
}
