// The one by-value parameter struct every selective_scan kernel takes (Mamba
// S6, token-major), and the layout of its workspace. Shared by the
// NVRTC-compiled kernels and the host code that fills it, so it may use
// nothing beyond plain C types. Layout is reported to clients by GetKernel.
//
// Shapes: u, delta, z, y, dy, du, ddelta, dz (B, L, D) in the problem's dtype;
// Bm, Cm, dBm, dCm (B, L, N) dtype; A, dA (D, N) fp32; Dv, dDv, delta_bias,
// ddelta_bias (D) fp32; h0, h_final, dh0 (B, D, N) fp32. Optional tensors
// (delta_bias, z, h0 and their gradients) are null when the problem has
// none. Element (b, t, d) is at (b*L + t)*D + d; state (b, d, n) at (b*D + d)*N + n.
#pragma once

struct SelectiveScanParams {
  // Forward: delta' = softplus?(delta + bias); h_t = exp(delta'_t A) h_{t-1} + delta'_t Bm_t u_t;
  // y_t = (Cm_t . h_t + Dv u_t) * (silu(z_t) with the gate).
  const void* u;
  const void* delta;
  const float* A;
  const void* Bm;
  const void* Cm;
  const float* Dv;
  const float* delta_bias;  // null: no bias
  const void* z;            // null: no gate
  const float* h0;          // null: zero
  void* y;
  float* h_final;           // null: not written
  // Backward (reads the forward inputs again; recomputes the states).
  const void* dy;
  void* du;
  void* ddelta;
  float* dA;
  void* dBm;
  void* dCm;
  float* dDv;
  float* ddelta_bias;       // null without delta_bias
  void* dz;                 // null without the gate
  float* dh0;               // null without h0
  void* workspace;          // see SsmWorkspaceLayout; the zeroed prefix holds the reductions
  long long batch;
  long long length;
  long long dim;
  long long state;
};

#if defined(__CUDACC__)
#define SSM_HD __host__ __device__ __forceinline__
#define SSM_HD_CONSTEXPR __host__ __device__ constexpr
#else
#define SSM_HD inline
#define SSM_HD_CONSTEXPR constexpr
#endif

// Offsets in floats into the workspace. The prefix [0, zero_end) holds the
// fp32 accumulators of the backward's reductions (atomics; zeroed before
// every phase): dA (D, N), dDv (D), ddelta_bias (D), dBm and dCm (B, L, N).
// Then, rewritten by every phase that uses them: the per-segment delta sums
// (B, S, D), the segment states hseg and adjoints gseg (B, S, D, N) (S time
// segments), and the backward's checkpoints ckpt (B, ceil(L/interval), D, N).
struct SsmWorkspace {
  long long dA, dDv, dbias, dB, dC, zero_end;
  long long sdelta, hseg, gseg, ckpt, total;
};

SSM_HD long long SsmRound(long long a) { return (a + 63) / 64 * 64; }  // 256-byte regions

// Timesteps per segment: `segment` (a multiple of `chunk`), or 0 for the whole sequence.
SSM_HD long long SsmSegmentLength(long long length, long long segment, long long chunk) {
  return segment > 0 ? segment : (length + chunk - 1) / chunk * chunk;
}

// The backward keeps one (B, D, N) checkpoint per this many timesteps (a
// multiple of its chunk): at most 1/16 of a (B, L, D, N) tensor.
SSM_HD_CONSTEXPR long long SsmCheckpointInterval(long long chunk) { return chunk < 16 ? 16 : chunk; }

SSM_HD struct SsmWorkspace SsmWorkspaceLayout(long long B, long long L, long long D, long long N, long long segment,
                                              long long chunk) {
  struct SsmWorkspace w;
  const long long interval = SsmCheckpointInterval(chunk);
  const long long seg_len = SsmSegmentLength(L, segment, interval);
  const long long segs = (L + seg_len - 1) / seg_len;
  const long long chunks = (L + interval - 1) / interval;
  w.dA = 0;
  w.dDv = w.dA + SsmRound(D * N);
  w.dbias = w.dDv + SsmRound(D);
  w.dB = w.dbias + SsmRound(D);
  w.dC = w.dB + SsmRound(B * L * N);
  w.zero_end = w.dC + SsmRound(B * L * N);
  w.sdelta = w.zero_end;
  w.hseg = w.sdelta + (segs > 1 ? SsmRound(B * segs * D) : 0);
  w.gseg = w.hseg + (segs > 1 ? SsmRound(B * segs * D * N) : 0);
  w.ckpt = w.gseg + (segs > 1 ? SsmRound(B * segs * D * N) : 0);
  w.total = w.ckpt + SsmRound(B * chunks * D * N);
  return w;
}

// tscan _f1 (fixed-order sums): the backward writes what the atomics would
// add as partials, each element by one block, and selective_scan_bwd_finalize<..., DB, TC> sums
// them in a fixed order, so every gradient has the same bits on every run.
// After the tscan layout's end (base = SsmWorkspaceLayout(..., 0, chunk).total;
// nothing of it is zeroed): dB, dC [G][B][L][N] for the G = ceil(D / DB)
// channel groups, dA [B][D][N], dDv and dbias [B][D].
struct SsmFixedSums {
  long long groups, dB, dC, dA, dDv, dbias, total;
};
SSM_HD struct SsmFixedSums SsmFixedSumsLayout(long long B, long long L, long long D, long long N, long long DB,
                                              long long base) {
  struct SsmFixedSums f;
  f.groups = (D + DB - 1) / DB;
  f.dB = SsmRound(base);
  f.dC = f.dB + SsmRound(f.groups * B * L * N);
  f.dA = f.dC + SsmRound(f.groups * B * L * N);
  f.dDv = f.dA + SsmRound(B * D * N);
  f.dbias = f.dDv + SsmRound(B * D);
  f.total = f.dbias + SsmRound(B * D);
  return f;
}

// tscan (lanes along time; kernels selective_scan_tscan_*): a block holds DB
// channels x SW state groups x TW warps per channel and group, each lane K
// consecutive timesteps, so one chunk is TC = 32 * TW * K steps; state group
// g of a channel holds states [g N / SW, (g + 1) N / SW). Dynamic shared
// memory in floats, laid out as the kernels carve it (selective_scan.cuh);
// the checkpoints are the forward state at every chunk start,
// SsmWorkspaceLayout(B, L, D, N, 0, TC).ckpt.
struct SsmTscanSmem {
  long long rows, bc, carry, a2, a, da, agg, ck, dec, red, rows2, bc2, total;  // offsets in floats
};
SSM_HD_CONSTEXPR long long SsmTscanChunk(long long TW, long long K) { return 32 * TW * K; }
SSM_HD_CONSTEXPR long long SsmTscanRowStride(long long DB, long long TW, long long K) {
  return SsmTscanChunk(TW, K) + (DB >= 32 ? 1 : 32 / DB);
}
// bwd false: rows = delta, u (, z) staged, then y; bc = Bm, Cm [N][TC + 1];
// red = the y partials of state groups 1 .. SW - 1 [SW - 1][DB][RS].
// bwd true: rows = delta, u, dy (, z), reused for the outputs; bc = Bm, Cm,
// and the chunk's (dBm, dCm) sums; red = the channel reduction, double
// buffered [2][SW][2][DB][TC] (also the du, ddelta, y partials of the state
// groups at the chunk's end). dec: each warp's chunk decays exp(A sum delta).
// prefetch (forward, fp32: the next chunk's inputs copied by cp.async while
// the current one computes): rows2, bc2 = the second rows and Bm/Cm buffers.
SSM_HD_CONSTEXPR struct SsmTscanSmem SsmTscanSmemLayout(long long N, long long DB, long long TW, long long K,
                                                        long long SW, bool gate, bool bwd,
                                                        bool prefetch = false) {
  struct SsmTscanSmem s{};
  const long long tc = SsmTscanChunk(TW, K);
  const long long nrows = bwd ? 3 + (gate ? 1 : 0) : 2 + (gate ? 1 : 0);
  s.rows = 0;
  s.bc = s.rows + nrows * DB * SsmTscanRowStride(DB, TW, K);
  s.carry = s.bc + (bwd ? 4 : 2) * N * (tc + 1);
  s.a2 = s.carry + 2 * DB * N;
  s.a = s.a2 + DB * N;
  s.da = s.a + DB * N;
  s.agg = s.da + (bwd ? 2 * DB * TW * N : 0);  // bwd: dA sums and their Kahan compensations
  s.ck = s.agg + (bwd ? 2 : 1) * 2 * DB * TW * 2;  // bwd: the chunk's start states [DB][N]
  s.dec = s.ck + (bwd ? DB * N : 0);  // every warp's chunk decays [DB * SW * TW][N]
  s.red = s.dec + DB * SW * TW * N;
  s.rows2 = s.red + (bwd ? 2 * SW * 2 * DB * tc : (SW - 1) * DB * SsmTscanRowStride(DB, TW, K));
  const bool two = prefetch && !bwd;
  s.bc2 = s.rows2 + (two ? s.bc - s.rows : 0);
  s.total = s.bc2 + (two ? s.carry - s.bc : 0);
  return s;
}

// Whether the forward double-buffers its chunk (cp.async; fp32 inputs only): where the second
// buffer keeps the blocks per SM that the registers allow (64 K registers over about 24 + 10 K
// per thread; 227 KB of shared memory, 1 KB reserved per block).
SSM_HD_CONSTEXPR bool SsmTscanPrefetch(long long N, long long DB, long long TW, long long K, long long SW, bool gate,
                                       bool f32) {
  const long long threads = DB * SW * TW * 32;
  const long long by_regs = 65536 / (threads * (24 + 10 * K)) < 1 ? 1 : 65536 / (threads * (24 + 10 * K));
  return f32 && by_regs * (SsmTscanSmemLayout(N, DB, TW, K, SW, gate, false, true).total * 4 + 1024) <= 227 * 1024;
}
