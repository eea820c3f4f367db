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
//
//    Dynamic shared memory (bytes; MakePlan passes the same formula):
//      [0, kIn * TILE * STRIP * sizeof(T))   the staged inputs, [kIn][TILE][STRIP]
//      then s_A, s_H [kSegs][STRIP] fp32, s_carry [STRIP] fp32, s_ticket
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
template <int N>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

template <typename T, int THREADS, int STRIP, int TILE, bool kBackward>
struct SmemLayout {
  static constexpr int kIn = kBackward ? 3 : 2;
  static constexpr int kChunkElts = 16 / int(sizeof(T));
  static constexpr int kTileBytes = kIn * TILE * STRIP * int(sizeof(T));
};

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

template <int STRIP, int TILE, bool kBackward>
__device__ __forceinline__ SmemTileIndex MakeSmemTileIndex(const LinearScanParams& p, long long ticket) {
  const long long strips = (p.width + STRIP - 1) / STRIP;
  const long long seqs = p.batch * strips;
  SmemTileIndex x;
  x.tile = ticket / seqs;
  x.seq = ticket % seqs;
  x.b = x.seq / strips;
  x.c_strip = (x.seq % strips) * STRIP;
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

// 2.-5. Scans one staged tile whose first group (a and x / dh) has landed
// and is visible to the block: local composition, block combine, publish and
// look back, rescan and store. Backward: before the rescan it waits until at
// most kPendingAfterH cp.async groups (those committed after this tile's h
// group) are outstanding. Ends with no barrier; a caller that reuses the
// shared memory must __syncthreads() first.
template <typename T, int VEC, int THREADS, int STRIP, int TILE, bool kBackward, int kPendingAfterH>
__device__ __forceinline__ void ScanSmemTile(const LinearScanParams& p, const SmemTileIndex& x, const T* s_in,
                                             float* s_A, float* s_H, float* s_carry) {
  constexpr int kLanes = STRIP / VEC;
  constexpr int kSegs = THREADS / kLanes;
  constexpr int kSteps = TILE / kSegs;
  static_assert(VEC >= 2 && VEC * sizeof(T) >= 4, "a pack must be at least one 32-bit word");
  static_assert(STRIP % VEC == 0 && THREADS % kLanes == 0, "lanes must divide threads");
  static_assert(kSegs >= 1 && TILE % kSegs == 0, "segments must divide the tile");
  static_assert((STRIP * sizeof(T)) % 16 == 0, "a strip row must be a whole number of 16-byte chunks");
  static_assert(THREADS % 32 == 0 && THREADS <= 1024, "threads must be a multiple of 32, at most 1024");

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
  float A[VEC], H[VEC];
  Fill(A, 1.0f);
  Fill(H, 0.0f);
#pragma unroll 4
  for (int i = 0; i < kSteps; ++i) {
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

  // 3. Block combine over segments.
#pragma unroll
  for (int j = 0; j < VEC; ++j) {
    s_A[seg * STRIP + lane * VEC + j] = A[j];
    s_H[seg * STRIP + lane * VEC + j] = H[j];
  }
  __syncthreads();
  auto prefix = [&](int upto, float (&pA)[VEC], float (&pH)[VEC]) {
    Fill(pA, 1.0f);
    Fill(pH, 0.0f);
    for (int s2 = 0; s2 < upto; ++s2) {
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        const float sa = s_A[s2 * STRIP + lane * VEC + j];
        pH[j] = fmaf(sa, pH[j], s_H[s2 * STRIP + lane * VEC + j]);
        pA[j] *= sa;
      }
    }
  };

  // 4. Publish the aggregate, look back, publish the inclusive state (as c).
  const long long c0 = x.c_strip + lane * VEC;
  const bool rows_aligned = kBackward ? BackwardRowsAligned<T, VEC>(p) : ForwardRowsAligned<T, VEC>(p);
  const Lanes l = MakeLanes<T, VEC>(c0, p.width, rows_aligned);
  const bool row = seg == kSegs - 1;
  const long long slot_tile = seq * tiles + tile;
  const long long slot = slot_tile * STRIP + lane * VEC;
  float carry[VEC];
  if (tile == 0) {
    if (kBackward) {
      Fill(carry, 0.0f);
    } else {
      LoadState(carry, p.h0 != nullptr ? p.h0 + b * p.width : nullptr, l);
    }
    if (row) {
      float tA[VEC], tH[VEC];
      prefix(kSegs, tA, tH);
#pragma unroll
      for (int j = 0; j < VEC; ++j) incl[slot + j] = fmaf(tA[j], carry[j], tH[j]);
      __threadfence();
    }
    __syncthreads();
    if (tid == 0) StoreRelease(flags + slot_tile, kFlagInclusive);
  } else {
    float tA[VEC], tH[VEC];
    if (row) {
      prefix(kSegs, tA, tH);
#pragma unroll
      for (int j = 0; j < VEC; ++j) agg[slot + j] = make_float2(tA[j], tH[j]);
      __threadfence();
    }
    __syncthreads();
    if (tid == 0) StoreRelease(flags + slot_tile, kFlagAggregate);
    if (row) {
      float accA[VEC], accH[VEC];
      Fill(accA, 1.0f);
      Fill(accH, 0.0f);
      for (long long k = tile - 1;; --k) {
        const long long other = seq * tiles + k;
        unsigned flag;
        while ((flag = LoadAcquire(flags + other)) == 0) {
        }
        const long long oslot = other * STRIP + lane * VEC;
        if (flag == kFlagInclusive) {
#pragma unroll
          for (int j = 0; j < VEC; ++j) carry[j] = fmaf(accA[j], LoadCg(incl + oslot + j), accH[j]);
          break;
        }
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          const float2 ag = LoadCg(agg + oslot + j);
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
    }
    __syncthreads();
    if (tid == 0) StoreRelease(flags + slot_tile, kFlagInclusive);
#pragma unroll
    for (int j = 0; j < VEC; ++j) carry[j] = s_carry[lane * VEC + j];
  }

  float eA[VEC], eH[VEC];
  prefix(seg, eA, eH);
  float s[VEC];
#pragma unroll
  for (int j = 0; j < VEC; ++j) s[j] = fmaf(eA[j], carry[j], eH[j]);

  if constexpr (kBackward) {
    // h_{t-1} must have landed, from every thread's copies.
    CpAsyncWait<kPendingAfterH>();
    __syncthreads();
  }
  if (l.nvalid <= 0) return;

  // 5. Rescan from this thread's carry-in and store.
  if constexpr (!kBackward) {
    T* __restrict__ out = static_cast<T*>(p.h);
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

// e) one tile per block.
template <typename T, int VEC, int THREADS, int STRIP, int TILE, bool kBackward>
__device__ __forceinline__ void LookbackSmemScan(const LinearScanParams& p) {
  using Layout = SmemLayout<T, THREADS, STRIP, TILE, kBackward>;
  constexpr int kSegs = THREADS / (STRIP / VEC);
  extern __shared__ __align__(16) unsigned char smem[];
  T* s_in = reinterpret_cast<T*>(smem);  // [kIn][TILE][STRIP]
  float* s_A = reinterpret_cast<float*>(smem + Layout::kTileBytes);
  float* s_H = s_A + kSegs * STRIP;
  float* s_carry = s_H + kSegs * STRIP;
  unsigned* s_ticket = reinterpret_cast<unsigned*>(s_carry + STRIP);

  unsigned* counter = static_cast<unsigned*>(p.workspace);
  if (threadIdx.x == 0) *s_ticket = atomicAdd(counter, 1u);
  __syncthreads();
  const SmemTileIndex x = MakeSmemTileIndex<STRIP, TILE, kBackward>(p, *s_ticket);

  // 1. Stage the tile. Backward: a and dh in group 0, h_{t-1} in group 1.
  StageSmemTile<T, THREADS, STRIP, TILE, kBackward>(p, x, s_in);
  CpAsyncWait<kBackward ? 1 : 0>();
  __syncthreads();
  ScanSmemTile<T, VEC, THREADS, STRIP, TILE, kBackward, 0>(p, x, s_in, s_A, s_H, s_carry);
}

// f) lookbackpipe: e) made persistent and double-buffered. A grid of at most
//    (blocks per SM) x (SMs) blocks loops over tickets. As soon as tile n
//    has landed a block issues the cp.async of its next ticket's tile into
//    its other buffer, then scans, looks back and stores tile n with those
//    loads in flight.
//    No deadlock: tickets are taken in increasing order and a tile waits
//    only on tiles of smaller tickets; a block that holds a prefetched
//    ticket m is processing a tile k < m whose dependencies are all < k, so
//    it finishes k and reaches m.
//
//    Dynamic shared memory (bytes; MakePlan passes the same formula):
//      2 x kIn * TILE * STRIP * sizeof(T)   two staged tiles
//      then s_A, s_H [kSegs][STRIP] fp32, s_carry [STRIP] fp32, s_ticket[2]
//    Workspace: as e) (one flag / aggregate / inclusive slot per tile).
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
  unsigned* s_ticket = reinterpret_cast<unsigned*>(s_carry + STRIP);  // [2]

  const long long total = p.batch * ((p.width + STRIP - 1) / STRIP) * ((p.length + TILE - 1) / TILE);
  unsigned* counter = static_cast<unsigned*>(p.workspace);
  if (threadIdx.x == 0) s_ticket[0] = atomicAdd(counter, 1u);
  __syncthreads();
  long long ticket = s_ticket[0];
  if (ticket >= total) return;
  SmemTileIndex x = MakeSmemTileIndex<STRIP, TILE, kBackward>(p, ticket);
  StageSmemTile<T, THREADS, STRIP, TILE, kBackward>(p, x, s_buf);

  // Thread 0 takes each ticket one tile ahead of its use and keeps it in a
  // register, so the atomic's round trip overlaps a whole tile instead of
  // stalling the block at the barrier below. A block thus holds up to two
  // tickets beyond the tile it works on, both larger than it: the argument
  // above still holds (the smallest unfinished ticket is always being worked
  // on, and everything it waits for is finished).
  unsigned pending = 0;
  if (threadIdx.x == 0) pending = atomicAdd(counter, 1u);
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
    if (threadIdx.x == 0 && next < total) pending = atomicAdd(counter, 1u);
    // Backward: this tile's h group is followed by the next tile's two groups.
    ScanSmemTile<T, VEC, THREADS, STRIP, TILE, kBackward, 2>(p, x, s_cur, s_A, s_H, s_carry);
    if (next >= total) break;
    x = y;
  }
}

}  // namespace scan

template <typename T, int VEC, int THREADS, int STRIP, int TILE>
__global__ void __launch_bounds__(THREADS) linear_scan_fwd_lookbacksmem(const LinearScanParams p) {
  scan::LookbackSmemScan<T, VEC, THREADS, STRIP, TILE, false>(p);
}

template <typename T, int VEC, int THREADS, int STRIP, int TILE>
__global__ void __launch_bounds__(THREADS) linear_scan_bwd_lookbacksmem(const LinearScanParams p) {
  scan::LookbackSmemScan<T, VEC, THREADS, STRIP, TILE, true>(p);
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
