// samu's `chunked` family: chunked_v8_t{threads}_c{chunk} (included by
// gated_scan.cuh; plans in compiler/plan_gated.cc). Time is cut into chunks
// of CHUNK tokens; each direction runs a local pass per chunk, a carry scan
// over the chunks and a rescan from the carries (the three-phase scan), and
// the passes that need the per-token controller own whole token rows: a
// "rows" block holds all W channels of a chunk (VEC channels per thread,
// ceil(W / 8) threads, at most THREADS), so m_t and dm_t are sums inside
// one block. Neither a control nor a fix-up pass, and no look-back.
//   fwd 1 samu_fwd_chunk_agg   rows     m_t -> (r_t, i_t) into p.ctrl; the chunk's
//                                        end state from h = 0 and its sum of r
//       2 samu_chunk_carry     columns  the state entering every chunk, in order;
//                                        h_final
//       3 samu_fwd_chunk_scan  columns  the rescan from those states: y, h
//   bwd 1 samu_bwd_chunk_agg   columns  the chunk's u from u = 0 (reverse) and its sum of r
//       2 samu_chunk_carry     columns  the u entering every chunk from its right; dh0
//       3 samu_bwd_chunk_scan  rows     dx with dm_t / W; parameter and controller
//                                        partials per block
//       4 samu_bwd_chunk_finalize       their sums (fixed order)
//   _a1: the rescan adds its partials into the gradients by atomics (the
//   agg zeroes them first) and there is no finalize: one kernel less, at
//   the price of a run-to-run order of the fp32 additions.
// The carry composes a chunk as h -> A h + H with A = exp(-8 softplus(lambda)
// sum_t r_t): samu's decay is one scalar per token, so the chunk's product of
// a is one exp of the chunk's sum of r and the carry pass moves one float per
// chunk and channel. Bytes per element (16-bit): fwd 2 + 6, bwd 2 + 8, plus
// 16 / CHUNK of carries; the local passes re-read x (fwd) and dy (bwd).
// Every kernel is a programmatic dependent (PDL): it waits on its
// predecessor (griddepcontrol.wait) before touching what that one writes.
// chunked_..._l{strip} runs the backward kernels with FWD_STRIP = strip
// after `lookback` _o3's forward: their workspace sections start after that
// forward's look-back region (gated_layout.h, HybridBase).
#pragma once

namespace gated {

template <int CHUNK>
struct ChunkSpan {
  long long b, part, t0, t1;
  __device__ __forceinline__ ChunkSpan(const ChunkedLayout& lay, long long chunk, long long batch_index,
                                       long long length) {
    b = batch_index;
    part = b * lay.chunks + chunk;
    t0 = chunk * CHUNK;
    t1 = t0 + CHUNK < length ? t0 + CHUNK : length;
  }
};

__device__ __forceinline__ float* ChunkWs(const SamuParams& p, long long offset) {
  return reinterpret_cast<float*>(static_cast<char*>(p.workspace) + offset);
}

// -8 softplus(lambda) of this thread's channels (0 past W).
template <typename T, int VEC>
__device__ __forceinline__ void LoadDecays(float (&sp)[VEC], const SamuParams& p, const Lanes& l) {
  LoadChannels(sp, p.lambda, l);
#pragma unroll
  for (int j = 0; j < VEC; ++j) sp[j] = -kC * SoftplusFor<T>(sp[j]);
}

// ForwardGate's k: -8 softplus(lambda), times log2(e) at 16 bits.
template <typename T, int VEC>
__device__ __forceinline__ void LoadForwardDecays(float (&k)[VEC], const SamuParams& p, const Lanes& l) {
  LoadDecays<T>(k, p, l);
  if constexpr (sizeof(T) == 2) {
#pragma unroll
    for (int j = 0; j < VEC; ++j) k[j] *= 1.44269504088896341f;
  }
}

// A thread's private ring of staged packs in dynamic shared memory (ChunkRingBytes):
// slot [group % stages][input][step][thread], so a warp's 16-byte packs are
// adjacent (no bank conflicts) and each thread reads back only what it
// copied: the ring needs cp.async.wait_group, never a block barrier. A slot
// is refilled only after its values were used (the caller issues group
// k + stages - 1 after consuming group k - 1).
template <typename T, int PASS>
struct PackRing {
  using P8 = Pack<T, kChunkVec>;
  static constexpr int kIn = ChunkInputs(PASS), kSteps = ChunkSteps(PASS);
  static constexpr int kStages = ChunkStages(PASS, int(sizeof(T)));
  P8* base;
  unsigned sbase;  // base in the shared window, converted once (not per cp.async)
  __device__ __forceinline__ explicit PackRing(unsigned char* smem)
      : base(reinterpret_cast<P8*>(smem)), sbase(static_cast<unsigned>(__cvta_generic_to_shared(smem))) {}
  __device__ __forceinline__ unsigned Shared(const void* p) const {
    return sbase + static_cast<unsigned>(static_cast<const char*>(p) - reinterpret_cast<const char*>(base));
  }
  __device__ __forceinline__ P8* Slot(long long group, int input, int step) const {
    return base + ((static_cast<int>(group % kStages) * kIn + input) * kSteps + step) * blockDim.x + threadIdx.x;
  }
  // Slot(group, 0, 0) of a group >= 0 in the shared window; the slot of
  // (input, step) is sizeof(P8) x blockDim.x x (input x kSteps + step) past it.
  __device__ __forceinline__ unsigned SlotShared(int group) const {
    return sbase + static_cast<unsigned>(((static_cast<unsigned>(group) % kStages) * kIn * kSteps * blockDim.x + threadIdx.x) *
                                         sizeof(P8));
  }
  // One pack: cp.async where the row access is wide, else a plain load (or
  // zeros where !valid) stored by this thread.
  __device__ __forceinline__ void Fetch(P8* dst, const T* src, const Lanes& l, bool valid) const {
    if (valid && l.wide) {
#pragma unroll
      for (int k = 0; k < int(sizeof(P8)) / 16; ++k) {
        CpAsync16Shared(Shared(dst) + 16 * k, reinterpret_cast<const char*>(src) + 16 * k);
      }
    } else {
      P8 pack;
      pack.Clear();
      if (valid) LoadPack(pack, src, false, l.nvalid);
      *dst = pack;
    }
  }
  // The group's rows of one input: step i from src + i x stride, valid for
  // i < count; one straight run of cp.async where all are valid and wide.
  __device__ __forceinline__ void Issue(long long group, int input, const T* src, long long stride, long long count,
                                        const Lanes& l) const {
    P8* dst = Slot(group, input, 0);
    if (l.wide && count >= kSteps) {
#pragma unroll
      for (int i = 0; i < kSteps; ++i) {
#pragma unroll
        for (int k = 0; k < int(sizeof(P8)) / 16; ++k) {
          CpAsync16Shared(Shared(dst + i * blockDim.x) + 16 * k, reinterpret_cast<const char*>(src + i * stride) + 16 * k);
        }
      }
    } else {
#pragma unroll
      for (int i = 0; i < kSteps; ++i) Fetch(dst + i * blockDim.x, src + i * stride, l, i < count);
    }
  }
  // Issue from a shared-window address: dst the slot of step 0, `pitch` bytes
  // between steps; all valid and wide (the callers' interior groups).
  __device__ __forceinline__ void IssueFull(unsigned dst, unsigned pitch, const T* src, long long stride) const {
#pragma unroll
    for (int i = 0; i < kSteps; ++i) {
#pragma unroll
      for (int k = 0; k < int(sizeof(P8)) / 16; ++k) {
        CpAsync16Shared(dst + i * pitch + 16 * k, reinterpret_cast<const char*>(src + i * stride) + 16 * k);
      }
    }
  }
  // Group k of a one-input walk over [t0, t1) (forward: t0 + k x steps up;
  // backward: t1 - 1 - k x steps down), rows src + t x width; then the commit
  // (an empty group past the end keeps cp.async.wait_group's count).
  template <bool kBackward>
  __device__ __forceinline__ void IssueWalk(long long k, const T* src, long long width, long long t0, long long t1,
                                           const Lanes& l) const {
    const long long t = kBackward ? t1 - 1 - k * kSteps : t0 + k * kSteps;
    if (kBackward ? t >= t0 : t < t1) {
      Issue(k, 0, src + t * width, kBackward ? -width : width, kBackward ? t - t0 + 1 : t1 - t, l);
    }
    CpAsyncCommit();
  }
};

// Eight fp32 values in two 16-byte slots of a thread's own (any element type's ring).
template <typename PackT>
__device__ __forceinline__ void StoreFloats(PackT* lo, PackT* hi, const float (&v)[8]) {
  static_assert(sizeof(PackT) >= 16, "a slot holds 4 fp32");
  *reinterpret_cast<float4*>(lo) = make_float4(v[0], v[1], v[2], v[3]);
  *reinterpret_cast<float4*>(hi) = make_float4(v[4], v[5], v[6], v[7]);
}
template <typename PackT>
__device__ __forceinline__ void LoadFloats(float (&v)[8], const PackT* lo, const PackT* hi) {
  const float4 a = *reinterpret_cast<const float4*>(lo), b = *reinterpret_cast<const float4*>(hi);
  v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w;
  v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
}

// (r_t, i_t) of the chunk's tokens into shared memory (one barrier).
template <int CHUNK>
__device__ __forceinline__ void StageControl(float2 (&s_ri)[CHUNK], const SamuParams& p, long long b, long long t0,
                                             long long t1) {
  const float2* ctrl = reinterpret_cast<const float2*>(p.ctrl) + b * p.length;
  for (int i = threadIdx.x; i < CHUNK; i += blockDim.x) {
    s_ri[i] = t0 + i < t1 ? __ldg(ctrl + t0 + i) : make_float2(0.0f, 0.0f);
  }
  __syncthreads();
}

// A columns block (samu_fwd_chunk_scan, samu_bwd_chunk_agg) on its
// (ceil(W / (8 cols)), chunks, B) grid: its ring, its chunk (in the grid's
// order, or reversed: a rescan walks the chunks opposite to its local pass,
// for L2 reuse) and its thread's kChunkVec channels (l.c0 the first); `cols`
// threads across the channels (at most kChunkColumnThreads; the plan's
// ChunkColumns).
template <typename T, int PASS, int CHUNK, int FWD_STRIP = 0>
struct ColumnsBlock {
  using Ring = PackRing<T, PASS>;
  static constexpr int P = Ring::kSteps, D = Ring::kStages;
  Ring ring;
  ChunkedLayout lay;
  ChunkSpan<CHUNK> span;
  Lanes l;
  __device__ __forceinline__ ColumnsBlock(const SamuParams& p, bool reversed, bool backward, int cols)
      : ring(DynamicSmem()),
        lay(MakeChunkedLayout(p.batch, p.length, p.width, CHUNK, FWD_STRIP)),
        span(lay, reversed ? gridDim.y - 1 - blockIdx.y : blockIdx.y, reversed ? gridDim.z - 1 - blockIdx.z : blockIdx.z,
             p.length),
        l(MakeLanes<T, kChunkVec>((static_cast<long long>(blockIdx.x) * cols + threadIdx.x % cols) * kChunkVec,
                                  p.width, SamuAligned<T, kChunkVec>(p, backward))) {}
  __device__ __forceinline__ static unsigned char* DynamicSmem() {
    extern __shared__ __align__(16) unsigned char smem[];
    return smem;
  }
};

// ---- forward ------------------------------------------------------------------------

// Rows: per group of 8 tokens (staged ahead by the ring), the block's row sums
// (RowSums8 per warp, then the warps in order), (r_t, i_t) by the lanes < 8
// of every warp (so one barrier per group: the sums are double-buffered),
// then each thread steps its 8 channels from h = 0 through the group.
template <typename T, int THREADS, int CHUNK>
__device__ __forceinline__ void SamuChunkForwardAgg(const SamuParams& p) {
  constexpr int VEC = kChunkVec;
  using Ring = PackRing<T, kChunkFwdAgg>;
  constexpr int P = Ring::kSteps, D = Ring::kStages;
  static_assert(P == 8, "RowSums8: 8 tokens per group");
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ float s_sum[2][THREADS / 32][P];
  const Ring ring(smem);
  const ChunkedLayout lay = MakeChunkedLayout(p.batch, p.length, p.width, CHUNK);
  const ChunkSpan<CHUNK> sp_(lay, blockIdx.x, blockIdx.y, p.length);
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, warps = blockDim.x / 32;
  const Lanes l = MakeLanes<T, VEC>(static_cast<long long>(tid) * VEC, p.width, SamuAligned<T, VEC>(p, false));
  float sp[VEC];
  LoadForwardDecays<T>(sp, p, l);
  const T* __restrict__ xs = static_cast<const T*>(p.x) + sp_.b * p.length * p.width + l.c0;
  float2* ctrl = reinterpret_cast<float2*>(p.ctrl) + sp_.b * p.length;
  const long long groups = (sp_.t1 - sp_.t0 + P - 1) / P;
  auto issue = [&](long long k) { ring.template IssueWalk<false>(k, xs, p.width, sp_.t0, sp_.t1, l); };
  // The phase's first kernel: x may be the output of the caller's kernel
  // before it, so it is read only after the wait.
  scan::GridDependencyWait();
  scan::LaunchDependents();
#pragma unroll
  for (int k = 0; k < D - 1; ++k) issue(k);
  float h[VEC];
  Fill(h, 0.0f);
  float rsum = 0.0f;
  for (long long k = 0; k < groups; ++k) {
    issue(k + D - 1);
    CpAsyncWait<D - 1>();
    const long long tg = sp_.t0 + k * P;
    float v[P];
#pragma unroll
    for (int i = 0; i < P; ++i) {
      const Pack<T, VEC> px = *ring.Slot(k, 0, i);
      v[i] = 0.0f;
#pragma unroll
      for (int j = 0; j < VEC; ++j) v[i] += px.Get(j);
    }
    const float total = RowSums8<32>(v);
    if (lane % 4 == 0) s_sum[k % 2][warp][RowSumIndex<32>(lane)] = total;
    __syncthreads();
    float2 ri = make_float2(0.0f, 0.0f);
    if (lane < P && tg + lane < sp_.t1) {
      float sum = 0.0f;
      for (int w = 0; w < warps; ++w) sum += s_sum[k % 2][w][lane];
      ri = SamuControlOf(p, sum);
      if (warp == 0) ctrl[tg + lane] = ri;
    }
    // (fp32: one token at a time; its accurate gate unrolled over 8 tokens
    // takes every register.)
#pragma unroll(sizeof(T) == 4 ? 1 : P)
    for (int i = 0; i < P; ++i) {
      const float r = __shfl_sync(0xffffffffu, ri.x, i), ii = __shfl_sync(0xffffffffu, ri.y, i);
      rsum += r;  // 0 past t1
      const Pack<T, VEC> px = *ring.Slot(k, 0, i);  // read again: fewer registers, more blocks per SM
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        const GateAS g = ForwardGate<T>(sp[j] * r);
        h[j] = fmaf(g.a, h[j], g.s * (ii * px.Get(j)));
      }
    }
  }
  // The recurrence is linear in its input and starts from 0: beta (loaded
  // only now, out of the loop's registers) scales the end state once.
  float beta[VEC];
  LoadChannels(beta, p.beta, l);
#pragma unroll
  for (int j = 0; j < VEC; ++j) h[j] *= beta[j];
  StoreRow(ChunkWs(p, lay.agg_offset) + sp_.part * p.width, h, l);
  if (tid == 0) ChunkWs(p, lay.sum_r_offset)[sp_.part] = rsum;
}

// Columns: the rescan from the chunk's entering state, 3 groups of 8 tokens in flight.
template <typename T, int CHUNK, int SAVE>
__device__ __forceinline__ void SamuChunkForwardScan(const SamuParams& p) {
  using Block = ColumnsBlock<T, kChunkFwdScan, CHUNK>;
  constexpr int VEC = kChunkVec, P = Block::P, D = Block::D;
  // SAVE: 1 every h, n (_h{n}) every n-th token's, 0 (_y1) only the groups'
  // whose h the backward cannot take from y (SamuGroupKeepsH).
  constexpr int kSaveStride = SAVE > 0 ? SAVE : 1;
  static_assert(SAVE == 0 || (P % SAVE == 0 && CHUNK % SAVE == 0), "saved rows at t = SAVE - 1 mod SAVE");
  __shared__ float2 s_ri[CHUNK];
  // Chunks in the reverse order of the local pass's: the x it read last is read first, from L2.
  const Block cb(p, /*reversed=*/true, /*backward=*/false, static_cast<int>(blockDim.x));
  float sp[VEC], beta[VEC], gamma[VEC];
  LoadForwardDecays<T>(sp, p, cb.l);
  LoadChannels(beta, p.beta, cb.l);
  LoadChannels(gamma, p.gamma, cb.l);
  const long long row0 = (cb.span.b * p.length) * p.width + cb.l.c0;
  const T* __restrict__ xs = static_cast<const T*>(p.x) + row0;
  const long long groups = (cb.span.t1 - cb.span.t0 + P - 1) / P;
  auto issue = [&](long long k) { cb.ring.template IssueWalk<false>(k, xs, p.width, cb.span.t0, cb.span.t1, cb.l); };
  // x (an input) before the wait: the phase's first kernel (the local pass)
  // waited for whatever wrote it, and this one starts only after the carry,
  // which waited for the local pass, released it (PDL).
  if (cb.l.nvalid > 0) {
#pragma unroll
    for (int k = 0; k < D - 1; ++k) issue(k);
  }
  scan::GridDependencyWait();
  scan::LaunchDependents();
  StageControl(s_ri, p, cb.span.b, cb.span.t0, cb.span.t1);
  if (cb.l.nvalid <= 0) return;
  const bool keep_h = SAVE != 0 || SamuGroupKeepsH(p, cb.l.c0 / VEC);
  float h[VEC];
  LoadRow(h, ChunkWs(p, cb.lay.start_offset) + cb.span.part * p.width, cb.l);
  for (long long k = 0; k < groups; ++k) {
    issue(k + D - 1);
    CpAsyncWait<D - 1>();
    // (fp32: two tokens at a time; fully unrolled, the accurate decay of ExpDecay spilled 4 bytes.)
#pragma unroll(sizeof(T) == 4 ? 2 : P)
    for (int i = 0; i < P; ++i) {
      const long long t = cb.span.t0 + k * P + i;
      if (t < cb.span.t1) {
        const Pack<T, VEC> px = *cb.ring.Slot(k, 0, i);
        const float2 ri = s_ri[t - cb.span.t0];
        float y[VEC];
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          const GateAS g = ForwardGate<T>(sp[j] * ri.x);
          h[j] = fmaf(g.a, h[j], g.s * ri.y * beta[j] * px.Get(j));
          y[j] = gamma[j] * h[j];
        }
        const long long off = row0 + t * p.width;
        if (keep_h && i % kSaveStride == kSaveStride - 1) StorePack<T, VEC>(static_cast<T*>(p.h) + off, h, cb.l.wide, cb.l.nvalid);
        StorePack<T, VEC>(static_cast<T*>(p.y) + off, y, cb.l.wide, cb.l.nvalid);
      }
    }
  }
}

// ---- carries ------------------------------------------------------------------------

// One block: 32 channels x blockDim.x / 32 slices (at most kCarrySlices),
// each slice a run of chunks (in time order, or reversed for the backward).
// A slice composes its run, one thread per channel scans the slices, then
// each slice rescans its run and writes every chunk's entering state.
// Forward: from h0, then h_final; backward: from 0, then dh0.
// BATCH: the chunks a slice loads at once. 4 holds the run's first batch for
// the second walk (at the seed shapes but L = 32768 a run is one batch: the
// carry is one round trip of loads, then the stores). 16 (the plan's where a
// run is longer than 4: L = 32768 at chunk 64 is 512 chunks over 32 slices)
// loads each batch again for the second walk: one round trip per walk there,
// where batches of 4 took four in the first walk and three in the second
// (5.5 us inside fwd_bwd at 1x32768x1024, bench/NOTES.md session 24).
// Holding 16 through the barrier spilled at 1024 threads' 64 registers.
template <typename T, int CHUNK, bool kReverse, int FWD_STRIP, int BATCH>
__device__ __forceinline__ void SamuChunkCarry(const SamuParams& p) {
  static_assert(BATCH == 4 || BATCH == 16, "batches of 4 (the first one held) or 16 (each loaded twice)");
  __shared__ float s_a[kCarrySlices][32], s_h[kCarrySlices][32];
  const ChunkedLayout lay = MakeChunkedLayout(p.batch, p.length, p.width, CHUNK, FWD_STRIP);
  const int lane = threadIdx.x % 32, slice = threadIdx.x / 32, slices = blockDim.x / 32;
  const long long c = static_cast<long long>(blockIdx.x) * 32 + lane;
  const long long b = blockIdx.y;
  const bool live = c < p.width;
  const float sp = live ? -kC * SoftplusFor<T>(p.lambda[c]) : 0.0f;
  scan::GridDependencyWait();
  scan::LaunchDependents();
  const long long n = lay.chunks;
  const long long per = (n + slices - 1) / slices;
  const long long q0 = slice * per, q1 = q0 + per < n ? q0 + per : n;
  const float* __restrict__ sum_r = ChunkWs(p, lay.sum_r_offset) + b * n;
  const float* __restrict__ agg = ChunkWs(p, lay.agg_offset) + b * n * p.width + c;
  float* start = ChunkWs(p, lay.start_offset) + b * n * p.width + c;
  // The run in batches of kRun chunks: all loads first, then the chain (a
  // chunk past the run composes as A = 1, H = 0). A batch's chunks by 32-bit
  // offsets from its first one (16 x W fits: W <= 2^16).
  // fp32 keeps batches of 4 in both instances: its exp (ExpDecay) spilled 32-48 bytes at 8 and 16.
  constexpr int kRun = sizeof(T) == 2 ? BATCH : 4;
  constexpr bool kHold = kRun == 4;
  const int wstep = kReverse ? -static_cast<int>(p.width) : static_cast<int>(p.width);
  auto batch = [&](long long q, float (&r)[kRun], float (&v)[kRun]) {
    const long long k0 = kReverse ? n - 1 - q : q;
    const float* rq = sum_r + k0;
    const float* vq = agg + k0 * p.width;
    const int left = static_cast<int>(q1 - q);
#pragma unroll
    for (int i = 0; i < kRun; ++i) {
      const bool in = live && i < left;
      r[i] = in ? rq[kReverse ? -i : i] : 0.0f;
      v[i] = in ? vq[i * wstep] : 0.0f;
    }
  };
  // kHold: the run's first batch stays in registers for the second walk below (its reload was one more
  // round trip between the agg and the rescan, session 22).
  float r0[kRun], v0[kRun];
  float rs = 0.0f, hh = 0.0f;
  auto compose = [&](const float (&r)[kRun], const float (&v)[kRun]) {
#pragma unroll
    for (int i = 0; i < kRun; ++i) {
      hh = fmaf(ExpDecay<T>(sp * r[i]), hh, v[i]);
      rs += r[i];
    }
  };
  if constexpr (kHold) {
    batch(q0, r0, v0);
    compose(r0, v0);
    for (long long q = q0 + kRun; q < q1; q += kRun) {
      float r[kRun], v[kRun];
      batch(q, r, v);
      compose(r, v);
    }
  } else {
    for (long long q = q0; q < q1; q += kRun) {
      batch(q, r0, v0);
      compose(r0, v0);
    }
  }
  s_a[slice][lane] = ExpDecay<T>(sp * rs);  // the run's A
  s_h[slice][lane] = hh;
  __syncthreads();
  if (slice == 0) {
    float carry = (!kReverse && live && p.h0 != nullptr) ? p.h0[b * p.width + c] : 0.0f;
    // Unrolled to kCarrySlices (the loads in flight together, then the chain); by 8 beside batches of 16
    // (all 32 at once spilled there).
#pragma unroll(kHold ? kCarrySlices : 8)
    for (int k = 0; k < kCarrySlices; ++k) {
      const float entering = carry;
      if (k < slices) {
        carry = fmaf(s_a[k][lane], carry, s_h[k][lane]);
        s_a[k][lane] = entering;
      }
    }
    float* out = kReverse ? p.dh0 : p.h_final;
    if (live && out != nullptr) out[b * p.width + c] = carry;
  }
  __syncthreads();
  if (!live) return;
  float carry = s_a[slice][lane];
  auto walk = [&](long long q, const float (&r)[kRun], const float (&v)[kRun]) {
    float* sq = start + (kReverse ? n - 1 - q : q) * p.width;
    const int left = static_cast<int>(q1 - q);
#pragma unroll
    for (int i = 0; i < kRun; ++i) {
      if (i < left) sq[i * wstep] = carry;
      carry = fmaf(ExpDecay<T>(sp * r[i]), carry, v[i]);
    }
  };
  if constexpr (!kHold) batch(q0, r0, v0);
  walk(q0, r0, v0);
  for (long long q = q0 + kRun; q < q1; q += kRun) {
    float r[kRun], v[kRun];
    batch(q, r, v);
    walk(q, r, v);
  }
}

// ---- backward -----------------------------------------------------------------------

// Columns: the chunk's u (the reverse scan u = a (gamma dy + u) from u = 0
// over the chunk) as a sum of independent terms, below. Two halves of
// kChunkColumnThreads threads on the same channels, each summing half the
// chunk's tokens (half 0 the later ones), then added: twice the warps of a
// one-walk block on the same grid (that pass ran at 22% occupancy,
// latency-bound: Nsight Compute, session 9).
template <typename T, int CHUNK, int FWD_STRIP>
__device__ __forceinline__ void SamuChunkBackwardAgg(const SamuParams& p) {
  using Block = ColumnsBlock<T, kChunkBwdAgg, CHUNK, FWD_STRIP>;
  constexpr int VEC = kChunkVec, P = Block::P, D = Block::D;
  __shared__ float s_S[CHUNK];  // S_t: the chunk's inclusive prefix sums of r_t from t0
  __shared__ float4 s_u2[kChunkColumnThreads][VEC / 4];
  const int cols = static_cast<int>(blockDim.x) / 2;  // the two halves' threads on the same channels
  const Block cb(p, /*reversed=*/false, /*backward=*/true, cols);
  const int half = threadIdx.x / cols, col = threadIdx.x % cols;
  const int len = static_cast<int>(cb.span.t1 - cb.span.t0), mid = len / 2;
  const int s0 = half == 0 ? mid : 0, s1 = half == 0 ? len : mid;  // this half's tokens, relative to t0
  float kd[VEC];
  LoadForwardDecays<T>(kd, p, cb.l);  // a = ex2(k r) at 16 bits: no FMUL by log2(e) per element
  const T* __restrict__ dys = static_cast<const T*>(p.dy) + (cb.span.b * p.length) * p.width + cb.l.c0;
  const int groups = cb.l.nvalid > 0 ? (s1 - s0 + P - 1) / P : 0;
  auto issue = [&](int k) { cb.ring.template IssueWalk<true>(k, dys, p.width, cb.span.t0 + s0, cb.span.t0 + s1, cb.l); };
  // The chunk's aggregate, U = sum over t of (a_t0 ... a_t) gamma dy_t, with
  // a_t0 ... a_t = exp(k S_t) (samu's decay is one scalar per token): every
  // token's term is independent (no recurrence: one ex2 and one FFMA per
  // element, gamma once), the halves add. S by warp 0 (an inclusive scan of
  // the chunk's r_t, fixed order); S at the chunk's end is its sum of r (the
  // carry's decay), written by the first column block. Warp 0 loads the r_t
  // before the wait (the forward wrote them before the kernel this one
  // follows started) and scans them after it, while dy is in flight.
  constexpr int kPer = (CHUNK + 31) / 32;
  float v[kPer];
  if (threadIdx.x < 32) {
    const float2* ctrl = reinterpret_cast<const float2*>(p.ctrl) + cb.span.b * p.length + cb.span.t0;
#pragma unroll
    for (int e = 0; e < kPer; ++e) {
      const int i = static_cast<int>(threadIdx.x) * kPer + e;
      v[e] = i < len ? __ldg(&ctrl[i].x) : 0.0f;
    }
  }
  // The bwd phase's first kernel: dy may be the output of the caller's
  // kernel before it, so it is read only after the wait.
  scan::GridDependencyWait();
  scan::LaunchDependents();
  // The gradients an _a1 rescan adds into start at 0 (the finalize after
  // the other rescans overwrites them): the first block, after the wait.
  if (blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0) {
    float* const out[3] = {p.dlambda, p.dbeta, p.dgamma};
    for (int n = 0; n < 3; ++n) {
      if (out[n] == nullptr) continue;
      for (long long c = threadIdx.x; c < p.width; c += blockDim.x) out[n][c] = 0.0f;
    }
    if (p.dcontroller != nullptr && threadIdx.x < 4) p.dcontroller[threadIdx.x] = 0.0f;
  }
  if (cb.l.nvalid > 0) {
#pragma unroll
    for (int k = 0; k < D - 1; ++k) issue(k);
  }
  if (threadIdx.x < 32) {
    float run = 0.0f;
#pragma unroll
    for (int e = 0; e < kPer; ++e) {
      run += v[e];
      v[e] = run;
    }
    float before = run;  // this lane's total -> the lanes' exclusive prefix
#pragma unroll
    for (int o = 1; o < 32; o *= 2) {
      const float up = __shfl_up_sync(0xffffffffu, before, o);
      if (static_cast<int>(threadIdx.x) >= o) before += up;
    }
    before -= run;
#pragma unroll
    for (int e = 0; e < kPer; ++e) {
      const int i = static_cast<int>(threadIdx.x) * kPer + e;
      if (i < CHUNK) s_S[i] = before + v[e];
    }
    const float total = __shfl_sync(0xffffffffu, before + run, 31);
    if (blockIdx.x == 0 && threadIdx.x == 0) ChunkWs(p, cb.lay.sum_r_offset)[cb.span.part] = total;
  }
  __syncthreads();
  float u[VEC];
  Fill(u, 0.0f);
  for (int k = 0; k < groups; ++k) {
    issue(k + D - 1);
    CpAsyncWait<D - 1>();
#pragma unroll
    for (int i = 0; i < P; ++i) {
      const int t = s1 - 1 - k * P - i;
      if (t >= s0) {
        const Pack<T, VEC> pd = *cb.ring.Slot(k, 0, i);
        const float st = s_S[t];
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          const float e = sizeof(T) == 2 ? Ex2Ftz(kd[j] * st) : ExpDecay<T>(kd[j] * st);
          u[j] = fmaf(e, pd.Get(j), u[j]);
        }
      }
    }
  }
  if (half == 0) {
#pragma unroll
    for (int q = 0; q < VEC / 4; ++q) s_u2[col][q] = make_float4(u[4 * q], u[4 * q + 1], u[4 * q + 2], u[4 * q + 3]);
  }
  __syncthreads();
  if (half == 0 || cb.l.nvalid <= 0) return;
  float gamma[VEC];
  LoadChannels(gamma, p.gamma, cb.l);
#pragma unroll
  for (int q = 0; q < VEC / 4; ++q) {
    const float4 u2 = s_u2[col][q];
    const float v2[4] = {u2.x, u2.y, u2.z, u2.w};
#pragma unroll
    for (int e = 0; e < 4; ++e) u[4 * q + e] = gamma[4 * q + e] * (u[4 * q + e] + v2[e]);
  }
  StoreRow(ChunkWs(p, cb.lay.agg_offset) + cb.span.part * p.width, u, cb.l);
}

// v times gamma (or over gamma) of the thread's channels: the _y1 rescan's
// conversions between h units and its y units, once per chunk.
template <int VEC>
__device__ __forceinline__ void YUnits(float (&v)[VEC], const SamuParams& p, const Lanes& l, bool over) {
  float gamma[VEC];
  LoadChannels(gamma, p.gamma, l);
#pragma unroll
  for (int j = 0; j < VEC; ++j) v[j] = over ? v[j] / gamma[j] : v[j] * gamma[j];
}

constexpr float kLn2 = 0.693147180559945309f;

// The rescan's element at 16 bits, in log2 units: z = k r (k from
// LoadForwardDecays), a = 2^z, 1 - a^2 by ForwardGate's series (no tanh:
// one MUFU and one FMUL fewer than SamuBackStep's lean gate, which also
// converts la to log2 units), and G = la w with w = u (h_{t-1} - a v / s):
// the FMUL by la = ln2 k r leaves the element for the sums' own factors,
// sum_t r w per channel (dlambda: times ln2 k once per chunk) and
// sum_c k w per token (dr: times ln2 r once per token). Returns dx's part
// g s i beta; the rest as SamuBackStep.
__device__ __forceinline__ float SamuBackStepLog2(float k, float z, float hprev, float xv, float dy, float2 ri,
                                                  float beta, float gamma, float& u, float& acc0, float& acc1,
                                                  float& acc2, float (&sums)[3], bool have_ht, float ht) {
  constexpr float kK = 1.38629436111989061f;  // 2 ln 2: 2 la = kK z
  const float a = Ex2Ftz(z);
  const float series = z * fmaf(z, -0.5f * kK * kK, -kK);
  const float om = fmaxf(z > -0.01f / kK ? series : fmaf(-a, a, 1.0f), 1e-30f);
  const float rs = RsqrtFtz(om);
  const float s = om * rs;
  const float g = fmaf(gamma, dy, u);
  const float ib = ri.y * beta;
  const float v = ib * xv;
  u = a * g;
  const float w = u * fmaf(-v * rs, a, hprev);
  const float gs = g * s;
  const float gsx = gs * xv;
  acc0 = fmaf(ri.x, w, acc0);
  acc1 = fmaf(gsx, ri.y, acc1);
  acc2 = fmaf(dy, have_ht ? ht : fmaf(a, hprev, s * v), acc2);
  sums[0] = fmaf(k, w, sums[0]);
  sums[1] = fmaf(gsx, beta, sums[1]);
  sums[2] += xv;
  return gs * ib;
}

// Rows: the rescan, last token first, 4 tokens per group (2 groups staged
// ahead at 16 bits): each element's backward (SamuBackStep), the group's 3
// sums per token met in the block (RowSums8 per warp, warps in order;
// double-buffered, one barrier per group), dm_t / W and the controller terms
// by the lanes below 4, then dx stored once. Parameter partials per block.
//
// SAVE > 1 (_h{SAVE}): the forward saved h at tokens t = SAVE - 1 mod SAVE
// only (L and CHUNK multiples of 4, so a group's first token tg is 3 mod 4
// and its step i's h_{tg-1-i} is saved where ChunkSavedStep(i, SAVE)); the
// group loads those rows and recomputes the others forward from them, each
// from the x its next step staged (h_{t} = a_t h_{t-1} + s_t i_t beta x_t,
// the forward's gate), into the h slots the steps read. The sequence's
// first group starts from h0.
//
// KW > 0 (`_k1`, the width baked in): the group loop's bounds and tokens as
// 32-bit values, and (with `_a1`) the interior groups' cp.async addresses from
// them (baked_issue); the unbaked twin's code is the same as before,
// instruction for instruction.
template <typename T, int THREADS, int CHUNK, int FWD_STRIP, int SAVE, bool ATOMIC, long long KW = 0>
__device__ __forceinline__ void SamuChunkBackwardScan(const SamuParams& p) {
  constexpr int VEC = kChunkVec;
  using Ring = PackRing<T, kChunkBwdScan>;
  constexpr int P = Ring::kSteps, D = Ring::kStages;
  static_assert(SAVE <= 1 || (P == 4 && CHUNK % 4 == 0 && ChunkSavedStep(P - 1, SAVE)),
                "a group's last step's h is saved");
  constexpr int kCalls = (3 * P + 7) / 8;  // RowSums8 calls per group
  constexpr bool kLean = sizeof(T) == 2;
  extern __shared__ __align__(16) unsigned char smem[];
  constexpr int kWarpSlots = THREADS / 32, kSumSlots = kCalls * 8;
  // The meeting's branch-free instance: 16-bit `_y1` (the h rescans spilled 40-56 bytes with it).
  constexpr bool kMeet = kLean && SAVE == 0;
  __shared__ float s_sum[2][kWarpSlots][kSumSlots];
  __shared__ float2 s_ri[CHUNK];
  const Ring ring(smem);
  const ChunkedLayout lay = MakeChunkedLayout(p.batch, p.length, p.width, CHUNK, FWD_STRIP);
  // Blocks in the reverse order of the local pass's: the dy it read last is read first, from L2.
  const ChunkSpan<CHUNK> sp_(lay, gridDim.x - 1 - blockIdx.x, gridDim.y - 1 - blockIdx.y, p.length);
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, warps = blockDim.x / 32;
  const Lanes l = MakeLanes<T, VEC>(static_cast<long long>(tid) * VEC, p.width, SamuAligned<T, VEC>(p, true));
  float sp[VEC], beta[VEC], gamma[VEC];
  LoadForwardDecays<T>(sp, p, l);  // 16-bit: log2 units (SamuBackStepLog2)
  LoadChannels(beta, p.beta, l);
  LoadChannels(gamma, p.gamma, l);
  const long long row0 = sp_.b * p.length * p.width + l.c0;
  const T* __restrict__ xs = static_cast<const T*>(p.x) + row0;
  // _y1 (SAVE 0): the rescan reads y, not h, except in groups whose h the
  // forward kept. There it runs in y units rather than scaling each y by
  // 1 / gamma: with hs = 1 / gamma (1 in kept groups), u' = u hs, g' = g hs
  // = dy + u' (gamma' = gamma hs = 1), and beta' = beta / hs, the
  // step's terms are the same expressions of (y, g', beta'): G = g' a la (y -
  // i beta' x rs a) is dr's and dlambda's term as is, g' s i beta' is dx's
  // part, g' s x beta' di's; dbeta's sum comes out divided by hs and dgamma's
  // (dy y) times 1 / hs, fixed once per channel after the chunk. (Session
  // 12 scaled each y by a 1 / gamma reloaded from shared memory; in y units
  // a group's steps are as many instructions as the h rescan's, though the
  // _y1 backward stayed 2.5-5 us slower than it: bench/NOTES.md, session 13.)
  const bool from_y = SAVE == 0 && !SamuGroupKeepsH(p, l.c0 / VEC);
  const T* __restrict__ hs = static_cast<const T*>(from_y ? p.y : p.h) + row0;
  if (from_y) {
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      beta[j] *= gamma[j];
      gamma[j] = 1.0f;
    }
  }
  const T* __restrict__ dys = static_cast<const T*>(p.dy) + row0;
  T* __restrict__ dxs = static_cast<T*>(p.dx) + row0;
  // `_k1` with `_a1`: the group loop's bounds and tokens as 32-bit values held in registers (below). Without
  // `_a1` the rescan then spilled its controller sums (16-24 bytes) in every group's meeting.
  constexpr bool kBakedIssue = KW > 0 && SAVE <= 1 && ATOMIC;
  int groups = static_cast<int>((sp_.t1 - sp_.t0 + P - 1) / P);
  // Every lane of the block wide (rows aligned, W = 8 x the block's threads): the meeting's branch-free instance.
  const bool rows_wide = SamuAligned<T, VEC>(p, true) && static_cast<long long>(blockDim.x) * VEC == p.width;
  // The sums' rows of absent warps (blockDim.x < THREADS), read as zeros by that instance; the first
  // group's barrier orders these stores before any read.
  for (int e = tid; kMeet && e < (kWarpSlots - warps) * kSumSlots; e += blockDim.x) {
    s_sum[0][warps + e / kSumSlots][e % kSumSlots] = 0.0f;
    s_sum[1][warps + e / kSumSlots][e % kSumSlots] = 0.0f;
  }
  // The chunk's last token as a 32-bit value (group k's first is t_last - k P).
  int t_last = static_cast<int>(sp_.t1 - 1);
  // Opaque to the compiler: held, not rederived from the chunk's 64-bit bounds at every group.
  if constexpr (kBakedIssue) asm("" : "+r"(groups));
  const int span = kBakedIssue ? t_last + 1 - static_cast<int>(sp_.t0) : static_cast<int>(sp_.t1 - sp_.t0);
  const long long w = p.width;
  // Group k's rows: its first token is t1 - 1 - k P; x and dy from that row
  // down, h_{t-1} one row further. Interior groups (all P rows inside the
  // chunk, t >= P, the row wide) issue from shared-window addresses and row
  // pointers (IssueFull); the rest through Issue's per-row tests. (The
  // per-group integer work, ~18 of the rescan's 54 instructions per element
  // in the profile, was mostly 64-bit address math and the shared window.)
  const unsigned pitch = static_cast<unsigned>(blockDim.x * sizeof(typename Ring::P8));  // one step of a slot
  // `_k1` with `_a1` (kBakedIssue): group k's rows from its first token as a 32-bit value times the baked width
  // (one wide multiply-add per input), and the slot pitch in the instructions' immediates where the block is
  // W / 8 threads.
  constexpr unsigned kPitch = KW > 0 && KW % 256 == 0 ? static_cast<unsigned>(KW / VEC * sizeof(typename Ring::P8)) : 0;
  const unsigned cpitch = kPitch > 0 ? kPitch : pitch;
  const unsigned slot0 = ring.sbase + static_cast<unsigned>(tid * sizeof(typename Ring::P8));
  auto baked_issue = [&](int k) {
    if (k < groups) {
      const int rows = span - k * P;  // rows of the group inside the chunk
      const int t = t_last - k * P;   // its first token; h_{t-1} exists for t >= 1
      const unsigned dst = slot0 + static_cast<unsigned>(k % D) * (Ring::kIn * P) * cpitch;
      if (l.wide && rows >= P) {
        ring.IssueFull(dst, cpitch, xs + t * w, -w);
        ring.IssueFull(dst + P * cpitch, cpitch, dys + t * w, -w);
      } else {
        ring.Issue(k, 0, xs + t * w, -w, rows, l);
        ring.Issue(k, 1, dys + t * w, -w, rows, l);
      }
      if (l.wide && rows >= P && t >= P) {
        ring.IssueFull(dst + 2 * P * cpitch, cpitch, hs + (t - 1) * w, -w);
      } else {
        ring.Issue(k, 2, hs + (t - 1) * w, -w, rows < t ? rows : t, l);
      }
    }
    CpAsyncCommit();
  };
  auto issue_in = [&](int k) {
    if (k < groups) {
      const long long t = sp_.t1 - 1 - static_cast<long long>(k) * P;  // steps t, t - 1, ...
      if (l.wide && span - k * P >= P) {
        const unsigned dst = ring.SlotShared(k);
        ring.IssueFull(dst, pitch, xs + t * w, -w);
        ring.IssueFull(dst + P * pitch, pitch, dys + t * w, -w);
      } else {
        ring.Issue(k, 0, xs + t * w, -w, t - sp_.t0 + 1, l);
        ring.Issue(k, 1, dys + t * w, -w, t - sp_.t0 + 1, l);
      }
    }
  };
  auto issue_h = [&](int k) {
    if (k < groups) {
      const long long t = sp_.t1 - 1 - static_cast<long long>(k) * P;  // h_{t-1} exists for t >= 1
      const long long count = t - sp_.t0 + 1;
      if constexpr (SAVE <= 1) {
        if (l.wide && count >= P && t >= P) {
          ring.IssueFull(ring.SlotShared(k) + 2 * P * pitch, pitch, hs + (t - 1) * w, -w);
        } else {
          ring.Issue(k, 2, hs + (t - 1) * w, -w, count < t ? count : t, l);
        }
      } else {  // the saved rows only
        const long long rows = count < t ? count : t;
        if (l.wide && count >= P && t >= P) {
          const unsigned dst = ring.SlotShared(k) + 2 * P * pitch;
#pragma unroll
          for (int i = 0; i < P; ++i) {
            if (!ChunkSavedStep(i, SAVE)) continue;
#pragma unroll
            for (int q = 0; q < int(sizeof(typename Ring::P8)) / 16; ++q) {
              CpAsync16Shared(dst + i * pitch + 16 * q, reinterpret_cast<const char*>(hs + (t - 1 - i) * w) + 16 * q);
            }
          }
        } else {
#pragma unroll
          for (int i = 0; i < P; ++i) {
            if (ChunkSavedStep(i, SAVE)) ring.Fetch(ring.Slot(k, 2, i), hs + (t - 1 - i) * w, l, i < rows);
          }
        }
      }
    }
    CpAsyncCommit();
  };
  auto issue = [&](int k) {
    if constexpr (kBakedIssue) {
      baked_issue(k);
    } else {
      issue_in(k);
      issue_h(k);
    }
  };
  // Everything but the carry's u loads while the predecessor (the carry)
  // drains: the first groups' x, dy and h (or y) and the chunk's (r_t, i_t).
  // The bwd phase's first kernel waited for whatever wrote them (the caller,
  // the forward: PDL), and this grid starts only once the carry, which waited
  // for that kernel, let it. (With h and StageControl after the wait, a block
  // that started late paid their round trips in series after it.)
#pragma unroll
  for (int k = 0; k < D - 1; ++k) issue(k);
  StageControl(s_ri, p, sp_.b, sp_.t0, sp_.t1);
  scan::GridDependencyWait();
  scan::LaunchDependents();
  float u[VEC];
  LoadRow(u, ChunkWs(p, lay.start_offset) + sp_.part * p.width, l);
  if (from_y) YUnits(u, p, l, true);  // u' = u / gamma
  float acc[3][VEC];
#pragma unroll
  for (int n = 0; n < 3; ++n) Fill(acc[n], 0.0f);
  float contrib[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  // The share's constants, once (not a global load and two IEEE divisions per group).
  const float w_r = p.controller[0], w_i = p.controller[2], inv_w = 1.0f / static_cast<float>(p.width);
  T* dx_row = dxs + (sp_.t1 - 1) * w;  // the group's first token's row, P rows back per group
  for (int k = 0; k < groups; ++k, dx_row -= P * w) {
    issue(k + D - 1);
    CpAsyncWait<D - 1>();
    const long long tg = kBakedIssue ? t_last - k * P : sp_.t1 - 1 - static_cast<long long>(k) * P;
    // The group's slots (x, dy, h: kSteps apart), once per group.
    typename Ring::P8* const slot = ring.Slot(k, 0, 0);
    const unsigned slot_s = ring.SlotShared(k);
    const int live = span - k * P;  // tokens of the group inside the chunk (>= 1)
    if constexpr (SAVE > 1) {  // live == P: L and CHUNK are multiples of 4
      float hr[VEC];
      if (tg >= P) {
        const Pack<T, VEC> ph = slot[(2 * P + P - 1) * blockDim.x];
#pragma unroll
        for (int j = 0; j < VEC; ++j) hr[j] = ph.Get(j);
      } else {
        LoadRow(hr, p.h0 != nullptr ? p.h0 + sp_.b * p.width : nullptr, l);
      }
#pragma unroll
      for (int i = P - 2; i >= 0; --i) {
        if (ChunkSavedStep(i, SAVE)) {
          const Pack<T, VEC> ph = slot[(2 * P + i) * blockDim.x];
#pragma unroll
          for (int j = 0; j < VEC; ++j) hr[j] = ph.Get(j);
        } else {  // h_{tg-1-i} from h_{tg-2-i}: token tg - 1 - i is step i + 1's
          const Pack<T, VEC> px = slot[(i + 1) * blockDim.x];
          const float2 ri = s_ri[live - 2 - i];
#pragma unroll
          for (int j = 0; j < VEC; ++j) {
            const GateAS g = ForwardGate<T>(sp[j] * ri.x);
            hr[j] = fmaf(g.a, hr[j], g.s * ri.y * beta[j] * px.Get(j));
          }
          // Rounded to T as the forward stores h, by st.shared (a plain
          // store let the compiler forward hr to the steps' loads in
          // registers: 124-220 bytes spilled).
          Pack<T, VEC> ph;
          if constexpr (sizeof(T) == 2) {
#pragma unroll
            for (int q = 0; q < VEC / 2; ++q) ph.u[q] = scan::PackPair<T>(hr[2 * q], hr[2 * q + 1]);
          } else {
#pragma unroll
            for (int j = 0; j < VEC; ++j) ph.u[j] = __float_as_uint(hr[j]);
          }
#pragma unroll
          for (int q = 0; q < Pack<T, VEC>::kU32 / 4; ++q) {
            StoreShared16(slot_s + (2 * P + i) * pitch + 16 * q, ph.u[4 * q], ph.u[4 * q + 1], ph.u[4 * q + 2],
                          ph.u[4 * q + 3]);
          }
        }
      }
    }
    float v[kCalls][8];
#pragma unroll
    for (int c = 0; c < kCalls; ++c) Fill(v[c], 0.0f);
    // The group's steps; kFull (every group but a chunk's last, and the
    // sequence's first token's): all P tokens inside the chunk, none at t = 0,
    // so no per-step tests.
    auto steps = [&](auto full_tag) {
      constexpr bool kFull = decltype(full_tag)::value;
      float ht[VEC];  // 16-bit, step i > 0: h_t is step i - 1's h_{t-1} (fp32 holding it spilled)
      Fill(ht, 0.0f);
#pragma unroll
      for (int i = 0; i < P; ++i) {
        float sums[3] = {0.0f, 0.0f, 0.0f};
        if (kFull || i < live) {
          const Pack<T, VEC> px = slot[i * blockDim.x], pd = slot[(P + i) * blockDim.x],
                             ph = slot[(2 * P + i) * blockDim.x];
          const float2 ri = s_ri[live - 1 - i];
          float hprev[VEC];
          if (kFull || tg - i > 0) {
#pragma unroll
            for (int j = 0; j < VEC; ++j) hprev[j] = ph.Get(j);
          } else {
            LoadRow(hprev, p.h0 != nullptr ? p.h0 + sp_.b * p.width : nullptr, l);
            if (from_y) YUnits(hprev, p, l, false);  // h0 gamma
          }
          float dx[VEC];
#pragma unroll
          for (int j = 0; j < VEC; ++j) {
            // dlambda's per-channel factor (DecayRatio) is applied once, to the partial.
            if constexpr (kLean) {
              dx[j] = SamuBackStepLog2(sp[j], sp[j] * ri.x, hprev[j], px.Get(j), pd.Get(j), ri, beta[j], gamma[j],
                                       u[j], acc[0][j], acc[1][j], acc[2][j], sums, i > 0, ht[j]);
            } else {
              const float la = sp[j] * ri.x;
              dx[j] = SamuBackStep<T, false, true>(la, ExpDecay<T>(la), hprev[j], px.Get(j), pd.Get(j), ri, beta[j],
                                                   gamma[j], 1.0f, u[j], acc[0][j], acc[1][j], acc[2][j], sums);
            }
            ht[j] = hprev[j];
          }
          // The dx part waits for dm_t / W as fp32 in the token's x and dy slots (used).
          StoreFloats(slot + i * blockDim.x, slot + (P + i) * blockDim.x, dx);
        }
#pragma unroll
        for (int n = 0; n < 3; ++n) v[(3 * i + n) / 8][(3 * i + n) % 8] = sums[n];
      }
    };
    if constexpr (kLean) {
      OnInterior(live >= P && tg >= P, steps);
    } else {
      steps(BoolTag<false>{});  // fp32: the second instance spilled 24-32 bytes
    }
#pragma unroll
    for (int c = 0; c < kCalls; ++c) {
      const float total = RowSums8<32>(v[c]);
      if (lane % 4 == 0) s_sum[k % 2][warp][c * 8 + RowSumIndex<32>(lane)] = total;
    }
    __syncthreads();
    // The meeting's second half, in two instances. Full groups of a block
    // whose lanes are all wide (kMet): no branch from the barrier to
    // the stores, so the loads of the dx parts, the cross-warp sums, the
    // share and the four rows' stores overlap (session 19's profile: ~21% of
    // the W = 2560 rescan's stall samples sat in this part, in series). The
    // cross-warp sum runs over THREADS / 32 rows in order; the rows of absent
    // warps are zero (set before the first group), which changes no bit.
    auto meet = [&](auto met_tag) {
      constexpr bool kMet = decltype(met_tag)::value;
      float total = 0.0f;
      if constexpr (kMet) {
#pragma unroll
        for (int wp = 0; wp < kWarpSlots; ++wp) total += s_sum[k % 2][wp][lane % kSumSlots];
      } else if (lane < 3 * P) {
        for (int wp = 0; wp < warps; ++wp) total += s_sum[k % 2][wp][lane];
      }
      float share = 0.0f;
      {
        // Lane q < 3 P holds value q (token q / 3, sum q % 3); the lanes
        // below P gather their token's three.
        float sums[3];
#pragma unroll
        for (int n = 0; n < 3; ++n) sums[n] = __shfl_sync(0xffffffffu, total, (3 * lane + n) % 32);
        const bool mine = lane < P && lane < live;
        if (kMet || mine) {
          const float2 ri = s_ri[kMet ? live - 1 - lane % P : live - 1 - lane];
          if constexpr (kLean) sums[0] *= kLn2 * ri.x;  // SamuBackStepLog2's sum of k w: sum G
          const SamuShare sh = kLean ? SamuShareOfControl(w_r, w_i, inv_w, sums, ri) : SamuShareOf(p, sums);
          share = mine ? sh.share : 0.0f;
#pragma unroll
          for (int n = 0; n < 4; ++n) contrib[n] += mine ? sh.contrib[n] : 0.0f;
        }
      }
      if constexpr (kMet) {
        float dx[P][VEC];
#pragma unroll
        for (int i = 0; i < P; ++i) {
          const float4 lo = LoadShared16(slot_s + i * pitch), hi = LoadShared16(slot_s + (P + i) * pitch);
          dx[i][0] = lo.x; dx[i][1] = lo.y; dx[i][2] = lo.z; dx[i][3] = lo.w;
          dx[i][4] = hi.x; dx[i][5] = hi.y; dx[i][6] = hi.z; dx[i][7] = hi.w;
        }
#pragma unroll
        for (int i = 0; i < P; ++i) {
          const float s = __shfl_sync(0xffffffffu, share, i);
#pragma unroll
          for (int j = 0; j < VEC; ++j) dx[i][j] += s;
          StorePack<T, VEC>(dx_row - i * w, dx[i], true, VEC);
        }
      } else {
        T* row = dx_row;
#pragma unroll
        for (int i = 0; i < P; ++i, row -= w) {
          const float s = __shfl_sync(0xffffffffu, share, i);
          if (i < live) {
            float dx[VEC];
            if constexpr (sizeof(typename Ring::P8) == 16) {  // 16-bit: the two fp32 halves by shared-window address
              const float4 lo = LoadShared16(slot_s + i * pitch), hi = LoadShared16(slot_s + (P + i) * pitch);
              dx[0] = lo.x; dx[1] = lo.y; dx[2] = lo.z; dx[3] = lo.w;
              dx[4] = hi.x; dx[5] = hi.y; dx[6] = hi.z; dx[7] = hi.w;
            } else {
              LoadFloats(dx, slot + i * blockDim.x, slot + (P + i) * blockDim.x);
            }
#pragma unroll
            for (int j = 0; j < VEC; ++j) dx[j] += s;
            StorePack<T, VEC>(row, dx, l.wide, l.nvalid);
          }
        }
      }
    };
    if (kMeet && rows_wide && live >= P) {
      meet(BoolTag<kMeet>{});
    } else {
      meet(BoolTag<false>{});
    }
  }
  float* param = ChunkWs(p, lay.param_offset);
  // DecayRatio(lambda) = sigmoid(lambda) / softplus(lambda). 16-bit: from the
  // softplus held in sp (DecayRatioFast), times the ln2 k of
  // SamuBackStepLog2's sum of r w (la = ln2 k r); fp32 reloads lambda
  // (holding sp to here spills at 512 threads).
  if constexpr (kLean) {
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const float la1 = kLn2 * sp[j];  // -8 softplus(lambda)
      acc[0][j] *= la1 * DecayRatioFast(la1 * (-1.0f / kC));
    }
  } else {
    float lambda[VEC];
    LoadChannels(lambda, p.lambda, l);
#pragma unroll
    for (int j = 0; j < VEC; ++j) acc[0][j] *= DecayRatio(lambda[j]);
  }
  if (from_y) {
    YUnits(acc[1], p, l, false);  // dbeta: times gamma
    YUnits(acc[2], p, l, true);   // dgamma: sum of dy y, over gamma
  }
  if constexpr (ATOMIC) {  // _a1: straight into the gradients (zeroed by the agg; no finalize)
    float* const out[3] = {p.dlambda, p.dbeta, p.dgamma};
#pragma unroll
    for (int n = 0; n < 3; ++n) AddRow(out[n], acc[n], l);
  } else {
#pragma unroll
    for (int n = 0; n < 3; ++n) StoreRow(param + (sp_.part * kSamuParams + n) * p.width, acc[n], l);
  }
  if (warp == 0) {
#pragma unroll
    for (int n = 0; n < 4; ++n) {
      const float total = RowSum<32>(contrib[n]);
      if (lane == 0) {
        if constexpr (ATOMIC) {
          if (p.dcontroller != nullptr) atomicAdd(p.dcontroller + n, total);
        } else {
          ChunkWs(p, lay.ctrl_offset)[sp_.part * 4 + n] = total;
        }
      }
    }
  }
}

// Blocks [0, ceil(W / CH)): the channel parameters over the B x chunks parts;
// the last block: the controller's four sums. CH = 16 (kChunkFinalizeChannels)
// where those blocks are one wave (one 1024-thread block per SM), else 32
// (the plan's choice; at W = 2560 CH = 16's 161 blocks ran in two waves: 6.5 us
// inside fwd_bwd against 3.1 at W = 2048, bench/NOTES.md session 24).
template <int CHUNK, int FWD_STRIP, int CH>
__device__ __forceinline__ void SamuChunkFinalize(const SamuParams& p) {
  const ChunkedLayout lay = MakeChunkedLayout(p.batch, p.length, p.width, CHUNK, FWD_STRIP);
  scan::GridDependencyWait();
  scan::LaunchDependents();
  if (static_cast<long long>(blockIdx.x) * CH < p.width) {
    float* const out[3] = {p.dlambda, p.dbeta, p.dgamma};
    FinalizeParams<3, CH>(ChunkWs(p, lay.param_offset), lay.parts, p.width, out);
    return;
  }
  SumControllerRows(reinterpret_cast<const float4*>(ChunkWs(p, lay.ctrl_offset)), lay.parts, p.dcontroller);
}

}  // namespace gated

// ---- entry points (grids: rows (chunks, B) x ceil(W / 8) threads rounded
// to a warp; columns (ceil(W / 1024), chunks, B) x 128; carry (ceil(W / 32),
// B) x 1024; finalize ceil(W / 16) + 1 x 1024; dynamic shared memory: the
// ring, ChunkRingBytes) ----------------------------------------------------------

template <typename T, int THREADS, int CHUNK>
__global__ void __launch_bounds__(THREADS, THREADS <= 256 && sizeof(T) == 2 ? 2 : 1) samu_fwd_chunk_agg(const SamuParams p) {
  gated::SamuChunkForwardAgg<T, THREADS, CHUNK>(p);
}
template <typename T, int CHUNK, int REVERSE, int FWD_STRIP = 0, int BATCH = 4>
__global__ void __launch_bounds__(gated::kCarrySlices * 32) samu_chunk_carry(const SamuParams p) {
  gated::SamuChunkCarry<T, CHUNK, REVERSE != 0, FWD_STRIP, BATCH>(p);
}
template <typename T, int CHUNK, int SAVE = 1>
__global__ void __launch_bounds__(gated::kChunkColumnThreads) samu_fwd_chunk_scan(const SamuParams p) {
  gated::SamuChunkForwardScan<T, CHUNK, SAVE>(p);
}
// KB, KL, KW (`_k1`): the shape the kernel is compiled for (scan::WithShape); 0: the struct's.
template <typename T, int CHUNK, int FWD_STRIP = 0, long long KB = 0, long long KL = 0, long long KW = 0>
__global__ void __launch_bounds__(gated::kChunkBwdAggThreads, 1) samu_bwd_chunk_agg(const SamuParams p) {
  gated::SamuChunkBackwardAgg<T, CHUNK, FWD_STRIP>(scan::WithShape<KB, KL, KW>(p));
}
template <typename T, int THREADS, int CHUNK, int FWD_STRIP = 0, int SAVE = 1, int ATOMIC = 0, long long KB = 0,
          long long KL = 0, long long KW = 0>
__global__ void __launch_bounds__(THREADS, THREADS <= 256 && sizeof(T) == 2 ? 2 : 1) samu_bwd_chunk_scan(const SamuParams p) {
  gated::SamuChunkBackwardScan<T, THREADS, CHUNK, FWD_STRIP, SAVE, ATOMIC != 0, KW>(scan::WithShape<KB, KL, KW>(p));
}
template <typename T, int CHUNK, int FWD_STRIP = 0, int CH = gated::kChunkFinalizeChannels>
__global__ void __launch_bounds__(gated::kFinalizeThreads) samu_bwd_chunk_finalize(const SamuParams p) {
  gated::SamuChunkFinalize<CHUNK, FWD_STRIP, CH>(p);
}
