// samu `lookback` _o4: the backward's fix-up folded into the backward scan
// (included by gated_scan.cuh after gated_held.cuh, whose _o3 kernels it
// runs). _o3's backward writes dx without dm_t / W and a fix-up kernel
// reads every dx row back from DRAM and writes it again (4 B per element,
// ~20 us of 160 at 4x2048x2048 under Nsight Compute; bench/NOTES.md,
// session 5). Here the scan's blocks add dm_t / W themselves, to rows that
// other blocks of the same kernel wrote moments earlier (still in L2):
//
// A group is the strips of one (b, tile): blocks (., b, z) of a (strips, B,
// tiles + lag) grid, z counting tiles in scan order (the backward scans the
// last tile first). Each scanning block runs _o3's backward unchanged
// (SamuBackwardHeld: dx without dm_t / W, per-(token, strip) sums,
// parameter partials), then arrives at its group's counter; the group's
// last arriver sums the group's token sums (strips in order, as the fix-up
// kernel does), writes the tokens' dm_t / W and the group's controller row,
// and raises the group's ready flag (tagged with the launch's epoch, so the
// flags are zeroed only once). Then every block adds dm_t / W to its own
// strip of the group scanned `lag` groups before it (z - lag), once that
// group is ready; the grid's `lag` extra z-slices (gridDim.z - tiles) only
// fix the groups scanned last. The lag is the plan's (FoldLag, 3): a block
// should not wait, SM slot held, for a group's shares (with a lag of 1 or 2
// and the shares summed one row per warp and L2 round trip, the backward
// took +45-130% on the H200, bench/NOTES.md session 5).
// No deadlock: a block waits only for blocks of a smaller z (the look-back
// and the ready flag of group z - lag), which were dispatched before it, the
// assumption the look-back's block-index order already makes.
#pragma once

namespace gated {

// The last arriver's sums of group (b, z): each token's dm_t / W into
// `shares`, and this thread's part of the group's controller sums into
// contrib. One thread per row, its strips in order: a row's [strips][3] sums
// are contiguous, read as float4 (16-byte aligned when strips % 4 == 0).
// (One warp per row with a butterfly per sum took ~2 us per 32 rows: 8-16 us
// per group on the H200, session 5.) One float4 triple in flight per thread
// and iteration: two or four spilled 8-28 bytes under the backward's 64
// registers.
template <int THREADS, int TILE>
__device__ __forceinline__ void SamuGroupShares(const SamuParams& p, const Layout& lay, long long b, long long z,
                                             float* shares, float (&contrib)[4]) {
  const float* tok = reinterpret_cast<const float*>(static_cast<const char*>(p.workspace) + lay.token_offset);
  const long long base = p.length - (z + 1) * TILE;
  const bool wide = lay.strips % 4 == 0;
  for (int r = threadIdx.x; r < TILE; r += THREADS) {
    const long long t = base + r;
    if (t < 0) continue;
    const float* row = tok + (b * p.length + t) * lay.strips * kSamuTokenSums;
    float sums[3] = {0.0f, 0.0f, 0.0f};
    if (wide) {
      const float4* v = reinterpret_cast<const float4*>(row);
#pragma unroll 1
      for (long long q = 0; q < lay.strips / 4 * 3; q += 3) {  // 4 strips x 3 sums
        const float4 a0 = __ldcg(v + q), a1 = __ldcg(v + q + 1), a2 = __ldcg(v + q + 2);
        sums[0] += a0.x;
        sums[1] += a0.y;
        sums[2] += a0.z;
        sums[0] += a0.w;
        sums[1] += a1.x;
        sums[2] += a1.y;
        sums[0] += a1.z;
        sums[1] += a1.w;
        sums[2] += a2.x;
        sums[0] += a2.y;
        sums[1] += a2.z;
        sums[2] += a2.w;
      }
    } else {
      for (long long k = 0; k < lay.strips; ++k) {
#pragma unroll
        for (int n = 0; n < 3; ++n) sums[n] += __ldcg(row + k * kSamuTokenSums + n);
      }
    }
    const SamuShare sh = SamuShareOf(p, sums);
    __stcg(shares + t, sh.share);
#pragma unroll
    for (int n = 0; n < 4; ++n) contrib[n] += sh.contrib[n];
  }
}

// This block's arrival at group (b, z) (scan) and its fix-up of its strip of
// group (b, z - lag). tag: the launch's epoch tag; s_share: TILE floats of
// shared memory that nothing else reads any more.
template <typename T, int THREADS, int STRIP, int TILE>
__device__ __forceinline__ void SamuFoldFixup(const SamuParams& p, const Layout& lay, long long b, long long z,
                                              long long lag, long long c_strip, unsigned tag, bool scan,
                                              float* s_share) {
  constexpr int kWarps = THREADS / 32;
  char* ws = static_cast<char*>(p.workspace);
  unsigned* counters = reinterpret_cast<unsigned*>(ws + lay.fold_offset);
  unsigned* ready = counters + lay.parts;
  float* shares = reinterpret_cast<float*>(ws + lay.share_offset) + b * p.length;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  __shared__ unsigned s_last;
  __shared__ float s_ctrl[kWarps][4];
  if (scan) {
    const long long g = b * lay.tiles + z;
    __threadfence();  // this thread's token sums, before the block's arrival
    __syncthreads();
    if (tid == 0) {
      s_last = atomicAdd(counters + g, 1u) == static_cast<unsigned>(lay.strips - 1);
      if (s_last) counters[g] = 0;  // every strip of this launch has arrived
    }
    __syncthreads();
    if (s_last) {
      __threadfence();
      float contrib[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      SamuGroupShares<THREADS, TILE>(p, lay, b, z, shares, contrib);
#pragma unroll
      for (int n = 0; n < 4; ++n) contrib[n] = RowSum<32>(contrib[n]);
      if (lane == 0) {
#pragma unroll
        for (int n = 0; n < 4; ++n) s_ctrl[warp][n] = contrib[n];
      }
      __syncthreads();
      if (tid < 4) {
        float total = 0.0f;
        for (int w = 0; w < kWarps; ++w) total += s_ctrl[w][tid];
        reinterpret_cast<float*>(ws + lay.ctrl_offset)[g * 4 + tid] = total;
      }
      __threadfence();
      __syncthreads();
      if (tid == 0) scan::StoreRelease(ready + g, tag + kFlagAggregate);
    }
  }
  const long long zf = z - lag;  // the group this block fixes up
  if (zf < 0 || zf >= lay.tiles) return;
  if (tid == 0) {
    while (scan::LoadAcquire(ready + b * lay.tiles + zf) != tag + kFlagAggregate) {
    }
  }
  __syncthreads();
  const long long base = p.length - (zf + 1) * TILE;  // group zf's first row
  for (int r = tid; r < TILE; r += THREADS) s_share[r] = base + r >= 0 ? __ldcg(shares + base + r) : 0.0f;
  __syncthreads();
  constexpr int kE = 16 / int(sizeof(T));
  constexpr int kChunks = STRIP / kE;  // 16-byte chunks per strip row
  const bool whole = ChunkAligned<T>(p.dx, p.width) && c_strip + STRIP <= p.width;
  T* dx = static_cast<T*>(p.dx) + b * p.length * p.width + c_strip;
  for (int q = tid; q < TILE * kChunks; q += THREADS) {
    const int r = q / kChunks, k = q % kChunks;
    const long long t = base + r;
    if (t < 0) continue;
    const float share = s_share[r];
    T* at = dx + t * p.width + k * kE;
    if (whole) {
      uint4* v = reinterpret_cast<uint4*>(at);
      const uint4 o = ChunkAdd<T>(__ldcg(v), share);
      const unsigned ou[4] = {o.x, o.y, o.z, o.w};
      scan::WordIO<uint4>::Store(v, ou);
    } else {
      for (int e = 0; e < kE && c_strip + k * kE + e < p.width; ++e) {
        at[e] = scan::FromFloat<T>(scan::ToFloat(__ldcg(at + e)) + share);
      }
    }
  }
}

}  // namespace gated

// grid (strips, B, tiles + lag): the backward scan of order BASE (3, or 2 for
// fp32, where the two are the same) plus the folded fix-up; the last lag
// z-slices only fix up (and arrive at the launch epoch, which counts every
// block of the grid).
template <typename T, int VEC, int THREADS, int STRIP, int TILE, int BASE>
__global__ void __launch_bounds__(THREADS, gated::SamuMinBlocksBwd<T>(THREADS, VEC, STRIP, TILE)) samu_bwd_fold(const SamuParams p) {
  using SP = gated::HeldPlan<T, VEC, THREADS, STRIP, TILE, 3>;
  static_assert(SP::kSegs * STRIP >= TILE, "the combine's s_A holds the shares of a tile");
  extern __shared__ __align__(16) unsigned char smem[];
  float* s_A = reinterpret_cast<float*>(smem + SP::kCombineOffset);
  unsigned* s_tag = reinterpret_cast<unsigned*>(s_A + 2 * SP::kSegs * STRIP + STRIP);  // StartTile's s_ticket
  const gated::Layout lay = gated::MakeLayout(p.batch, p.length, p.width, STRIP, TILE, gated::kSamuParams, true,
                                              true, true, true);
  const bool scanning = blockIdx.z < lay.tiles;
  if (scanning) {
    static_assert(BASE == 2 || BASE == 3, "the fold runs a packed (block-index, epoch) backward");
    gated::SamuBackwardHeld<T, VEC, THREADS, STRIP, TILE, false, BASE>(p);
  } else {
    scan::GridDependencyWait();
    scan::LaunchDependents();
    unsigned* header = static_cast<unsigned*>(p.workspace);
    if (threadIdx.x == 0) {
      *s_tag = scan::EpochTag(header);
      scan::FinishEpoch(header, atomicAdd(header + 1, 1u), gridDim.x * gridDim.y * gridDim.z);
    }
    __syncthreads();
  }
  gated::SamuFoldFixup<T, THREADS, STRIP, TILE>(p, lay, blockIdx.y, blockIdx.z, gridDim.z - lay.tiles,
                                                static_cast<long long>(blockIdx.x) * STRIP, *s_tag, scanning, s_A);
}
// grid ceil(W / 32) + 1 blocks of 1024 threads: controller rows per group.
template <typename T, int UNIT, int TILE>
__global__ void __launch_bounds__(gated::kFinalizeThreads) samu_bwd_finalize_fold(const SamuParams p) {
  scan::GridDependencyWait();
  scan::LaunchDependents();
  gated::SamuFinalize<UNIT, TILE, true, true, true>(p);
}
