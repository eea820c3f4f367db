// rglru and samu kernels (DESIGN.md "Operators"), instantiated by NVRTC name
// expressions. Layout is token-major (B, L, W): element (b, t, c) sits at
// (b*L + t)*W + c. T is float, __nv_bfloat16 or __half; the carry is fp32.
//
// Both operators are the linear recurrence h_t = a_t h_{t-1} + b_t per
// channel, with a_t and b_t computed on chip from the inputs (never stored
// in device memory):
//   rglru  a = exp(la), la = -8 softplus(lambda_c) sigmoid(ga), b = sqrt(1 - a^2) sigmoid(gx) x
//   samu   a = exp(la), la = -8 softplus(lambda_c) r_t,         b = sqrt(1 - a^2) i_t beta_c x
// samu's (r_t, i_t) come from the controller kernel (one warp per token:
// m_t = mean_c x, written to p.ctrl), so samu never holds a (B, L, W) gate.
// sqrt(1 - a^2) = sqrt(-expm1(2 la)) (stable near a = 1) and the backward
// carries dL/dla * la, whose factor la / sqrt(1 - a^2) stays bounded
// (worker/reference_gated.h explains both).
//
// Backward: the reverse scan u_t = a_t (u_{t+1} + d_t), g_t = d_t + u_{t+1},
// dh0 = u_0, with d = dh (rglru) or gamma dy (samu): the same affine maps
// s -> A s + H as linear_scan's backward. Parameter gradients are full
// reductions over (B, L): every block writes its partial sums once to the
// workspace (no atomics, no zeroing) and the finalize kernel sums them in a
// fixed order. samu's dx also needs, per token, dm_t / W with dm_t from sums
// over all W channels: the scan writes per-(token, channel unit) partial
// sums. The sequential family then runs a fix-up kernel (one warp per token:
// reduces them, adds dm_t / W to the token's dx row, writes the controller's
// partial gradients), which reads and writes dx once more; so does the
// `lookback` family (its fix-up reads 16-byte rows); the `fused` family
// keeps its dx part in shared memory until the strips of its time tile have
// all added their sums (a counter per (b, tile)), then stores dx once
// (gated_held.cuh, SamuMeetBackward).
//
// Families (their plans are in compiler/plan_gated.cc; workspace offsets in
// gated_layout.h, shared with the plans):
//   sequential  one thread per (b, VEC channels) walks all of t, loading P
//               steps at a time. grid (ceil(ceil(W/VEC)/THREADS), B).
//   lookback    (gated_held.cuh) single pass per phase: a block owns (b,
//               STRIP channels, TILE steps), stages its inputs raw in shared
//               memory by cp.async, each thread composes TILE/segments steps
//               holding its (a, b) in registers, segments combine, the last
//               segment publishes and looks back over earlier tiles
//               (decoupled look-back; tiles time-slowest: an atomic ticket,
//               or _o2 the block index with the packed look-back and launch
//               epochs), then every thread rescans and stores; samu's
//               backward writes dx without dm_t / W and a fix-up kernel
//               (16-byte rows) adds it: no strip waits for another.
//   fused       (samu, gated_held.cuh) lookback with the controller met
//               inside the scans (no control and no fix-up kernel).
//   chunked     (samu, gated_chunked.cuh) three phases per direction over
//               time chunks (local pass, carry over chunks, rescan); the
//               passes that need m_t or dm_t own whole token rows, so no
//               control, no fix-up and no look-back.
// (v1's `lookbacksmem`, staging an fp32 (a, b) region, was dropped in
// session 4: never selected, 1.5-3x slower than `lookback`.)
#pragma once

#include "gated_layout.h"
#include "rglru_params.h"
#include "samu_params.h"
#include "scan_common.cuh"

namespace gated {

using scan::Lanes;
using scan::LoadPack;
using scan::MakeLanes;
using scan::Pack;
using scan::StorePack;

// ---- fp32 rows of channels (parameters, h0 / h_final / dh0, workspace states) ----
//
// LoadRow / StoreRow / LoadChannels move a thread's VEC consecutive fp32 as
// 16-byte (VEC % 4 == 0) or 8-byte accesses where all are inside the row and
// the address allows it, so a warp touches whole sectors. As scalars at
// VEC = 8, a warp's 32 lanes sit 32 bytes apart and each 4-byte access is its
// own sector: 8x the sectors (Nsight Compute, session 9: 41% of
// samu_bwd_chunk_scan's). scan::LoadState / StoreState, which linear_scan
// keeps, move one float at a time. kVector false does the same here (the
// `sequential` family: its rglru forward spilled 4 bytes at 16 bits with the
// vector path).
template <int VEC, bool kVector>
constexpr int FloatsPerAccess() {
  return !kVector ? 1 : VEC % 4 == 0 ? 4 : VEC % 2 == 0 ? 2 : 1;
}
template <int VEC, bool kVector>
__device__ __forceinline__ bool VectorAccess(const float* p, const Lanes& l) {
  constexpr int kF = FloatsPerAccess<VEC, kVector>();
  return kF > 1 && l.nvalid >= VEC && (reinterpret_cast<unsigned long long>(p) % (4 * kF)) == 0;
}
template <int VEC, bool kLdg, bool kVector>
__device__ __forceinline__ void LoadFloatRun(float (&v)[VEC], const float* p, const Lanes& l) {
  constexpr int kF = FloatsPerAccess<VEC, kVector>();
  if (VectorAccess<VEC, kVector>(p, l)) {
    if constexpr (kF == 4) {
#pragma unroll
      for (int q = 0; q < VEC / 4; ++q) {
        const float4 f = kLdg ? __ldg(reinterpret_cast<const float4*>(p) + q) : reinterpret_cast<const float4*>(p)[q];
        v[4 * q] = f.x;
        v[4 * q + 1] = f.y;
        v[4 * q + 2] = f.z;
        v[4 * q + 3] = f.w;
      }
      return;
    } else if constexpr (kF == 2) {
#pragma unroll
      for (int q = 0; q < VEC / 2; ++q) {
        const float2 f = kLdg ? __ldg(reinterpret_cast<const float2*>(p) + q) : reinterpret_cast<const float2*>(p)[q];
        v[2 * q] = f.x;
        v[2 * q + 1] = f.y;
      }
      return;
    }
  }
#pragma unroll
  for (int j = 0; j < VEC; ++j) v[j] = j < l.nvalid ? (kLdg ? __ldg(p + j) : p[j]) : 0.0f;
}

template <int VEC, bool kVector = true>
__device__ __forceinline__ void LoadRow(float (&v)[VEC], const float* row, const Lanes& l) {
  if constexpr (!kVector) {
#pragma unroll
    for (int j = 0; j < VEC; ++j) v[j] = (row != nullptr && j < l.nvalid) ? row[l.c0 + j] : 0.0f;
    return;
  }
  if (row == nullptr) {
#pragma unroll
    for (int j = 0; j < VEC; ++j) v[j] = 0.0f;
    return;
  }
  LoadFloatRun<VEC, false, kVector>(v, row + l.c0, l);
}

template <int VEC, bool kVector = true>
__device__ __forceinline__ void StoreRow(float* row, const float (&v)[VEC], const Lanes& l) {
  if (row == nullptr) return;
  float* p = row + l.c0;
  constexpr int kF = FloatsPerAccess<VEC, kVector>();
  if (VectorAccess<VEC, kVector>(p, l)) {
    if constexpr (kF == 4) {
#pragma unroll
      for (int q = 0; q < VEC / 4; ++q) {
        reinterpret_cast<float4*>(p)[q] = make_float4(v[4 * q], v[4 * q + 1], v[4 * q + 2], v[4 * q + 3]);
      }
      return;
    } else if constexpr (kF == 2) {
#pragma unroll
      for (int q = 0; q < VEC / 2; ++q) reinterpret_cast<float2*>(p)[q] = make_float2(v[2 * q], v[2 * q + 1]);
      return;
    }
  }
#pragma unroll
  for (int j = 0; j < VEC; ++j) {
    if (j < l.nvalid) p[j] = v[j];
  }
}

// StoreRow's counterpart for sums that several blocks add into one row (the
// `chunked` _a1 rescan's parameter gradients): red.global.add.v4.f32 (sm_90)
// where the four floats are inside the row and 16-byte aligned, else one
// atomicAdd per channel. The order of the blocks' additions varies from run
// to run (fp32 sums: ~1e-7 relative).
template <int VEC>
__device__ __forceinline__ void AddRow(float* row, const float (&v)[VEC], const Lanes& l) {
  if (row == nullptr) return;
  float* p = row + l.c0;
#if __CUDA_ARCH__ >= 900
  if constexpr (VEC % 4 == 0) {
    if (VectorAccess<VEC, true>(p, l)) {
#pragma unroll
      for (int q = 0; q < VEC / 4; ++q) {
        asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p + 4 * q), "f"(v[4 * q]),
                     "f"(v[4 * q + 1]), "f"(v[4 * q + 2]), "f"(v[4 * q + 3])
                     : "memory");
      }
      return;
    }
  }
#endif
#pragma unroll
  for (int j = 0; j < VEC; ++j) {
    if (j < l.nvalid) atomicAdd(p + j, v[j]);
  }
}


constexpr unsigned kFlagAggregate = 1;
constexpr unsigned kFlagInclusive = 2;
constexpr float kC = 8.0f;

template <int N>
__device__ __forceinline__ void Fill(float (&v)[N], float value) {
#pragma unroll
  for (int j = 0; j < N; ++j) v[j] = value;
}

// ---- math ------------------------------------------------------------------

// sigmoid(z) and 1 - sigmoid(z), without cancellation; z is clamped to
// [-80, 80], where both are exact in fp32 and exp never overflows.
struct Sig {
  float s, c;
};
__device__ __forceinline__ Sig Sigmoid2(float z) {
  z = fminf(fmaxf(z, -80.0f), 80.0f);
  const float e = __expf(-z);
  const float s = __fdividef(1.0f, 1.0f + e);
  return {s, e * s};
}
__device__ __forceinline__ float Sigmoid(float z) {
  z = fminf(fmaxf(z, -80.0f), 80.0f);
  return __fdividef(1.0f, 1.0f + __expf(-z));
}
// Accurate forms for per-channel and per-token values (cheap there).
__device__ __forceinline__ float SoftplusAccurate(float p) {
  return p > 0.0f ? p + log1pf(expf(-p)) : log1pf(expf(p));
}
__device__ __forceinline__ float SigmoidAccurate(float z) {
  if (z >= 0.0f) return 1.0f / (1.0f + expf(-z));
  const float e = expf(z);
  return e / (1.0f + e);
}
// dla/dp / la for the decay parameter p: sigmoid(p) / softplus(p) (-> 1 where softplus underflows).
__device__ __forceinline__ float DecayRatio(float p) {
  const float sp = SoftplusAccurate(p);
  return sp > 0.0f ? SigmoidAccurate(p) / sp : 1.0f;
}

// The MUFU approximations the gated kernels use, one PTX instruction each.
enum class Mufu { kEx2Ftz, kTanh, kRsqrtFtz, kSqrtFtz, kLg2Ftz };
template <Mufu F>
__device__ __forceinline__ float MufuApprox(float v) {
  float y;
  if constexpr (F == Mufu::kEx2Ftz) {
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(v));
  } else if constexpr (F == Mufu::kTanh) {
    asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(v));
  } else if constexpr (F == Mufu::kRsqrtFtz) {
    asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(v));
  } else if constexpr (F == Mufu::kLg2Ftz) {
    asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(v));
  } else {
    asm("sqrt.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(v));
  }
  return y;
}

// softplus(p) for the decays of a kernel of dtype T. 16-bit: two MUFU
// (ex2, lg2) and a few FFMA instead of the accurate expf and log1pf (~40
// issued instructions a channel, paid per thread for each of its channels
// in the per-thread prologues: 2-5 instructions per element of samu's held
// forward, bwd local pass and rescan at their tile sizes). e = exp(-|p|);
// log1p(e) by its series to e^3 / 3 below 1/64 (truncation < e^3 / 4 <
// 4e-6 relative), else lg2.approx(1 + e) (absolute error ~2^-22 against
// log2(1 + e) >= 0.022 there: < 1e-5 relative). fp32: SoftplusAccurate.
template <typename T>
__device__ __forceinline__ float SoftplusFor(float p) {
  if constexpr (sizeof(T) == 4) {
    return SoftplusAccurate(p);
  } else {
    const float e = MufuApprox<Mufu::kEx2Ftz>(-fabsf(p) * 1.44269504088896341f);
    const float l = e < 0.015625f ? e * fmaf(e, fmaf(e, 1.0f / 3.0f, -0.5f), 1.0f)
                                  : MufuApprox<Mufu::kLg2Ftz>(1.0f + e) * 0.693147180559945309f;
    return fmaxf(p, 0.0f) + l;
  }
}

// DecayRatio from a softplus s > 0 at 16 bits: sigmoid(p) / s = -expm1(-s) / s,
// by its series below 1/16 (truncation s^4 / 120 < 1e-7), else (1 - ex2) times
// rcp.approx (1 - e^-s >= 0.06 there: < 1e-5 relative); 1 where s = 0.
__device__ __forceinline__ float DecayRatioFast(float s) {
  if (s < 0.0625f) return fmaf(-s, fmaf(-s, fmaf(-s, 1.0f / 24.0f, 1.0f / 6.0f), 0.5f), 1.0f);
  return __fdividef(1.0f - MufuApprox<Mufu::kEx2Ftz>(-s * 1.44269504088896341f), s);
}
// exp for the decay a = exp(la). fp32 inputs need the accurate expf: an
// error d in a grows to about d / sqrt(1 - a^2) in h (20-50 x near a = 1),
// which the 1e-5 fp32 tolerance cannot absorb from __expf's ~2e-7; the
// 16-bit dtypes' tolerances can, and take ex2.approx.ftz of la log2(e):
// FMUL + MUFU.EX2 (__expf's non-ftz ex2 adds a range test and two scaling
// multiplies around the MUFU; a result below 2^-126 flushes to 0, which
// as a decay is the same).
__device__ __forceinline__ float Ex2Ftz(float v) { return MufuApprox<Mufu::kEx2Ftz>(v); }
__device__ __forceinline__ float TanhApprox(float v) { return MufuApprox<Mufu::kTanh>(v); }
__device__ __forceinline__ float RsqrtFtz(float v) { return MufuApprox<Mufu::kRsqrtFtz>(v); }
__device__ __forceinline__ float SqrtApprox(float v) { return MufuApprox<Mufu::kSqrtFtz>(v); }
// fp32 near a = 1 (la > -0.5): exp by its Taylor series to degree 9 in FMAs
// (truncation < 3e-10), whose last FMA rounds once: a within about half an
// ulp, unbiased. A chain of n decays near 1 multiplies n of them, so a bias
// in each (expf is within 2 ulp, not centred) grows to ~n times it in the
// chain's product and in the gradients that follow the chain (samu's dh0 at
// 1x1000x200: 2e-5 of max |ref|, bench/NOTES.md session 29).
__device__ __forceinline__ float ExpNearZero(float la) { return fmaf(la, scan::TaylorTail<1, 8>(la), 1.0f); }
template <typename T>
__device__ __forceinline__ float ExpDecay(float la) {
  if constexpr (sizeof(T) == 4) {
    return la > -0.5f ? ExpNearZero(la) : expf(la);
  } else {
    return Ex2Ftz(la * 1.44269504088896341f);
  }
}

// a = exp(la), s = sqrt(1 - a^2) = sqrt(-expm1(2 la)), q = la / s (0 where s = 0).
struct Gate {
  float a, s, q;
};
template <typename T>
__device__ __forceinline__ Gate MakeGate(float la) {
  Gate g;
  g.a = ExpDecay<T>(la);
  const float x = 2.0f * la;
  // -expm1(x) on [-0.5, 0] by its Taylor series (relative error < 1e-8);
  // below -0.5, 1 - a^2 >= 0.39 has no cancellation.
  const float t = scan::TaylorTail<1, 7>(x);
  const float om = x > -0.5f ? -x * t : fmaf(-g.a, g.a, 1.0f);
  const float rs = rsqrtf(om);
  g.s = om > 0.0f ? om * rs : 0.0f;
  g.q = om > 0.0f ? la * rs : 0.0f;
  return g;
}

// Per-channel fp32 parameters of this thread's VEC channels (0 past W).
template <int VEC, bool kVector = true>
__device__ __forceinline__ void LoadChannels(float (&v)[VEC], const float* __restrict__ src, const Lanes& l) {
  LoadFloatRun<VEC, true, kVector>(v, src + l.c0, l);
}

template <typename T, int VEC>
__device__ __forceinline__ bool PackAligned(const void* ptr) {
  return ptr == nullptr || (reinterpret_cast<unsigned long long>(ptr) % (VEC * sizeof(T))) == 0;
}

// ---- cp.async ----------------------------------------------------------------

// s: a shared-window address (converted once by the caller).
__device__ __forceinline__ void CpAsync16Shared(unsigned s, const void* gmem) {
  asm volatile(
      "{\n\t.reg .u64 g;\n\tcvta.to.global.u64 g, %1;\n\tcp.async.cg.shared.global [%0], [g], 16;\n\t}" ::"r"(s),
      "l"(gmem)
      : "memory");
}
__device__ __forceinline__ void CpAsync16(void* smem, const void* gmem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile(
      "{\n\t.reg .u64 g;\n\tcvta.to.global.u64 g, %1;\n\tcp.async.cg.shared.global [%0], [g], 16;\n\t}" ::"r"(s),
      "l"(gmem)
      : "memory");
}
__device__ __forceinline__ void CpAsyncCommit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// 16 bytes of this thread's own shared memory at a shared-window address
// (no generic-to-shared conversion per access). "memory": ordered after the
// thread's earlier stores to the same bytes.
__device__ __forceinline__ float4 LoadShared16(unsigned s) {
  float4 v;
  asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(s) : "memory");
  return v;
}
// 16 bytes into this thread's own shared memory at a shared-window address.
// "memory": the compiler keeps it in order with the loads of the same bytes
// and does not forward the stored registers to them.
__device__ __forceinline__ void StoreShared16(unsigned s, unsigned a, unsigned b, unsigned c, unsigned d) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(s), "r"(a), "r"(b), "r"(c), "r"(d) : "memory");
}
template <int N>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// Copies rows [0, TILE) of one (B, L, W) input into dst[TILE][STRIP]: row r
// is source time base + r - shift. Rows outside [0, L) and channels past W
// are staged as 0 (the kernels treat out-of-range steps as the identity
// themselves). `aligned`: W is a multiple of a 16-byte chunk and the base
// pointer is 16-byte aligned, so whole chunks may move by cp.async.
template <typename T, int THREADS, int STRIP, int TILE>
__device__ __forceinline__ void StageRows(T* dst, const T* __restrict__ src, long long L, long long W, long long b,
                                          long long c_strip, long long base, int shift, bool aligned) {
  constexpr int kE = 16 / int(sizeof(T));
  constexpr int kPerRow = STRIP / kE;
  constexpr int kChunks = TILE * kPerRow;
  const long long t0 = base - shift;
  if (aligned && t0 >= 0 && t0 + TILE <= L && c_strip + STRIP <= W) {
    const T* g = src + (b * L + t0) * W + c_strip;
#pragma unroll 4
    for (int q = threadIdx.x; q < kChunks; q += THREADS) {
      const int r = q / kPerRow, cc = (q % kPerRow) * kE;
      CpAsync16(dst + r * STRIP + cc, g + r * W + cc);
    }
    return;
  }
  for (int q = threadIdx.x; q < kChunks; q += THREADS) {
    const int r = q / kPerRow, cc = (q % kPerRow) * kE;
    const long long t = t0 + r;
    const long long c = c_strip + cc;
    T* d = dst + r * STRIP + cc;
    const bool t_ok = t >= 0 && t < L;
    if (t_ok && aligned && c < W) {
      CpAsync16(d, src + (b * L + t) * W + c);
    } else {
#pragma unroll
      for (int j = 0; j < kE; ++j) {
        d[j] = (t_ok && c + j < W) ? src[(b * L + t) * W + c + j] : scan::FromFloat<T>(0.0f);
      }
    }
  }
}

template <typename T>
__device__ __forceinline__ bool ChunkAligned(const void* ptr, long long width) {
  return (reinterpret_cast<unsigned long long>(ptr) % 16) == 0 && width % (16 / int(sizeof(T))) == 0;
}

// ---- look-back skeleton --------------------------------------------------------

// Dynamic shared memory of a look-back kernel, in bytes (the plan passes the
// same: SmemBytes in gated_layout.h is its host twin).
template <typename T, int VEC, int THREADS, int STRIP, int TILE, int kIn>
struct SmemPlan {
  static constexpr int kLanes = STRIP / VEC;
  static constexpr int kSegs = THREADS / kLanes;
  static constexpr int kSteps = TILE / kSegs;
  static constexpr int kStagedBytes = (kIn * TILE * STRIP * int(sizeof(T)) + 15) / 16 * 16;
  static constexpr int kCombineOffset = kStagedBytes;
  static_assert(VEC >= 2 && VEC * sizeof(T) >= 4, "a pack must be at least one 32-bit word");
  static_assert(STRIP % VEC == 0 && THREADS % kLanes == 0, "strip / vec lanes must divide threads");
  static_assert(kSegs >= 1 && TILE % kSegs == 0, "segments must divide the tile");
  static_assert((STRIP * sizeof(T)) % 16 == 0, "a strip row must be a whole number of 16-byte chunks");
  static_assert(THREADS % 32 == 0 && THREADS <= 1024, "threads must be a multiple of 32, at most 1024");
  static_assert(kLanes < 32 ? 32 % kLanes == 0 : kLanes % 32 == 0,
                "strip / vec lanes must divide 32 or be whole warps");
};

// I: long long, or int for the `lookback` _o2 kernels (fewer registers: with
// 64-bit fields their backward spilled at 64 registers; every offset widens
// at its product with a 64-bit parameter).
template <typename I>
struct TileIndexOf {
  I tile, seq, strip, b, c_strip;
  long long base;
};
using TileIndex = TileIndexOf<long long>;

// Thread 0 takes the block's ticket; tickets run over time tiles in the
// outer loop, so a tile only ever waits on tiles of smaller tickets.
template <int STRIP, int TILE, bool kBackward>
__device__ __forceinline__ TileIndex TakeTicket(void* workspace, unsigned* s_ticket, long long batch, long long length,
                                                long long width) {
  if (threadIdx.x == 0) *s_ticket = atomicAdd(static_cast<unsigned*>(workspace), 1u);
  __syncthreads();
  const long long ticket = *s_ticket;
  const long long strips = (width + STRIP - 1) / STRIP;
  const long long seqs = batch * strips;
  TileIndex x;
  x.tile = ticket / seqs;
  x.seq = ticket % seqs;
  x.b = x.seq / strips;
  x.strip = x.seq % strips;
  x.c_strip = x.strip * STRIP;
  x.base = kBackward ? length - (x.tile + 1) * TILE : x.tile * TILE;
  return x;
}

// The tile of a block launched on a (strips, B, tiles) grid (the `fused`
// family): blockIdx in linear order (x fastest) is the ticket order, and
// blocks are dispatched in that order (what CUB's single-pass scans rely
// on), so there is no ticket atomic and its round trip before the loads, no
// barrier after it, and no 64-bit division (two calls of ~70 instructions).
template <int STRIP, int TILE, bool kBackward, typename I = long long>
__device__ __forceinline__ TileIndexOf<I> BlockTile(long long length) {
  TileIndexOf<I> x;
  x.strip = blockIdx.x;
  x.b = blockIdx.y;
  x.tile = blockIdx.z;
  x.seq = x.b * gridDim.x + x.strip;
  x.c_strip = x.strip * STRIP;
  x.base = kBackward ? length - (x.tile + 1) * TILE : x.tile * TILE;
  return x;
}

// The tile of a block of the `lookback` family: ORDER 0 an atomic ticket
// (TakeTicket); ORDER 2 its block index on a (strips, B, tiles) grid
// (BlockTile: no atomic, barrier or 64-bit divisions before the loads), with
// launch epochs (the workspace prefix zeroed once; thread 0 leaves the epoch
// tag in s_ticket[0], read after the caller's staging barrier) and
// programmatic dependent launch: the grid waits here for its predecessor in
// the stream and lets its own dependents be scheduled (they park in their
// wait until this grid is done; this grid's blocks have all started by
// then, so none waits for a parked block).
template <int STRIP, int TILE, bool kBackward, int ORDER>
__device__ __forceinline__ auto StartTile(void* workspace, unsigned* s_ticket, long long batch, long long length,
                                          long long width) {
  if constexpr (ORDER >= 2) {
    scan::GridDependencyWait();
    scan::LaunchDependents();
    if (threadIdx.x == 0) s_ticket[0] = scan::EpochTag(static_cast<const unsigned*>(workspace));
    return BlockTile<STRIP, TILE, kBackward, int>(length);
  } else {
    return TakeTicket<STRIP, TILE, kBackward>(workspace, s_ticket, batch, length, width);
  }
}

// The packed look-back (scan_common.cuh, LookBackPacked) with few live
// registers, one round trip per predecessor tile: {w1, w2} of this
// thread's channels for the kWindow tiles below the next one each channel
// still needs, then each channel walks them in order: an inclusive w1 ends
// its walk, an aggregate pair (both words of this launch) is combined and
// the channel moves one tile down, anything else (not published yet) leaves
// it where it is for the next load. (Loading w2 only after an aggregate w1
// cost a second round trip per aggregate hop; at L = 32768 a strip's chain
// has up to 16 tiles in one wave of blocks, all publishing aggregates at
// about the same time. A window of 2 tiles at vec 2 spilled 24-40 bytes in
// the 80-register forwards.) w2 is written with w1's aggregate and never
// overwritten, so reading it with w1 is safe. `w`: this thread's channels'
// {w1, w2} pairs of its own tile (not tile 0), the predecessor k tiles back
// at -2k x STRIP; `tile` its index in the chain (the walk never reads below
// tile 0, which publishes an inclusive state, so the walk ends).
// CHAINED ("_d1"): only the predecessor's inclusive state is taken (the
// chained scan of LookBackPacked's CHAINED: the same bits every run).
template <int VEC, int STRIP, bool CHAINED = false>
__device__ __forceinline__ void LookBackPackedLean(const unsigned long long* w, unsigned tag, float (&carry)[VEC],
                                                   long long tile) {
  using scan::FlagOf;
  using scan::LoadWord;
  using scan::ValueOf;
  constexpr int kWindow = CHAINED || VEC >= 2 ? 1 : 2;
  float accA[VEC], accH[VEC];
  Fill(accA, 1.0f);
  Fill(accH, 0.0f);
  int next[VEC];  // the distance of the tile each channel combines next
#pragma unroll
  for (int j = 0; j < VEC; ++j) next[j] = 1;
  constexpr unsigned kAll = (1u << VEC) - 1u;
  unsigned done = 0;
  while (done != kAll) {
    int k0 = 0x7fffffff;
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      if (!(done >> j & 1u) && next[j] < k0) k0 = next[j];
    }
    unsigned long long a[kWindow][VEC], h[kWindow][VEC];
#pragma unroll
    for (int q = 0; q < kWindow; ++q) {
      const bool in = k0 + q <= tile;
      const unsigned long long* wq = w - 2LL * STRIP * (k0 + q);
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        a[q][j] = in ? LoadWord(wq + 2 * j) : 0ull;
        h[q][j] = in && !CHAINED ? LoadWord(wq + 2 * j + 1) : 0ull;
      }
    }
#pragma unroll
    for (int q = 0; q < kWindow; ++q) {
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        if ((done >> j & 1u) || next[j] != k0 + q) continue;
        if (FlagOf(a[q][j]) == tag + kFlagInclusive) {
          carry[j] = fmaf(accA[j], ValueOf(a[q][j]), accH[j]);
          done |= 1u << j;
        } else if (!CHAINED && FlagOf(a[q][j]) == tag + kFlagAggregate && FlagOf(h[q][j]) == tag + kFlagAggregate) {
          accH[j] = fmaf(accA[j], ValueOf(h[q][j]), accH[j]);
          accA[j] *= ValueOf(a[q][j]);
          ++next[j];
        }
      }
    }
  }
}

// Combines the segments' maps (A, H) of the block, publishes the tile's
// aggregate, looks back over earlier tiles of the same (b, strip), publishes
// the inclusive state and returns in `s` this thread's carry-in (the state
// before its first step). `carry0`: the state entering tile 0 (h0 forward,
// 0 backward). kWait >= 0: cp.async.wait_group kWait before the block's
// final barrier (the backward's second staging group).
// ORDER 2: the packed look-back (scan_common.cuh LookBackPacked; w1 / w2 at
// lay.agg_offset / incl_offset): each row thread publishes and looks back
// for its own channels, flags tagged with the launch's epoch (s_ticket[0],
// StartTile), no fences and no block flag; after the final barrier thread 0
// arrives at the epoch counter and, if last, opens the next epoch (waiting
// for the atomic there stalls one warp of an issue-bound block; holding its
// result to the block's end instead spilled in the 64-register backward).
// kArrive false (a persistent block, which looks back once per tile): the
// caller arrives once, after its last tile.
template <int VEC, int THREADS, int STRIP, int TILE, int kWait, int ORDER = 0, typename I = long long,
          bool kArrive = true, bool CHAINED = false>
__device__ __forceinline__ void CombineAndLookBack(const float (&A)[VEC], const float (&H)[VEC],
                                                   const float (&carry0)[VEC], const TileIndexOf<I>& x,
                                                   const Layout& lay,
                                                   void* workspace, float* s_A, float* s_H, float* s_carry,
                                                   float (&s)[VEC]) {
  constexpr int kLanes = STRIP / VEC;
  constexpr int kSegs = THREADS / kLanes;
  const int tid = threadIdx.x;
  const int lane = tid % kLanes;
  const int seg = tid / kLanes;
  unsigned* flags = static_cast<unsigned*>(workspace) + 64;
  float2* agg = reinterpret_cast<float2*>(static_cast<char*>(workspace) + lay.agg_offset);
  float* incl = reinterpret_cast<float*>(static_cast<char*>(workspace) + lay.incl_offset);

  float* my_A = s_A + seg * STRIP + lane * VEC;
  float* my_H = s_H + seg * STRIP + lane * VEC;
#pragma unroll
  for (int j = 0; j < VEC; ++j) {
    my_A[j] = A[j];
    my_H[j] = H[j];
  }
  __syncthreads();
  // The last segment's threads (the row) turn the segment aggregates into
  // exclusive prefixes in place and hold the tile aggregate.
  const bool row = seg == kSegs - 1;
  const bool leader = tid == (kSegs - 1) * kLanes;
  float tA[VEC], tH[VEC];
  if (row) {
    Fill(tA, 1.0f);
    Fill(tH, 0.0f);
#pragma unroll
    for (int s2 = 0; s2 < kSegs; ++s2) {
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        const int k = s2 * STRIP + lane * VEC + j;
        const float sa = s_A[k];
        const float sh = s_H[k];
        s_A[k] = tA[j];
        s_H[k] = tH[j];
        tH[j] = fmaf(sa, tH[j], sh);
        tA[j] *= sa;
      }
    }
  }
  auto row_sync = [&]() {
    if constexpr (kLanes < 32) {
      constexpr unsigned kMask = ((1u << kLanes) - 1u) << (32 - kLanes);
      __syncwarp(kMask);
    } else {
      asm volatile("bar.sync 1, %0;" ::"n"(kLanes) : "memory");
    }
  };
  const long long slot_tile = x.seq * lay.tiles + x.tile;
  const long long slot = slot_tile * STRIP + lane * VEC;
  float carry[VEC];
  if constexpr (ORDER >= 2) {
    using scan::PackWord;
    using scan::StoreWord;
    // {w1, w2} of this thread's channels of its tile (gated_layout.h).
    unsigned long long* w =
        reinterpret_cast<unsigned long long*>(static_cast<char*>(workspace) + lay.agg_offset) + 2 * slot;
    const unsigned* s_tag = reinterpret_cast<const unsigned*>(s_carry + STRIP);
    if (x.tile == 0) {
#pragma unroll
      for (int j = 0; j < VEC; ++j) carry[j] = carry0[j];
      if (row) {
        const unsigned tag = *s_tag;
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          StoreWord(w + 2 * j, PackWord(fmaf(tA[j], carry[j], tH[j]), tag + kFlagInclusive));
        }
      }
    } else if (row) {
      const unsigned tag = *s_tag;
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        StoreWord(w + 2 * j, PackWord(tA[j], tag + kFlagAggregate));
        StoreWord(w + 2 * j + 1, PackWord(tH[j], tag + kFlagAggregate));
      }
      LookBackPackedLean<VEC, STRIP, CHAINED>(w, tag, carry, x.tile);
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        StoreWord(w + 2 * j, PackWord(fmaf(tA[j], carry[j], tH[j]), tag + kFlagInclusive));
        s_carry[lane * VEC + j] = carry[j];
      }
    }
  } else if (x.tile == 0) {
#pragma unroll
    for (int j = 0; j < VEC; ++j) carry[j] = carry0[j];
    if (row) {
#pragma unroll
      for (int j = 0; j < VEC; ++j) incl[slot + j] = fmaf(tA[j], carry[j], tH[j]);
      __threadfence();
      row_sync();
      if (leader) scan::StoreRelease(flags + slot_tile, kFlagInclusive);
    }
  } else if (row) {
#pragma unroll
    for (int j = 0; j < VEC; ++j) agg[slot + j] = make_float2(tA[j], tH[j]);
    __threadfence();
    row_sync();
    if (leader) scan::StoreRelease(flags + slot_tile, kFlagAggregate);
    float accA[VEC], accH[VEC];
    Fill(accA, 1.0f);
    Fill(accH, 0.0f);
    for (long long k = x.tile - 1;; --k) {
      const long long other = x.seq * lay.tiles + k;
      unsigned flag;
      while ((flag = scan::LoadAcquire(flags + other)) == 0) {
      }
      const long long oslot = other * STRIP + lane * VEC;
      if (flag == kFlagInclusive) {
#pragma unroll
        for (int j = 0; j < VEC; ++j) carry[j] = fmaf(accA[j], scan::LoadCg(incl + oslot + j), accH[j]);
        break;
      }
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        const float2 ag = scan::LoadCg(agg + oslot + j);
        accH[j] = fmaf(accA[j], ag.y, accH[j]);
        accA[j] *= ag.x;
      }
    }
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      incl[slot + j] = fmaf(tA[j], carry[j], tH[j]);
      s_carry[lane * VEC + j] = carry[j];
    }
    __threadfence();
    row_sync();
    if (leader) scan::StoreRelease(flags + slot_tile, kFlagInclusive);
  }
  if constexpr (kWait >= 0) CpAsyncWait<kWait>();
  __syncthreads();
  if constexpr (ORDER >= 2 && kArrive) {
    // Every look-back of the block is over: it reads no slot again.
    if (threadIdx.x == 0) {
      unsigned* header = static_cast<unsigned*>(workspace);
      scan::FinishEpoch(header, atomicAdd(header + 1, 1u), gridDim.x * gridDim.y * gridDim.z);
    }
  }
  if (x.tile != 0) {
#pragma unroll
    for (int j = 0; j < VEC; ++j) carry[j] = s_carry[lane * VEC + j];
  }
#pragma unroll
  for (int j = 0; j < VEC; ++j) s[j] = fmaf(my_A[j], carry[j], my_H[j]);
}

// Writes the block's per-channel partial sums acc[NP][VEC] (summed over its
// segments in segment order) to param[part][NP][W]. Reuses the staged-input
// shared memory `s_red` (at least NP x segments x STRIP floats): the caller's
// reads of it must be done; this starts with a barrier.
template <int NP, int VEC, int THREADS, int STRIP>
__device__ __forceinline__ void WriteParamPartials(const float (&acc)[NP][VEC], float* s_red, float* param,
                                                   long long part, long long c_strip, long long width) {
  constexpr int kLanes = STRIP / VEC;
  constexpr int kSegs = THREADS / kLanes;
  const int tid = threadIdx.x;
  const int lane = tid % kLanes;
  const int seg = tid / kLanes;
  __syncthreads();
#pragma unroll
  for (int n = 0; n < NP; ++n) {
#pragma unroll
    for (int j = 0; j < VEC; ++j) s_red[(n * kSegs + seg) * STRIP + lane * VEC + j] = acc[n][j];
  }
  __syncthreads();
  for (int k = tid; k < NP * STRIP; k += THREADS) {
    const int n = k / STRIP, c = k % STRIP;
    float sum = 0.0f;
    for (int s2 = 0; s2 < kSegs; ++s2) sum += s_red[(n * kSegs + s2) * STRIP + c];
    if (c_strip + c < width) param[(part * NP + n) * width + c_strip + c] = sum;
  }
}

// Sum over the kLanes lanes of a row group (part of one warp), deterministic.
template <int kLanes>
__device__ __forceinline__ float RowSum(float v) {
#pragma unroll
  for (int o = kLanes / 2; o >= 1; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// ---- parameter-gradient finalize (both operators) ---------------------------------

// out[n][c] = sum over parts of param[part][n][c], parts in a fixed order.
// Block: CH channels x (THREADS / CH) slices over parts. The NP sums run in
// one loop (NP x 4 loads in flight per thread, not 4: with tile-64 variants
// at L = 32768 samu has 3 x 512 rows per channel). CH = 16 (chunked): twice
// the blocks of CH = 32, so that W = 2048 covers the 132 SMs, with half the
// rows per slice in flight (the kernel is one wave of latency).
template <int NP, int CH = 32>
__device__ __forceinline__ void FinalizeParams(const float* __restrict__ param, long long parts, long long width,
                                               float* const (&out)[NP]) {
  static_assert(CH == 16 || CH == 32, "a warp sums one channel over 32 lanes of 1 or 2 slices");
  constexpr int kSlices = kFinalizeThreads / CH;
  __shared__ float s_red[NP][kSlices][CH + 1];
  const int tid = threadIdx.x;
  const int k = tid / CH;
  const long long c = static_cast<long long>(blockIdx.x) * CH + tid % CH;
  float sum[NP];
#pragma unroll
  for (int n = 0; n < NP; ++n) sum[n] = 0.0f;
  if (c < width) {
    const float* src = param + k * NP * width + c;  // part q = k, k + kSlices, ...
    const long long step = kSlices * NP * width;
#pragma unroll 4
    for (long long q = k; q < parts; q += kSlices, src += step) {
#pragma unroll
      for (int n = 0; n < NP; ++n) sum[n] += __ldcg(src + n * width);
    }
  }
  // The slices' sums: warp j takes channel j, its lanes the slices (CH = 16:
  // slices lane and lane + 32, added first), and a butterfly (fixed order);
  // all warps at once, one barrier, instead of one thread per channel
  // walking the slices per parameter.
#pragma unroll
  for (int n = 0; n < NP; ++n) s_red[n][k][tid % CH] = sum[n];
  __syncthreads();
  const int w = tid / 32, lane = tid % 32;
  if (w >= CH) return;
  const long long cj = static_cast<long long>(blockIdx.x) * CH + w;  // warp w's channel
#pragma unroll
  for (int n = 0; n < NP; ++n) {
    float v = s_red[n][lane][w];
    if constexpr (CH == 16) v += s_red[n][lane + 32][w];
    const float total = RowSum<32>(v);
    if (lane == 0 && cj < width && out[n] != nullptr) out[n][cj] = total;
  }
}

}  // namespace gated

#include "gated_rglru.cuh"
#include "gated_samu.cuh"
#include "gated_held.cuh"
#include "gated_chunked.cuh"
