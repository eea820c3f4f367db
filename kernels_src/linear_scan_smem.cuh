// e) lookbacksmem: the look-back of family c), with the tile staged in SHARED
//    memory by cp.async instead of held in registers. Included at the end of
//    linear_scan.cuh (it uses its helpers and flag values).
//
//    A block owns (b, a strip of STRIP channels, a time tile of TILE steps).
//    Its threads copy the tile's inputs (fwd: a, x; bwd: a, dh, h_{t-1}) into
//    shared memory as 16-byte cp.async.cg (no registers held while the loads
//    are in flight; the tail / misaligned chunks go element-wise through
//    registers). Thread (seg, lane), with kLanes = STRIP / VEC lanes and
//    kSegs = THREADS / kLanes segments of kSteps = TILE / kSegs steps, then
//    composes its steps from shared memory, the segments combine, the last
//    segment's threads publish the aggregate and look back exactly as in c),
//    and every thread rescans its steps from shared memory and stores to
//    global. Out-of-range timesteps are staged as the identity (a = 1, x = 0).
//    Interior tiles (and full-width packs) take predicate-free staging and
//    rescan paths; only edge tiles take the checked ones. Only the last
//    segment's threads publish and look back (synchronising among
//    themselves); the block waits for them at one barrier.
//
//    Dynamic shared memory (bytes; MakePlan passes the same formula):
//      [0, kIn * TILE * STRIP * sizeof(T))   the staged inputs, [kIn][TILE][STRIP]
//      then s_A, s_H [kSegs][STRIP] fp32, s_carry [STRIP] fp32, s_ticket[2] (ticket, epoch tag)
//    kIn = 2 forward, 3 backward.
//    grid.x and workspace: as c), with kStrip = STRIP and kTile = TILE.
//    Backward: in.h is loaded in a second cp.async group that is only waited
//    for before the rescan, so its copies are in flight during the local
//    scan, the combine and the look-back.
#pragma once

namespace scan {

// 16-byte global -> shared copy that bypasses L1 (cp.async.cg, sm_80+).
__device__ __forceinline__ void CpAsync16(void* smem, const void* gmem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile(
      "{\n\t.reg .u64 g;\n\tcvta.to.global.u64 g, %1;\n\tcp.async.cg.shared.global [%0], [g], 16;\n\t}" ::"r"(s),
      "l"(gmem)
      : "memory");
}
__device__ __forceinline__ void CpAsyncCommit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// The same with the shared address already converted (so that a constant
// offset folds into the instruction's immediate).
__device__ __forceinline__ void CpAsync16Shared(unsigned s, const void* gmem) {
  asm volatile(
      "{\n\t.reg .u64 g;\n\tcvta.to.global.u64 g, %1;\n\tcp.async.cg.shared.global [%0], [g], 16;\n\t}" ::"r"(s),
      "l"(gmem)
      : "memory");
}
template <int N>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}
// CpAsyncWait with the count known only after unrolling (a constant there:
// the switch folds); at most 7 groups pending.
__device__ __forceinline__ void CpAsyncWaitPending(int n) {
  switch (n) {
    case 0: CpAsyncWait<0>(); break;
    case 1: CpAsyncWait<1>(); break;
    case 2: CpAsyncWait<2>(); break;
    case 3: CpAsyncWait<3>(); break;
    case 4: CpAsyncWait<4>(); break;
    case 5: CpAsyncWait<5>(); break;
    case 6: CpAsyncWait<6>(); break;
    default: CpAsyncWait<7>(); break;
  }
}

template <typename T, int THREADS, int STRIP, int TILE, bool kBackward>
struct SmemLayout {
  static constexpr int kIn = kBackward ? 3 : 2;
  static constexpr int kChunkElts = 16 / int(sizeof(T));
  static constexpr int kTileBytes = kIn * TILE * STRIP * int(sizeof(T));
};

// Every staged row of the tile is a real timestep (t - shift in [0, L)), the
// whole strip lies inside W and rows are 16-byte aligned: the unchecked paths.
template <int STRIP, int TILE>
__device__ __forceinline__ bool InteriorTile(const LinearScanParams& p, long long c_strip, long long base, int shift,
                                             bool chunks_aligned) {
  return chunks_aligned && base >= shift && base + TILE <= p.length && c_strip + STRIP <= p.width;
}

// Copies rows [0, TILE) of input `k` (time of row r: base + r; `shift`: the
// source row is t - shift, valid for t - shift >= 0) into dst[TILE][STRIP].
// `identity`: the value staged for out-of-range timesteps (1 for a, else 0).
template <typename T, int THREADS, int STRIP, int TILE>
__device__ __forceinline__ void StageInput(T* dst, const T* __restrict__ src, const LinearScanParams& p, long long b,
                                           long long c_strip, long long base, int shift, float identity,
                                           bool chunks_aligned) {
  constexpr int kE = 16 / int(sizeof(T));
  constexpr int kPerRow = STRIP / kE;
  constexpr int kChunks = TILE * kPerRow;
  if constexpr (THREADS % kPerRow == 0 && kChunks % THREADS == 0) {
    // Interior tile (every row in [shift, L), the whole strip inside W,
    // rows 16-byte aligned): no predicate per chunk. Each thread copies a
    // fixed column chunk of rows r0, r0 + kRowsPerPass, ...: one 64-bit
    // pointer add and one LDGSTS (shared offset an immediate) per chunk.
    constexpr int kRowsPerPass = THREADS / kPerRow;
    constexpr int kPasses = kChunks / THREADS;
    if (InteriorTile<STRIP, TILE>(p, c_strip, base, shift, chunks_aligned)) {
      const int r0 = int(threadIdx.x) / kPerRow;
      const int cc = (int(threadIdx.x) % kPerRow) * kE;
      const T* g = src + ((b * p.length + base + r0 - shift) * p.width + c_strip + cc);
      const long long stride = static_cast<long long>(kRowsPerPass) * p.width;
      const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst + r0 * STRIP + cc));
#pragma unroll
      for (int k = 0; k < kPasses; ++k) {
        CpAsync16Shared(s + unsigned(k * kRowsPerPass * STRIP * int(sizeof(T))), g);
        g += stride;
      }
      return;
    }
  }
  const T id = FromFloat<T>(identity);
#pragma unroll 4
  for (int q = threadIdx.x; q < kChunks; q += THREADS) {
    const int r = q / kPerRow;
    const int cc = (q % kPerRow) * kE;
    const long long t = base + r;
    const long long c = c_strip + cc;
    T* d = dst + r * STRIP + cc;
    const bool t_ok = t >= shift && t < p.length;
    if (t_ok && chunks_aligned && c < p.width) {
      CpAsync16(d, src + (b * p.length + t - shift) * p.width + c);
    } else {
      // Tail channels, misaligned rows, or out-of-range time: element-wise.
      const bool t_in = t >= 0 && t < p.length;
#pragma unroll
      for (int j = 0; j < kE; ++j) {
        T v = t_in ? FromFloat<T>(0.0f) : id;
        if (t_ok && c + j < p.width) v = src[(b * p.length + t - shift) * p.width + c + j];
        d[j] = v;
      }
    }
  }
}

// Where ticket `ticket` sits: time tile, (batch, strip) sequence and the
// time of staged row 0. Tickets run over time tiles in the outer loop, so a
// tile only ever waits on tiles of smaller tickets.
struct SmemTileIndex {
  long long tile, seq, b, c_strip, base;
};

template <bool kNarrow> struct TileIndexInt { using type = long long; };
template <> struct TileIndexInt<true> { using type = unsigned; };

// Index: the integer type of the divisions. unsigned (orders >= 3) needs
// ticket, sequences and strips < 2^32, which CanImplement's 2^30 tiles bound
// guarantees; it spares the two 64-bit division calls (~100 dependent
// instructions each) between the block's start and its first load.
template <int STRIP, int TILE, bool kBackward, typename Index = long long>
__device__ __forceinline__ SmemTileIndex MakeSmemTileIndex(const LinearScanParams& p, long long ticket) {
  const Index strips = Index((p.width + STRIP - 1) / STRIP);
  const Index seqs = Index(p.batch) * strips;
  SmemTileIndex x;
  x.tile = Index(ticket) / seqs;
  x.seq = Index(ticket) % seqs;
  x.b = Index(x.seq) / strips;
  x.c_strip = static_cast<long long>(Index(x.seq) % strips) * STRIP;
  // Row r of the staged tile is time base + r. Backward tiles count from the
  // end of the sequence, so the first backward tile ends at L - 1.
  x.base = kBackward ? p.length - (x.tile + 1) * TILE : x.tile * TILE;
  return x;
}

// 1. Issues the copies of one tile into s_in [kIn][TILE][STRIP] and commits
//    them: forward one cp.async group (a, x); backward two (a and dh, then
//    h_{t-1}), so that the caller can wait for h separately.
template <typename T, int THREADS, int STRIP, int TILE, bool kBackward>
__device__ __forceinline__ void StageSmemTile(const LinearScanParams& p, const SmemTileIndex& x, T* s_in) {
  using Layout = SmemLayout<T, THREADS, STRIP, TILE, kBackward>;
  const bool chunks_aligned = kBackward ? BackwardRowsAligned<T, Layout::kChunkElts>(p)
                                        : ForwardRowsAligned<T, Layout::kChunkElts>(p);
  StageInput<T, THREADS, STRIP, TILE>(s_in, static_cast<const T*>(p.a), p, x.b, x.c_strip, x.base, 0, 1.0f,
                                      chunks_aligned);
  StageInput<T, THREADS, STRIP, TILE>(s_in + TILE * STRIP, static_cast<const T*>(kBackward ? p.dh : p.x), p, x.b,
                                      x.c_strip, x.base, 0, 0.0f, chunks_aligned);
  CpAsyncCommit();
  if constexpr (kBackward) {
    StageInput<T, THREADS, STRIP, TILE>(s_in + 2 * TILE * STRIP, static_cast<const T*>(p.h), p, x.b, x.c_strip,
                                        x.base, 1, 0.0f, chunks_aligned);
    CpAsyncCommit();
  }
}

// ORDER 3, forward: warp-local staging in kGroups cp.async groups. Thread
// (seg, lane) reads staged rows seg * kSteps + [0, kSteps), so warp w (its
// kSegsPerWarp segments) reads rows [w, w + 1) x kSegsPerWarp * kSteps only: it
// stages exactly those rows itself, group g holding steps [g, g + 1) x
// kGroupSteps of each of its segments (a and x). Each thread then waits for
// its own copies of group g (cp.async.wait_group kGroups - 1 - g) and the
// warp syncs (its lanes' copies) before composing those steps: no block
// barrier between staging and scan, and the first steps are composed while
// the later groups are still in flight. Lane l copies column chunk
// l % kPerRow of rows l / kPerRow + k x kRowsPerPass of each group.
template <typename T, int VEC, int THREADS, int STRIP, int TILE>
struct WarpStaging {
  static constexpr int kLanes = STRIP / VEC;
  static constexpr int kSegs = THREADS / kLanes;
  static constexpr int kSteps = TILE / kSegs;
  static constexpr int kSegsPerWarp = 32 / kLanes;
  static constexpr int kPerRow = STRIP * int(sizeof(T)) / 16;  // 16-byte chunks per staged row
  static constexpr int kRowsPerPass = 32 / kPerRow;
  static constexpr int kGroups = 4;
  static constexpr int kGroupSteps = kSteps / kGroups;
  static constexpr int kPasses = kSegsPerWarp * kGroupSteps / kRowsPerPass;  // per input and group
  static_assert(kLanes <= 32 && 32 % kLanes == 0, "a warp must hold whole segments");
  static_assert(kPerRow <= 32 && 32 % kPerRow == 0, "a warp must copy whole rows per pass");
  static_assert(kSteps % kGroups == 0 && kGroupSteps % kRowsPerPass == 0,
                "each group's steps must be whole passes of the warp");
  // Offset (rows) of pass k of group g from the thread's first row.
  static constexpr int RowOf(int g, int k) {
    return (k * kRowsPerPass / kGroupSteps) * kSteps + g * kGroupSteps + (k * kRowsPerPass) % kGroupSteps;
  }
};

// Issues and commits the kGroups groups of an interior forward tile (InteriorTile).
template <typename T, int VEC, int THREADS, int STRIP, int TILE>
__device__ __forceinline__ void StageWarpRows(const LinearScanParams& p, const SmemTileIndex& x, T* s_in) {
  using W = WarpStaging<T, VEC, THREADS, STRIP, TILE>;
  const int warp = int(threadIdx.x) / 32;
  const int wl = int(threadIdx.x) % 32;
  const int row0 = warp * W::kSegsPerWarp * W::kSteps + wl / W::kPerRow;
  const int cc = (wl % W::kPerRow) * (16 / int(sizeof(T)));
  const long long off = (x.b * p.length + x.base + row0) * p.width + x.c_strip + cc;
  const T* ga = static_cast<const T*>(p.a) + off;
  const T* gx = static_cast<const T*>(p.x) + off;
  const unsigned sa = static_cast<unsigned>(__cvta_generic_to_shared(s_in + row0 * STRIP + cc));
  constexpr unsigned kInputBytes = unsigned(TILE * STRIP * int(sizeof(T)));
#pragma unroll
  for (int g = 0; g < W::kGroups; ++g) {
#pragma unroll
    for (int k = 0; k < W::kPasses; ++k) {
      const int r = W::RowOf(g, k);
      const long long go = r * p.width;
      const unsigned so = unsigned(r * STRIP * int(sizeof(T)));
      CpAsync16Shared(sa + so, ga + go);
      CpAsync16Shared(sa + kInputBytes + so, gx + go);
    }
    CpAsyncCommit();
  }
}

// The first wave: the SMs, and the SMs x the blocks per SM that this kernel's
// dynamic shared memory allows (of sm_90's 228 KB). Under programmatic
// dependent launch the whole first wave is resident, parked in
// griddepcontrol.wait, and leaves it at once: its blocks then stage, scan,
// look back and store in step, and the memory pipe idles while they all scan
// and look back. Orders 5-7 stagger it.
struct FirstWaveSize {
  unsigned sms, blocks;
};
__device__ __forceinline__ FirstWaveSize FirstWave() {
  unsigned sms, dynamic_smem;
  asm("mov.u32 %0, %%nsmid;" : "=r"(sms));
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dynamic_smem));
  const unsigned per_sm = 233472u / (dynamic_smem + 1024u);
  return {sms, sms * (per_sm > 0 ? per_sm : 1u)};
}

// ORDER 5 and 6: block i of the first wave sleeps ~i / wave x ramp_ns before
// its loads. No deadlock: a block waits only on smaller block indices, which
// sleep no longer than it does.
__device__ __forceinline__ void FirstWaveRamp(unsigned ramp_ns) {
  const FirstWaveSize w = FirstWave();
  if (blockIdx.x > 0 && blockIdx.x < w.blocks) __nanosleep(ramp_ns * blockIdx.x / w.blocks);
}

// ORDER 7: the stagger driven by the data instead of the clock. Block i of the
// first wave with i >= SMs starts staging once its warps' count of landed
// tiles (`landed`, counted in warps by ScanSmemTile) reaches that of i - SMs + 1
// blocks, so that about one block per SM loads at a time in the first wave
// while the others scan, look back and store. `landed` is header[0], the
// ticket counter that block-index orders leave unused and FinishEpoch resets.
// The wait is bounded (~4 us of clock64) and only paces the block: a stale or
// late count changes timing, never results, and cannot hang the grid.
__device__ __forceinline__ void FirstWaveThrottle(const unsigned* landed, unsigned warps_per_block) {
  const FirstWaveSize w = FirstWave();
  if (blockIdx.x < w.sms || blockIdx.x >= w.blocks) return;  // block-uniform
  if (threadIdx.x == 0) {
    const unsigned need = (blockIdx.x - w.sms + 1u) * warps_per_block;
    const long long start = clock64();
    while (LoadAcquire(landed) < need && clock64() - start < 8000) {
    }
  }
  __syncthreads();
}

// 2.-5. Scans one staged tile whose first group (a and x / dh) has landed
// and is visible to the block: local composition, block combine, publish and
// look back, rescan and store. Backward: before the rescan it waits until at
// most kPendingAfterH cp.async groups (those committed after this tile's h
// group) are outstanding. Ends with no barrier; a caller that reuses the
// shared memory must __syncthreads() first.
// `tag` is the launch's epoch tag; with `epoch_header` (thread 0 of a kernel
// using launch epochs) the block arrives once its look-back is over.
// kPacked: publish and look back through packed words (LookBackPacked), each
// row thread for its own channels, with no fence and no block flag.
// kGroups > 1: the tile was staged by StageWarpRows (or staged whole and made
// visible by the caller): the local composition waits for each group in turn;
// with `landed`, each warp then counts itself there (FirstWaveThrottle).
// kChained (with kPacked; "_d1"): the chained look-back (LookBackPacked's
// CHAINED): the same bits every run.
template <typename T, int VEC, int THREADS, int STRIP, int TILE, bool kBackward, int kPendingAfterH,
          bool kPacked = false, int kGroups = 1, bool kChained = false>
__device__ __forceinline__ void ScanSmemTile(const LinearScanParams& p, const SmemTileIndex& x, const T* s_in,
                                             float* s_A, float* s_H, float* s_carry, unsigned tag = 0,
                                             unsigned* epoch_header = nullptr, unsigned* landed = nullptr) {
  constexpr int kLanes = STRIP / VEC;
  constexpr int kSegs = THREADS / kLanes;
  constexpr int kSteps = TILE / kSegs;
  static_assert(VEC >= 2 && VEC * sizeof(T) >= 4, "a pack must be at least one 32-bit word");
  static_assert(STRIP % VEC == 0 && THREADS % kLanes == 0, "lanes must divide threads");
  static_assert(kSegs >= 1 && TILE % kSegs == 0, "segments must divide the tile");
  static_assert((STRIP * sizeof(T)) % 16 == 0, "a strip row must be a whole number of 16-byte chunks");
  static_assert(THREADS % 32 == 0 && THREADS <= 1024, "threads must be a multiple of 32, at most 1024");
  static_assert(kLanes < 32 ? 32 % kLanes == 0 : kLanes % 32 == 0,
                "the last segment's lanes must be part of one warp or whole warps (row_sync)");

  const int tid = threadIdx.x;
  const int lane = tid % kLanes;
  const int seg = tid / kLanes;
  const long long tiles = (p.length + TILE - 1) / TILE;
  const long long seqs = p.batch * ((p.width + STRIP - 1) / STRIP);

  unsigned* counter = static_cast<unsigned*>(p.workspace);
  unsigned* flags = counter + 64;
  const long long zero_bytes = ((256 + 4 * seqs * tiles) + 255) / 256 * 256;
  float2* agg = reinterpret_cast<float2*>(static_cast<char*>(p.workspace) + zero_bytes);
  float* incl = reinterpret_cast<float*>(agg + seqs * tiles * STRIP);
  // Packed: [256 B header][w1: tiles x STRIP u64][w2: tiles x STRIP u64].
  unsigned long long* w1 = reinterpret_cast<unsigned long long*>(static_cast<char*>(p.workspace) + 256);
  unsigned long long* w2 = w1 + seqs * tiles * STRIP;

  const long long tile = x.tile;
  const long long seq = x.seq;
  const long long b = x.b;
  const long long base = x.base;
  const T* s_a = s_in;
  const T* s_b = s_in + TILE * STRIP;
  const T* s_h = s_in + 2 * TILE * STRIP;

  // Step i of this thread is staged row row_of(i): forward walks up from the
  // segment's first row, backward walks down from the tile's last row.
  auto row_of = [&](int i) -> int { return kBackward ? TILE - 1 - (seg * kSteps + i) : seg * kSteps + i; };
  auto pack_at = [&](const T* s, int i) -> const Pack<T, VEC>& {
    return *reinterpret_cast<const Pack<T, VEC>*>(s + row_of(i) * STRIP + lane * VEC);
  };

  // 2. Thread-local composition of its steps (staged identity past the ends).
  //    kSteps is a compile-time constant: fully unrolled, shared addresses
  //    are one base register plus immediates.
  float A[VEC], H[VEC];
  Fill(A, 1.0f);
  Fill(H, 0.0f);
#pragma unroll
  for (int i = 0; i < kSteps; ++i) {
    if constexpr (kGroups > 1) {
      if (i % (kSteps / kGroups) == 0) {
        CpAsyncWaitPending(kGroups - 1 - i / (kSteps / kGroups));
        __syncwarp();
        if (i == kSteps - kSteps / kGroups && landed != nullptr && threadIdx.x % 32 == 0) atomicAdd(landed, 1u);
      }
    }
    const Pack<T, VEC> pa = pack_at(s_a, i);
    const Pack<T, VEC> pb = pack_at(s_b, i);
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const float av = pa.Get(j);
      const float bv = pb.Get(j);
      A[j] *= av;
      H[j] = kBackward ? av * (H[j] + bv) : fmaf(av, H[j], bv);
    }
  }

  // 3. Block combine over segments. The last segment's threads (the "row",
  //    kLanes threads: part of one warp, or whole warps) scan the segment
  //    aggregates of their channels serially and overwrite them in place with
  //    the EXCLUSIVE prefixes, so that after the barrier below every thread
  //    reads its own prefix (O(1) instead of O(segments) shared loads).
  float* my_A = s_A + seg * STRIP + lane * VEC;
  float* my_H = s_H + seg * STRIP + lane * VEC;
#pragma unroll
  for (int j = 0; j < VEC; ++j) {
    my_A[j] = A[j];
    my_H[j] = H[j];
  }
  __syncthreads();
  const bool row = seg == kSegs - 1;
  const bool leader = tid == (kSegs - 1) * kLanes;
  float tA[VEC], tH[VEC];  // the tile aggregate (row threads only)
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
  // Orders the row threads' workspace writes (each fenced by its writer)
  // before the leader's release of the flag: only the row takes part.
  auto row_sync = [&]() {
    if constexpr (kLanes < 32) {
      constexpr unsigned kMask = ((1u << kLanes) - 1u) << (32 - kLanes);
      __syncwarp(kMask);
    } else {
      // Whole warps: a named barrier over the row's kLanes threads.
      asm volatile("bar.sync 1, %0;" ::"n"(kLanes) : "memory");
    }
  };

  // 4. Publish the aggregate, look back, publish the inclusive state (as c).
  //    Only the row waits on other blocks; the rest of the block waits once,
  //    at the barrier after it.
  const long long c0 = x.c_strip + lane * VEC;
  const bool rows_aligned = kBackward ? BackwardRowsAligned<T, VEC>(p) : ForwardRowsAligned<T, VEC>(p);
  const Lanes l = MakeLanes<T, VEC>(c0, p.width, rows_aligned);
  const long long slot_tile = seq * tiles + tile;
  const long long slot = slot_tile * STRIP + lane * VEC;
  // Tile 0's carry-in: h0 forward (zero without it), zero backward.
  float carry[VEC];
  if (tile == 0) {
    if (kBackward) {
      Fill(carry, 0.0f);
    } else {
      LoadState(carry, p.h0 != nullptr ? p.h0 + b * p.width : nullptr, l);
    }
  }
  if constexpr (kPacked) {
    if (tile == 0) {
      if (row) {
#pragma unroll
        for (int j = 0; j < VEC; ++j) StoreWord(w1 + slot + j, PackWord(fmaf(tA[j], carry[j], tH[j]), tag + kFlagInclusive));
      }
    } else if (row) {
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        StoreWord(w1 + slot + j, PackWord(tA[j], tag + kFlagAggregate));
        StoreWord(w2 + slot + j, PackWord(tH[j], tag + kFlagAggregate));
      }
      LookBackPacked<VEC, STRIP, kChained>(w1, w2, seq * tiles, tile, lane * VEC, tag, carry);
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        StoreWord(w1 + slot + j, PackWord(fmaf(tA[j], carry[j], tH[j]), tag + kFlagInclusive));
        s_carry[lane * VEC + j] = carry[j];
      }
    }
  } else if (tile == 0) {
    if (row) {
#pragma unroll
      for (int j = 0; j < VEC; ++j) incl[slot + j] = fmaf(tA[j], carry[j], tH[j]);
      __threadfence();
      row_sync();
      if (leader) StoreRelease(flags + slot_tile, tag + kFlagInclusive);
    }
  } else if (row) {
#pragma unroll
    for (int j = 0; j < VEC; ++j) agg[slot + j] = make_float2(tA[j], tH[j]);
    __threadfence();
    row_sync();
    if (leader) StoreRelease(flags + slot_tile, tag + kFlagAggregate);
    LookBack<VEC, STRIP>(flags, agg, incl, seq * tiles, tile, lane * VEC, carry, tag);
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      incl[slot + j] = fmaf(tA[j], carry[j], tH[j]);
      s_carry[lane * VEC + j] = carry[j];
    }
    __threadfence();
    row_sync();
    if (leader) StoreRelease(flags + slot_tile, tag + kFlagInclusive);
  }
  if constexpr (kBackward) {
    // h_{t-1} must have landed, from every thread's copies: each thread
    // waits for its own, and the barrier below makes all of them visible.
    CpAsyncWait<kPendingAfterH>();
  }
  // The exclusive prefixes, s_carry (and backward h) are visible after this.
  __syncthreads();
  // Every thread's look-back is over: the block reads no workspace slot again.
  EpochArrival arrival;
  if (epoch_header != nullptr) arrival.Arrive(epoch_header, gridDim.x);
  if (tile != 0) {
#pragma unroll
    for (int j = 0; j < VEC; ++j) carry[j] = s_carry[lane * VEC + j];
  }
  float s[VEC];
#pragma unroll
  for (int j = 0; j < VEC; ++j) s[j] = fmaf(my_A[j], carry[j], my_H[j]);

  if (l.nvalid <= 0) return;

  // 5. Rescan from this thread's carry-in and store. Interior tiles with a
  //    full-width aligned pack take a branch-free path: one output pointer,
  //    stepped by one row per step, no per-step range test.
  if constexpr (!kBackward) {
    T* __restrict__ out = static_cast<T*>(p.h);
    if (l.wide && base >= 0 && base + TILE <= p.length) {
      T* o = out + ((b * p.length + base + seg * kSteps) * p.width + c0);
#pragma unroll
      for (int i = 0; i < kSteps; ++i) {
        const Pack<T, VEC> pa = pack_at(s_a, i);
        const Pack<T, VEC> pb = pack_at(s_b, i);
#pragma unroll
        for (int j = 0; j < VEC; ++j) s[j] = fmaf(pa.Get(j), s[j], pb.Get(j));
        StorePack<T, VEC>(o, s, true, VEC);
        o += p.width;
      }
      // This thread's last step was time L - 1.
      if (p.h_final != nullptr && base + seg * kSteps + kSteps == p.length) StoreState(p.h_final + b * p.width, s, l);
      return;
    }
#pragma unroll 4
    for (int i = 0; i < kSteps; ++i) {
      const long long t = base + row_of(i);
      const Pack<T, VEC> pa = pack_at(s_a, i);
      const Pack<T, VEC> pb = pack_at(s_b, i);
#pragma unroll
      for (int j = 0; j < VEC; ++j) s[j] = fmaf(pa.Get(j), s[j], pb.Get(j));
      if (t < p.length) {
        StorePack<T, VEC>(out + (b * p.length + t) * p.width + c0, s, l.wide, l.nvalid);
        if (t == p.length - 1 && p.h_final != nullptr) StoreState(p.h_final + b * p.width, s, l);
      }
    }
  } else {
    T* __restrict__ da = static_cast<T*>(p.da);
    T* __restrict__ dx = static_cast<T*>(p.dx);
    // Backward rows are all < L; every row t > 0 (h_{t-1} staged, no dh0).
    if (l.wide && base >= 1) {
      const long long off = (b * p.length + base + row_of(0)) * p.width + c0;
      T* odx = dx + off;
      T* oda = da + off;
#pragma unroll
      for (int i = 0; i < kSteps; ++i) {
        const Pack<T, VEC> pa = pack_at(s_a, i);
        const Pack<T, VEC> pb = pack_at(s_b, i);
        const Pack<T, VEC> ph = pack_at(s_h, i);
        float gx[VEC], ga[VEC];
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          const float g = pb.Get(j) + s[j];
          gx[j] = g;
          ga[j] = g * ph.Get(j);
          s[j] = pa.Get(j) * g;
        }
        StorePack<T, VEC>(odx, gx, true, VEC);
        StorePack<T, VEC>(oda, ga, true, VEC);
        odx -= p.width;
        oda -= p.width;
      }
      return;
    }
#pragma unroll 4
    for (int i = 0; i < kSteps; ++i) {
      const long long t = base + row_of(i);
      const Pack<T, VEC> pa = pack_at(s_a, i);
      const Pack<T, VEC> pb = pack_at(s_b, i);
      const Pack<T, VEC> ph = pack_at(s_h, i);
      if (t >= 0) {
        float hp[VEC];
        if (t > 0) {
#pragma unroll
          for (int j = 0; j < VEC; ++j) hp[j] = ph.Get(j);
        } else {
          LoadState(hp, p.h0 != nullptr ? p.h0 + b * p.width : nullptr, l);
        }
        float gx[VEC], ga[VEC];
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          const float g = pb.Get(j) + s[j];
          gx[j] = g;
          ga[j] = g * hp[j];
          s[j] = pa.Get(j) * g;
        }
        const long long off = (b * p.length + t) * p.width + c0;
        StorePack<T, VEC>(dx + off, gx, l.wide, l.nvalid);
        StorePack<T, VEC>(da + off, ga, l.wide, l.nvalid);
        if (t == 0 && p.dh0 != nullptr) StoreState(p.dh0 + b * p.width, s, l);
      }
    }
  }
}

// e) one tile per block. ORDER 0: the block's tile is an atomic ticket (tiles
//    wait only on smaller tickets: no deadlock in any dispatch order); ORDER 1:
//    its block index, which saves the ticket's round trip before the loads
//    start and relies on blocks being dispatched in index order, as CUB's
//    single-pass scans do; ORDER 2: as 1, with the packed look-back
//    (scan_common.cuh, LookBackPacked; workspace laid out as it says);
//    ORDER 3: as 2, and the forward stages interior tiles warp by warp in
//    groups (StageWarpRows), scanning each group as it lands; ORDER 4: as 2
//    (the control for 3: only the forward's register bound below); ORDER 5
//    and 6: as 3, the first wave's starts spread over ~2 / ~4 us
//    (FirstWaveRamp); ORDER 7: as 3, the first wave paced by its landed
//    tiles (FirstWaveThrottle). The backward of 3-7 is ORDER 2's. Orders 3
//    and 5-7 also take the tile index in 32-bit arithmetic (MakeSmemTileIndex).
//    CHAINED (orders >= 2, "_d1"): the chained look-back (deterministic).
template <typename T, int VEC, int THREADS, int STRIP, int TILE, bool kBackward, int ORDER, bool CHAINED = false>
__device__ __forceinline__ void LookbackSmemScan(const LinearScanParams& p) {
  using Layout = SmemLayout<T, THREADS, STRIP, TILE, kBackward>;
  constexpr int kSegs = THREADS / (STRIP / VEC);
  extern __shared__ __align__(16) unsigned char smem[];
  T* s_in = reinterpret_cast<T*>(smem);  // [kIn][TILE][STRIP]
  float* s_A = reinterpret_cast<float*>(smem + Layout::kTileBytes);
  float* s_H = s_A + kSegs * STRIP;
  float* s_carry = s_H + kSegs * STRIP;
  unsigned* s_ticket = reinterpret_cast<unsigned*>(s_carry + STRIP);

  // Launch epochs (scan_common.cuh): the header and flags are zeroed once,
  // not before every launch, and under programmatic dependent launch this
  // grid waits here for the previous kernel of the stream.
  GridDependencyWait();
  LaunchDependents();
  unsigned* header = static_cast<unsigned*>(p.workspace);
  long long ticket = blockIdx.x;
  if constexpr (ORDER == 0) {
    if (threadIdx.x == 0) s_ticket[0] = atomicAdd(header, 1u);
    __syncthreads();
    ticket = s_ticket[0];
  }
  constexpr bool kWarpStaged = (ORDER == 3 || ORDER >= 5) && !kBackward;
  // The tag is first needed after the barrier below: its load overlaps the staging.
  if (!kWarpStaged && threadIdx.x == 0) s_ticket[1] = EpochTag(header);
  // Orders 3 and 5-7 (forward and backward): 32-bit tile index math.
  using Index = typename TileIndexInt<ORDER == 3 || ORDER >= 5>::type;
  const SmemTileIndex x = MakeSmemTileIndex<STRIP, TILE, kBackward, Index>(p, ticket);

  if constexpr (kWarpStaged) {
    if constexpr (ORDER == 5 || ORDER == 6) FirstWaveRamp(ORDER == 5 ? 2000u : 4000u);
    if constexpr (ORDER == 7) FirstWaveThrottle(header, THREADS / 32);
    // Warp-local staging in groups (StageWarpRows); edge tiles are staged
    // whole, checked, and made visible at a barrier. Only the row threads
    // need the tag, after the combine's barrier: they load it themselves (it
    // changes only after every block of this launch has arrived).
    using W = WarpStaging<T, VEC, THREADS, STRIP, TILE>;
    const unsigned tag = int(threadIdx.x) >= THREADS - W::kLanes ? EpochTag(header) : 0u;
    if (InteriorTile<STRIP, TILE>(p, x.c_strip, x.base, 0, ForwardRowsAligned<T, Layout::kChunkElts>(p))) {
      StageWarpRows<T, VEC, THREADS, STRIP, TILE>(p, x, s_in);
    } else {
      StageSmemTile<T, THREADS, STRIP, TILE, false>(p, x, s_in);
      CpAsyncWait<0>();
      __syncthreads();
    }
    ScanSmemTile<T, VEC, THREADS, STRIP, TILE, false, 0, true, W::kGroups, CHAINED>(
        p, x, s_in, s_A, s_H, s_carry, tag, threadIdx.x == 0 ? header : nullptr, ORDER == 7 ? header : nullptr);
    return;
  }
  // 1. Stage the tile. Backward: a and dh in group 0, h_{t-1} in group 1.
  StageSmemTile<T, THREADS, STRIP, TILE, kBackward>(p, x, s_in);
  CpAsyncWait<kBackward ? 1 : 0>();
  __syncthreads();
  const unsigned tag = s_ticket[1];
  ScanSmemTile<T, VEC, THREADS, STRIP, TILE, kBackward, 0, (ORDER >= 2), 1, CHAINED>(
      p, x, s_in, s_A, s_H, s_carry, tag, threadIdx.x == 0 ? header : nullptr);
}

// f) lookbackpipe: e) made persistent and double-buffered. A grid of at most
//    (blocks per SM) x (SMs) blocks loops over tickets. As soon as tile n
//    has landed a block issues the cp.async of its next ticket's tile into
//    its other buffer, then scans, looks back and stores tile n with those
//    loads in flight: the SM's memory pipe stays busy while the row threads
//    wait on their predecessors, which in e) left the block idle at a barrier.
//    The look-back is e)'s packed one (ORDER 2), under launch epochs and
//    programmatic dependent launch.
//    No deadlock: tickets are taken in increasing order and a tile waits
//    only on tiles of smaller tickets; a block that holds a prefetched
//    ticket m is processing a tile k < m whose dependencies are all < k, so
//    it finishes k and reaches m.
//    Epochs: each block arrives once, when it leaves, after its last ticket
//    atomic and its last look-back, so the last arrival may reset the ticket
//    counter and open the next epoch.
//
//    Dynamic shared memory (bytes; MakePlan passes the same formula):
//      2 x kIn * TILE * STRIP * sizeof(T)   two staged tiles
//      then s_A, s_H [kSegs][STRIP] fp32, s_carry [STRIP] fp32, s_ticket[4]
//      (the ticket pair and the epoch tag)
//    Workspace: as e) with ORDER 2 (two packed words per tile and channel).
template <typename T, int VEC, int THREADS, int STRIP, int TILE, bool kBackward>
__device__ __forceinline__ void LookbackPipeScan(const LinearScanParams& p) {
  using Layout = SmemLayout<T, THREADS, STRIP, TILE, kBackward>;
  constexpr int kSegs = THREADS / (STRIP / VEC);
  constexpr int kTileElts = Layout::kTileBytes / int(sizeof(T));
  extern __shared__ __align__(16) unsigned char smem[];
  T* s_buf = reinterpret_cast<T*>(smem);  // [2][kIn][TILE][STRIP]
  float* s_A = reinterpret_cast<float*>(smem + 2 * Layout::kTileBytes);
  float* s_H = s_A + kSegs * STRIP;
  float* s_carry = s_H + kSegs * STRIP;
  unsigned* s_ticket = reinterpret_cast<unsigned*>(s_carry + STRIP);  // [4]: ticket pair, epoch tag

  const long long total = p.batch * ((p.width + STRIP - 1) / STRIP) * ((p.length + TILE - 1) / TILE);
  GridDependencyWait();
  LaunchDependents();
  unsigned* header = static_cast<unsigned*>(p.workspace);
  // Thread 0 arrives when the block leaves (both return paths below).
  EpochArrival arrival;
  if (threadIdx.x == 0) {
    s_ticket[0] = atomicAdd(header, 1u);
    s_ticket[2] = EpochTag(header);
  }
  __syncthreads();
  long long ticket = s_ticket[0];
  const unsigned tag = s_ticket[2];
  if (ticket >= total) {
    if (threadIdx.x == 0) arrival.Arrive(header, gridDim.x);
    return;
  }
  SmemTileIndex x = MakeSmemTileIndex<STRIP, TILE, kBackward>(p, ticket);
  StageSmemTile<T, THREADS, STRIP, TILE, kBackward>(p, x, s_buf);

  // Thread 0 takes each ticket one tile ahead of its use and keeps it in a
  // register, so the atomic's round trip overlaps a whole tile instead of
  // stalling the block at the barrier below. A block thus holds up to two
  // tickets beyond the tile it works on, both larger than it: the argument
  // above still holds (the smallest unfinished ticket is always being worked
  // on, and everything it waits for is finished).
  unsigned pending = 0;
  if (threadIdx.x == 0) pending = atomicAdd(header, 1u);
  for (int n = 1;; ++n) {
    T* s_cur = s_buf + ((n - 1) & 1) * kTileElts;
    T* s_next = s_buf + (n & 1) * kTileElts;
    if (threadIdx.x == 0) s_ticket[n & 1] = pending;
    // The only groups outstanding are this tile's (h last in the backward).
    CpAsyncWait<kBackward ? 1 : 0>();
    // Also orders the previous tile's last reads of s_next, s_A, s_H and
    // s_carry before they are overwritten.
    __syncthreads();
    const long long next = s_ticket[n & 1];
    SmemTileIndex y = x;
    if (next < total) {
      y = MakeSmemTileIndex<STRIP, TILE, kBackward>(p, next);
      StageSmemTile<T, THREADS, STRIP, TILE, kBackward>(p, y, s_next);
    } else {
      // Empty groups keep the per-iteration group count fixed.
      CpAsyncCommit();
      if constexpr (kBackward) CpAsyncCommit();
    }
    if (threadIdx.x == 0 && next < total) pending = atomicAdd(header, 1u);
    // Backward: this tile's h group is followed by the next tile's two groups.
    ScanSmemTile<T, VEC, THREADS, STRIP, TILE, kBackward, 2, true>(p, x, s_cur, s_A, s_H, s_carry, tag);
    if (next >= total) break;
    x = y;
  }
  // After thread 0's last ticket atomic, and after the block's last look-back:
  // the row threads' loads were over before ScanSmemTile's barrier.
  if (threadIdx.x == 0) arrival.Arrive(header, gridDim.x);
}

}  // namespace scan

// ORDER >= 3 forward: 3 resident blocks per SM (what the shared memory of
// their 64 KB tiles allows) in the launch bounds. Without a minimum, ptxas held
// the 16-bit forward to 64 registers and spilled 2-10 bytes across the
// look-back (ORDER 2, kept as it was); with it, 74-78 and no spill.
// CHAINED 1 ("_d1", ORDER >= 2): the chained look-back (deterministic).
// KB, KL, KW (`_k1`): the shape the kernel is compiled for (scan::WithShape); 0: the struct's.
template <typename T, int VEC, int THREADS, int STRIP, int TILE, int ORDER, int CHAINED = 0, long long KB = 0,
          long long KL = 0, long long KW = 0>
__global__ void __launch_bounds__(THREADS, ORDER >= 3 ? 3 : 0) linear_scan_fwd_lookbacksmem(const LinearScanParams p) {
  static_assert(CHAINED == 0 || ORDER >= 2, "_d1: the packed look-back's chained form");
  if constexpr (KB == 0 && KL == 0 && KW == 0) {
    scan::LookbackSmemScan<T, VEC, THREADS, STRIP, TILE, false, ORDER, CHAINED != 0>(p);
  } else {
    scan::LookbackSmemScan<T, VEC, THREADS, STRIP, TILE, false, ORDER, CHAINED != 0>(scan::WithShape<KB, KL, KW>(p));
  }
}

// The backward's bound (2 blocks of its 96 KB bf16 tiles): the fp32 t128
// backward spilled 4 bytes at ORDER 2 without it.
template <typename T, int VEC, int THREADS, int STRIP, int TILE, int ORDER, int CHAINED = 0, long long KB = 0,
          long long KL = 0, long long KW = 0>
__global__ void __launch_bounds__(THREADS, ORDER >= 3 ? 2 : 0) linear_scan_bwd_lookbacksmem(const LinearScanParams p) {
  static_assert(CHAINED == 0 || ORDER >= 2, "_d1: the packed look-back's chained form");
  if constexpr (KB == 0 && KL == 0 && KW == 0) {
    scan::LookbackSmemScan<T, VEC, THREADS, STRIP, TILE, true, ORDER, CHAINED != 0>(p);
  } else {
    scan::LookbackSmemScan<T, VEC, THREADS, STRIP, TILE, true, ORDER, CHAINED != 0>(scan::WithShape<KB, KL, KW>(p));
  }
}

// The blocks-per-SM knob only sizes the grid (MakePlan); the kernel is the
// same for every value, so it is not a template parameter.
template <typename T, int VEC, int THREADS, int STRIP, int TILE>
__global__ void __launch_bounds__(THREADS) linear_scan_fwd_lookbackpipe(const LinearScanParams p) {
  scan::LookbackPipeScan<T, VEC, THREADS, STRIP, TILE, false>(p);
}

template <typename T, int VEC, int THREADS, int STRIP, int TILE>
__global__ void __launch_bounds__(THREADS) linear_scan_bwd_lookbackpipe(const LinearScanParams p) {
  scan::LookbackPipeScan<T, VEC, THREADS, STRIP, TILE, true>(p);
}
