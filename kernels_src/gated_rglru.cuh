// rglru kernels (included by gated_scan.cuh, which documents the families).
#pragma once

namespace gated {

template <typename T, int VEC>
__device__ __forceinline__ bool RgLruAligned(const RgLruParams& p, bool bwd) {
  bool ok = p.width % VEC == 0 && PackAligned<T, VEC>(p.x) && PackAligned<T, VEC>(p.ga) &&
            PackAligned<T, VEC>(p.gx) && PackAligned<T, VEC>(p.h);
  if (bwd) {
    ok = ok && PackAligned<T, VEC>(p.dh) && PackAligned<T, VEC>(p.dx) && PackAligned<T, VEC>(p.dga) &&
         PackAligned<T, VEC>(p.dgx);
  }
  return ok;
}

// ---- sequential -------------------------------------------------------------------

template <typename T, int VEC, int THREADS, int P>
__device__ __forceinline__ void RgLruForwardSequential(const RgLruParams& p) {
  const long long b = blockIdx.y;
  const long long c0 = (static_cast<long long>(blockIdx.x) * THREADS + threadIdx.x) * VEC;
  const Lanes l = MakeLanes<T, VEC>(c0, p.width, RgLruAligned<T, VEC>(p, false));
  if (l.nvalid <= 0) return;
  const T* __restrict__ xs = static_cast<const T*>(p.x);
  const T* __restrict__ gas = static_cast<const T*>(p.ga);
  const T* __restrict__ gxs = static_cast<const T*>(p.gx);
  T* __restrict__ hs = static_cast<T*>(p.h);
  float sp[VEC], h[VEC];
  LoadChannels(sp, p.lambda, l);
#pragma unroll
  for (int j = 0; j < VEC; ++j) sp[j] = SoftplusAccurate(sp[j]);
  LoadState(h, p.h0 != nullptr ? p.h0 + b * p.width : nullptr, l);
  for (long long t0 = 0; t0 < p.length; t0 += P) {
    Pack<T, VEC> px[P], pa[P], pi[P];
#pragma unroll
    for (int i = 0; i < P; ++i) {
      const long long t = t0 + i;
      if (t < p.length) {
        const long long off = (b * p.length + t) * p.width + c0;
        LoadPack(px[i], xs + off, l.wide, l.nvalid);
        LoadPack(pa[i], gas + off, l.wide, l.nvalid);
        LoadPack(pi[i], gxs + off, l.wide, l.nvalid);
      }
    }
#pragma unroll
    for (int i = 0; i < P; ++i) {
      const long long t = t0 + i;
      if (t < p.length) {
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          const Gate g = MakeGate<T>(-kC * sp[j] * Sigmoid(pa[i].Get(j)));
          h[j] = fmaf(g.a, h[j], g.s * Sigmoid(pi[i].Get(j)) * px[i].Get(j));
        }
        StorePack<T, VEC>(hs + (b * p.length + t) * p.width + c0, h, l.wide, l.nvalid);
      }
    }
  }
  if (p.h_final != nullptr) StoreState(p.h_final + b * p.width, h, l);
}

// The backward at one element: from g = d + u_{t+1}, writes dx, dga, dgx
// into the arrays and returns the new u = a g; adds G ratio to dlam.
struct RgLruGrads {
  float dx, dga, dgx, u;
};
template <typename T>
__device__ __forceinline__ RgLruGrads RgLruBackwardAt(float sp, float ratio, float ga, float gx, float x, float hprev,
                                                      float g, float& dlam) {
  const Sig r = Sigmoid2(ga);
  const Sig i = Sigmoid2(gx);
  const float la = -kC * sp * r.s;
  const Gate gate = MakeGate<T>(la);
  RgLruGrads out;
  out.dx = g * gate.s * i.s;
  out.dgx = g * gate.s * x * (i.s * i.c);
  const float big_g = g * (gate.a * hprev * la - i.s * x * gate.a * gate.a * gate.q);
  out.dga = big_g * r.c;
  dlam = fmaf(big_g, ratio, dlam);
  out.u = gate.a * g;
  return out;
}

template <typename T, int VEC, int THREADS, int P>
__device__ __forceinline__ void RgLruBackwardSequential(const RgLruParams& p) {
  const long long b = blockIdx.y;
  const long long c0 = (static_cast<long long>(blockIdx.x) * THREADS + threadIdx.x) * VEC;
  const Lanes l = MakeLanes<T, VEC>(c0, p.width, RgLruAligned<T, VEC>(p, true));
  if (l.nvalid <= 0) return;
  const Layout lay = MakeLayout(p.batch, p.length, p.width, 32 * VEC, 0, kRgLruParams, false);
  const T* __restrict__ xs = static_cast<const T*>(p.x);
  const T* __restrict__ gas = static_cast<const T*>(p.ga);
  const T* __restrict__ gxs = static_cast<const T*>(p.gx);
  const T* __restrict__ hs = static_cast<const T*>(p.h);
  const T* __restrict__ dhs = static_cast<const T*>(p.dh);
  float sp[VEC], ratio[VEC], h0v[VEC], u[VEC], dlam[VEC];
  LoadChannels(sp, p.lambda, l);
#pragma unroll
  for (int j = 0; j < VEC; ++j) {
    ratio[j] = DecayRatio(sp[j]);
    sp[j] = SoftplusAccurate(sp[j]);
  }
  LoadState(h0v, p.h0 != nullptr ? p.h0 + b * p.width : nullptr, l);
  Fill(u, 0.0f);
  Fill(dlam, 0.0f);
  for (long long t0 = p.length - 1; t0 >= 0; t0 -= P) {
    Pack<T, VEC> px[P], pa[P], pi[P], pd[P], ph[P];
#pragma unroll
    for (int i = 0; i < P; ++i) {
      const long long t = t0 - i;
      if (t >= 0) {
        const long long off = (b * p.length + t) * p.width + c0;
        LoadPack(px[i], xs + off, l.wide, l.nvalid);
        LoadPack(pa[i], gas + off, l.wide, l.nvalid);
        LoadPack(pi[i], gxs + off, l.wide, l.nvalid);
        LoadPack(pd[i], dhs + off, l.wide, l.nvalid);
        if (t > 0) LoadPack(ph[i], hs + off - p.width, l.wide, l.nvalid);
      }
    }
#pragma unroll
    for (int i = 0; i < P; ++i) {
      const long long t = t0 - i;
      if (t >= 0) {
        float dx[VEC], dga[VEC], dgx[VEC];
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          const float hprev = t > 0 ? ph[i].Get(j) : h0v[j];
          const RgLruGrads g = RgLruBackwardAt<T>(sp[j], ratio[j], pa[i].Get(j), pi[i].Get(j), px[i].Get(j), hprev,
                                               pd[i].Get(j) + u[j], dlam[j]);
          dx[j] = g.dx;
          dga[j] = g.dga;
          dgx[j] = g.dgx;
          u[j] = g.u;
        }
        const long long off = (b * p.length + t) * p.width + c0;
        StorePack<T, VEC>(static_cast<T*>(p.dx) + off, dx, l.wide, l.nvalid);
        StorePack<T, VEC>(static_cast<T*>(p.dga) + off, dga, l.wide, l.nvalid);
        StorePack<T, VEC>(static_cast<T*>(p.dgx) + off, dgx, l.wide, l.nvalid);
      }
    }
  }
  if (p.dh0 != nullptr) StoreState(p.dh0 + b * p.width, u, l);
  float* param = reinterpret_cast<float*>(static_cast<char*>(p.workspace) + lay.param_offset);
#pragma unroll
  for (int j = 0; j < VEC; ++j) {
    if (j < l.nvalid) param[b * p.width + c0 + j] = dlam[j];
  }
}

// ---- look-back ------------------------------------------------------------------

// Forward: stages ga, gx, x; the local pass computes (a, b) once into the
// fp32 region s_ab (each thread's own slots: no barrier needed), the
// rescan reads them back.
template <typename T, int VEC, int THREADS, int STRIP, int TILE>
__device__ __forceinline__ void RgLruForwardLookback(const RgLruParams& p) {
  using SP = SmemPlan<T, VEC, THREADS, STRIP, TILE, 3, true>;
  constexpr int kLanes = SP::kLanes, kSegs = SP::kSegs, kSteps = SP::kSteps;
  extern __shared__ __align__(16) unsigned char smem[];
  T* s_in = reinterpret_cast<T*>(smem);
  float2* s_ab = reinterpret_cast<float2*>(smem + SP::kStagedBytes);
  float* s_A = reinterpret_cast<float*>(smem + SP::kCombineOffset);
  float* s_H = s_A + kSegs * STRIP;
  float* s_carry = s_H + kSegs * STRIP;
  unsigned* s_ticket = reinterpret_cast<unsigned*>(s_carry + STRIP);
  const Layout lay = MakeLayout(p.batch, p.length, p.width, STRIP, TILE, kRgLruParams, false);
  const TileIndex x = TakeTicket<STRIP, TILE, false>(p.workspace, s_ticket, p.batch, p.length, p.width);
  const bool chunks = ChunkAligned<T>(p.x, p.width) && ChunkAligned<T>(p.ga, p.width) && ChunkAligned<T>(p.gx, p.width);
  StageRows<T, THREADS, STRIP, TILE>(s_in, static_cast<const T*>(p.ga), p.length, p.width, x.b, x.c_strip, x.base, 0,
                                     chunks);
  StageRows<T, THREADS, STRIP, TILE>(s_in + TILE * STRIP, static_cast<const T*>(p.gx), p.length, p.width, x.b,
                                     x.c_strip, x.base, 0, chunks);
  StageRows<T, THREADS, STRIP, TILE>(s_in + 2 * TILE * STRIP, static_cast<const T*>(p.x), p.length, p.width, x.b,
                                     x.c_strip, x.base, 0, chunks);
  CpAsyncCommit();

  const int tid = threadIdx.x;
  const int lane = tid % kLanes;
  const int seg = tid / kLanes;
  const long long c0 = x.c_strip + lane * VEC;
  const Lanes l = MakeLanes<T, VEC>(c0, p.width, RgLruAligned<T, VEC>(p, false));
  float sp[VEC], carry0[VEC];
  LoadChannels(sp, p.lambda, l);
#pragma unroll
  for (int j = 0; j < VEC; ++j) sp[j] = SoftplusAccurate(sp[j]);
  LoadState(carry0, (x.tile == 0 && p.h0 != nullptr) ? p.h0 + x.b * p.width : nullptr, l);
  CpAsyncWait<0>();
  __syncthreads();

  auto pack_at = [&](int input, int row) -> const Pack<T, VEC>& {
    return *reinterpret_cast<const Pack<T, VEC>*>(s_in + (input * TILE + row) * STRIP + lane * VEC);
  };
  float A[VEC], H[VEC];
  Fill(A, 1.0f);
  Fill(H, 0.0f);
#pragma unroll
  for (int i = 0; i < kSteps; ++i) {
    const int row = seg * kSteps + i;
    const bool in = x.base + row < p.length;
    const Pack<T, VEC> pa = pack_at(0, row), pi = pack_at(1, row), px = pack_at(2, row);
    float2* ab = s_ab + row * STRIP + lane * VEC;
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const Gate g = MakeGate<T>(-kC * sp[j] * Sigmoid(pa.Get(j)));
      const float a = in ? g.a : 1.0f;
      const float bb = in ? g.s * Sigmoid(pi.Get(j)) * px.Get(j) : 0.0f;
      ab[j] = make_float2(a, bb);
      A[j] *= a;
      H[j] = fmaf(a, H[j], bb);
    }
  }
  float s[VEC];
  CombineAndLookBack<VEC, THREADS, STRIP, TILE, -1>(A, H, carry0, x, lay, p.workspace, s_A, s_H, s_carry, s);
  if (l.nvalid <= 0) return;
  T* __restrict__ out = static_cast<T*>(p.h);
#pragma unroll 4
  for (int i = 0; i < kSteps; ++i) {
    const int row = seg * kSteps + i;
    const long long t = x.base + row;
    const float2* ab = s_ab + row * STRIP + lane * VEC;
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const float2 v = ab[j];
      s[j] = fmaf(v.x, s[j], v.y);
    }
    if (t < p.length) {
      StorePack<T, VEC>(out + (x.b * p.length + t) * p.width + c0, s, l.wide, l.nvalid);
      if (t == p.length - 1 && p.h_final != nullptr) StoreState(p.h_final + x.b * p.width, s, l);
    }
  }
}

// Backward: stages ga, dh (group 0: all the local pass needs) and gx, x,
// h_{t-1} (group 1, in flight during the local pass and the look-back).
template <typename T, int VEC, int THREADS, int STRIP, int TILE>
__device__ __forceinline__ void RgLruBackwardLookback(const RgLruParams& p) {
  using SP = SmemPlan<T, VEC, THREADS, STRIP, TILE, 5, false>;
  constexpr int kLanes = SP::kLanes, kSegs = SP::kSegs, kSteps = SP::kSteps;
  extern __shared__ __align__(16) unsigned char smem[];
  T* s_in = reinterpret_cast<T*>(smem);
  float* s_A = reinterpret_cast<float*>(smem + SP::kCombineOffset);
  float* s_H = s_A + kSegs * STRIP;
  float* s_carry = s_H + kSegs * STRIP;
  unsigned* s_ticket = reinterpret_cast<unsigned*>(s_carry + STRIP);
  const Layout lay = MakeLayout(p.batch, p.length, p.width, STRIP, TILE, kRgLruParams, false);
  const TileIndex x = TakeTicket<STRIP, TILE, true>(p.workspace, s_ticket, p.batch, p.length, p.width);
  const bool chunks = ChunkAligned<T>(p.x, p.width) && ChunkAligned<T>(p.ga, p.width) &&
                      ChunkAligned<T>(p.gx, p.width) && ChunkAligned<T>(p.dh, p.width) && ChunkAligned<T>(p.h, p.width);
  const T* srcs[5] = {static_cast<const T*>(p.ga), static_cast<const T*>(p.dh), static_cast<const T*>(p.gx),
                      static_cast<const T*>(p.x), static_cast<const T*>(p.h)};
#pragma unroll
  for (int k = 0; k < 5; ++k) {
    StageRows<T, THREADS, STRIP, TILE>(s_in + k * TILE * STRIP, srcs[k], p.length, p.width, x.b, x.c_strip, x.base,
                                       k == 4 ? 1 : 0, chunks);
    if (k == 1 || k == 4) CpAsyncCommit();
  }

  const int tid = threadIdx.x;
  const int lane = tid % kLanes;
  const int seg = tid / kLanes;
  const long long c0 = x.c_strip + lane * VEC;
  const Lanes l = MakeLanes<T, VEC>(c0, p.width, RgLruAligned<T, VEC>(p, true));
  float sp[VEC], ratio[VEC], h0v[VEC], zero[VEC];
  LoadChannels(sp, p.lambda, l);
#pragma unroll
  for (int j = 0; j < VEC; ++j) {
    ratio[j] = DecayRatio(sp[j]);
    sp[j] = SoftplusAccurate(sp[j]);
  }
  LoadState(h0v, p.h0 != nullptr ? p.h0 + x.b * p.width : nullptr, l);
  Fill(zero, 0.0f);
  CpAsyncWait<1>();
  __syncthreads();

  auto pack_at = [&](int input, int row) -> const Pack<T, VEC>& {
    return *reinterpret_cast<const Pack<T, VEC>*>(s_in + (input * TILE + row) * STRIP + lane * VEC);
  };
  auto row_of = [&](int i) { return TILE - 1 - (seg * kSteps + i); };
  float A[VEC], H[VEC];
  Fill(A, 1.0f);
  Fill(H, 0.0f);
#pragma unroll
  for (int i = 0; i < kSteps; ++i) {
    const int row = row_of(i);
    const bool in = x.base + row >= 0;
    const Pack<T, VEC> pa = pack_at(0, row), pd = pack_at(1, row);
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const float a = in ? ExpDecay<T>(-kC * sp[j] * Sigmoid(pa.Get(j))) : 1.0f;
      A[j] *= a;
      H[j] = a * (H[j] + pd.Get(j));
    }
  }
  float u[VEC];
  CombineAndLookBack<VEC, THREADS, STRIP, TILE, 0>(A, H, zero, x, lay, p.workspace, s_A, s_H, s_carry, u);
  float acc[1][VEC];
  Fill(acc[0], 0.0f);
  if (l.nvalid > 0) {
#pragma unroll 2
    for (int i = 0; i < kSteps; ++i) {
      const int row = row_of(i);
      const long long t = x.base + row;
      if (t < 0) break;
      const Pack<T, VEC> pa = pack_at(0, row), pd = pack_at(1, row), pi = pack_at(2, row), px = pack_at(3, row),
                         ph = pack_at(4, row);
      float dx[VEC], dga[VEC], dgx[VEC];
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        const float hprev = t > 0 ? ph.Get(j) : h0v[j];
        const RgLruGrads g =
            RgLruBackwardAt<T>(sp[j], ratio[j], pa.Get(j), pi.Get(j), px.Get(j), hprev, pd.Get(j) + u[j], acc[0][j]);
        dx[j] = g.dx;
        dga[j] = g.dga;
        dgx[j] = g.dgx;
        u[j] = g.u;
      }
      const long long off = (x.b * p.length + t) * p.width + c0;
      StorePack<T, VEC>(static_cast<T*>(p.dx) + off, dx, l.wide, l.nvalid);
      StorePack<T, VEC>(static_cast<T*>(p.dga) + off, dga, l.wide, l.nvalid);
      StorePack<T, VEC>(static_cast<T*>(p.dgx) + off, dgx, l.wide, l.nvalid);
      if (t == 0 && p.dh0 != nullptr) StoreState(p.dh0 + x.b * p.width, u, l);
    }
  }
  float* param = reinterpret_cast<float*>(static_cast<char*>(p.workspace) + lay.param_offset);
  WriteParamPartials<1, VEC, THREADS, STRIP>(acc, reinterpret_cast<float*>(smem), param, x.b * lay.tiles + x.tile,
                                             x.c_strip, p.width);
}

template <int UNIT, int TILE, int ORDER>
__device__ __forceinline__ void RgLruFinalize(const RgLruParams& p) {
  const Layout lay = MakeLayout(p.batch, p.length, p.width, UNIT, TILE, kRgLruParams, false, false, ORDER == 2);
  float* const out[1] = {p.dlambda};
  FinalizeParams<1>(reinterpret_cast<const float*>(static_cast<const char*>(p.workspace) + lay.param_offset),
                    lay.parts, p.width, out);
}

}  // namespace gated

template <typename T, int VEC, int THREADS, int P>
__global__ void __launch_bounds__(THREADS) rglru_fwd_sequential(const RgLruParams p) {
  gated::RgLruForwardSequential<T, VEC, THREADS, P>(p);
}
template <typename T, int VEC, int THREADS, int P>
__global__ void __launch_bounds__(THREADS) rglru_bwd_sequential(const RgLruParams p) {
  gated::RgLruBackwardSequential<T, VEC, THREADS, P>(p);
}
template <typename T, int VEC, int THREADS, int STRIP, int TILE>
__global__ void __launch_bounds__(THREADS) rglru_fwd_lookback(const RgLruParams p) {
  gated::RgLruForwardLookback<T, VEC, THREADS, STRIP, TILE>(p);
}
template <typename T, int VEC, int THREADS, int STRIP, int TILE>
__global__ void __launch_bounds__(THREADS) rglru_bwd_lookback(const RgLruParams p) {
  gated::RgLruBackwardLookback<T, VEC, THREADS, STRIP, TILE>(p);
}
// UNIT, TILE: the scan kernel's channel unit and tile (0: sequential), which
// fix the workspace offsets and the number of partial rows; ORDER: the
// `lookback` scan's (2: packed workspace, launched as a PDL dependent).
template <typename T, int UNIT, int TILE, int ORDER = 0>
__global__ void __launch_bounds__(gated::kFinalizeThreads) rglru_bwd_finalize(const RgLruParams p) {
  scan::GridDependencyWait();
  scan::LaunchDependents();
  gated::RgLruFinalize<UNIT, TILE, ORDER>(p);
}
