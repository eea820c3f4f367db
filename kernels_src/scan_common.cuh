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

// ---- wide packs of VEC channels -------------------------------------------

// The widest plain word a pack of BYTES moves per instruction: sm_90 has no
// 32-byte global access, so 8 x fp32 becomes two 16-byte words.
template <int BYTES> struct WordOf;
template <> struct WordOf<2> { using type = unsigned short; };
template <> struct WordOf<4> { using type = unsigned int; };
template <> struct WordOf<8> { using type = uint2; };
template <> struct WordOf<16> { using type = uint4; };

template <typename T, int VEC>
struct PackTraits {
  static_assert(VEC == 1 || VEC == 2 || VEC == 4 || VEC == 8, "vec must be 1, 2, 4 or 8");
  static constexpr int kBytes = VEC * int(sizeof(T));
  static constexpr int kWordBytes = kBytes < 16 ? kBytes : 16;
  static constexpr int kWords = kBytes / kWordBytes;
  using Word = typename WordOf<kWordBytes>::type;
};

// VEC elements kept in their storage type until used, so a thread can hold
// many timesteps in flight with half the registers of fp32 copies (bf16/fp16).
template <typename T, int VEC>
struct alignas(PackTraits<T, VEC>::kWordBytes) Pack {
  T e[VEC];
  __device__ __forceinline__ float Get(int j) const { return ToFloat(e[j]); }
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
      reinterpret_cast<Word*>(pack.e)[k] = __ldg(reinterpret_cast<const Word*>(src) + k);
    }
  } else {
#pragma unroll
    for (int j = 0; j < VEC; ++j) pack.e[j] = j < nvalid ? src[j] : FromFloat<T>(0.0f);
  }
}

template <typename T, int VEC>
__device__ __forceinline__ void StorePack(T* __restrict__ dst, const float (&v)[VEC], bool wide, int nvalid) {
  using Traits = PackTraits<T, VEC>;
  using Word = typename Traits::Word;
  Pack<T, VEC> pack;
#pragma unroll
  for (int j = 0; j < VEC; ++j) pack.e[j] = FromFloat<T>(v[j]);
  if (wide) {
#pragma unroll
    for (int k = 0; k < Traits::kWords; ++k) {
      reinterpret_cast<Word*>(dst)[k] = reinterpret_cast<const Word*>(pack.e)[k];
    }
  } else {
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      if (j < nvalid) dst[j] = pack.e[j];
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

}  // namespace scan
