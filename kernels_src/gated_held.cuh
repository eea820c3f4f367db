// v2 look-back kernels of rglru and samu: the `lookback_v{vec}_t{threads}_s{segments}_i{items}`
// family (included by gated_scan.cuh). Geometry: a block owns strip =
// (threads / segments) x vec channels and tile = segments x items steps;
// thread (seg, lane) owns `items` consecutive steps of `vec` channels.
// Inputs are staged raw (in their dtype) in shared memory by cp.async, as in
// v1's (dropped) lookbacksmem; what differs (bench/NOTES.md, "rglru/samu v2"):
//   - forward: the local pass computes each step's (a, b) once and keeps them
//     in registers (2 x items x vec fp32) for the rescan, so neither an fp32
//     (a, b) region in shared memory (rglru v1: 8 B per element) nor a second
//     evaluation of the gate (samu v1: 2 transcendentals per element again);
//   - 16-bit dtypes: sigmoid(z) = 0.5 + 0.5 tanh.approx(z / 2) (1 MUFU
//     instead of ex2 + rcp) and a shorter series for -expm1(2 la); fp32 keeps
//     the v1 math (its 1e-5 tolerance);
//   - rglru backward: also holds a (items x vec fp32) from the local pass;
//   - samu backward: no meeting of the strips of a time tile. The scan writes
//     dx without the dm_t / W term, plus its per-(token, strip) sums; a fix-up
//     kernel (one warp per token, 16-byte loads, all of a row's loads in
//     flight) adds dm_t / W to dx and writes the controller partials;
//   - samu forward: the controller kernel reads x by 16-byte loads, eight in
//     flight per lane.
#pragma once

namespace gated {

// sigmoid(z) and 1 - sigmoid(z): one tanh.approx for the 16-bit dtypes
// (absolute error < 2.5e-4), Sigmoid2 (ex2 + rcp) for fp32.
template <typename T>
__device__ __forceinline__ Sig FastSig(float z) {
  if constexpr (sizeof(T) == 4) {
    return Sigmoid2(z);
  } else {
    const float t = TanhApprox(0.5f * z);
    return {fmaf(0.5f, t, 0.5f), fmaf(-0.5f, t, 0.5f)};
  }
}

// The gate from la and a = exp(la): s = sqrt(1 - a^2), q = la / s (0 where
// s = 0). 1 - a^2 = -expm1(2 la) by its series on [-0.5, 0] (to x^8 / 8! for
// fp32 as MakeGate; to x^5 / 5! for 16-bit: relative error < 6e-5), else
// 1 - a^2 directly. 16-bit: rsqrt.approx.ftz (one MUFU; rsqrtf adds a
// denormal range fix-up), with s = q = 0 below om = 1e-30 (there s < 1e-15
// and |q| ~ sqrt(om) / 2, both nothing at 16-bit precision; the ftz rsqrt of
// a denormal om would be inf).
// kTanh (`lookback` _o3, 16-bit dtypes only): 1 - a^2 = tanh(-la) (1 + a^2)
// with tanh.approx (relative error ~2^-11: s and q to ~2.5e-4, far inside
// the bf16 / fp16 tolerances): MUFU + FFMA + FMUL instead of the series,
// its select and 1 - a^2 (~8 issued instructions per gate).
template <typename T, bool kTanh = false>
__device__ __forceinline__ Gate GateFromA(float la, float a) {
  if constexpr (kTanh && sizeof(T) == 2) {
    const float om = TanhApprox(-la) * fmaf(a, a, 1.0f);
    const float rs = RsqrtFtz(om);
    Gate g;
    g.a = a;
    g.s = om > 1e-30f ? om * rs : 0.0f;
    g.q = om > 1e-30f ? la * rs : 0.0f;
    return g;
  }
  const float x = 2.0f * la;
  float t;
  if constexpr (sizeof(T) == 4) {
    t = fmaf(x, 1.0f / 40320.0f, 1.0f / 5040.0f);
    t = fmaf(x, t, 1.0f / 720.0f);
    t = fmaf(x, t, 1.0f / 120.0f);
  } else {
    t = 1.0f / 120.0f;
  }
  t = fmaf(x, t, 1.0f / 24.0f);
  t = fmaf(x, t, 1.0f / 6.0f);
  t = fmaf(x, t, 0.5f);
  t = fmaf(x, t, 1.0f);
  const float om = x > -0.5f ? -x * t : fmaf(-a, a, 1.0f);
  constexpr float kFloor = sizeof(T) == 4 ? 0.0f : 1e-30f;
  const float rs = sizeof(T) == 4 ? rsqrtf(om) : RsqrtFtz(om);
  Gate g;
  g.a = a;
  g.s = om > kFloor ? om * rs : 0.0f;
  g.q = om > kFloor ? la * rs : 0.0f;
  return g;
}
template <typename T, bool kTanh = false>
__device__ __forceinline__ Gate GateFast(float la) {
  return GateFromA<T, kTanh>(la, ExpDecay<T>(la));
}

// The forward's gate: a and s = sqrt(1 - a^2) (no q). 16-bit: two MUFU
// (ex2, sqrt.approx), since the forward passes are bound by the MUFU pipe
// (Nsight Compute, session 8: XU 53-65% of peak in `chunked`'s, the busiest
// pipe): 1 - a^2 =
// -expm1(x), x = 2 la, by -x (1 + x / 2) on [-0.01, 0] (relative error
// < 1.7e-5), else fma(-a, a, 1) (< 5e-5 there: a carries ex2.approx's ~2
// ulp); both tighter than _o3's tanh.approx form (~2.5e-4), which costs a
// third MUFU (and measured slower twice: sessions 13 and 15). Four issue
// slots with the select (session 14's three-term series on [-0.05, 0] in x
// took six). fp32: GateFast.
struct GateAS {
  float a, s;
};
// Its argument z = k r with k from LoadForwardDecays (gated_chunked.cuh): la = ln a
// at fp32, log2 a at 16 bits (ex2 takes it as is).
template <typename T>
__device__ __forceinline__ GateAS ForwardGate(float z) {
  if constexpr (sizeof(T) == 2) {
    // In z = log2 a: with k = 2 ln 2, x = 2 ln a = k z and -x (1 + x / 2) =
    // z (-k - (k^2 / 2) z): an FFMA and an FMUL, on x > -0.01 (the dropped
    // x^2 / 6 is < 1.7e-5 of the result there).
    constexpr float kK = 1.38629436111989061f;
    const float a = Ex2Ftz(z);
    const float series = z * fmaf(z, -0.5f * kK * kK, -kK);
    return {a, SqrtApprox(z > -0.01f / kK ? series : fmaf(-a, a, 1.0f))};
  } else {
    const Gate g = GateFast<T, true>(z);
    return {g.a, g.s};
  }
}

// ForwardGate from la = ln a (the look-back forward's decays): at 16 bits
// la log2(e) is ExpDecay's own FMUL, so a is bit-identical to the rescan's
// ExpDecay<T>(la).
template <typename T>
__device__ __forceinline__ GateAS ForwardGateLn(float la) {
  return ForwardGate<T>(sizeof(T) == 2 ? la * 1.44269504088896341f : la);
}


// Whether a thread holds its a's (items x vec fp32) from the local pass to
// the rescan. Up to 16 per thread it does (the forward then holds (a, b):
// 32 fp32); above, only b is held in the forward and nothing in the backward,
// and the rescan recomputes a (rglru: tanh + ex2, samu: ex2 per element), so
// that 256-thread blocks of twice the tile still fit 3 per SM.
template <int kSteps, int VEC>
constexpr bool kHoldA = kSteps * VEC <= 16;

// Interior tiles: every row of the block's tile inside [0, L), the whole
// strip inside W and every row access wide (then l.wide and l.nvalid == VEC
// for every thread: the test is block-uniform). The local pass and the
// rescan run as lambdas on a BoolTag: the interior instance has no per-row
// range tests and stores packs unconditionally (the profile's ALU-bound
// issue slots: 64-bit compares, selects and branches per row), the other
// keeps every test.
template <bool B>
struct BoolTag {
  static constexpr bool value = B;
};
template <int STRIP, int TILE>
__device__ __forceinline__ bool Interior(long long base, long long length, long long c_strip, long long width,
                                         bool rows_aligned) {
  return base >= 0 && base + TILE <= length && c_strip + STRIP <= width && rows_aligned;
}
template <typename F>
__device__ __forceinline__ void OnInterior(bool interior, F&& f) {
  if (interior) {
    f(BoolTag<true>{});
  } else {
    f(BoolTag<false>{});
  }
}

// Shared memory of a `lookback` kernel: kIn staged inputs, then the combine.
template <typename T, int VEC, int THREADS, int STRIP, int TILE, int kIn>
using HeldPlan = SmemPlan<T, VEC, THREADS, STRIP, TILE, kIn>;

// The block's per-channel decay constants, -8 softplus(lambda) and (NC = 2,
// backward) DecayRatio(lambda), computed once per channel by the first
// segment's threads into s_chan instead of by every segment: both are
// accurate expf / log1pf, ~40-100 instructions per channel, which the
// other kSegs - 1 segments repeated. The caller's next __syncthreads
// publishes them; ReadDecayConsts after it.
template <int VEC, int NC, int STRIP>
__device__ __forceinline__ void WriteDecayConsts(const float* lambda, const Lanes& l, bool first_seg, int lane,
                                                 float (&s_chan)[NC][STRIP]) {
  if (!first_seg) return;
  float v[VEC];
  LoadChannels(v, lambda, l);
#pragma unroll
  for (int j = 0; j < VEC; ++j) {
    s_chan[0][lane * VEC + j] = -kC * SoftplusAccurate(v[j]);
    if constexpr (NC > 1) s_chan[1][lane * VEC + j] = DecayRatio(v[j]);
  }
}
template <int NC, int VEC, int STRIP>
__device__ __forceinline__ void ReadDecayConsts(const float (&s_chan)[NC][STRIP], int lane, int k, float (&v)[VEC]) {
#pragma unroll
  for (int j = 0; j < VEC; ++j) v[j] = s_chan[k][lane * VEC + j];
}
// Static shared memory of the decay constants (the plans count it).
constexpr int DecayConstBytes(int strip, bool bwd) { return (bwd ? 2 : 1) * strip * 4; }

// ---- rglru ------------------------------------------------------------------------

// Staging of a whole tile (every row inside [0, L), the strip inside W,
// 16-byte chunks aligned) with the address math once per thread: each
// thread's first chunk offset (one 64-bit product) and then one 64-bit add
// per chunk; the shared-memory offsets are immediates. StageRows' fast path
// recomputes row and column (a signed division and modulo) and a 64-bit
// row product for every chunk and every input (~22-30 issued instructions
// per 16-byte chunk in the SASS: 8-15 per element of rglru's 3-5 inputs).
// (A new helper, not a change of StageRows: samu's kernels keep that one.)
template <typename T, int THREADS, int STRIP, int TILE>
struct TileStager {
  static constexpr int kE = 16 / int(sizeof(T));
  static constexpr int kPerRow = STRIP / kE;            // chunks per row
  static constexpr int kRowStep = THREADS / kPerRow;    // rows per pass of the block
  static constexpr int kPasses = (TILE + kRowStep - 1) / kRowStep;
  static_assert(THREADS % kPerRow == 0, "a pass of the block covers whole rows");
  long long goff;        // element offset of this thread's first chunk in a (B, L, W) tensor, row `base`
  long long step;        // kRowStep rows of W
  int soff;              // element offset of its first chunk in a staged [TILE][STRIP] tile
  int r0;                // its first row
  // first: (b L + base) W + c_strip, the element offset of the tile's first row and channel.
  __device__ __forceinline__ TileStager(long long first, long long width) {
    const int tid = threadIdx.x;
    r0 = tid / kPerRow;
    const int cc = (tid % kPerRow) * kE;
    goff = first + static_cast<long long>(r0) * width + cc;
    step = kRowStep * width;
    soff = r0 * STRIP + cc;
  }
  // dst[r][.] = src rows base + r - shift (shift 0 or 1: all inside [0, L) by the caller's test).
  __device__ __forceinline__ void Stage(T* dst, const T* __restrict__ src, int shift, long long width) const {
    const T* g = src + (goff - (shift != 0 ? width : 0));
#pragma unroll
    for (int i = 0; i < kPasses; ++i) {
      if (TILE % kRowStep == 0 || r0 + i * kRowStep < TILE) CpAsync16(dst + soff + i * kRowStep * STRIP, g);
      g += step;
    }
  }
};

// The edge instance of a rescan takes its Lanes through a shuffle with
// itself (ptxas sees through moves, not through a shuffle): otherwise ptxas
// computes StorePack's `wide` / `j < nvalid` tests of every unrolled row
// before the interior / edge branch and keeps them as one bit each of a
// register (~60 issued instructions per thread in the SASS of the backward,
// on every tile, the interior ones included). The edge branch is taken by
// whole blocks; lanes past W may have left, hence the active mask.
template <bool kIn>
__device__ __forceinline__ Lanes EdgeLanes(const Lanes& l) {
  if constexpr (kIn) {
    return l;
  } else {
    Lanes e = l;
    const unsigned mask = __activemask();
    const int lane = threadIdx.x % 32;
    e.nvalid = __shfl_sync(mask, l.nvalid, lane);
    e.wide = __shfl_sync(mask, l.wide ? 1 : 0, lane) != 0;
    return e;
  }
}

// rglru's gate at 16 bits with the _o3 gate, lean (both scans; fp32 and _o2
// keep FastSig / GateFast / GateFromA). From th = tanh(ga / 2), sigmoid(ga)
// = (1 + th) / 2 and 1 - sigmoid(ga) = (1 - th) / 2, so with sph = sp / 2
// (sp = -8 softplus(Lambda)) la = sph (1 + th) is one FFMA (FastSig's FFMA
// and the FMUL by sp before). RgLruGateLean: s as GateFromA<T, true>
// (1 - a^2 = tanh(-la) (1 + a^2)) and 1 / s, with om clamped at 1e-30: one
// FMNMX instead of a compare and two selects (below the clamp the o3 gate
// gave s = q = 0, this s = 1e-15 and |q| = |la| / s < 1e-15: nothing at
// 16-bit precision).
// The halving z / 2 of both gate inputs goes two at a time (Halved: one
// HMUL2 per 16-bit pair, exact: a power of two) instead of an FMUL per
// element; the backward's rescan halves the same words as its local pass,
// so both get the same la and a.
template <typename T, int VEC>
__device__ __forceinline__ Pack<T, VEC> Halved(const Pack<T, VEC>& p) {
  static_assert(sizeof(T) == 2, "16-bit packs");
  Pack<T, VEC> h;
#pragma unroll
  for (int k = 0; k < Pack<T, VEC>::kU32; ++k) {
    if constexpr (scan::IsBF16<T>::value) {
      const __nv_bfloat162 v = __hmul2(*reinterpret_cast<const __nv_bfloat162*>(&p.u[k]), __float2bfloat162_rn(0.5f));
      h.u[k] = *reinterpret_cast<const unsigned*>(&v);
    } else {
      const __half2 v = __hmul2(*reinterpret_cast<const __half2*>(&p.u[k]), __float2half2_rn(0.5f));
      h.u[k] = *reinterpret_cast<const unsigned*>(&v);
    }
  }
  return h;
}
__device__ __forceinline__ float RgLruLa(float sph, float th) { return fmaf(sph, th, sph); }
struct GateRs {
  float s, rs;  // sqrt(1 - a^2) and its inverse (q = la rs)
};
__device__ __forceinline__ GateRs RgLruGateLean(float la, float a) {
  const float om = fmaxf(TanhApprox(-la) * fmaf(a, a, 1.0f), 1e-30f);
  const float rs = RsqrtFtz(om);
  return {om * rs, rs};
}

// Where the forward keeps b (the _o3 16-bit kernels; the others hold b in
// registers): in the staging. With a not held (items x vec > 16) the rescan
// recomputed a (tanh + ex2: 2 of the 7 MUFU per element, the bound once the
// integer work is gone); with b in the staging a is held instead. The
// items-8 points free the 16 registers of b: 64 registers, 4 blocks of 256
// per SM instead of 3 (RgLruMinBlocksFwd), for one STS + one LDS per
// element. (GPU run 1 of session 5, where only s16_i8_o3 did so: its forward
// gained 7-12% from o2 against s8_i8's 1-2% with b in registers; the forward
// at items 8 is latency-bound, and 32 warps per SM hide more of it.)
constexpr bool RgLruBInStaging(int order, int elem_bytes, int steps, int vec, int tile) {
  return order == 3 && elem_bytes == 2;
}

// Forward: stages ga, gx, x (6 B per element at bf16); each thread's (a, b)
// stay in registers from the local pass to the rescan (or a in registers and
// b in the staging: RgLruBInStaging; or b alone, a recomputed).
// CHAINED ("_d1"): the look-back takes only the predecessor's inclusive
// state (LookBackPackedLean): the same bits every run.
template <typename T, int VEC, int THREADS, int STRIP, int TILE, int ORDER, bool CHAINED = false>
__device__ __forceinline__ void RgLruForwardHeld(const RgLruParams& p) {
  using SP = HeldPlan<T, VEC, THREADS, STRIP, TILE, 3>;
  constexpr int kLanes = SP::kLanes, kSegs = SP::kSegs, kSteps = SP::kSteps;
  extern __shared__ __align__(16) unsigned char smem[];
  T* s_in = reinterpret_cast<T*>(smem);
  float* s_A = reinterpret_cast<float*>(smem + SP::kCombineOffset);
  float* s_H = s_A + kSegs * STRIP;
  float* s_carry = s_H + kSegs * STRIP;
  unsigned* s_ticket = reinterpret_cast<unsigned*>(s_carry + STRIP);
  const Layout lay = MakeLayout(p.batch, p.length, p.width, STRIP, TILE, kRgLruParams, false, false, ORDER >= 2);
  const auto x = StartTile<STRIP, TILE, false, ORDER>(p.workspace, s_ticket, p.batch, p.length, p.width);
  const bool chunks = ChunkAligned<T>(p.x, p.width) && ChunkAligned<T>(p.ga, p.width) && ChunkAligned<T>(p.gx, p.width);
  const T* srcs[3] = {static_cast<const T*>(p.ga), static_cast<const T*>(p.gx), static_cast<const T*>(p.x)};
  if (chunks && x.base + TILE <= p.length && x.c_strip + STRIP <= p.width) {
    const TileStager<T, THREADS, STRIP, TILE> st((x.b * p.length + x.base) * p.width + x.c_strip, p.width);
#pragma unroll
    for (int k = 0; k < 3; ++k) st.Stage(s_in + k * TILE * STRIP, srcs[k], 0, p.width);
  } else {
#pragma unroll
    for (int k = 0; k < 3; ++k) {
      StageRows<T, THREADS, STRIP, TILE>(s_in + k * TILE * STRIP, srcs[k], p.length, p.width, x.b, x.c_strip, x.base,
                                         0, chunks);
    }
  }
  CpAsyncCommit();

  const int tid = threadIdx.x;
  const int lane = tid % kLanes;
  const int seg = tid / kLanes;
  const long long c0 = x.c_strip + lane * VEC;
  const Lanes l = MakeLanes<T, VEC>(c0, p.width, RgLruAligned<T, VEC>(p, false));
  __shared__ float s_chan[1][STRIP];
  WriteDecayConsts<VEC>(p.lambda, l, seg == 0, lane, s_chan);
  float sp[VEC], carry0[VEC];
  LoadRow(carry0, (x.tile == 0 && p.h0 != nullptr) ? p.h0 + x.b * p.width : nullptr, l);
  CpAsyncWait<0>();
  __syncthreads();
  ReadDecayConsts(s_chan, lane, 0, sp);

  auto pack_at = [&](int input, int row) -> const Pack<T, VEC>& {
    return *reinterpret_cast<const Pack<T, VEC>*>(s_in + (input * TILE + row) * STRIP + lane * VEC);
  };
  const int row0 = seg * kSteps;
  const bool interior = Interior<STRIP, TILE>(x.base, p.length, x.c_strip, p.width, l.wide);
  constexpr bool kHold = kHoldA<kSteps, VEC>;
  // _o3 at 16 bits: RgLruLa and RgLruGateLean (sph = sp / 2).
  constexpr bool kLean = ORDER == 3 && sizeof(T) == 2;
  float sph[VEC];
#pragma unroll
  for (int j = 0; j < VEC; ++j) sph[j] = 0.5f * sp[j];
  // RgLruBInStaging: a held, b in the thread's own ga / gx slots of the
  // staging (one fp32 per element, read only by this thread and already read).
  constexpr bool kBSmem = RgLruBInStaging(ORDER, int(sizeof(T)), kSteps, VEC, TILE);
  static_assert(!kBSmem || sizeof(T) == 2, "b in the staging: 16-bit packs, one fp32 per element");
  float av[(kHold || kBSmem) ? kSteps : 1][VEC], bv[kBSmem ? 1 : kSteps][VEC];
  auto b_slot = [&](int row, int j) -> float& {
    return reinterpret_cast<float*>(s_in + ((j < VEC / 2 ? 0 : 1) * TILE + row) * STRIP + lane * VEC)[j % (VEC / 2)];
  };
  float A[VEC], H[VEC];
  Fill(A, 1.0f);
  Fill(H, 0.0f);
  // Rows past L (a partial last tile) are staged as zeros, so their (a, b)
  // are finite, and nothing reads them: they come after every stored row of
  // their segment, later segments hold only such rows, and the tile's
  // aggregate and inclusive state are read by later tiles only (there are
  // none). So the local pass has no per-row range test (its select and the
  // branch around b cost ~5 issued instructions per element).
#pragma unroll
  for (int i = 0; i < kSteps; ++i) {
    const int row = row0 + i;
    const Pack<T, VEC> pa = pack_at(0, row), pi = pack_at(1, row), px = pack_at(2, row);
    Pack<T, VEC> pah, pih;  // kLean: ga / 2, gx / 2
    if constexpr (kLean) {
      pah = Halved(pa);
      pih = Halved(pi);
    }
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      float a, bb;
      if constexpr (kLean) {
        const float la = RgLruLa(sph[j], TanhApprox(pah.Get(j)));
        a = ExpDecay<T>(la);
        bb = RgLruGateLean(la, a).s * fmaf(0.5f, TanhApprox(pih.Get(j)), 0.5f) * px.Get(j);
      } else {
        const Gate g = GateFast<T, ORDER == 3>(sp[j] * FastSig<T>(pa.Get(j)).s);
        a = g.a;
        bb = g.s * FastSig<T>(pi.Get(j)).s * px.Get(j);
      }
      if constexpr (kHold || kBSmem) av[i][j] = a;
      if constexpr (kBSmem) {
        b_slot(row, j) = bb;  // pa and pi of this row are in registers
      } else {
        bv[i][j] = bb;
      }
      A[j] *= a;
      H[j] = fmaf(a, H[j], bb);
    }
  }
  float s[VEC];
  CombineAndLookBack<VEC, THREADS, STRIP, TILE, -1, ORDER, decltype(x.tile), true, CHAINED>(
      A, H, carry0, x, lay, p.workspace, s_A, s_H, s_carry, s);
  if (l.nvalid <= 0) return;
  T* __restrict__ out = static_cast<T*>(p.h) + (x.b * p.length + x.base + row0) * p.width + c0;
  // Running row pointers (one 64-bit add per row): the unrolled i * W
  // offsets cost ~7 integer instructions per row and output in the SASS.
  OnInterior(interior, [&](auto tag) {
    constexpr bool kIn = decltype(tag)::value;
    const Lanes le = EdgeLanes<kIn>(l);
    T* __restrict__ o = out;
#pragma unroll
    for (int i = 0; i < kSteps; ++i, o += p.width) {
      if constexpr (kBSmem) {
#pragma unroll
        for (int j = 0; j < VEC; ++j) s[j] = fmaf(av[i][j], s[j], b_slot(row0 + i, j));
      } else if constexpr (kHold) {
#pragma unroll
        for (int j = 0; j < VEC; ++j) s[j] = fmaf(av[i][j], s[j], bv[i][j]);
      } else {
        // The same a as the local pass (same instructions on the same input);
        // rows past L only follow the last stored one.
        const Pack<T, VEC> pa = pack_at(0, row0 + i);
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          const float a = ExpDecay<T>(sp[j] * FastSig<T>(pa.Get(j)).s);  // not kLean (kHold or kBSmem there)
          s[j] = fmaf(a, s[j], bv[i][j]);
        }
      }
      const long long t = x.base + row0 + i;
      if (kIn || t < p.length) {
        StorePack<T, VEC>(o, s, kIn || le.wide, le.nvalid);
        if (!kIn && t == p.length - 1 && p.h_final != nullptr) StoreRow(p.h_final + x.b * p.width, s, le);
      }
    }
  });
  // Interior: h_{L-1} is the last row of the last segment when the tile ends at L.
  if (interior && x.base + row0 + kSteps == p.length && p.h_final != nullptr) StoreRow(p.h_final + x.b * p.width, s, l);
}

// Backward: stages ga, dh (group 0) and gx, x, h_{t-1} (group 1, in flight
// during the local pass and the look-back); the local pass keeps a.
template <typename T>
constexpr int RgLruMinBlocksBwd(int threads, int vec, int strip, int tile);
template <typename T, int VEC, int THREADS, int STRIP, int TILE, int ORDER, bool CHAINED = false>
__device__ __forceinline__ void RgLruBackwardHeld(const RgLruParams& p) {
  using SP = HeldPlan<T, VEC, THREADS, STRIP, TILE, 5>;
  constexpr int kLanes = SP::kLanes, kSegs = SP::kSegs, kSteps = SP::kSteps;
  static_assert(kSegs * STRIP * 4 <= SP::kStagedBytes, "the staging holds the parameter sums");
  extern __shared__ __align__(16) unsigned char smem[];
  T* s_in = reinterpret_cast<T*>(smem);
  float* s_A = reinterpret_cast<float*>(smem + SP::kCombineOffset);
  float* s_H = s_A + kSegs * STRIP;
  float* s_carry = s_H + kSegs * STRIP;
  unsigned* s_ticket = reinterpret_cast<unsigned*>(s_carry + STRIP);
  const Layout lay = MakeLayout(p.batch, p.length, p.width, STRIP, TILE, kRgLruParams, false, false, ORDER >= 2);
  const auto x = StartTile<STRIP, TILE, true, ORDER>(p.workspace, s_ticket, p.batch, p.length, p.width);
  const bool chunks = ChunkAligned<T>(p.x, p.width) && ChunkAligned<T>(p.ga, p.width) &&
                      ChunkAligned<T>(p.gx, p.width) && ChunkAligned<T>(p.dh, p.width) && ChunkAligned<T>(p.h, p.width);
  const T* srcs[5] = {static_cast<const T*>(p.ga), static_cast<const T*>(p.dh), static_cast<const T*>(p.gx),
                      static_cast<const T*>(p.x), static_cast<const T*>(p.h)};
  // h is staged one row back (h_{t-1}): the whole tile needs base >= 1.
  if (chunks && x.base >= 1 && x.base + TILE <= p.length && x.c_strip + STRIP <= p.width) {
    const TileStager<T, THREADS, STRIP, TILE> st((x.b * p.length + x.base) * p.width + x.c_strip, p.width);
#pragma unroll
    for (int k = 0; k < 5; ++k) {
      st.Stage(s_in + k * TILE * STRIP, srcs[k], k == 4 ? 1 : 0, p.width);
      if (k == 1 || k == 4) CpAsyncCommit();
    }
  } else {
#pragma unroll
    for (int k = 0; k < 5; ++k) {
      StageRows<T, THREADS, STRIP, TILE>(s_in + k * TILE * STRIP, srcs[k], p.length, p.width, x.b, x.c_strip, x.base,
                                         k == 4 ? 1 : 0, chunks);
      if (k == 1 || k == 4) CpAsyncCommit();
    }
  }

  const int tid = threadIdx.x;
  const int lane = tid % kLanes;
  const int seg = tid / kLanes;
  const long long c0 = x.c_strip + lane * VEC;
  const Lanes l = MakeLanes<T, VEC>(c0, p.width, RgLruAligned<T, VEC>(p, true));
  __shared__ float s_chan[2][STRIP];
  WriteDecayConsts<VEC>(p.lambda, l, seg == 0, lane, s_chan);
  float sp[VEC], ratio[VEC], h0v[VEC], zero[VEC];
  LoadRow(h0v, p.h0 != nullptr ? p.h0 + x.b * p.width : nullptr, l);
  Fill(zero, 0.0f);
  CpAsyncWait<1>();
  __syncthreads();
  ReadDecayConsts(s_chan, lane, 0, sp);
  ReadDecayConsts(s_chan, lane, 1, ratio);

  auto pack_at = [&](int input, int row) -> const Pack<T, VEC>& {
    return *reinterpret_cast<const Pack<T, VEC>*>(s_in + (input * TILE + row) * STRIP + lane * VEC);
  };
  auto row_of = [&](int i) { return TILE - 1 - (seg * kSteps + i); };
  // Interior (backward): every row at t >= 1, so h_{t-1} is always the staged one.
  const bool interior = Interior<STRIP, TILE>(x.base - 1, p.length, x.c_strip, p.width, l.wide);
  // a held where kHoldA allows (items x vec <= 16). Elsewhere the rescan
  // recomputes a (one ex2 per element) and runs two steps per trip instead
  // of all kSteps unrolled: session 5 also held a at items 16 (2 blocks per
  // SM, 128 registers), whose fully unrolled rescan made the kernel ~2x the
  // SASS; without it fwd_bwd is 1-10% faster on the H200 and the ~12 us
  // fwd_bwd > fwd + bwd gap of the items-16 points is gone (bench/NOTES.md,
  // session 6).
  constexpr bool kHold = kHoldA<kSteps, VEC>;
  float av[kHold ? kSteps : 1][VEC];
  float A[VEC], H[VEC];
  Fill(A, 1.0f);
  Fill(H, 0.0f);
  // _o3 at 16 bits: RgLruLa and RgLruGateLean (sph = sp / 2).
  constexpr bool kLean = ORDER == 3 && sizeof(T) == 2;
  if constexpr (kLean) {
#pragma unroll
    for (int j = 0; j < VEC; ++j) sp[j] *= 0.5f;
  }
  // kLean: ga halved (Halved) before; la_of gets ga / 2.
  auto la_of = [&](float ga, int j) { return kLean ? RgLruLa(sp[j], TanhApprox(ga)) : sp[j] * FastSig<T>(ga).s; };
  OnInterior(interior, [&](auto tag) {
    constexpr bool kIn = decltype(tag)::value;
#pragma unroll
    for (int i = 0; i < kSteps; ++i) {
      const int row = row_of(i);
      const bool in = kIn || x.base + row >= 0;
      const Pack<T, VEC> pd = pack_at(1, row);
      Pack<T, VEC> pa = pack_at(0, row);
      if constexpr (kLean) pa = Halved(pa);
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        const float a = in ? ExpDecay<T>(la_of(pa.Get(j), j)) : 1.0f;
        if constexpr (kHold) av[i][j] = a;
        A[j] *= a;
        H[j] = a * (H[j] + pd.Get(j));
      }
    }
  });
  float u[VEC];
  CombineAndLookBack<VEC, THREADS, STRIP, TILE, 0, ORDER, decltype(x.tile), true, CHAINED>(
      A, H, zero, x, lay, p.workspace, s_A, s_H, s_carry, u);
  float acc[1][VEC];
  Fill(acc[0], 0.0f);
  if (l.nvalid > 0) OnInterior(interior, [&](auto tag) {
    constexpr bool kIn = decltype(tag)::value;
    const long long off0 = (x.b * p.length + x.base + row_of(0)) * p.width + c0;
    const Lanes le = EdgeLanes<kIn>(l);
    long long off = off0;  // running row offset (one 64-bit add per row; the bases stay in the parameter bank)
    constexpr int kUnroll = kHold ? kSteps : 2;
#pragma unroll kUnroll
    for (int i = 0; i < kSteps; ++i, off -= p.width) {
      const int row = row_of(i);
      const long long t = x.base + row;
      if (kIn || t >= 0) {
        const Pack<T, VEC> pa = pack_at(0, row), pd = pack_at(1, row), pi = pack_at(2, row), px = pack_at(3, row),
                           ph = pack_at(4, row);
        Pack<T, VEC> pah, pih;  // kLean: ga / 2, gx / 2
        if constexpr (kLean) {
          pah = Halved(pa);
          pih = Halved(pi);
        }
        float dx[VEC], dga[VEC], dgx[VEC];
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          const float hprev = (kIn || t > 0) ? ph.Get(j) : h0v[j];
          const float xv = px.Get(j);
          const float g = pd.Get(j) + u[j];
          if constexpr (kLean) {
            // With v = sigmoid(gx) x and 1 / s = rs: q = la rs, so
            // G = g (a hprev la - v a^2 q) = (a g) la (hprev - a v rs), and
            // dgx = g s v (1 - sigmoid(gx)): 4 fewer FMULs than the o3 form.
            const float th = TanhApprox(pah.Get(j));
            const float la = RgLruLa(sp[j], th);
            const float ti = TanhApprox(pih.Get(j));
            const float is = fmaf(0.5f, ti, 0.5f);
            float a;
            if constexpr (kHold) {
              a = av[i][j];
            } else {
              a = ExpDecay<T>(la);  // t >= 0 here: as the local pass
            }
            const GateRs gate = RgLruGateLean(la, a);
            const float gs = g * gate.s;
            const float v = is * xv;
            dx[j] = gs * is;
            dgx[j] = gs * v * fmaf(-0.5f, ti, 0.5f);
            u[j] = a * g;
            const float big_g = (u[j] * la) * fmaf(-v * gate.rs, a, hprev);
            dga[j] = big_g * fmaf(-0.5f, th, 0.5f);
            acc[0][j] = fmaf(big_g, ratio[j], acc[0][j]);
          } else {
            const Sig r = FastSig<T>(pa.Get(j));
            const float la = sp[j] * r.s;
            const Sig ig = FastSig<T>(pi.Get(j));
            float a;
            if constexpr (kHold) {
              a = av[i][j];
            } else {
              a = ExpDecay<T>(la);  // t >= 0 here: as the local pass
            }
            const Gate gate = GateFromA<T, ORDER == 3>(la, a);
            const float gs = g * gate.s;
            dx[j] = gs * ig.s;
            dgx[j] = gs * xv * (ig.s * ig.c);
            const float big_g = g * (gate.a * hprev * la - ig.s * xv * gate.a * gate.a * gate.q);
            dga[j] = big_g * r.c;
            acc[0][j] = fmaf(big_g, ratio[j], acc[0][j]);
            u[j] = gate.a * g;
          }
        }
        StorePack<T, VEC>(static_cast<T*>(p.dx) + off, dx, kIn || le.wide, le.nvalid);
        StorePack<T, VEC>(static_cast<T*>(p.dga) + off, dga, kIn || le.wide, le.nvalid);
        StorePack<T, VEC>(static_cast<T*>(p.dgx) + off, dgx, kIn || le.wide, le.nvalid);
        if (!kIn && t == 0 && p.dh0 != nullptr) StoreRow(p.dh0 + x.b * p.width, u, le);
      }
    }
  });
  float* param = reinterpret_cast<float*>(static_cast<char*>(p.workspace) + lay.param_offset);
  WriteParamPartials<1, VEC, THREADS, STRIP>(acc, reinterpret_cast<float*>(smem), param, x.b * lay.tiles + x.tile,
                                             x.c_strip, p.width);
}

// ---- samu ---------------------------------------------------------------------------

// Sum of the elements of one 16-byte chunk.
template <typename T>
__device__ __forceinline__ float ChunkSum(const uint4& w) {
  const unsigned u[4] = {w.x, w.y, w.z, w.w};
  float sum = 0.0f;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    if constexpr (sizeof(T) == 4) {
      sum += __uint_as_float(u[k]);
    } else if constexpr (scan::IsBF16<T>::value) {
      sum += __uint_as_float(u[k] << 16) + __uint_as_float(u[k] & 0xffff0000u);
    } else {
      sum += __half2float(__ushort_as_half(static_cast<unsigned short>(u[k] & 0xffffu))) +
             __half2float(__ushort_as_half(static_cast<unsigned short>(u[k] >> 16)));
    }
  }
  return sum;
}

// Adds v to every element of one 16-byte chunk (rounded to T).
template <typename T>
__device__ __forceinline__ uint4 ChunkAdd(const uint4& w, float v) {
  unsigned u[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    if constexpr (sizeof(T) == 4) {
      u[k] = __float_as_uint(__uint_as_float(u[k]) + v);
    } else if constexpr (scan::IsBF16<T>::value) {
      u[k] = scan::PackPair<T>(__uint_as_float(u[k] << 16) + v, __uint_as_float(u[k] & 0xffff0000u) + v);
    } else {
      u[k] = scan::PackPair<T>(__half2float(__ushort_as_half(static_cast<unsigned short>(u[k] & 0xffffu))) + v,
                               __half2float(__ushort_as_half(static_cast<unsigned short>(u[k] >> 16))) + v);
    }
  }
  return make_uint4(u[0], u[1], u[2], u[3]);
}

constexpr int kRowBatch16 = 8;  // 16-byte chunks in flight per lane in the row kernels

// Sums 8 values per lane over the kLanes lanes of a row group (kLanes 8, 16
// or 32: adjacent lanes of one warp) by recursive halving, a reduce-scatter:
// at offset o a lane keeps one half of its values, sends the other and adds
// what its partner sent (4 + 2 + 1 shuffles), then a butterfly over the
// lanes below kLanes / 8. Returns the full sum of value RowSumIndex(lane)
// (lane: the lane in the warp); a fixed order, so deterministic. Against
// RowSum per value (log2(kLanes) shuffles each): 7 + log2(kLanes / 8)
// shuffles for 8 values instead of 8 x log2(kLanes).
template <int kLanes>
__device__ __forceinline__ float RowSums8(float (&v)[8]) {
  static_assert(kLanes == 8 || kLanes == 16 || kLanes == 32, "RowSums8: row groups of 8, 16 or 32 lanes");
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int count = 8, o = kLanes / 2; count > 1; count /= 2, o /= 2) {
    const bool upper = (lane & o) != 0;
#pragma unroll
    for (int k = 0; k < count / 2; ++k) {
      const float send = upper ? v[k] : v[k + count / 2];
      const float keep = upper ? v[k + count / 2] : v[k];
      v[k] = keep + __shfl_xor_sync(0xffffffffu, send, o);
    }
  }
  float sum = v[0];
#pragma unroll
  for (int o = kLanes / 16; o >= 1; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  return sum;
}
template <int kLanes>
__device__ __forceinline__ int RowSumIndex(int lane) {
  return ((lane & (kLanes / 2)) ? 4 : 0) + ((lane & (kLanes / 4)) ? 2 : 0) + ((lane & (kLanes / 8)) ? 1 : 0);
}

// (r_t, i_t) of a token from the sum of its W channels.
__device__ __forceinline__ float2 SamuControlOf(const SamuParams& p, float sum) {
  const float m = sum / static_cast<float>(p.width);
  return make_float2(SigmoidAccurate(fmaf(p.controller[0], m, p.controller[1])),
                     SigmoidAccurate(fmaf(p.controller[2], m, p.controller[3])));
}

// One warp per token: m_t = mean_c x by 16-byte loads, kRowBatch16 in flight
// per lane (a 2048-wide bf16 row is one batch), then (r_t, i_t). Blocks
// take the tokens last first: the scan after it reads x first tile first,
// so the rows this pass read last are the ones still in L2 when the scan
// starts, and the scan's own traffic evicts rows it reads last.
template <typename T>
__device__ __forceinline__ void SamuControlFast(const SamuParams& p) {
  const long long token =
      static_cast<long long>(gridDim.x - 1 - blockIdx.x) * kFixupTokensPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (token >= p.batch * p.length) return;
  constexpr int kE = 16 / int(sizeof(T));
  const T* row = static_cast<const T*>(p.x) + token * p.width;
  float sum = 0.0f;
  if (ChunkAligned<T>(p.x, p.width)) {
    const uint4* v = reinterpret_cast<const uint4*>(row);
    const long long n = p.width / kE;
    long long c = lane;
    for (; c + 32 * (kRowBatch16 - 1) < n; c += 32 * kRowBatch16) {
      uint4 w[kRowBatch16];
#pragma unroll
      for (int k = 0; k < kRowBatch16; ++k) w[k] = __ldg(v + c + 32 * k);
#pragma unroll
      for (int k = 0; k < kRowBatch16; ++k) sum += ChunkSum<T>(w[k]);
    }
    for (; c < n; c += 32) sum += ChunkSum<T>(__ldg(v + c));
  } else {
    for (long long c = lane; c < p.width; c += 32) sum += scan::ToFloat(row[c]);
  }
  sum = RowSum<32>(sum);
  if (lane == 0) reinterpret_cast<float2*>(p.ctrl)[token] = SamuControlOf(p, sum);
}

// ---- samu `fused`: the strips of a (b, time tile) meet inside the scans ---------
//
// m_t (forward) and dm_t (backward) are sums over all W channels of a token,
// i.e. over every strip of the token's time tile. Instead of a control pass
// (a second read of x) and a fix-up pass (a second read and write of dx),
// the blocks of one group (b, tile) meet at a counter in the zeroed
// workspace prefix (lay.group_counters + b x tiles + tile): each adds its
// per-row sums into the token's zeroed accumulator (lay.acc_offset, fp32
// atomics: the order of the strips' additions varies from run to run, ~1e-7
// relative) and arrives (atomicAdd); the block that arrives last sets
// kGroupMet, the others wait for it; then every block reads its rows' full
// sums (one round trip). (v1's meeting re-read every strip's sums in every
// block: quadratic.)
//
// No deadlock (bench/NOTES.md "rglru/samu v3"): the strips of a group hold
// consecutive tickets (the forward's blockIdx order on its (strips, B,
// tiles) grid, the order blocks are dispatched in; the backward's atomic
// tickets); a block waits only for (i) earlier tiles of its strip
// (look-back) and (ii) the blocks of its own group. Take the first group
// (ticket order) with an unfinished block. If all its tickets are taken,
// every member reaches its arrival (before it only (i), on finished groups),
// the last one publishes without waiting, and all finish. Otherwise every
// resident unfinished block belongs to it (earlier groups finished; later
// tickets are not taken yet), fewer than `strips` <= SMs (CanImplement), so
// an SM is free, a new block starts and takes its next ticket.
constexpr unsigned kGroupMet = 0x80000000u;

// Arrives at a group's counter once all of the block's threads' writes are
// visible (__threadfence, then the barrier); returns whether this block
// arrived last (then the other strips' writes are visible to it).
__device__ __forceinline__ bool ArriveAtGroup(unsigned* counter, unsigned strips) {
  __shared__ unsigned s_last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned old = atomicAdd(counter, 1u);
    __threadfence();
    s_last = old + 1u == strips ? 1u : 0u;
  }
  __syncthreads();
  return s_last != 0u;
}
// The last block, after its publication: marks the group met.
__device__ __forceinline__ void PublishGroup(unsigned* counter) {
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) scan::StoreRelease(counter, kGroupMet);
}
// The other blocks: wait until the group is met.
__device__ __forceinline__ void WaitForGroup(const unsigned* counter) {
  if (threadIdx.x == 0) {
    while ((scan::LoadAcquire(counter) & kGroupMet) == 0u) {
    }
  }
  __syncthreads();
}

// Forward: row sums of the staged x tile over this strip's channels (one
// thread per row, 16-byte chunks from shared memory, rotated by row so that
// a quarter warp reads 8 different bank groups), added by atomics into the
// token's zeroed accumulator acc[token][2]; once the group has met, every
// block forms its rows' (r_t, i_t) from the full sums into s_ri (0 past L)
// and strip 0's block writes them to p.ctrl. (v3's first form had the last
// block reduce the strips' sums alone: its loads went in a few dependent
// rounds per row, ~4-45 us per group, and the whole group waited: 1.6-10x
// slower than the v2 scans on the H200.)
template <typename T, int THREADS, int STRIP, int TILE>
__device__ __forceinline__ void SamuMeetForward(const SamuParams& p, const Layout& lay, const TileIndex& x,
                                                const T* s_x, float2* s_ri) {
  constexpr int kE = 16 / int(sizeof(T));
  constexpr int kChunks = STRIP / kE;
  float* acc = reinterpret_cast<float*>(static_cast<char*>(p.workspace) + lay.acc_offset);
  float2* ctrl = reinterpret_cast<float2*>(p.ctrl) + x.b * p.length;
  for (int r = threadIdx.x; r < TILE; r += THREADS) {
    const long long t = x.base + r;
    if (t < p.length) {
      float sum = 0.0f;
#pragma unroll
      for (int k = 0; k < kChunks; ++k) {
        sum += ChunkSum<T>(*reinterpret_cast<const uint4*>(s_x + r * STRIP + ((k + r) % kChunks) * kE));
      }
      atomicAdd(acc + (x.b * p.length + t) * kSamuTokenSums + 2, sum);
    }
  }
  unsigned* counter = static_cast<unsigned*>(p.workspace) + lay.group_counters + x.b * lay.tiles + x.tile;
  if (ArriveAtGroup(counter, static_cast<unsigned>(lay.strips))) {
    PublishGroup(counter);
  } else {
    WaitForGroup(counter);
  }
  for (int r = threadIdx.x; r < TILE; r += THREADS) {
    const long long t = x.base + r;
    float2 ri = make_float2(0.0f, 0.0f);
    if (t < p.length) {
      ri = SamuControlOf(p, __ldcg(acc + (x.b * p.length + t) * kSamuTokenSums + 2));
      if (x.strip == 0) ctrl[t] = ri;
    }
    s_ri[r] = ri;
  }
  __syncthreads();
}

// After a meeting (`fused` or `_o5`): dm_t / W of each of the tile's rows into
// s_share (0 before t = 0), by SamuShareOf from the row's sums over all W
// channels (sums_of(r, t, sums)); strip 0's block also writes the (b, tile)'s
// controller row (its rows' partials summed in order; s_contrib: 4 x TILE
// floats of free shared memory).
template <int THREADS, int TILE, typename I, typename SumsOf>
__device__ __forceinline__ void SamuSharesOfTile(const SamuParams& p, const Layout& lay, const TileIndexOf<I>& x,
                                                 SumsOf sums_of, float* s_share, float* s_contrib) {
  for (int r = threadIdx.x; r < TILE; r += THREADS) {
    const long long t = x.base + r;
    SamuShare sh = {0.0f, {0.0f, 0.0f, 0.0f, 0.0f}};
    if (t >= 0) {
      float sums[3];
      sums_of(r, t, sums);
      sh = SamuShareOf(p, sums);
    }
    s_share[r] = sh.share;
    if (x.strip == 0) {
#pragma unroll
      for (int n = 0; n < 4; ++n) s_contrib[r * 4 + n] = sh.contrib[n];
    }
  }
  __syncthreads();
  if (x.strip == 0 && threadIdx.x < 4) {
    float total = 0.0f;
    for (int r = 0; r < TILE; ++r) total += s_contrib[r * 4 + threadIdx.x];
    reinterpret_cast<float*>(static_cast<char*>(p.workspace) + lay.ctrl_offset)[(x.b * lay.tiles + x.tile) * 4 +
                                                                                threadIdx.x] = total;
  }
}

// Backward, after the rescan has added its per-row sums (sum G, sum g s
// beta x, sum x) into acc[token][0..2] by atomics: once the group has met,
// every block forms dm_t / W for its rows into s_share (0 before t = 0);
// strip 0's block also writes the (b, tile)'s controller partials (ctrl row
// b x tiles + tile, rows summed in order). s_contrib: 4 x TILE floats of
// free shared memory.
template <int THREADS, int TILE>
__device__ __forceinline__ void SamuMeetBackward(const SamuParams& p, const Layout& lay, const TileIndex& x,
                                                 float* s_share, float* s_contrib) {
  const float* acc = reinterpret_cast<const float*>(static_cast<const char*>(p.workspace) + lay.acc_offset);
  unsigned* counter = static_cast<unsigned*>(p.workspace) + lay.group_counters + x.b * lay.tiles + x.tile;
  if (ArriveAtGroup(counter, static_cast<unsigned>(lay.strips))) {
    PublishGroup(counter);
  } else {
    WaitForGroup(counter);
  }
  SamuSharesOfTile<THREADS, TILE>(
      p, lay, x,
      [&](int, long long t, float (&sums)[3]) {
        const float* a = acc + (x.b * p.length + t) * kSamuTokenSums;
#pragma unroll
        for (int n = 0; n < 3; ++n) sums[n] = __ldcg(a + n);
      },
      s_share, s_contrib);
}

// ---- samu `_o5`: the strips of a time tile as one thread-block cluster ----------
//
// _o3 whose (strips, B, tiles) grid is launched in clusters of (strips, 1, 1)
// (the plan's cluster_x): the blocks of one (b, tile) are co-scheduled and
// read each other's shared memory, so the strips meet for m_t (forward) and
// dm_t (backward) without the `fused` family's global counters and waits:
// each block leaves its rows' sums over its strip in its own shared memory,
// a cluster barrier, then every block reads the cluster's sums for its rows
// in rank (= strip) order (deterministic) from distributed shared memory.
// No control kernel (the forward writes p.ctrl from strip 0) and no fix-up
// kernel (the backward adds dm_t / W before its one store of dx). A block
// leaves only after the cluster's second barrier (ClusterWait): no block
// reads the shared memory of one that has exited.
__device__ __forceinline__ void ClusterArrive() { asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory"); }
__device__ __forceinline__ void ClusterWait() { asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory"); }
// The second arrival of a meeting: only "this block's remote reads are done"
// (their values are already used), so no release fence (MEMBAR.GPU in SASS).
__device__ __forceinline__ void ClusterArriveRelaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
}
// `local` (this block's shared memory) as seen in block `rank` of the cluster.
__device__ __forceinline__ float LoadClusterRank(const float* local, unsigned rank) {
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(local));
  unsigned remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(addr), "r"(rank));
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(remote) : "memory");
  return v;
}

// Blocks per cluster at most (the plan's kMaxCluster; 16 with the non-portable attribute).
constexpr int kMaxClusterBlocks = 16;
// Sum over the cluster's ranks 0..ranks-1 (in rank order) of `local` as seen
// in each: all loads issued before the first add (one round trip, not ranks).
__device__ __forceinline__ float SumOverCluster(const float* local, unsigned ranks) {
  float v[kMaxClusterBlocks];
#pragma unroll
  for (int k = 0; k < kMaxClusterBlocks; ++k) v[k] = k < static_cast<int>(ranks) ? LoadClusterRank(local, k) : 0.0f;
  float total = 0.0f;
#pragma unroll
  for (int k = 0; k < kMaxClusterBlocks; ++k) total += v[k];
  return total;
}

// Forward: each row's sum of x over this strip (kPer threads per row, 16-byte
// chunks of the staged tile, a fixed butterfly) into s_rows; the cluster
// meets; each block forms its rows' (r_t, i_t) from the strips' sums in rank
// order into s_ri (0 past L); strip 0 writes them to p.ctrl for the backward.
// Ends with the cluster's first arrival of the pair: the caller waits
// (ClusterWait) before it may exit.
template <typename T, int THREADS, int STRIP, int TILE, typename I>
__device__ __forceinline__ void SamuClusterForward(const SamuParams& p, const TileIndexOf<I>& x, const T* s_x,
                                                   float* s_rows, float2* s_ri) {
  constexpr int kE = 16 / int(sizeof(T));
  constexpr int kChunks = STRIP / kE;
  constexpr int kFit = THREADS / TILE >= 32 ? 32 : THREADS / TILE >= 1 ? THREADS / TILE : 1;
  constexpr int kPer = kFit >= 16 && kChunks % 16 == 0 ? (kFit >= 32 && kChunks % 32 == 0 ? 32 : 16)
                       : kFit >= 8 && kChunks % 8 == 0 ? 8
                       : kFit >= 4 && kChunks % 4 == 0 ? 4
                       : kFit >= 2 && kChunks % 2 == 0 ? 2
                                                       : 1;
  constexpr int kRowsPerPass = THREADS / kPer;
  const int sub = threadIdx.x % kPer;
#pragma unroll 1
  for (int r0 = 0; r0 < TILE; r0 += kRowsPerPass) {
    const int r = r0 + static_cast<int>(threadIdx.x) / kPer;
    float sum = 0.0f;
    if (r < TILE) {
#pragma unroll
      for (int k = sub; k < kChunks; k += kPer) {
        sum += ChunkSum<T>(*reinterpret_cast<const uint4*>(s_x + r * STRIP + k * kE));
      }
    }
#pragma unroll
    for (int o = kPer / 2; o >= 1; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (r < TILE && sub == 0) s_rows[r] = sum;
  }
  ClusterArrive();
  ClusterWait();
  const unsigned strips = gridDim.x;
  float2* ctrl = reinterpret_cast<float2*>(p.ctrl) + static_cast<long long>(x.b) * p.length;
  for (int r = threadIdx.x; r < TILE; r += THREADS) {
    const long long t = x.base + r;
    float2 ri = make_float2(0.0f, 0.0f);
    if (t < p.length) {
      ri = SamuControlOf(p, SumOverCluster(s_rows + r, strips));
      if (x.strip == 0) ctrl[t] = ri;
    }
    s_ri[r] = ri;
  }
  ClusterArriveRelaxed();
  __syncthreads();
}

// Backward, after the rescan has left its rows' sums over this strip (sum G,
// sum g s beta x, sum x) in s_rows3[row][group][3] (kGroups row groups of 32
// lanes per segment) and arrived at the cluster barrier (ClusterArrive, before
// its parameter partials, which overlap the other blocks' arrival): waits,
// then forms dm_t / W of its rows from the strips' sums in rank order into
// s_share (0 before t = 0) and strip 0's block writes the (b, tile)'s
// controller row (as the `fused` meeting). s_free: (4 + 3 x kGroups) x TILE
// floats of free shared memory (the controller partials, then the cluster's
// sums of each (row, group, sum), one SumOverCluster per thread and item).
// Ends with the second arrival of the pair (the caller waits).
template <int THREADS, int TILE, int kGroups, typename I>
__device__ __forceinline__ void SamuClusterBackward(const SamuParams& p, const Layout& lay, const TileIndexOf<I>& x,
                                                    const float* s_rows3, float* s_share, float* s_free) {
  float* s_contrib = s_free;
  float* s_tot = s_free + 4 * TILE;
  // The block's own threads may still read s_free as the parameter partials'
  // scratch (they arrived at the cluster barrier before those): a block barrier first.
  __syncthreads();
  ClusterWait();
  const unsigned strips = gridDim.x;
  for (int q = threadIdx.x; q < 3 * kGroups * TILE; q += THREADS) s_tot[q] = SumOverCluster(s_rows3 + q, strips);
  ClusterArriveRelaxed();  // this block's remote reads are done
  __syncthreads();
  SamuSharesOfTile<THREADS, TILE>(
      p, lay, x,
      [&](int r, long long, float (&sums)[3]) {
#pragma unroll
        for (int n = 0; n < 3; ++n) sums[n] = 0.0f;
#pragma unroll
        for (int g = 0; g < kGroups; ++g) {
#pragma unroll
          for (int n = 0; n < 3; ++n) sums[n] += s_tot[(r * kGroups + g) * 3 + n];
        }
      },
      s_share, s_contrib);
}

// `chunked` _y1 (SAVE = 0 in samu_fwd_held and samu_bwd_chunk_scan): the
// forward stores y = gamma h and not h; the backward reads y and takes
// h = y / gamma. Per 8-channel group (the rescan's pack: channels
// [8 g, 8 g + 8)) the forward still stores h where y cannot give it back:
// a channel past W or a |gamma| outside [2^-14, 2^14] (gamma h then stays
// in bf16's normal range wherever h is). Both kernels decide by this one
// function.
__device__ __forceinline__ bool SamuGroupKeepsH(const SamuParams& p, long long group) {
  bool keep = false;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const long long c = group * 8 + j;
    const float g = fabsf(__ldg(p.gamma + (c < p.width ? c : 0)));
    keep = keep || c >= p.width || !(g >= 0x1p-14f && g <= 0x1p14f);
  }
  return keep;
}

// Where samu's forward keeps b at 16 bits and _o3 when a is not held
// (items x vec > 16): in its own fp32 region of shared memory after the
// combine (TILE x STRIP floats, counted by the plan; each thread's slots
// only its own), not in 32 registers: the local pass can take the tanh gate (with b
// held it spilled 52-56 bytes at 80 registers) and 4 blocks of 256 fit (64
// registers, SamuMinBlocksFwd), for one STS + one LDS per element.
// _o5 keeps b there at every dtype (vec 4: with b held the fp32 forward spilled 16-144 bytes).
constexpr bool SamuBInSmem(int order, int elem_bytes, int steps, int vec) {
  return ((order >= 3 && elem_bytes == 2) || order == 5) && steps * vec > 16;
}

// Forward: stages x (2 B per element at bf16); (r_t, i_t) of the thread's
// rows are loaded before the staging wait; (a, b) stay in registers.
// FUSED (the `fused` family): no control kernel before it; the strips of
// the time tile meet for m_t once x is staged (SamuMeetForward).
// PERSIST (`chunked` _p{n}, with _b): a persistent grid of min(tiles, n x SMs) blocks, each taking the tiles
// blockIdx.x + k x gridDim.x in BlockTile's order (strips fastest, then batch, then tile), with the next
// tile's x staged into a second buffer while it runs this one's passes, look-back and stores. A tile waits
// only on tiles of smaller index, and every block of the grid is resident (the plan sizes it from the
// register and shared-memory bounds), so the smallest unfinished tile always runs: no deadlock. Each block
// arrives at the launch epoch once, after its last tile, and lets the dependent grid start after its last
// tile's local pass.
// CHAINED (`chunked` _l..._d1): the look-back takes only the predecessor's
// inclusive state (LookBackPackedLean): the same bits every run.
template <typename T, int VEC, int THREADS, int STRIP, int TILE, bool FUSED, int ORDER = 0, int SAVE = 1, int BLOCKS = 0,
          bool PERSIST = false, bool CHAINED = false>
__device__ __forceinline__ void SamuForwardHeld(const SamuParams& p) {
  using SP = HeldPlan<T, VEC, THREADS, STRIP, TILE, PERSIST ? 2 : 1>;
  constexpr int kLanes = SP::kLanes, kSegs = SP::kSegs, kSteps = SP::kSteps;
  static_assert(SAVE <= 1 || (kSteps % SAVE == 0 && TILE % SAVE == 0), "saved rows at t = SAVE - 1 mod SAVE");
  static_assert(SAVE != 0 || VEC <= 8, "_y1: a thread's channels inside one 8-channel group");
  extern __shared__ __align__(16) unsigned char smem[];
  T* s_stage = reinterpret_cast<T*>(smem);  // PERSIST: two buffers of TILE x STRIP
  float* s_A = reinterpret_cast<float*>(smem + SP::kCombineOffset);
  float* s_H = s_A + kSegs * STRIP;
  float* s_carry = s_H + kSegs * STRIP;
  unsigned* s_ticket = reinterpret_cast<unsigned*>(s_carry + STRIP);
  static_assert(!FUSED || ORDER == 0, "fused: no packed look-back or PDL (the meetings' deadlock bound)");
  constexpr bool kCluster = ORDER == 5;  // the strips of a tile as one cluster (SamuClusterForward)
  const Layout lay = MakeLayout(p.batch, p.length, p.width, STRIP, TILE, kSamuParams, true, !FUSED && !kCluster,
                                ORDER >= 2);
  // kEarly (_o2 and up after the control kernel): x is staged before the
  // grid waits on its predecessor. That predecessor is samu_fwd_control_fast,
  // which itself waited for whatever wrote x before it let this grid start,
  // so x is complete; p.ctrl (the control's output) and the workspace are
  // touched only after the wait. (_o5 and `fused` have no control kernel.)
  constexpr bool kEarly = ORDER >= 2 && !FUSED && !kCluster;
  const bool chunks = ChunkAligned<T>(p.x, p.width);
  const auto stage = [&](const auto& x, T* dst) {
    if (chunks && x.base + TILE <= p.length && x.c_strip + STRIP <= p.width) {  // whole tiles: as rglru's forward
      const TileStager<T, THREADS, STRIP, TILE> st((x.b * p.length + x.base) * p.width + x.c_strip, p.width);
      st.Stage(dst, static_cast<const T*>(p.x), 0, p.width);
    } else {
      StageRows<T, THREADS, STRIP, TILE>(dst, static_cast<const T*>(p.x), p.length, p.width, x.b, x.c_strip, x.base,
                                         0, chunks);
    }
  };
  __shared__ float2 s_ri[TILE];
  __shared__ float s_rows[kCluster ? TILE : 1];
  // One tile whose x is staged in s_in (PERSIST: with the next tile's staging committed after it); `last`:
  // the block's last tile.
  const auto run_tile = [&](const auto& x, T* s_in, bool last) {
  const int tid = threadIdx.x;
  const int lane = tid % kLanes;
  const int seg = tid / kLanes;
  const int row0 = seg * kSteps;
  const long long c0 = x.c_strip + lane * VEC;
  const Lanes l = MakeLanes<T, VEC>(c0, p.width, SamuAligned<T, VEC>(p, false));
  // kLean (16-bit, _o3 and up where a is held or b is in shared memory):
  // sp in log2 units (ForwardGate's and the rescan's ex2 take k r as is: no
  // FMUL by log2(e) per element), and the segment's A from its sum of r (one
  // ex2 per channel) instead of a product over its steps (one FMUL per
  // element).
  constexpr bool kHold = kHoldA<kSteps, VEC>;
  // kB16 (`chunked` _b{BLOCKS}): b rounded to T in place of its x in the
  // staging (each element's x is read once, by the thread that writes its
  // b), no fp32 region: ~21 KB of shared memory, BLOCKS blocks per SM.
  constexpr bool kB16 = BLOCKS > 0;
  static_assert(!kB16 || (sizeof(T) == 2 && ORDER == 3 && !FUSED && !kHold), "_b: the 16-bit _o3 forward, a not held");
  constexpr bool kBSmem = !FUSED && !kB16 && SamuBInSmem(ORDER, int(sizeof(T)), kSteps, VEC);
  constexpr bool kLean = sizeof(T) == 2 && ORDER >= 3 && (kHold || kBSmem || kB16);
  // (r_t, i_t) of the tile's rows, staged once (0 past L). kRiFirst: loaded into registers and
  // stored to s_ri once lambda's and beta's loads are issued, so that the round trips overlap (the
  // store right after the load held lambda's load behind it: ~12% of the W = 2560 forward's stall
  // samples, bench/NOTES.md, session 22). Not in _b's 16-step forwards: at 48 registers it
  // spilled 4-8 bytes there.
  constexpr bool kRiFirst = !kB16 || kSteps >= 32;
  constexpr int kRiPerThread = (TILE + THREADS - 1) / THREADS;
  float2 ri_own[kRiPerThread];
  const auto store_ri = [&] {
#pragma unroll
    for (int q = 0; q < kRiPerThread; ++q) {
      const int r = threadIdx.x + q * THREADS;
      if (r < TILE) s_ri[r] = ri_own[q];
    }
  };
  if constexpr (!FUSED && !kCluster) {
    const float2* __restrict__ ctrl = reinterpret_cast<const float2*>(p.ctrl) + x.b * p.length;
    if constexpr (kRiFirst) {
#pragma unroll
      for (int q = 0; q < kRiPerThread; ++q) {
        const int r = threadIdx.x + q * THREADS;
        ri_own[q] = r < TILE && x.base + r < p.length ? __ldg(ctrl + x.base + r) : make_float2(0.0f, 0.0f);
      }
    } else {
      for (int r = threadIdx.x; r < TILE; r += THREADS) {
        s_ri[r] = x.base + r < p.length ? __ldg(ctrl + x.base + r) : make_float2(0.0f, 0.0f);
      }
    }
  }
  // sp and beta now; gamma only after the look-back (fewer live registers
  // through it: the forward of twice the tile holds 32 fp32 b's).
  // (sp per thread: shared as in rglru it spilled 4 bytes in fused_d16_s32_c512; one constant, ~1
  // instruction per element.)
  float sp[VEC], beta[VEC];
  LoadChannels(sp, p.lambda, l);
  LoadChannels(beta, p.beta, l);
  if constexpr (!FUSED && !kCluster && kRiFirst) store_ri();
#pragma unroll
  for (int j = 0; j < VEC; ++j) sp[j] = -kC * SoftplusFor<T>(sp[j]) * (kLean ? 1.44269504088896341f : 1.0f);
  float carry0[VEC];
  LoadRow(carry0, (x.tile == 0 && p.h0 != nullptr) ? p.h0 + x.b * p.width : nullptr, l);
  CpAsyncWait<PERSIST ? 1 : 0>();
  __syncthreads();
  if constexpr (FUSED) SamuMeetForward<T, THREADS, STRIP, TILE>(p, lay, x, s_in, s_ri);
  if constexpr (kCluster) SamuClusterForward<T, THREADS, STRIP, TILE>(p, x, s_in, s_rows, s_ri);

  const bool interior = Interior<STRIP, TILE>(x.base, p.length, x.c_strip, p.width, l.wide);
  float* s_b = reinterpret_cast<float*>(smem + SP::kCombineOffset + ((2 * kSegs * STRIP + STRIP) * 4 + 16 + 15) / 16 * 16);
  float av[kHold ? kSteps : 1][VEC], bv[kBSmem || kB16 ? 1 : kSteps][VEC];
  float A[VEC], H[VEC];
  Fill(A, 1.0f);
  Fill(H, 0.0f);
  float rsum = 0.0f;  // kLean: the segment's sum of r
  // Rows past L have (r_t, i_t) = 0 (s_ri), so a = exp(0) = 1 and b = 0
  // there without a per-row test (and they follow every stored row).
  // _i32 (32 steps): in unrolled runs of 8 (fully unrolled, the prologue's
  // indices spilled 12-16 bytes at the 48 registers of _b5).
  constexpr int kUnroll = kSteps > 16 ? 8 : kSteps;
#pragma unroll kUnroll
  for (int i = 0; i < kSteps; ++i) {
    const int row = row0 + i;
    const float2 ri = s_ri[row];
    if constexpr (kLean) rsum += ri.x;
    const Pack<T, VEC> px = *reinterpret_cast<const Pack<T, VEC>*>(s_in + row * STRIP + lane * VEC);
    float b16[kB16 ? VEC : 1];
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      // _o3 and up: ForwardGate's two MUFU where a is held or b is in shared
      // memory (the tanh form's three spilled 52-56 bytes at 80 registers with
      // b alone held, 16 steps).
      GateAS g;
      if constexpr (kLean) {
        g = ForwardGate<T>(sp[j] * ri.x);
      } else if constexpr (ORDER >= 3 && (kHold || kBSmem)) {
        g = ForwardGateLn<T>(sp[j] * ri.x);
      } else {
        const Gate full = GateFast<T>(sp[j] * ri.x);
        g = {full.a, full.s};
      }
      const float a = g.a;
      const float bb = g.s * ri.y * beta[j] * px.Get(j);  // 0 past L (i = 0)
      if constexpr (kHold) av[i][j] = a;
      if constexpr (kB16) {
        b16[j] = bb;
      } else if constexpr (kBSmem) {
        s_b[row * STRIP + lane * VEC + j] = bb;
      } else {
        bv[i][j] = bb;
      }
      if constexpr (!kLean) A[j] *= a;
      H[j] = fmaf(a, H[j], bb);
    }
    if constexpr (kB16) {
      Pack<T, VEC> pb;
#pragma unroll
      for (int q = 0; q < VEC / 2; ++q) pb.u[q] = scan::PackPair<T>(b16[2 * q], b16[2 * q + 1]);
      *reinterpret_cast<Pack<T, VEC>*>(s_in + row * STRIP + lane * VEC) = pb;
    }
  }
  if constexpr (kLean) {
#pragma unroll
    for (int j = 0; j < VEC; ++j) A[j] = Ex2Ftz(sp[j] * rsum);
  }
  // The dependent grid (the next kernel) may start once every block has
  // passed this point. _i32's blocks (twice the tile, 37 KB of shared memory
  // at 5 per SM) pass it after their local pass, not at their start: with
  // the early trigger the backward's first kernel cost fwd_bwd 17-20 us at
  // chunk 128, after the look-back their forward 2 us (bench/NOTES.md,
  // session 15); the 16-token tiles keep the early trigger (a late one cost
  // their forward 1-2.5 us).
  if constexpr (PERSIST) {
    if (last) scan::LaunchDependents();
  } else if constexpr (kEarly && kSteps >= 32) {
    scan::LaunchDependents();
  }
  float s[VEC];
  CombineAndLookBack<VEC, THREADS, STRIP, TILE, -1, ORDER, decltype(x.tile), !PERSIST, CHAINED>(
      A, H, carry0, x, lay, p.workspace, s_A, s_H, s_carry, s);
  if constexpr (kCluster) ClusterWait();  // the cluster has read s_rows: every block may exit
  if (l.nvalid <= 0) return;
  float gamma[VEC];
  LoadChannels(gamma, p.gamma, l);
  // _y1: h only where the backward cannot take it from y (SamuGroupKeepsH).
  // Where every lane of the strip is inside W, the group's 8 / VEC lanes OR
  // their own tests of the gammas they hold (two shuffles at vec 2; each
  // thread testing its group's eight gammas was ~100 issued instructions a
  // thread, ~3 per element in session 14's profile; a once-per-block test
  // before the staging barrier put another round trip on it and lost 4-7 us).
  bool store_h = SAVE != 0;
  if constexpr (SAVE == 0) {
    if (x.c_strip + STRIP <= p.width) {
      bool keep = false;
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        const float g = fabsf(gamma[j]);
        keep = keep || !(g >= 0x1p-14f && g <= 0x1p14f);
      }
#pragma unroll
      for (int o = 1; o < 8 / VEC; o *= 2) {
        // Every lane shuffles (not `keep || shfl`: a lane that already keeps
        // would skip the shuffle and its group-mates would read no value).
        const bool mate = __shfl_xor_sync(0xffffffffu, keep ? 1 : 0, o) != 0;
        keep = keep || mate;
      }
      store_h = keep;
    } else {
      store_h = SamuGroupKeepsH(p, c0 / 8);
    }
  }
  const long long off0 = (x.b * p.length + x.base + row0) * p.width + c0;
  OnInterior(interior, [&](auto tag) {
  constexpr bool kIn = decltype(tag)::value;
  const Lanes le = EdgeLanes<kIn>(l);  // as rglru's rescans
  // The rows' outputs by pointers advanced one row per step (two 64-bit adds
  // a row), not by off0 + i * width added to each base (~7 integer
  // instructions a row in the SASS: 64-bit product, shifts, two adds).
  T* h_row = static_cast<T*>(p.h) + off0;
  T* y_row = static_cast<T*>(p.y) + off0;
#pragma unroll
  for (int i = 0; i < kSteps; ++i, h_row += p.width, y_row += p.width) {
    const long long t = x.base + row0 + i;
    float r = 0.0f;
    if constexpr (!kHold) r = s_ri[row0 + i].x;
    float y[VEC];
    Pack<T, VEC> pb;
    if constexpr (kB16) pb = *reinterpret_cast<const Pack<T, VEC>*>(s_in + (row0 + i) * STRIP + lane * VEC);
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      float a;
      if constexpr (kHold) {
        a = av[i][j];
      } else {
        a = kLean ? Ex2Ftz(sp[j] * r) : ExpDecay<T>(sp[j] * r);  // as the local pass (rows past L: not stored)
      }
      s[j] = fmaf(a, s[j],
                  kB16 ? pb.Get(j) : kBSmem ? s_b[(row0 + i) * STRIP + lane * VEC + j] : bv[kBSmem || kB16 ? 0 : i][j]);
      y[j] = gamma[j] * s[j];
    }
    if (kIn || t < p.length) {
      // SAVE > 1 (`chunked` _h{SAVE}): h at every SAVE-th token only (rows
      // t = SAVE - 1 mod SAVE: row0 and the tile's base are multiples of 16);
      // the backward rescan recomputes the rows between.
      if (SAVE == 0 ? store_h : SAVE == 1 || i % (SAVE > 1 ? SAVE : 1) == SAVE - 1) {
        StorePack<T, VEC>(h_row, s, kIn || le.wide, le.nvalid);
      }
      StorePack<T, VEC>(y_row, y, kIn || le.wide, le.nvalid);
      if (!kIn && t == p.length - 1 && p.h_final != nullptr) StoreRow(p.h_final + x.b * p.width, s, le);
    }
  }
  });
  if (interior && x.base + row0 + kSteps == p.length && p.h_final != nullptr) StoreRow(p.h_final + x.b * p.width, s, l);
  };
  if constexpr (PERSIST) {
    static_assert(kEarly && BLOCKS > 0, "_p: the _b forward after its control kernel (block-index order, epochs, PDL)");
    const int strips = static_cast<int>(lay.strips), batch = static_cast<int>(p.batch);
    const int total = strips * batch * static_cast<int>(lay.tiles);
    const auto tile_of = [&](int n) {
      TileIndexOf<int> t;
      t.strip = n % strips;
      t.b = n / strips % batch;
      t.tile = n / strips / batch;
      t.seq = t.b * strips + t.strip;
      t.c_strip = t.strip * STRIP;
      t.base = static_cast<long long>(t.tile) * TILE;
      return t;
    };
    constexpr int kBuffer = TILE * STRIP;
    int n = blockIdx.x;
    stage(tile_of(n), s_stage);
    CpAsyncCommit();
    scan::GridDependencyWait();
    if (threadIdx.x == 0) s_ticket[0] = scan::EpochTag(static_cast<const unsigned*>(p.workspace));
    for (int k = 0; n < total; ++k, n += gridDim.x) {
      const int next = n + gridDim.x;
      if (next < total) stage(tile_of(next), s_stage + ((k + 1) & 1) * kBuffer);
      CpAsyncCommit();  // an empty group after the last tile: the wait for this tile's stays wait_group 1
      run_tile(tile_of(n), s_stage + (k & 1) * kBuffer, next >= total);
      __syncthreads();  // this tile's buffer and s_ri are read: the next iteration may overwrite them
    }
    // Every look-back of the block is over (CombineAndLookBack's own arrival, once per block).
    if (threadIdx.x == 0) {
      unsigned* header = static_cast<unsigned*>(p.workspace);
      scan::FinishEpoch(header, atomicAdd(header + 1, 1u), gridDim.x * gridDim.y * gridDim.z);
    }
  } else {
    const auto x = [&] {
      if constexpr (FUSED) {
        return BlockTile<STRIP, TILE, false>(p.length);
      } else if constexpr (kEarly) {
        return BlockTile<STRIP, TILE, false, int>(p.length);
      } else {
        return StartTile<STRIP, TILE, false, ORDER>(p.workspace, s_ticket, p.batch, p.length, p.width);
      }
    }();
    stage(x, s_stage);
    CpAsyncCommit();
    if constexpr (kEarly) {  // StartTile's ORDER >= 2 path, after the staging
      scan::GridDependencyWait();
      if constexpr (kSteps < 32) scan::LaunchDependents();
      if (threadIdx.x == 0) s_ticket[0] = scan::EpochTag(static_cast<const unsigned*>(p.workspace));
    }
    run_tile(x, s_stage, true);
  }
}

// samu's backward at one element (the `lookback` / `fused` and `chunked`
// rescans): g = gamma dy + u; accumulates the parameter sums (dlambda,
// dbeta, dgamma) and the token sums (sum G, sum g s beta x, sum x); u <- a g;
// returns dx's part g s i beta (without dm_t / W). have_ht: dgamma's h_t is
// the caller's ht (the `chunked` rescan's previous step's h_{t-1}, as the
// forward stored it) instead of a hprev + s v. kLean (16-bit, _o3 and
// `chunked`): rglru's regrouping (RgLruBackwardHeld): with 1 / s = rs,
// q = la rs and G = g (a hprev la - v a^2 q) = (a g) la (hprev - a v rs);
// i beta once.
template <typename T, bool kLean, bool kTanh>
__device__ __forceinline__ float SamuBackStep(float la, float a, float hprev, float xv, float dy, float2 ri,
                                              float beta, float gamma, float ratio, float& u, float& acc0,
                                              float& acc1, float& acc2, float (&sums)[3], bool have_ht = false,
                                              float ht = 0.0f) {
  const float g = fmaf(gamma, dy, u);
  if constexpr (kLean) {
    const GateRs gate = RgLruGateLean(la, a);
    const float ib = ri.y * beta;
    const float v = ib * xv;
    u = a * g;
    const float big_g = (u * la) * fmaf(-v * gate.rs, a, hprev);
    const float gs = g * gate.s;
    const float gsx = gs * xv;
    acc0 = fmaf(big_g, ratio, acc0);
    acc1 = fmaf(gsx, ri.y, acc1);
    acc2 = fmaf(dy, have_ht ? ht : fmaf(a, hprev, gate.s * v), acc2);
    sums[0] += big_g;
    sums[1] = fmaf(gsx, beta, sums[1]);
    sums[2] += xv;
    return gs * ib;
  } else {
    const Gate gate = GateFromA<T, kTanh>(la, a);
    const float v = ri.y * beta * xv;
    const float big_g = g * (gate.a * hprev * la - v * gate.a * gate.a * gate.q);
    const float gs = g * gate.s;
    acc0 = fmaf(big_g, ratio, acc0);
    acc1 = fmaf(gs * ri.y, xv, acc1);
    acc2 = fmaf(dy, fmaf(gate.a, hprev, gate.s * v), acc2);
    sums[0] += big_g;
    sums[1] = fmaf(gs * beta, xv, sums[1]);
    sums[2] += xv;
    u = gate.a * g;
    return gs * ri.y * beta;
  }
}

// Backward scan: stages dy (group 0) and x, h_{t-1} (group 1); the local
// pass keeps a. Writes dx without dm_t / W (the fix-up adds it), the
// per-(token, strip) sums and the per-part parameter sums. No block waits on
// another except through the look-back.
// FUSED (the `fused` family): the rescan keeps its dx part (rounded to T)
// in its own dy slot; after the parameter partials the strips of the time
// tile meet (SamuMeetBackward) and every block stores dx + dm_t / W once.
template <typename T, int VEC, int THREADS, int STRIP, int TILE, bool FUSED, int ORDER = 0>
__device__ __forceinline__ void SamuBackwardHeld(const SamuParams& p) {
  using SP = HeldPlan<T, VEC, THREADS, STRIP, TILE, 3>;
  constexpr int kLanes = SP::kLanes, kSegs = SP::kSegs, kSteps = SP::kSteps;
  static_assert(kLanes <= 32 || ORDER == 5, "samu's token sums reduce over the lanes of one warp (_o5: per warp)");
  static_assert(3 * kSegs * STRIP * 4 <= SP::kStagedBytes, "the staging holds the parameter sums");
  static_assert(!FUSED || 3 * kSegs * STRIP * 4 <= 2 * TILE * STRIP * int(sizeof(T)),
                "fused: the x / h staging holds the parameter sums (the dy slots hold the dx parts)");
  static_assert(!FUSED || (kSegs * STRIP >= TILE && 16 <= 2 * STRIP * int(sizeof(T))),
                "fused: s_A holds the shares, the x / h staging the controller partials");
  extern __shared__ __align__(16) unsigned char smem[];
  T* s_in = reinterpret_cast<T*>(smem);
  float* s_A = reinterpret_cast<float*>(smem + SP::kCombineOffset);
  float* s_H = s_A + kSegs * STRIP;
  float* s_carry = s_H + kSegs * STRIP;
  unsigned* s_ticket = reinterpret_cast<unsigned*>(s_carry + STRIP);
  static_assert(!FUSED || ORDER == 0, "fused: no packed look-back or PDL (the meetings' deadlock bound)");
  constexpr bool kCluster = ORDER == 5;   // the strips of a tile as one cluster (SamuClusterBackward)
  constexpr bool kMeet = FUSED || kCluster;  // dx stored once, after the strips met
  static_assert(!kCluster || 3 * kSegs * STRIP * 4 <= 2 * TILE * STRIP * int(sizeof(T)),
                "_o5: the x / h staging holds the parameter sums (the dy slots hold the dx parts)");
  static_assert(!kCluster || (kSegs * STRIP >= TILE && (4 + 3 * (kLanes > 32 ? kLanes / 32 : 1)) * 4 <=
                                                         2 * STRIP * int(sizeof(T))),
                "_o5: s_A holds the shares, the x / h staging the controller partials and the cluster's sums");
  const Layout lay = MakeLayout(p.batch, p.length, p.width, STRIP, TILE, kSamuParams, true, !FUSED && !kCluster,
                                ORDER >= 2);
  const auto x = StartTile<STRIP, TILE, true, ORDER>(p.workspace, s_ticket, p.batch, p.length, p.width);
  const bool chunks = ChunkAligned<T>(p.x, p.width) && ChunkAligned<T>(p.dy, p.width) && ChunkAligned<T>(p.h, p.width);
  const T* srcs[3] = {static_cast<const T*>(p.dy), static_cast<const T*>(p.x), static_cast<const T*>(p.h)};
  // dy (group 0), then x and h_{t-1} (group 1); h is staged one row back, so
  // TileStager's whole tiles need base >= 1 (as rglru's backward).
  if (chunks && x.base >= 1 && x.base + TILE <= p.length && x.c_strip + STRIP <= p.width) {
    const TileStager<T, THREADS, STRIP, TILE> st((x.b * p.length + x.base) * p.width + x.c_strip, p.width);
#pragma unroll
    for (int k = 0; k < 3; ++k) {
      st.Stage(s_in + k * TILE * STRIP, srcs[k], k == 2 ? 1 : 0, p.width);
      if (k != 1) CpAsyncCommit();
    }
  } else {
#pragma unroll
    for (int k = 0; k < 3; ++k) {
      StageRows<T, THREADS, STRIP, TILE>(s_in + k * TILE * STRIP, srcs[k], p.length, p.width, x.b, x.c_strip, x.base,
                                         k == 2 ? 1 : 0, chunks);
      if (k != 1) CpAsyncCommit();
    }
  }
  const int tid = threadIdx.x;
  const int lane = tid % kLanes;
  const int seg = tid / kLanes;
  const long long c0 = x.c_strip + lane * VEC;
  const Lanes l = MakeLanes<T, VEC>(c0, p.width, SamuAligned<T, VEC>(p, true));
  auto row_of = [&](int i) { return TILE - 1 - (seg * kSteps + i); };
  // (r_t, i_t) of the tile's rows, staged once (0 before t = 0).
  __shared__ float2 s_ri[TILE];
  const float2* __restrict__ ctrl = reinterpret_cast<const float2*>(p.ctrl) + x.b * p.length;
  for (int r = threadIdx.x; r < TILE; r += THREADS) {
    s_ri[r] = x.base + r >= 0 ? __ldg(ctrl + x.base + r) : make_float2(0.0f, 0.0f);
  }
  __shared__ float s_chan[2][STRIP];
  WriteDecayConsts<VEC>(p.lambda, l, seg == 0, lane, s_chan);
  SamuChannels<VEC> ch;  // sp (times -8) and ratio from s_chan, beta and gamma loaded
  LoadChannels(ch.beta, p.beta, l);
  LoadChannels(ch.gamma, p.gamma, l);
  float h0v[VEC], zero[VEC];
  LoadRow(h0v, p.h0 != nullptr ? p.h0 + x.b * p.width : nullptr, l);
  Fill(zero, 0.0f);
  CpAsyncWait<1>();
  __syncthreads();
  ReadDecayConsts(s_chan, lane, 0, ch.sp);
  ReadDecayConsts(s_chan, lane, 1, ch.ratio);

  auto pack_at = [&](int input, int row) -> const Pack<T, VEC>& {
    return *reinterpret_cast<const Pack<T, VEC>*>(s_in + (input * TILE + row) * STRIP + lane * VEC);
  };
  // Interior (backward): every row at t >= 1 (h_{t-1} staged), the strip inside W.
  const bool interior = Interior<STRIP, TILE>(x.base - 1, p.length, x.c_strip, p.width, l.wide);
  constexpr bool kHold = kHoldA<kSteps, VEC>;
  // _o3 at 16 bits: the lean element (below).
  constexpr bool kLean = ORDER >= 3 && sizeof(T) == 2;
  float av[kHold ? kSteps : 1][VEC];
  float A[VEC], H[VEC];
  Fill(A, 1.0f);
  Fill(H, 0.0f);
  OnInterior(interior, [&](auto tag) {
  constexpr bool kIn = decltype(tag)::value;
#pragma unroll
  for (int i = 0; i < kSteps; ++i) {
    const int row = row_of(i);
    const bool in = kIn || x.base + row >= 0;
    const float r = s_ri[row].x;
    const Pack<T, VEC> pd = pack_at(0, row);
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const float a = in ? ExpDecay<T>(ch.sp[j] * r) : 1.0f;
      if constexpr (kHold) av[i][j] = a;
      A[j] *= a;
      H[j] = a * fmaf(ch.gamma[j], pd.Get(j), H[j]);
    }
  }
  });
  float u[VEC];
  CombineAndLookBack<VEC, THREADS, STRIP, TILE, 0, ORDER>(A, H, zero, x, lay, p.workspace, s_A, s_H, s_carry, u);
  float* tok = reinterpret_cast<float*>(static_cast<char*>(p.workspace) + lay.token_offset);
  float* acc_sums = reinterpret_cast<float*>(static_cast<char*>(p.workspace) + lay.acc_offset);  // FUSED
  // _o5: this strip's sums of each row, per row group of (at most) 32 lanes.
  constexpr int kRowLanes = kLanes < 32 ? kLanes : 32;
  constexpr int kGroups = kLanes / kRowLanes;
  __shared__ float s_rows3[kCluster ? 3 * kGroups * TILE : 1];
  float acc[3][VEC];
#pragma unroll
  for (int n = 0; n < 3; ++n) Fill(acc[n], 0.0f);
  const long long off0 = (x.b * p.length + x.base + row_of(0)) * p.width + c0;
  OnInterior(interior, [&](auto tag) {
  constexpr bool kIn = decltype(tag)::value;
  T* __restrict__ o_dx = static_cast<T*>(p.dx) + off0;  // running row pointer
  const Lanes le = EdgeLanes<kIn>(l);  // as rglru's rescans
  float pend[8];  // RowSums8: the 3 sums of an even and an odd step, 2 zeros
  // One step of the rescan; parity: i % 2, known at compile time.
  auto step = [&](int i, auto parity) {
    constexpr int kPar = decltype(parity)::value ? 1 : 0;
    const int row = row_of(i);
    const long long t = x.base + row;
    // No early exit: the row sums are shuffles over the whole warp. Rows
    // before t = 0 are staged as zeros, have r = i = 0 and a = 1, and
    // contribute nothing.
    const float2 ri = s_ri[row];
    const Pack<T, VEC> pd = pack_at(0, row), px = pack_at(1, row), ph = pack_at(2, row);
    float dx[VEC], sums[3] = {0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const float la = ch.sp[j] * ri.x;
      float a;
      if constexpr (kHold) {
        a = av[i][j];
      } else {
        a = (kIn || t >= 0) ? ExpDecay<T>(la) : 1.0f;  // as the local pass
      }
      const float hprev = (kIn || t > 0) ? ph.Get(j) : h0v[j];
      dx[j] = SamuBackStep<T, kLean, ORDER >= 3>(la, a, hprev, px.Get(j), pd.Get(j), ri, ch.beta[j], ch.gamma[j],
                                                 ch.ratio[j], u[j], acc[0][j], acc[1][j], acc[2][j], sums);
    }
    if constexpr (kLanes >= 16) {
      // Two rows' 3 sums at a time by RowSums8 (9 shuffles for 2 rows, not 30).
      // (At 8 lanes, strip 16, the pending sums spilled in the fused backward.)
      const int k0 = kPar * 3;
#pragma unroll
      for (int n = 0; n < 3; ++n) pend[k0 + n] = sums[n];
      if (kPar == 1 || i == kSteps - 1) {
        if (kPar == 0) pend[3] = pend[4] = pend[5] = 0.0f;
        pend[6] = pend[7] = 0.0f;
        const float total = RowSums8<kRowLanes>(pend);
        const int idx = RowSumIndex<kRowLanes>(tid % 32);
        if (tid % (kRowLanes / 8) == 0 && idx < 6) {
          const long long tt = x.base + row_of(i - kPar + idx / 3);
          if (kIn || tt >= 0) {
            if constexpr (kCluster) {
              s_rows3[(row_of(i - kPar + idx / 3) * kGroups + lane / 32) * 3 + idx % 3] = total;
            } else if constexpr (FUSED) {
              atomicAdd(acc_sums + (x.b * p.length + tt) * kSamuTokenSums + idx % 3, total);
            } else {
              tok[((x.b * p.length + tt) * lay.strips + x.strip) * kSamuTokenSums + idx % 3] = total;
            }
          }
        }
      }
    } else {
#pragma unroll
      for (int n = 0; n < 3; ++n) sums[n] = RowSum<kLanes>(sums[n]);
      if ((kIn || t >= 0) && lane == 0) {
        const long long token = x.b * p.length + t;
#pragma unroll
        for (int n = 0; n < 3; ++n) {
          if constexpr (kCluster) {
            s_rows3[row * 3 + n] = sums[n];
          } else if constexpr (FUSED) {
            atomicAdd(acc_sums + token * kSamuTokenSums + n, sums[n]);
          } else {
            tok[(token * lay.strips + x.strip) * kSamuTokenSums + n] = sums[n];
          }
        }
      }
    }
    if (kIn || t >= 0) {
      if constexpr (kMeet) {
        // This thread's own dy slot: only it reads dy there, and it just did.
        StoreSmemPack<T, VEC>(s_in + row * STRIP + lane * VEC, dx);
      } else {
        StorePack<T, VEC>(o_dx, dx, kIn || le.wide, le.nvalid);
      }
      if (!kIn && t == 0 && p.dh0 != nullptr) StoreRow(p.dh0 + x.b * p.width, u, le);
    }
    o_dx -= p.width;
  };
  if constexpr (kHold || kSteps % 2 != 0) {
#pragma unroll
    for (int i = 0; i < kSteps; ++i) {
      if (i % 2 == 0) {
        step(i, BoolTag<false>{});
      } else {
        step(i, BoolTag<true>{});
      }
    }
  } else {
    // Two steps per trip, not all kSteps unrolled: unrolled, the interior
    // rescan alone was tens of KB of SASS and the backward stalled on
    // instruction fetch (ncu, session 6: no_instruction 1.4 cycles per issue).
#pragma unroll 1
    for (int i = 0; i < kSteps; i += 2) {
      step(i, BoolTag<false>{});
      step(i + 1, BoolTag<true>{});
    }
  }
  });
  if constexpr (kCluster) ClusterArrive();  // s_rows3 complete; the partials below overlap the others' arrival
  float* param = reinterpret_cast<float*>(static_cast<char*>(p.workspace) + lay.param_offset);
  T* s_xh = s_in + TILE * STRIP;  // the x / h staging, free after the rescan
  WriteParamPartials<3, VEC, THREADS, STRIP>(acc, reinterpret_cast<float*>(kMeet ? s_xh : s_in), param,
                                             x.b * lay.tiles + x.tile, x.c_strip, p.width);
  if constexpr (kMeet) {
    if constexpr (kCluster) {
      SamuClusterBackward<THREADS, TILE, kGroups>(p, lay, x, s_rows3, s_A, reinterpret_cast<float*>(s_xh));
    } else {
      SamuMeetBackward<THREADS, TILE>(p, lay, x, s_A, reinterpret_cast<float*>(s_xh));
    }
    if (l.nvalid > 0) {
      T* __restrict__ o_dx = static_cast<T*>(p.dx) + off0;
#pragma unroll 2
      for (int i = 0; i < kSteps; ++i, o_dx -= p.width) {
        const int row = row_of(i);
        const long long t = x.base + row;
        if (!interior && t < 0) break;
        const Pack<T, VEC> part = pack_at(0, row);
        const float share = s_A[row];
        float v[VEC];
#pragma unroll
        for (int j = 0; j < VEC; ++j) v[j] = part.Get(j) + share;
        StorePack<T, VEC>(o_dx, v, interior || l.wide, l.nvalid);
      }
    }
    if constexpr (kCluster) ClusterWait();  // the cluster has read s_rows3: every block may exit
  }
}

// One warp per token: reduces the token's strip sums, forms dm_t / W and
// adds it to the token's dx row (16-byte loads, kRowBatch16 in flight per
// lane); the block writes its controller partials (one row per block).
template <typename T, int UNIT, int TILE, int ORDER>
__device__ __forceinline__ void SamuFixupFast(const SamuParams& p) {
  __shared__ float s_ctrl[kFixupTokensPerBlock][4];
  const Layout lay = MakeLayout(p.batch, p.length, p.width, UNIT, TILE, kSamuParams, true, true, ORDER >= 2);
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const long long token = static_cast<long long>(blockIdx.x) * kFixupTokensPerBlock + warp;
  float contrib[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  if (token < p.batch * p.length) {
    const float* tok = reinterpret_cast<const float*>(static_cast<const char*>(p.workspace) + lay.token_offset) +
                       token * lay.strips * kSamuTokenSums;
    T* row = static_cast<T*>(p.dx) + token * p.width;
    const bool aligned = ChunkAligned<T>(p.dx, p.width);
    constexpr int kE = 16 / int(sizeof(T));
    uint4* v = reinterpret_cast<uint4*>(row);
    const long long n = aligned ? p.width / kE : 0;
    // The row's first batch is loaded before the token's sums, so that the
    // DRAM and the L2 round trips overlap (one after the other, the kernel
    // ran at 46% of DRAM bandwidth on the H200: bench/NOTES.md session 5).
    uint4 w[kRowBatch16];
#pragma unroll
    for (int k = 0; k < kRowBatch16; ++k) {
      if (lane + 32 * k < n) w[k] = __ldcg(v + lane + 32 * k);
    }
    float sums[3] = {0.0f, 0.0f, 0.0f};
    for (long long k = lane; k < lay.strips; k += 32) {
#pragma unroll
      for (int n3 = 0; n3 < 3; ++n3) sums[n3] += __ldcg(tok + k * kSamuTokenSums + n3);
    }
#pragma unroll
    for (int n3 = 0; n3 < 3; ++n3) sums[n3] = RowSum<32>(sums[n3]);
    const SamuShare sh = SamuShareOf(p, sums);
    const float share = sh.share;
#pragma unroll
    for (int n3 = 0; n3 < 4; ++n3) contrib[n3] = sh.contrib[n3];
    if (aligned) {
      for (long long c = lane; c < n; c += 32 * kRowBatch16) {
        if (c != lane) {
#pragma unroll
          for (int k = 0; k < kRowBatch16; ++k) {
            if (c + 32 * k < n) w[k] = __ldcg(v + c + 32 * k);
          }
        }
#pragma unroll
        for (int k = 0; k < kRowBatch16; ++k) {
          if (c + 32 * k < n) {
            const uint4 o = ChunkAdd<T>(w[k], share);
            const unsigned ou[4] = {o.x, o.y, o.z, o.w};
            scan::WordIO<uint4>::Store(v + c + 32 * k, ou);
          }
        }
      }
    } else {
      for (long long c = lane; c < p.width; c += 32) row[c] = scan::FromFloat<T>(scan::ToFloat(row[c]) + share);
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

// Blocks per SM the register allocation must allow (__launch_bounds__): 3
// of 256 threads (<= 85 registers), 4 of 128 (<= 128). A thread holds at
// most 2 x 16 fp32 through the look-back (kHoldA). Checked without spills by
// tests/compiler/plan_gated_test.cc.
constexpr int HeldMinBlocks(int threads, int vec, int strip, int tile) {
  return threads >= 256 ? 3 : 4;
}
// The backward scans hold at most items x vec fp32 (a, or nothing), so 4 of
// 256 (<= 64 registers) fit without spills, except samu's with a held (fp32
// v2_t256_s8_i8 spilled 4 B): they keep 3. Where shared memory allows fewer
// blocks (rglru with 8 K-element tiles: 86 KB at bf16, 2 per SM), the bound
// asks for only those, and the registers are free for the rescan.
// inputs: staged tensors; static_bytes: the kernel's static shared memory.
template <typename T>
constexpr int HeldMinBlocksBwd(int threads, int vec, int strip, int tile, int inputs, int static_bytes,
                               bool held_a_cap3) {
  const int segs = threads / (strip / vec);
  const int smem = (inputs * tile * strip * int(sizeof(T)) + 15) / 16 * 16 + (2 * segs * strip + strip) * 4 + 16 +
                   static_bytes;
  const int by_smem = 233472 / (smem + 1024);  // 228 KB per SM, 1 KB reserved per block
  const int cap = threads >= 256 ? (held_a_cap3 ? 3 : 4) : 4;
  const int blocks = by_smem < cap ? by_smem : cap;
  return blocks < 1 ? 1 : blocks;
}
// rglru's forward: 4 blocks of 256 (64 registers) where b is in the staging
// and a fits (RgLruBInStaging), else HeldMinBlocks.
template <typename T, int ORDER>
constexpr int RgLruMinBlocksFwd(int threads, int vec, int strip, int tile) {
  const int steps = tile / (threads / (strip / vec));
  return threads >= 256 && steps * vec <= 16 && RgLruBInStaging(ORDER, int(sizeof(T)), steps, vec, tile)
             ? 4
             : HeldMinBlocks(threads, vec, strip, tile);
}
template <typename T>
constexpr int RgLruMinBlocksBwd(int threads, int vec, int strip, int tile) {
  return HeldMinBlocksBwd<T>(threads, vec, strip, tile, 5, DecayConstBytes(strip, true), false);
}
// samu's forward: 4 blocks of 256 (64 registers) where b is in shared memory
// (SamuBInSmem) and 4 fit (16 steps a thread), or as many as its shared
// memory allows (32 steps: the staging and b of twice the tile, 2 per SM, so
// 128 registers), else HeldMinBlocks.
template <typename T, int ORDER>
constexpr int SamuMinBlocksFwd(int threads, int vec, int strip, int tile) {
  const int steps = tile / (threads / (strip / vec));
  if (ORDER == 5 && SamuBInSmem(ORDER, int(sizeof(T)), steps, vec)) return 1024 / threads > 0 ? 1024 / threads : 1;
  if (threads < 256 || !SamuBInSmem(ORDER, int(sizeof(T)), steps, vec)) return HeldMinBlocks(threads, vec, strip, tile);
  const int segs = threads / (strip / vec);
  const int smem = (tile * strip * int(sizeof(T)) + 15) / 16 * 16 + ((2 * segs * strip + strip) * 4 + 16 + 15) / 16 * 16 +
                   tile * strip * 4;
  const int by_smem = 233472 / (smem + 1024);  // 228 KB per SM, 1 KB reserved per block
  return by_smem < 4 ? (by_smem < 1 ? 1 : by_smem) : 4;
}
// _o5 (vec 4: twice the channel state of the vec-2 points): 2 blocks of 256
// or 3 of 128 per SM, so 128 / 170 registers (ptxas, session 6: at 80 / 128
// registers they spilled 4-36 bytes).
// At vec 2 (the o3 points' channel state) 1024 threads per SM, 64 registers.
constexpr int SamuMinBlocksBwdCluster(int threads, int vec) {
  return vec <= 2 ? (1024 / threads > 0 ? 1024 / threads : 1) : threads >= 256 ? 2 : 3;
}
template <typename T>
constexpr int SamuMinBlocksBwd(int threads, int vec, int strip, int tile) {
  return HeldMinBlocksBwd<T>(threads, vec, strip, tile, 3, tile * 8 + DecayConstBytes(strip, true),
                             (tile / (threads / (strip / vec))) * vec <= 16);
}
}  // namespace gated

// ---- entry points of the `lookback` family (grids: scans B x strips x tiles,
// ORDER 0 one-dimensional (tickets), ORDER 2 (strips, B, tiles) (block index);
// ceil(B*L / 8) blocks of 256 threads for control and fix-up) ----------
// ORDER 2 launches are programmatic dependents (PDL): every kernel of the
// family starts with griddepcontrol.wait (a no-op in a plain launch).

// CHAINED 1 ("_d1", with ORDER >= 2): the chained look-back (deterministic).
// KB, KL, KW (`_k1`, with ORDER >= 2): the shape the kernel is compiled for (scan::WithShape); 0: the struct's.
template <typename T, int VEC, int THREADS, int STRIP, int TILE, int ORDER, int CHAINED = 0, long long KB = 0,
          long long KL = 0, long long KW = 0>
__global__ void __launch_bounds__(THREADS, gated::RgLruMinBlocksFwd<T, ORDER>(THREADS, VEC, STRIP, TILE)) rglru_fwd_held(const RgLruParams p) {
  static_assert(CHAINED == 0 || ORDER >= 2, "_d1: the packed look-back's chained form");
  gated::RgLruForwardHeld<T, VEC, THREADS, STRIP, TILE, ORDER, CHAINED != 0>(scan::WithShape<KB, KL, KW>(p));
}
template <typename T, int VEC, int THREADS, int STRIP, int TILE, int ORDER, int CHAINED = 0, long long KB = 0,
          long long KL = 0, long long KW = 0>
__global__ void __launch_bounds__(THREADS, gated::RgLruMinBlocksBwd<T>(THREADS, VEC, STRIP, TILE)) rglru_bwd_held(const RgLruParams p) {
  static_assert(CHAINED == 0 || ORDER >= 2, "_d1: the packed look-back's chained form");
  gated::RgLruBackwardHeld<T, VEC, THREADS, STRIP, TILE, ORDER, CHAINED != 0>(scan::WithShape<KB, KL, KW>(p));
}
template <typename T>
__global__ void __launch_bounds__(gated::kFixupThreads) samu_fwd_control_fast(const SamuParams p) {
  scan::GridDependencyWait();
  scan::LaunchDependents();
  gated::SamuControlFast<T>(p);
}
// CHAINED 1 (`chunked` _l..._d1, ORDER >= 2): the chained look-back (a deterministic forward).
// KB, KL, KW (`_k1`): the shape the kernel is compiled for (scan::WithShape); 0: the struct's.
template <typename T, int VEC, int THREADS, int STRIP, int TILE, int ORDER, int SAVE = 1, int BLOCKS = 0, int PERSIST = 0,
          int CHAINED = 0, long long KB = 0, long long KL = 0, long long KW = 0>
__global__ void __launch_bounds__(THREADS, BLOCKS > 0 ? BLOCKS : gated::SamuMinBlocksFwd<T, ORDER>(THREADS, VEC, STRIP, TILE))
    samu_fwd_held(const SamuParams p) {
  static_assert(CHAINED == 0 || ORDER >= 2, "_d1: the packed look-back's chained form");
  gated::SamuForwardHeld<T, VEC, THREADS, STRIP, TILE, false, ORDER, SAVE, BLOCKS, PERSIST != 0, CHAINED != 0>(
      scan::WithShape<KB, KL, KW>(p));
}
template <typename T, int VEC, int THREADS, int STRIP, int TILE, int ORDER>
__global__ void __launch_bounds__(THREADS, ORDER == 5 ? gated::SamuMinBlocksBwdCluster(THREADS, VEC)
                                                      : gated::SamuMinBlocksBwd<T>(THREADS, VEC, STRIP, TILE))
    samu_bwd_held(const SamuParams p) {
  gated::SamuBackwardHeld<T, VEC, THREADS, STRIP, TILE, false, ORDER>(p);
}
template <typename T, int UNIT, int TILE, int ORDER>
__global__ void __launch_bounds__(gated::kFixupThreads) samu_bwd_fixup_fast(const SamuParams p) {
  scan::GridDependencyWait();
  scan::LaunchDependents();
  gated::SamuFixupFast<T, UNIT, TILE, ORDER>(p);
}
// The finalize of the `lookback` family: controller partials per fix-up block.
template <typename T, int UNIT, int TILE, int ORDER>
__global__ void __launch_bounds__(gated::kFinalizeThreads) samu_bwd_finalize_fixup(const SamuParams p) {
  scan::GridDependencyWait();
  scan::LaunchDependents();
  gated::SamuFinalize<UNIT, TILE, ORDER != 5, ORDER >= 2>(p);  // _o5: one controller row per (b, tile)
}

// The `fused` family of samu (fused_d{strip}_s{segments}_c{tile}: vec 2,
// threads = strip / 2 x segments): the scans above with the strips of a
// time tile meeting for m_t and dm_t; no control or fix-up kernel. The
// finalize is samu_bwd_finalize (one controller row per (b, tile)).
template <typename T, int VEC, int THREADS, int STRIP, int TILE>
__global__ void __launch_bounds__(THREADS, gated::HeldMinBlocks(THREADS, VEC, STRIP, TILE)) samu_fwd_fused(const SamuParams p) {
  gated::SamuForwardHeld<T, VEC, THREADS, STRIP, TILE, true>(p);
}
template <typename T, int VEC, int THREADS, int STRIP, int TILE>
__global__ void __launch_bounds__(THREADS, gated::SamuMinBlocksBwd<T>(THREADS, VEC, STRIP, TILE)) samu_bwd_fused(const SamuParams p) {
  gated::SamuBackwardHeld<T, VEC, THREADS, STRIP, TILE, true>(p);
}
