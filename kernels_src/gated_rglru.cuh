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
  LoadChannels<VEC, false>(sp, p.lambda, l);
#pragma unroll
  for (int j = 0; j < VEC; ++j) sp[j] = SoftplusAccurate(sp[j]);
  LoadRow<VEC, false>(h, p.h0 != nullptr ? p.h0 + b * p.width : nullptr, l);
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
  if (p.h_final != nullptr) StoreRow<VEC, false>(p.h_final + b * p.width, h, l);
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
  LoadChannels<VEC, false>(sp, p.lambda, l);
#pragma unroll
  for (int j = 0; j < VEC; ++j) {
    ratio[j] = DecayRatio(sp[j]);
    sp[j] = SoftplusAccurate(sp[j]);
  }
  LoadRow<VEC, false>(h0v, p.h0 != nullptr ? p.h0 + b * p.width : nullptr, l);
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
  if (p.dh0 != nullptr) StoreRow<VEC, false>(p.dh0 + b * p.width, u, l);
  float* param = reinterpret_cast<float*>(static_cast<char*>(p.workspace) + lay.param_offset);
#pragma unroll
  for (int j = 0; j < VEC; ++j) {
    if (j < l.nvalid) param[b * p.width + c0 + j] = dlam[j];
  }
}

template <int UNIT, int TILE, int ORDER>
__device__ __forceinline__ void RgLruFinalize(const RgLruParams& p) {
  const Layout lay = MakeLayout(p.batch, p.length, p.width, UNIT, TILE, kRgLruParams, false, false, ORDER >= 2);
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
// UNIT, TILE: the scan kernel's channel unit and tile (0: sequential), which
// fix the workspace offsets and the number of partial rows; ORDER: the
// `lookback` scan's (2: packed workspace, launched as a PDL dependent).
template <typename T, int UNIT, int TILE, int ORDER = 0>
__global__ void __launch_bounds__(gated::kFinalizeThreads) rglru_bwd_finalize(const RgLruParams p) {
  scan::GridDependencyWait();
  scan::LaunchDependents();
  gated::RgLruFinalize<UNIT, TILE, ORDER>(p);
}
