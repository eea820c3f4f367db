// Device helpers shared by the scan kernels: element conversion to and from
// the fp32 carry, `Pack`s of VEC adjacent channels loaded and stored as wide
// as alignment allows (16-byte LDG/STG for 8 x bf16), and the acquire/release
// accesses the decoupled look-back needs. Compiled by NVRTC only (the kernel
// sources are embedded in the binaries), so it may use only what NVRTC and
// the toolkit's cuda_bf16.h / cuda_fp16.h provide: no <cuda/atomic>, no std.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "linear_scan_params.h"

namespace scan {

// ---- element <-> fp32 ------------------------------------------------------

__device__ __forceinline__ float ToFloat(float v) { return v; }
__device__ __forceinline__ float ToFloat(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float ToFloat(__half v) { return __half2float(v); }

template <typename T>
__device__ __forceinline__ T FromFloat(float v);
template <>
__device__ __forceinline__ float FromFloat<float>(float v) { return v; }
template <>
__device__ __forceinline__ __nv_bfloat16 FromFloat<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <>
__device__ __forceinline__ __half FromFloat<__half>(float v) { return __float2half_rn(v); }

// ---- Taylor series in FMAs -------------------------------------------------

// n! as a float (exact up to 13!).
__host__ __device__ constexpr float Factorial(int n) { return n <= 1 ? 1.0f : static_cast<float>(n) * Factorial(n - 1); }

// sum_{k=0}^{DEG} x^k / (k + FIRST)! by Horner's rule, highest term first, one
// FMA per term: exp(x) = TaylorTail<0, n>(x) near 0 (selective_scan's
// ExpAccurate, after its range reduction), exp(x) = 1 + x TaylorTail<1, n>(x)
// (ExpNearZero) and -expm1(x) = -x TaylorTail<1, n>(x) (MakeGate's 1 - a^2).
// (The coefficients are constexpr, so folded before code generation.)
template <int FIRST, int K>
__device__ __forceinline__ float HornerDown(float x, float t) {
  if constexpr (K < 0) {
    return t;
  } else {
    constexpr float c = 1.0f / Factorial(FIRST + K);
    return HornerDown<FIRST, K - 1>(x, fmaf(x, t, c));
  }
}
template <int FIRST, int DEG>
__device__ __forceinline__ float TaylorTail(float x) {
  static_assert(DEG >= 1 && FIRST + DEG <= 13, "factorials exact in fp32");
  constexpr float hi = 1.0f / Factorial(FIRST + DEG), next = 1.0f / Factorial(FIRST + DEG - 1);
  return HornerDown<FIRST, DEG - 2>(x, fmaf(x, hi, next));
}

// ---- wide packs of VEC channels -------------------------------------------

// The widest plain word a pack of BYTES moves per instruction: sm_90 has no
// 32-byte global access, so 8 x fp32 becomes two 16-byte words.
template <int BYTES> struct WordOf;
template <> struct WordOf<2> { using type = unsigned short; };
template <> struct WordOf<4> { using type = unsigned int; };
template <> struct WordOf<8> { using type = uint2; };
template <> struct WordOf<16> { using type = uint4; };

// Moves a wide word between memory and 32-bit registers explicitly. Stores
// are inline PTX: NVVM splits a plain 16-byte store of a register-built uint4
// into four 4-byte ones (seen in the PTX/SASS), which wastes store bandwidth.
template <typename Word> struct WordIO;
template <> struct WordIO<uint4> {
  static constexpr int kU32 = 4;
  __device__ __forceinline__ static void Unpack(uint4 w, unsigned* u) { u[0] = w.x; u[1] = w.y; u[2] = w.z; u[3] = w.w; }
  __device__ __forceinline__ static void Store(void* dst, const unsigned* u) {
    asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(dst), "r"(u[0]), "r"(u[1]), "r"(u[2]), "r"(u[3])
                 : "memory");
  }
};
template <> struct WordIO<uint2> {
  static constexpr int kU32 = 2;
  __device__ __forceinline__ static void Unpack(uint2 w, unsigned* u) { u[0] = w.x; u[1] = w.y; }
  __device__ __forceinline__ static void Store(void* dst, const unsigned* u) {
    asm volatile("st.global.v2.b32 [%0], {%1, %2};" ::"l"(dst), "r"(u[0]), "r"(u[1]) : "memory");
  }
};
template <> struct WordIO<unsigned int> {
  static constexpr int kU32 = 1;
  __device__ __forceinline__ static void Unpack(unsigned int w, unsigned* u) { u[0] = w; }
  __device__ __forceinline__ static void Store(void* dst, const unsigned* u) { *static_cast<unsigned*>(dst) = u[0]; }
};
template <> struct WordIO<unsigned short> {
  static constexpr int kU32 = 1;
  __device__ __forceinline__ static void Unpack(unsigned short w, unsigned* u) { u[0] = w; }
  __device__ __forceinline__ static void Store(void* dst, const unsigned* u) {
    *static_cast<unsigned short*>(dst) = static_cast<unsigned short>(u[0]);
  }
};

template <typename T, int VEC>
struct PackTraits {
  static_assert(VEC == 1 || VEC == 2 || VEC == 4 || VEC == 8, "vec must be 1, 2, 4 or 8");
  static constexpr int kBytes = VEC * int(sizeof(T));
  static constexpr int kWordBytes = kBytes < 16 ? kBytes : 16;
  static constexpr int kWords = kBytes / kWordBytes;
  using Word = typename WordOf<kWordBytes>::type;
};

template <typename T> struct IsBF16 { static constexpr bool value = false; };
template <> struct IsBF16<__nv_bfloat16> { static constexpr bool value = true; };

// Bits of one element.
__device__ __forceinline__ unsigned BitsOf(float v) { return __float_as_uint(v); }
__device__ __forceinline__ unsigned BitsOf(__nv_bfloat16 v) { return __bfloat16_as_ushort(v); }
__device__ __forceinline__ unsigned BitsOf(__half v) { return __half_as_ushort(v); }

// VEC elements kept in their storage type, packed into 32-bit words, until
// used: a thread then holds two bf16/fp16 per register instead of one fp32,
// which is what lets the look-back keep many timesteps in flight without
// spilling. Get() widens one element (bf16 -> fp32 is a shift).
template <typename T, int VEC>
struct alignas(PackTraits<T, VEC>::kWordBytes) Pack {
  static constexpr int kPerWord = 4 / int(sizeof(T));
  static constexpr int kU32 = (VEC + kPerWord - 1) / kPerWord;
  unsigned u[kU32];

  __device__ __forceinline__ float Get(int j) const {
    if constexpr (sizeof(T) == 4) {
      return __uint_as_float(u[j]);
    } else {
      const unsigned word = u[j / 2];
      if constexpr (IsBF16<T>::value) {
        return __uint_as_float((j & 1) ? (word & 0xffff0000u) : (word << 16));
      } else {
        return __half2float(__ushort_as_half(static_cast<unsigned short>((j & 1) ? (word >> 16) : word)));
      }
    }
  }
  // Get() for a second use of the same pack: the widening is an opaque
  // volatile asm, so the compiler cannot reuse the fp32 values of the first
  // use. Otherwise it keeps all ITEMS x VEC widened floats live (twice the
  // registers of the packed words) between the two uses in the look-back.
  __device__ __forceinline__ float GetAgain(int j) const {
    if constexpr (sizeof(T) == 4) {
      unsigned v;
      asm volatile("mov.b32 %0, %1;" : "=r"(v) : "r"(u[j]));
      return __uint_as_float(v);
    } else if constexpr (IsBF16<T>::value) {
      unsigned v;
      if (j & 1) {
        asm volatile("and.b32 %0, %1, 0xffff0000;" : "=r"(v) : "r"(u[j / 2]));
      } else {
        asm volatile("shl.b32 %0, %1, 16;" : "=r"(v) : "r"(u[j / 2]));
      }
      return __uint_as_float(v);
    } else {
      unsigned v;
      if (j & 1) {
        asm volatile("shr.b32 %0, %1, 16;" : "=r"(v) : "r"(u[j / 2]));
      } else {
        asm volatile("mov.b32 %0, %1;" : "=r"(v) : "r"(u[j / 2]));
      }
      return __half2float(__ushort_as_half(static_cast<unsigned short>(v)));
    }
  }
  __device__ __forceinline__ void Clear() {
#pragma unroll
    for (int k = 0; k < kU32; ++k) u[k] = 0;
  }
  // Requires Clear() first for 16-bit types.
  __device__ __forceinline__ void Set(int j, T v) {
    if constexpr (sizeof(T) == 4) {
      u[j] = BitsOf(v);
    } else {
      u[j / 2] |= BitsOf(v) << (16 * (j & 1));
    }
  }
};

// Loads VEC channels starting at src. `wide`: the whole pack is in range and
// aligned, so it moves as kWords wide words through the read-only path;
// otherwise element-wise, `nvalid` (<= VEC, may be <= 0) of them, rest zero.
template <typename T, int VEC>
__device__ __forceinline__ void LoadPack(Pack<T, VEC>& pack, const T* __restrict__ src, bool wide, int nvalid) {
  using Traits = PackTraits<T, VEC>;
  using Word = typename Traits::Word;
  if (wide) {
#pragma unroll
    for (int k = 0; k < Traits::kWords; ++k) {
      WordIO<Word>::Unpack(__ldg(reinterpret_cast<const Word*>(src) + k), pack.u + k * WordIO<Word>::kU32);
    }
  } else {
    pack.Clear();
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      if (j < nvalid) pack.Set(j, src[j]);
    }
  }
}

// Two fp32 values rounded to nearest-even into one 32-bit word (lo first).
template <typename T>
__device__ __forceinline__ unsigned PackPair(float lo, float hi);
template <>
__device__ __forceinline__ unsigned PackPair<__nv_bfloat16>(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return (static_cast<unsigned>(__bfloat16_as_ushort(v.y)) << 16) | __bfloat16_as_ushort(v.x);
}
template <>
__device__ __forceinline__ unsigned PackPair<__half>(float lo, float hi) {
  const __half2 v = __floats2half2_rn(lo, hi);
  return (static_cast<unsigned>(__half_as_ushort(v.y)) << 16) | __half_as_ushort(v.x);
}

template <typename T, int VEC>
__device__ __forceinline__ void StorePack(T* __restrict__ dst, const float (&v)[VEC], bool wide, int nvalid) {
  using Traits = PackTraits<T, VEC>;
  using Word = typename Traits::Word;
  if (wide) {
    Pack<T, VEC> pack;
    if constexpr (sizeof(T) == 2 && VEC % 2 == 0) {
      // Two channels per conversion (F2FP.*.PACK_AB): the same round-to-
      // nearest-even as FromFloat, without the per-element merge.
#pragma unroll
      for (int k = 0; k < VEC / 2; ++k) pack.u[k] = PackPair<T>(v[2 * k], v[2 * k + 1]);
    } else {
      pack.Clear();
#pragma unroll
      for (int j = 0; j < VEC; ++j) pack.Set(j, FromFloat<T>(v[j]));
    }
#pragma unroll
    for (int k = 0; k < Traits::kWords; ++k) {
      WordIO<Word>::Store(reinterpret_cast<Word*>(dst) + k, pack.u + k * WordIO<Word>::kU32);
    }
  } else {
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      if (j < nvalid) dst[j] = FromFloat<T>(v[j]);
    }
  }
}

// Where one thread's VEC channels sit in a row of width W, and whether every
// row access of them may use wide words: W a multiple of VEC and every base
// pointer aligned to the pack (cudaMalloc'ed tensors are; views may not be).
struct Lanes {
  long long c0;  // first channel
  int nvalid;    // channels of the pack inside the row (may be <= 0 on idle threads)
  bool wide;
};

template <typename T, int VEC>
__device__ __forceinline__ bool Aligned(const void* ptr) {
  return ptr == nullptr || (reinterpret_cast<unsigned long long>(ptr) % (VEC * sizeof(T))) == 0;
}

template <typename T, int VEC>
__device__ __forceinline__ Lanes MakeLanes(long long c0, long long width, bool rows_aligned) {
  Lanes l;
  l.c0 = c0;
  const long long left = width - c0;
  l.nvalid = left >= VEC ? VEC : (left > 0 ? int(left) : 0);
  l.wide = rows_aligned && l.nvalid == VEC;
  return l;
}

// ---- fp32 state rows (h0, h_final, dh0) -------------------------------------

template <int VEC>
__device__ __forceinline__ void LoadState(float (&v)[VEC], const float* row, const Lanes& l) {
#pragma unroll
  for (int j = 0; j < VEC; ++j) v[j] = (row != nullptr && j < l.nvalid) ? row[l.c0 + j] : 0.0f;
}

template <int VEC>
__device__ __forceinline__ void StoreState(float* row, const float (&v)[VEC], const Lanes& l) {
  if (row == nullptr) return;
#pragma unroll
  for (int j = 0; j < VEC; ++j) {
    if (j < l.nvalid) row[l.c0 + j] = v[j];
  }
}

// ---- inter-block publication (decoupled look-back) -------------------------

// Release store / acquire load at GPU scope: what a block wrote (and fenced)
// before the release is visible to a block that acquires the flag.
__device__ __forceinline__ void StoreRelease(unsigned* ptr, unsigned value) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(ptr), "r"(value) : "memory");
}
__device__ __forceinline__ unsigned LoadAcquire(const unsigned* ptr) {
  unsigned value;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(value) : "l"(ptr) : "memory");
  return value;
}

// Workspace reads of data another block published bypass L1 (ld.global.cg),
// which is not coherent across SMs.
__device__ __forceinline__ float LoadCg(const float* ptr) { return __ldcg(ptr); }
__device__ __forceinline__ float2 LoadCg(const float2* ptr) { return __ldcg(ptr); }

template <int VEC>
__device__ __forceinline__ void Fill(float (&v)[VEC], float value) {
#pragma unroll
  for (int j = 0; j < VEC; ++j) v[j] = value;
}

// Flag of a (sequence, tile) slot: 0 nothing yet, 1 aggregate ready, 2 inclusive ready,
// plus the launch's epoch tag (below; 0 for kernels whose flags are zeroed
// before every launch).
constexpr unsigned kFlagAggregate = 1;
constexpr unsigned kFlagInclusive = 2;

// Whether `flag` was published in the launch tagged `tag` (tag + 1 or tag + 2).
__device__ __forceinline__ bool FlagReady(unsigned flag, unsigned tag) { return flag - tag - 1u <= 1u; }

// ---- launch epochs: a look-back workspace zeroed once, not before every launch ----
//
// A kernel that takes tickets and publishes flags would need its counter and
// flags zeroed before every launch (a memset node per launch: ~2 us on the
// H200, bench/NOTES.md session 3). Instead the workspace header keeps
//   header[0] ticket counter, header[1] blocks done, header[2] launch epoch
// and every flag carries the epoch's tag (epoch mod 2^30, times 4): flags left
// by the previous launch never look ready. Each block arrives at header[1]
// once its look-back is over (it reads no other block's slots after that);
// the block that arrives last knows every block's look-back is over, so it
// resets the counters and advances the epoch, which the next launch (stream
// order, or griddepcontrol.wait under programmatic dependent launch) reads.
// The header and flags must be zero once, when the workspace is allocated
// (the plan's workspace_zero_once); launches sharing a workspace must be
// stream-ordered.
__device__ __forceinline__ unsigned EpochTag(const unsigned* header) {
  return (__ldcg(header + 2) & 0x3FFFFFFFu) << 2;
}
// The last of `blocks` arrivals (`arrived` = atomicAdd(header + 1, 1)'s old
// value) resets the launch's counters and opens the next epoch.
__device__ __forceinline__ void FinishEpoch(unsigned* header, unsigned arrived, unsigned blocks) {
  if (arrived != blocks - 1u) return;
  __stcg(header, 0u);
  __stcg(header + 1, 0u);
  __stcg(header + 2, __ldcg(header + 2) + 1u);
}

// One block's arrival, held from the end of its look-back to the end of the
// block, so that the atomic's round trip overlaps the rescan: the destructor
// (every return path) finishes the epoch if this block arrived last. Only one
// thread of the block arrives (header == nullptr for the others).
struct EpochArrival {
  unsigned* header = nullptr;
  unsigned blocks = 0;
  unsigned arrived = 0;
  __device__ __forceinline__ void Arrive(unsigned* h, unsigned grid_blocks) {
    header = h;
    blocks = grid_blocks;
    arrived = atomicAdd(h + 1, 1u);
  }
  __device__ __forceinline__ ~EpochArrival() {
    if (header != nullptr) FinishEpoch(header, arrived, blocks);
  }
};

// Programmatic dependent launch (sm_90): a kernel launched with programmatic
// stream serialization may start while the previous kernel of the stream
// finishes; it must wait for it before touching memory. Launched without the
// attribute, both are no-ops.
__device__ __forceinline__ void GridDependencyWait() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void LaunchDependents() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Decoupled look-back for this thread's VEC channels of tile `tile` of one
// sequence: the carry-in, i.e. the inclusive state after tile - 1, composed
// from the predecessors' published aggregates (A, H) back to the nearest
// published inclusive state. Tile k's slot is `first + k`: its flag is
// flags[first + k], its values agg / incl[(first + k) * STRIP + c] for the
// channels c = lane_c + j. Tile 0 always publishes an inclusive state, so the
// walk ends. One predecessor at a time: a window of flags read at once (relaxed
// loads and one acquire fence) measured no faster forward and 2-6% slower
// forward+backward on the H200 (bench/NOTES.md, v8). `tag`: the launch's epoch tag.
template <int VEC, int STRIP>
__device__ __forceinline__ void LookBack(const unsigned* flags, const float2* agg, const float* incl, long long first,
                                         long long tile, int lane_c, float (&carry)[VEC], unsigned tag = 0) {
  float accA[VEC], accH[VEC];
  Fill(accA, 1.0f);
  Fill(accH, 0.0f);
  for (long long k = tile - 1;; --k) {
    unsigned flag;
    while (!FlagReady(flag = LoadAcquire(flags + first + k), tag)) {
    }
    const long long slot = (first + k) * STRIP + lane_c;
    if (flag == tag + kFlagInclusive) {
#pragma unroll
      for (int j = 0; j < VEC; ++j) carry[j] = fmaf(accA[j], LoadCg(incl + slot + j), accH[j]);
      return;
    }
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const float2 ag = LoadCg(agg + slot + j);
      accH[j] = fmaf(accA[j], ag.y, accH[j]);
      accA[j] *= ag.x;
    }
  }
}

// ---- packed look-back: each channel's state travels with its flag ----------
//
// Two 64-bit words per (tile, channel), in two arrays of [tiles][STRIP]:
//   aggregate  w1 = {A, tag + 1}, w2 = {H, tag + 1}
//   inclusive  w1 = {h, tag + 2}            (written over the aggregate's w1)
// An aligned 64-bit access is single-copy atomic, so a reader that sees a
// word's flag sees its value: no fence between the values and a flag, no
// block-wide flag, and one round trip per predecessor (the flag comes with
// the value) instead of a flag poll followed by a value load.
__device__ __forceinline__ unsigned long long PackWord(float value, unsigned flag) {
  return (static_cast<unsigned long long>(flag) << 32) | __float_as_uint(value);
}
__device__ __forceinline__ void StoreWord(unsigned long long* ptr, unsigned long long word) {
  asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(ptr), "l"(word) : "memory");
}
__device__ __forceinline__ unsigned long long LoadWord(const unsigned long long* ptr) {
  unsigned long long word;
  asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(word) : "l"(ptr) : "memory");
  return word;
}
__device__ __forceinline__ unsigned FlagOf(unsigned long long word) { return static_cast<unsigned>(word >> 32); }
__device__ __forceinline__ float ValueOf(unsigned long long word) {
  return __uint_as_float(static_cast<unsigned>(word));
}

// The packed form of LookBack: this thread's VEC channels at w1/w2 + (first + k)
// * STRIP + lane_c for tile k; each channel walks back on its own until it
// meets an inclusive state. The loads of one step are in flight together.
// CHAINED ("_d1"): the predecessor's inclusive state only, never its
// aggregate (a chained scan): the carry is composed in the same order on
// every run, so the outputs have the same bits every run, at the price of a
// round trip per tile on the chain's critical path.
template <int VEC, int STRIP, bool CHAINED = false>
__device__ __forceinline__ void LookBackPacked(const unsigned long long* w1, const unsigned long long* w2,
                                               long long first, long long tile, int lane_c, unsigned tag,
                                               float (&carry)[VEC]) {
  float accA[VEC], accH[VEC];
  Fill(accA, 1.0f);
  Fill(accH, 0.0f);
  constexpr unsigned kAll = (1u << VEC) - 1u;
  unsigned done = 0;
  for (long long k = tile - 1; done != kAll; --k) {
    const long long s = (first + k) * STRIP + lane_c;
    unsigned pending = kAll & ~done;
    while (pending != 0) {
      // Both words of every channel at once (2 x VEC loads in flight); a
      // channel uses h only if both carry this launch's aggregate flag.
      unsigned long long a[VEC], h[VEC];
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        a[j] = LoadWord(w1 + s + j);
        h[j] = CHAINED ? 0ull : LoadWord(w2 + s + j);
      }
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        if (!(pending >> j & 1u)) continue;
        if (FlagOf(a[j]) == tag + kFlagInclusive) {
          carry[j] = fmaf(accA[j], ValueOf(a[j]), accH[j]);
          done |= 1u << j;
          pending &= ~(1u << j);
        } else if (!CHAINED && FlagOf(a[j]) == tag + kFlagAggregate && FlagOf(h[j]) == tag + kFlagAggregate) {
          accH[j] = fmaf(accA[j], ValueOf(h[j]), accH[j]);
          accA[j] *= ValueOf(a[j]);
          pending &= ~(1u << j);
        }
      }
    }
  }
}

// `_k1` (samu `chunked` _l points): the problem's batch, length and width as template arguments (0: the
// parameter struct's, at run time). A kernel scans a copy of its parameters with the known sizes written in, so
// the inlined scan's index arithmetic, bounds tests and partial-tile paths fold into constants. Without a baked
// size it is the kernel's own parameters (a copy alone changes the unbaked kernels' code: ptxas schedules them
// differently).
template <long long B, long long L, long long W, typename Params>
__device__ __forceinline__ decltype(auto) WithShape(const Params& p) {
  if constexpr (B == 0 && L == 0 && W == 0) {
    return (p);
  } else {
    Params q = p;
    if constexpr (B > 0) q.batch = B;
    if constexpr (L > 0) q.length = L;
    if constexpr (W > 0) q.width = W;
    return q;
  }
}

}  // namespace scan
