// samu kernels (included by gated_scan.cuh, which documents the families).
// Forward: the controller kernel, then the scan. Backward: the scan (per-
// (token, unit) sums and per-part parameter sums; the look-back also adds
// dm_t / W and writes the controller partials), the fix-up (sequential only:
// adds dm_t / W to dx, controller partials), finalize.
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
    LoadChannels(sp, p.lambda, l);
    LoadChannels(beta, p.beta, l);
    LoadChannels(gamma, p.gamma, l);
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
  LoadState(h, p.h0 != nullptr ? p.h0 + b * p.width : nullptr, l);
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
  if (p.h_final != nullptr) StoreState(p.h_final + b * p.width, h, l);
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
  LoadState(h0v, p.h0 != nullptr ? p.h0 + b * p.width : nullptr, l);
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
  if (p.dh0 != nullptr) StoreState(p.dh0 + b * p.width, u, l);
  float* param = reinterpret_cast<float*>(static_cast<char*>(p.workspace) + lay.param_offset);
#pragma unroll
  for (int n = 0; n < 3; ++n) {
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      if (j < l.nvalid) param[(b * kSamuParams + n) * p.width + c0 + j] = acc[n][j];
    }
  }
}

// ---- look-back ------------------------------------------------------------------

// Forward: stages x; (r_t, i_t) per row come from p.ctrl (one float2 per
// row, the same address for the row's lanes). The gate is recomputed in the
// rescan (two transcendentals per element; no fp32 (a, b) region).
template <typename T, int VEC, int THREADS, int STRIP, int TILE>
__device__ __forceinline__ void SamuForwardLookback(const SamuParams& p) {
  using SP = SmemPlan<T, VEC, THREADS, STRIP, TILE, 1, false>;
  constexpr int kLanes = SP::kLanes, kSegs = SP::kSegs, kSteps = SP::kSteps;
  extern __shared__ __align__(16) unsigned char smem[];
  T* s_in = reinterpret_cast<T*>(smem);
  float* s_A = reinterpret_cast<float*>(smem + SP::kCombineOffset);
  float* s_H = s_A + kSegs * STRIP;
  float* s_carry = s_H + kSegs * STRIP;
  unsigned* s_ticket = reinterpret_cast<unsigned*>(s_carry + STRIP);
  const Layout lay = MakeLayout(p.batch, p.length, p.width, STRIP, TILE, kSamuParams, true);
  const TileIndex x = TakeTicket<STRIP, TILE, false>(p.workspace, s_ticket, p.batch, p.length, p.width);
  StageRows<T, THREADS, STRIP, TILE>(s_in, static_cast<const T*>(p.x), p.length, p.width, x.b, x.c_strip, x.base, 0,
                                     ChunkAligned<T>(p.x, p.width));
  CpAsyncCommit();
  const int tid = threadIdx.x;
  const int lane = tid % kLanes;
  const int seg = tid / kLanes;
  const long long c0 = x.c_strip + lane * VEC;
  const Lanes l = MakeLanes<T, VEC>(c0, p.width, SamuAligned<T, VEC>(p, false));
  const float2* __restrict__ ctrl = reinterpret_cast<const float2*>(p.ctrl) + x.b * p.length;
  SamuChannels<VEC> ch;
  ch.Load(p, l, false);
  float carry0[VEC];
  LoadState(carry0, (x.tile == 0 && p.h0 != nullptr) ? p.h0 + x.b * p.width : nullptr, l);
  CpAsyncWait<0>();
  __syncthreads();

  auto pack_at = [&](int row) -> const Pack<T, VEC>& {
    return *reinterpret_cast<const Pack<T, VEC>*>(s_in + row * STRIP + lane * VEC);
  };
  float A[VEC], H[VEC];
  Fill(A, 1.0f);
  Fill(H, 0.0f);
#pragma unroll
  for (int i = 0; i < kSteps; ++i) {
    const int row = seg * kSteps + i;
    const long long t = x.base + row;
    const bool in = t < p.length;
    const float2 ri = in ? __ldg(ctrl + t) : make_float2(0.0f, 0.0f);
    const Pack<T, VEC> px = pack_at(row);
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const Gate g = MakeGate<T>(-kC * ch.sp[j] * ri.x);
      const float a = in ? g.a : 1.0f;
      const float bb = g.s * ri.y * ch.beta[j] * px.Get(j);  // 0 past L (i = 0)
      A[j] *= a;
      H[j] = fmaf(a, H[j], bb);
    }
  }
  float s[VEC];
  CombineAndLookBack<VEC, THREADS, STRIP, TILE, -1>(A, H, carry0, x, lay, p.workspace, s_A, s_H, s_carry, s);
  if (l.nvalid <= 0) return;
#pragma unroll 4
  for (int i = 0; i < kSteps; ++i) {
    const int row = seg * kSteps + i;
    const long long t = x.base + row;
    if (t >= p.length) break;
    const float2 ri = __ldg(ctrl + t);
    const Pack<T, VEC> px = pack_at(row);
    float y[VEC];
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const Gate g = MakeGate<T>(-kC * ch.sp[j] * ri.x);
      s[j] = fmaf(g.a, s[j], g.s * ri.y * ch.beta[j] * px.Get(j));
      y[j] = ch.gamma[j] * s[j];
    }
    const long long off = (x.b * p.length + t) * p.width + c0;
    StorePack<T, VEC>(static_cast<T*>(p.h) + off, s, l.wide, l.nvalid);
    StorePack<T, VEC>(static_cast<T*>(p.y) + off, y, l.wide, l.nvalid);
    if (t == p.length - 1 && p.h_final != nullptr) StoreState(p.h_final + x.b * p.width, s, l);
  }
}

// Shares of dm_t / W for the rows of one (b, tile), once every strip of the
// tile has published its token sums: s_share[row] (rows outside [0, L) get
// 0). Every block of the tile computes them (the same values, a fixed
// order); the block of strip 0 also writes the tile's controller partials.
// Rows go kRowBatch at a time per warp, so a lane has that many rows' loads
// in flight.
template <int THREADS, int TILE>
__device__ __forceinline__ void SamuTileShares(const SamuParams& p, const Layout& lay, const TileIndex& x,
                                               float* s_share, float* s_ctrl) {
  constexpr int kWarps = THREADS / 32;
  constexpr int kRowBatch = 8;
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const float* tok = reinterpret_cast<const float*>(static_cast<const char*>(p.workspace) + lay.token_offset);
  const float w_r = p.controller[0], b_r = p.controller[1], w_i = p.controller[2], b_i = p.controller[3];
  float contrib[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int r0 = warp * kRowBatch; r0 < TILE; r0 += kWarps * kRowBatch) {
    float sums[kRowBatch][3];
#pragma unroll
    for (int k = 0; k < kRowBatch; ++k) {
      const long long t = x.base + r0 + k;
      sums[k][0] = sums[k][1] = sums[k][2] = 0.0f;
      if (r0 + k < TILE && t >= 0 && t < p.length) {
        const float* row = tok + (x.b * p.length + t) * lay.strips * kSamuTokenSums;
        for (long long q = lane; q < lay.strips; q += 32) {
#pragma unroll
          for (int n = 0; n < 3; ++n) sums[k][n] += __ldcg(row + q * kSamuTokenSums + n);
        }
      }
    }
#pragma unroll
    for (int k = 0; k < kRowBatch; ++k) {
#pragma unroll
      for (int n = 0; n < 3; ++n) sums[k][n] = RowSum<32>(sums[k][n]);
      const long long t = x.base + r0 + k;
      if (r0 + k >= TILE) continue;
      float share = 0.0f;
      if (t >= 0 && t < p.length) {
        const float m = sums[k][2] / static_cast<float>(p.width);
        const float zr = fmaf(w_r, m, b_r), zi = fmaf(w_i, m, b_i);
        const float dz_r = sums[k][0] * SigmoidAccurate(-zr);
        const float dz_i = sums[k][1] * (SigmoidAccurate(zi) * SigmoidAccurate(-zi));
        share = fmaf(w_r, dz_r, w_i * dz_i) / static_cast<float>(p.width);
        contrib[0] = fmaf(dz_r, m, contrib[0]);
        contrib[1] += dz_r;
        contrib[2] = fmaf(dz_i, m, contrib[2]);
        contrib[3] += dz_i;
      }
      if (lane == 0) s_share[r0 + k] = share;
    }
  }
  if (x.strip != 0) return;
  if (lane == 0) {
#pragma unroll
    for (int n = 0; n < 4; ++n) s_ctrl[warp * 4 + n] = contrib[n];
  }
  __syncthreads();  // x.strip is the same for the whole block
  if (threadIdx.x < 4) {
    float total = 0.0f;
    for (int w = 0; w < kWarps; ++w) total += s_ctrl[w * 4 + threadIdx.x];
    reinterpret_cast<float*>(static_cast<char*>(p.workspace) + lay.ctrl_offset)[(x.b * lay.tiles + x.tile) * 4 +
                                                                                threadIdx.x] = total;
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

// Backward: stages dy (group 0: the local pass needs only dy and the
// controller) and x, h_{t-1} (group 1). Every thread runs every step of the
// rescan (the token sums are reductions over the row's lanes). dx needs
// dm_t / W, a sum over all W channels of the token, so the rescan keeps its
// dx part (g s i beta, rounded to T) in its own dy slot, publishes the
// token sums of its strip, and the strips of the time tile meet at a
// counter; each then forms the shares of its rows and stores dx once. No
// deadlock: the strips of a tile hold consecutive tickets and wait only for
// each other (after publishing their look-back state), and CanImplement
// requires strips <= SMs (a block fits on every SM): while the lowest
// unfinished tile is not wholly started, all resident blocks belong to it,
// fewer than the SMs, so its next block can start; once it is, it finishes.
template <typename T, int VEC, int THREADS, int STRIP, int TILE>
__device__ __forceinline__ void SamuBackwardLookback(const SamuParams& p) {
  using SP = SmemPlan<T, VEC, THREADS, STRIP, TILE, 3, false>;
  constexpr int kLanes = SP::kLanes, kSegs = SP::kSegs, kSteps = SP::kSteps;
  static_assert(kLanes <= 32, "samu's token sums reduce over the lanes of one warp");
  static_assert(kSegs * STRIP >= TILE && kSegs * STRIP >= 4 * (THREADS / 32), "s_A holds the shares, s_H the warps' sums");
  static_assert(3 * kSegs * 4 <= 2 * TILE * int(sizeof(T)), "the x / h staging holds the parameter sums");
  extern __shared__ __align__(16) unsigned char smem[];
  T* s_in = reinterpret_cast<T*>(smem);
  float* s_A = reinterpret_cast<float*>(smem + SP::kCombineOffset);
  float* s_H = s_A + kSegs * STRIP;
  float* s_carry = s_H + kSegs * STRIP;
  unsigned* s_ticket = reinterpret_cast<unsigned*>(s_carry + STRIP);
  const Layout lay = MakeLayout(p.batch, p.length, p.width, STRIP, TILE, kSamuParams, true);
  const TileIndex x = TakeTicket<STRIP, TILE, true>(p.workspace, s_ticket, p.batch, p.length, p.width);
  const bool chunks = ChunkAligned<T>(p.x, p.width) && ChunkAligned<T>(p.dy, p.width) && ChunkAligned<T>(p.h, p.width);
  StageRows<T, THREADS, STRIP, TILE>(s_in, static_cast<const T*>(p.dy), p.length, p.width, x.b, x.c_strip, x.base, 0,
                                     chunks);
  CpAsyncCommit();
  StageRows<T, THREADS, STRIP, TILE>(s_in + TILE * STRIP, static_cast<const T*>(p.x), p.length, p.width, x.b,
                                     x.c_strip, x.base, 0, chunks);
  StageRows<T, THREADS, STRIP, TILE>(s_in + 2 * TILE * STRIP, static_cast<const T*>(p.h), p.length, p.width, x.b,
                                     x.c_strip, x.base, 1, chunks);
  CpAsyncCommit();
  const int tid = threadIdx.x;
  const int lane = tid % kLanes;
  const int seg = tid / kLanes;
  const long long c0 = x.c_strip + lane * VEC;
  const Lanes l = MakeLanes<T, VEC>(c0, p.width, SamuAligned<T, VEC>(p, true));
  const float2* __restrict__ ctrl = reinterpret_cast<const float2*>(p.ctrl) + x.b * p.length;
  SamuChannels<VEC> ch;
  ch.Load(p, l, true);
  float h0v[VEC], zero[VEC];
  LoadState(h0v, p.h0 != nullptr ? p.h0 + x.b * p.width : nullptr, l);
  Fill(zero, 0.0f);
  CpAsyncWait<1>();
  __syncthreads();

  auto slot = [&](int input, int row) { return s_in + (input * TILE + row) * STRIP + lane * VEC; };
  auto pack_at = [&](int input, int row) -> const Pack<T, VEC>& {
    return *reinterpret_cast<const Pack<T, VEC>*>(slot(input, row));
  };
  auto row_of = [&](int i) { return TILE - 1 - (seg * kSteps + i); };
  float A[VEC], H[VEC];
  Fill(A, 1.0f);
  Fill(H, 0.0f);
#pragma unroll
  for (int i = 0; i < kSteps; ++i) {
    const int row = row_of(i);
    const long long t = x.base + row;
    const bool in = t >= 0;
    const float r = in ? __ldg(ctrl + t).x : 0.0f;
    const Pack<T, VEC> pd = pack_at(0, row);
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const float a = in ? ExpDecay<T>(-kC * ch.sp[j] * r) : 1.0f;
      A[j] *= a;
      H[j] = a * fmaf(ch.gamma[j], pd.Get(j), H[j]);
    }
  }
  float u[VEC];
  CombineAndLookBack<VEC, THREADS, STRIP, TILE, 0>(A, H, zero, x, lay, p.workspace, s_A, s_H, s_carry, u);
  float* tok = reinterpret_cast<float*>(static_cast<char*>(p.workspace) + lay.token_offset);
  float acc[3][VEC];
#pragma unroll
  for (int n = 0; n < 3; ++n) Fill(acc[n], 0.0f);
#pragma unroll 2
  for (int i = 0; i < kSteps; ++i) {
    const int row = row_of(i);
    const long long t = x.base + row;
    // No early exit: the row sums are shuffles over the whole warp, whose
    // two row groups may be on different sides of t = 0. Rows before t = 0
    // are staged as zeros and contribute nothing.
    const bool in = t >= 0;
    const float2 ri = in ? __ldg(ctrl + t) : make_float2(0.0f, 0.0f);
    const Pack<T, VEC> pd = pack_at(0, row), px = pack_at(1, row), ph = pack_at(2, row);
    float dx[VEC], sums[3] = {0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      float a3[3] = {acc[0][j], acc[1][j], acc[2][j]};
      const float hprev = t > 0 ? ph.Get(j) : h0v[j];
      dx[j] = SamuBackwardAt<T>(ch.sp[j], ch.ratio[j], ch.beta[j], ch.gamma[j], ri.x, ri.y, px.Get(j), pd.Get(j),
                                hprev, u[j], a3, sums);
      acc[0][j] = a3[0];
      acc[1][j] = a3[1];
      acc[2][j] = a3[2];
    }
#pragma unroll
    for (int n = 0; n < 3; ++n) sums[n] = RowSum<kLanes>(sums[n]);
    if (!in) continue;
    if (lane == 0) {
      const long long token = x.b * p.length + t;
#pragma unroll
      for (int n = 0; n < 3; ++n) tok[(token * lay.strips + x.strip) * kSamuTokenSums + n] = sums[n];
    }
    // This thread's own slot: only it reads dy there, and it just did.
    StoreSmemPack<T, VEC>(slot(0, row), dx);
    if (t == 0 && p.dh0 != nullptr) StoreState(p.dh0 + x.b * p.width, u, l);
  }
  float* param = reinterpret_cast<float*>(static_cast<char*>(p.workspace) + lay.param_offset);
  // Reduced in the x / h staging (the dy slots hold the dx parts).
  WriteParamPartials<3, VEC, THREADS, STRIP>(acc, reinterpret_cast<float*>(s_in + TILE * STRIP), param,
                                             x.b * lay.tiles + x.tile, x.c_strip, p.width);

  // Meet the other strips of this (b, tile): their token sums are published
  // once the counter reaches the number of strips.
  __threadfence();
  __syncthreads();
  if (tid == 0) {
    unsigned* counter = static_cast<unsigned*>(p.workspace) + lay.group_counters + x.b * lay.tiles + x.tile;
    atomicAdd(counter, 1u);
    while (scan::LoadAcquire(counter) < static_cast<unsigned>(lay.strips)) {
    }
  }
  __syncthreads();
  SamuTileShares<THREADS, TILE>(p, lay, x, s_A, s_H);
  __syncthreads();
  if (l.nvalid <= 0) return;
  T* __restrict__ out = static_cast<T*>(p.dx);
#pragma unroll 4
  for (int i = 0; i < kSteps; ++i) {
    const int row = row_of(i);
    const long long t = x.base + row;
    if (t < 0) break;
    const Pack<T, VEC> part = pack_at(0, row);
    const float share = s_A[row];
    float v[VEC];
#pragma unroll
    for (int j = 0; j < VEC; ++j) v[j] = part.Get(j) + share;
    StorePack<T, VEC>(out + (x.b * p.length + t) * p.width + c0, v, l.wide, l.nvalid);
  }
}

// ---- fix-up and finalize ------------------------------------------------------------

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
    const float w_r = p.controller[0], b_r = p.controller[1], w_i = p.controller[2], b_i = p.controller[3];
    const float m = sums[2] / static_cast<float>(p.width);
    const float zr = fmaf(w_r, m, b_r), zi = fmaf(w_i, m, b_i);
    const float dz_r = sums[0] * SigmoidAccurate(-zr);
    const float dz_i = sums[1] * (SigmoidAccurate(zi) * SigmoidAccurate(-zi));
    const float share = fmaf(w_r, dz_r, w_i * dz_i) / static_cast<float>(p.width);
    contrib[0] = dz_r * m;
    contrib[1] = dz_r;
    contrib[2] = dz_i * m;
    contrib[3] = dz_i;
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
  __shared__ float s_red[kFinalizeThreads];
  const float* rows = reinterpret_cast<const float*>(static_cast<const char*>(p.workspace) + lay.ctrl_offset);
  for (int n = 0; n < 4; ++n) {
    float sum = 0.0f;
    for (long long q = threadIdx.x; q < lay.ctrl_rows; q += kFinalizeThreads) sum += __ldcg(rows + q * 4 + n);
    s_red[threadIdx.x] = sum;
    __syncthreads();
    for (int stride = kFinalizeThreads / 2; stride >= 1; stride /= 2) {
      if (threadIdx.x < stride) s_red[threadIdx.x] += s_red[threadIdx.x + stride];
      __syncthreads();
    }
    if (threadIdx.x == 0) p.dcontroller[n] = s_red[0];
    __syncthreads();
  }
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
template <typename T, int VEC, int THREADS, int STRIP, int TILE>
__global__ void __launch_bounds__(THREADS) samu_fwd_lookback(const SamuParams p) {
  gated::SamuForwardLookback<T, VEC, THREADS, STRIP, TILE>(p);
}
template <typename T, int VEC, int THREADS, int STRIP, int TILE>
__global__ void __launch_bounds__(THREADS) samu_bwd_lookback(const SamuParams p) {
  gated::SamuBackwardLookback<T, VEC, THREADS, STRIP, TILE>(p);
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
