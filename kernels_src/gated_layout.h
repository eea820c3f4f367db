// Workspace layout of the gated-scan kernels (rglru, samu), shared by the
// kernels (NVRTC) and the planner (compiler/plan_gated.cc), so that the
// offsets the kernels use and the sizes the plan allocates are one formula.
// Plain C++ only.
//
// Sections, each starting on a 256-byte boundary:
//   [0, zero_bytes)  look-back only: ticket counter (256 B), then one 32-bit
//                    flag per tile; zeroed before each phase (the plan's
//                    workspace_zero_bytes)
//   agg              look-back only: float2 (A, H) per tile and channel of its strip
//   incl             look-back only: float inclusive state per tile and channel
//   param            bwd: per-part partial sums of the parameter gradients,
//                    [parts][nparam][W] fp32; parts = B (sequential) or
//                    B x tiles (look-back). Every slot written, none zeroed.
//   token            samu bwd: per token and channel unit, 3 fp32 partial sums
//                    over the unit's channels: sum G, sum g s beta x, sum x
//                    [tokens][units][3]; a unit is a strip (look-back) or a
//                    warp's 32 x VEC channels (sequential).
//   ctrl             samu bwd: [ctrl_rows][4] partial sums of the controller
//                    gradients: one row per block of the fix-up kernel
//                    (sequential, lookback), one per (b, tile) (fused).
// samu's `fused` family also keeps one 32-bit counter per (b, tile) in the
// zeroed prefix, after the flags: the strips of a time tile meet there
// (gated_held.cuh, SamuMeetForward / SamuMeetBackward).
// Packed look-back (`lookback` _o2, launch epochs; scan_common.cuh
// PackWord): the zeroed prefix is the 256-byte epoch header, then the two
// u64 words of each tile and channel side by side, [seqs x tiles][unit]
// {w1, w2}: w1 at agg_offset + 16 x slot, w2 at incl_offset + 16 x slot
// (one pointer per thread); zeroed ONCE (the plan's workspace_zero_once),
// the later sections as above.
#pragma once

#ifdef __CUDACC__
#define GATED_HD __host__ __device__ __forceinline__
#else
#define GATED_HD inline
#endif

namespace gated {

// Tokens per block of samu's fix-up kernel (one warp per token).
constexpr int kFixupThreads = 256;
constexpr int kFixupTokensPerBlock = kFixupThreads / 32;
// Threads of the finalize kernel (32 channels per block, THREADS / 32 slices over parts).
constexpr int kFinalizeThreads = 1024;
// Number of per-channel parameters with gradients: rglru Lambda; samu lambda, beta, gamma.
constexpr int kRgLruParams = 1;
constexpr int kSamuParams = 3;
constexpr int kSamuTokenSums = 3;

struct Layout {
  long long tiles;       // time tiles (1 for sequential)
  long long strips;      // channel units per row
  long long seqs;        // B x strips (look-back sequences)
  long long parts;       // rows of the parameter partials
  long long fix_blocks;  // blocks of samu's fix-up kernel
  long long ctrl_rows;   // rows of samu's controller partials
  long long group_counters;  // samu look-back: uint index of the (b, tile) counters in the workspace
  long long zero_bytes;
  long long acc_offset;  // samu with tiles and no fix-up: [tokens][3] fp32 sums in the zeroed prefix (fused meetings)
  long long agg_offset, incl_offset, param_offset, token_offset, ctrl_offset, total_bytes;
};

GATED_HD long long RoundUp256(long long v) { return (v + 255) / 256 * 256; }

// unit: channels per strip (look-back) or per warp (sequential: 32 x VEC);
// tile: timesteps per tile, 0 for the sequential family; nparam: 1 or 3;
// samu: token and controller sections present; samu_fixup: a look-back
// whose dm_t / W is added by the fix-up kernel (the `lookback` family,
// gated_held.cuh), so the controller partials are one row per fix-up block.
GATED_HD Layout MakeLayout(long long batch, long long length, long long width, int unit, int tile, int nparam,
                           bool samu, bool samu_fixup = false, bool packed = false) {
  Layout g;
  g.tiles = tile > 0 ? (length + tile - 1) / tile : 1;
  g.strips = (width + unit - 1) / unit;
  g.seqs = batch * g.strips;
  g.parts = tile > 0 ? batch * g.tiles : batch;
  const long long tokens = batch * length;
  g.fix_blocks = samu ? (tokens + kFixupTokensPerBlock - 1) / kFixupTokensPerBlock : 0;
  g.ctrl_rows = samu ? (tile > 0 && !samu_fixup ? g.parts : g.fix_blocks) : 0;
  g.group_counters = 64 + g.seqs * g.tiles;
  // The `fused` meetings sum per-token values by atomics into [tokens][3]
  // fp32 after the counters (zeroed with them); present for every samu
  // layout with tiles and no fix-up (fused).
  g.acc_offset = 256 + 4 * g.seqs * g.tiles + (samu ? 4 * batch * g.tiles : 0);
  const long long acc_bytes = (samu && tile > 0 && !samu_fixup) ? tokens * 3 * 4 : 0;
  g.zero_bytes = tile > 0 ? RoundUp256(g.acc_offset + acc_bytes) : 0;
  const long long slots = tile > 0 ? g.seqs * g.tiles * unit : 0;
  g.agg_offset = g.zero_bytes;
  g.incl_offset = g.agg_offset + RoundUp256(slots * 8);
  g.param_offset = g.incl_offset + RoundUp256(slots * 4);
  if (packed) {
    g.agg_offset = 256;
    g.incl_offset = 256 + 8;
    g.zero_bytes = RoundUp256(256 + slots * 16);
    g.param_offset = g.zero_bytes;
  }
  g.token_offset = g.param_offset + RoundUp256(g.parts * nparam * width * 4);
  g.ctrl_offset = g.token_offset + (samu ? RoundUp256(tokens * g.strips * kSamuTokenSums * 4) : 0);
  g.total_bytes = g.ctrl_offset + (samu ? RoundUp256(g.ctrl_rows * 4 * 4) : 0);
  return g;
}

// samu's `chunked` family (gated_chunked.cuh): time segments ("chunks") of
// `chunk` tokens, parts = B x chunks. Every slot is written before it is
// read (nothing zeroed):
//   sum_r   [parts] fp32: sum of r_t over the chunk
//   agg     [parts][W] fp32: the chunk's local end state (fwd: h from 0;
//           bwd: u from 0)
//   start   [parts][W] fp32: the state entering the chunk (fwd: h from the
//           left; bwd: u from the right)
//   param   [parts][3][W] fp32: per-block partial sums of dlambda, dbeta, dgamma
//   ctrl    [parts][4] fp32: per-block partial sums of the controller gradients
// `chunked` geometry (shared with compiler/plan_gated.cc): 8 channels per
// thread (one 16-byte pack at 16 bits); columns blocks (samu_fwd_chunk_scan,
// samu_bwd_chunk_agg) of 128 threads; samu_chunk_carry blocks of 32 channels
// x CarrySlices slices of the chunks. The streaming passes stage their rows
// by cp.async in a per-thread ring of shared memory: `stages` groups of
// `steps` tokens in flight, `inputs` rows per token.
constexpr int kChunkVec = 8;
constexpr int kChunkColumnThreads = 128;
// samu_bwd_chunk_agg: two columns' worth of threads, each half walking one
// half of the chunk (the later tokens, then the earlier), met once at the end.
constexpr int kChunkBwdAggThreads = 2 * kChunkColumnThreads;
// Channels per block of samu_bwd_chunk_finalize (FinalizeParams's CH).
constexpr int kChunkFinalizeChannels = 16;
constexpr int kCarrySlices = 32;
enum ChunkPass { kChunkFwdAgg = 0, kChunkFwdScan = 1, kChunkBwdAgg = 2, kChunkBwdScan = 3 };
// Slices of samu_chunk_carry: runs of about 4 chunks, at most kCarrySlices.
GATED_HD constexpr int CarrySlices(long long chunks) {
  return chunks >= 4 * kCarrySlices ? kCarrySlices : static_cast<int>((chunks + 3) / 4);
}
GATED_HD constexpr int ChunkInputs(int pass) { return pass == kChunkBwdScan ? 3 : 1; }
GATED_HD constexpr int ChunkSteps(int pass) { return pass == kChunkBwdScan || pass == kChunkBwdAgg ? 4 : 8; }
GATED_HD constexpr int ChunkStages(int pass, int elem_bytes) {
  if (pass == kChunkBwdScan) return elem_bytes == 4 ? 1 : 2;
  return pass == kChunkFwdAgg ? 2 : 3;
}
// `chunked` _h{save}: the forward keeps h at rows t = save - 1 mod save
// only. Whether step i of a backward rescan group (4 tokens from tg = 3 mod
// 4 down; L and the chunk multiples of 4) finds its h_{tg-1-i} saved:
// tg - 1 - i = 2 - i mod 4. The group loads those rows and recomputes the
// others forward from the saved one below them (step 3's is always saved).
GATED_HD constexpr bool ChunkSavedStep(int i, int save) { return (6 - i) % save == save - 1; }
GATED_HD constexpr long long ChunkRingBytes(int pass, int threads, int elem_bytes) {
  return static_cast<long long>(ChunkStages(pass, elem_bytes)) * ChunkInputs(pass) * ChunkSteps(pass) * threads *
         kChunkVec * elem_bytes;
}

// `chunked` with the look-back forward (chunked_v8_t{threads}_c{chunk}_l{strip}):
// the forward is `lookback` _o3's (samu_fwd_control_fast, then
// samu_fwd_held as lookback_v2_t256_s{512 / strip}_i16_o3: the control
// pass reads x without a gate and the scan gates each element once, where
// `chunked`'s forward gates it in both its local pass and its rescan), the
// backward is `chunked`'s. The forward's packed look-back region (zeroed
// once, launch epochs) comes first in the workspace; the `chunked` sections
// start after it (HybridBase), so the backward never writes over flags.
constexpr int kHybridVec = 2;
constexpr int kHybridThreads = 256;
constexpr int kHybridItems = 16;
GATED_HD constexpr int HybridSegments(int strip) { return kHybridThreads * kHybridVec / strip; }
GATED_HD constexpr int HybridTile(int strip) { return HybridSegments(strip) * kHybridItems; }
GATED_HD long long HybridBase(long long batch, long long length, long long width, int strip) {
  return strip == 0 ? 0
                    : MakeLayout(batch, length, width, strip, HybridTile(strip), kSamuParams, true, true, true).zero_bytes;
}

struct ChunkedLayout {
  long long chunks, parts;
  long long sum_r_offset, agg_offset, start_offset, param_offset, ctrl_offset, total_bytes;
};

// fwd_strip: 0 for `chunked`'s own forward, else the look-back forward's strip (HybridBase).
GATED_HD ChunkedLayout MakeChunkedLayout(long long batch, long long length, long long width, int chunk,
                                         int fwd_strip = 0) {
  ChunkedLayout g;
  g.chunks = (length + chunk - 1) / chunk;
  g.parts = batch * g.chunks;
  g.sum_r_offset = HybridBase(batch, length, width, fwd_strip);
  g.agg_offset = g.sum_r_offset + RoundUp256(g.parts * 4);
  g.start_offset = g.agg_offset + RoundUp256(g.parts * width * 4);
  g.param_offset = g.start_offset + RoundUp256(g.parts * width * 4);
  g.ctrl_offset = g.param_offset + RoundUp256(g.parts * kSamuParams * width * 4);
  g.total_bytes = g.ctrl_offset + RoundUp256(g.parts * 4 * 4);
  return g;
}

}  // namespace gated
