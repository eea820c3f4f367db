// Plans of rglru and samu (kernels in kernels_src/gated_scan.cuh). Three
// families, the same variant names for both operators (the variants table
// is keyed by (op, name)):
//   sequential_v{vec}_t{threads}_p{steps loaded at a time}
//   lookback_v{vec}_t{threads}_s{segments}_i{items}[_o2]      (v2 look-back,
//       kernels_src/gated_held.cuh: strip = threads / segments x vec
//       channels, tile = segments x items steps, (a, b) held in registers;
//       samu's dm_t / W added by a fix-up kernel. _o2 (v4): tiles by block
//       index on a (strips, B, tiles) grid, packed look-back, launch epochs
//       (workspace zeroed once) and every launch a PDL dependent; _o3: the
//       16-bit gate's 1 - a^2 from tanh.approx; _o5, samu only: _o3 with
//       the strips of a time tile launched as one thread-block cluster, so
//       m_t and dm_t meet in distributed shared memory: no control and no
//       fix-up kernel)
//   fused_d{strip}_s{segments}_c{tile}                        (v3, samu only:
//       the v2 kernels with vec 2 and threads = strip / 2 x segments, the
//       controller fused into the scans: the strips of a time tile meet for
//       m_t (fwd) and dm_t (bwd), so no control and no fix-up kernel)
//   chunked_v{vec}_t{threads}_c{chunk}[_l{strip}]           (samu only,
//       kernels_src/gated_chunked.cuh: three phases per direction over time
//       chunks of `chunk` tokens; the passes needing m_t / dm_t own whole
//       token rows, ceil(W / vec) threads (at most `threads`, the launch
//       bound); no control, fix-up or look-back. _l{strip}: the forward is
//       lookback_v2_t256_s{512 / strip}_i16_o3's (control pass, then one
//       look-back scan that gates each element once), the backward chunked's.
//       _h{n} (n = 2, 4; fwd_bwd and bwd; by name, not enumerated): the
//       forward saves h at every n-th token only, and the backward rescan
//       recomputes the rows between from the x it stages anyway: 2 (n - 1) / n
//       fewer bytes per element, ~8 more instructions per element in the rescan.)
//       _y1 (bf16 fwd_bwd): the forward stores y and not h, the backward takes
//       h = y / gamma (enumerated with _l; without it, chunked's own forward
//       stores y only, by name: its forward is 6-17 us slower than _l's at
//       every seed shape, bench/NOTES.md session 27). _b{n} (bf16): the forward keeps b at 16 bits in place of
//       its staged x (no fp32 region) and is compiled for n blocks per SM.
// (v1's `lookbacksmem` family, the tile staged with an fp32 (a, b) region,
// was dropped in session 4: 1.5-3x slower than `lookback` at every seed
// shape, never selected; bench/NOTES.md "rglru/samu v4".)
// Workspace offsets come from kernels_src/gated_layout.h (shared with the
// kernels); shared-memory sizes mirror SmemPlan in gated_scan.cuh.
#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>

#include "compiler/op_planner.h"
#include "kernels_src/gated_layout.h"
#include "kernels_src/rglru_params.h"
#include "kernels_src/samu_params.h"

namespace scantune {
namespace {

// {vec, threads, prefetch}. Sequential has only B x W / vec threads: it is the
// baseline, and the winner only where B x W is large and L short.
struct SeqKnobs {
  int vec, threads, prefetch;
};
// (v8 with 4 steps spilled in the fp32 rglru backward: 5 inputs x 4 x 8 fp32.)
constexpr SeqKnobs kSequential[] = {{4, 64, 4}, {8, 64, 2}, {4, 128, 8}, {2, 64, 8}};

// v2 (`lookback`, gated_held.cuh): {vec, threads, segments, items}. A
// thread holds (a, b) (items x vec <= 16) or only b (larger: the rescan
// recomputes a) through the look-back, at most 32 fp32; __launch_bounds__
// asks for 3 blocks of 256 threads (<= 85 registers) or 4 of 128 (<= 128) in
// the forward, up to 4 of 256 in the backward (what shared memory allows).
// Registers (bf16, fwd / bwd; rglru | samu): see bench/NOTES.md "rglru/samu
// v2". Dropped for spills: v4_t128_s8_i16 (fp32 rglru fwd 32 B), v4_t256
// with items 8 (16-36 B in rglru fwd and samu).
// Orders enumerated per point: 2 (block index, packed look-back, epochs,
// PDL) for every point; 3 (order 2 with the 16-bit gate's 1 - a^2 from
// tanh.approx, GateFromA) for the four that won a seed shape; 0 (atomic
// ticket, flags, prefix zeroed per phase) for one point only, as the
// baseline and to keep that path under the GPU suite. (GPU run 2026-11-30
// 03:50: order 2 beat order 0 by 9-24% fwd_bwd at every v2 point and
// shape; bench/NOTES.md "rglru/samu v4".) Every order parses and runs by name.
struct HeldKnobs {
  int vec, threads, segments, items;
  bool tanh, baseline;
};
constexpr HeldKnobs kHeld[] = {
    {2, 256, 8, 8, true, false},     // strip 64, tile 64, (a, b) held, 3 blocks/SM
    {2, 256, 16, 8, true, false},    // strip 32, tile 128, (a, b) held, 3 blocks/SM
    {2, 256, 8, 16, true, true},     // strip 64, tile 128, b held, 3 blocks/SM (rglru bwd: 2, shared memory)
    {2, 256, 16, 16, true, false},   // strip 32, tile 256, b held, 3 blocks/SM (rglru bwd: 2, shared memory)
    {4, 128, 8, 8, false, false},    // strip 64, tile 64, b held, 4 blocks/SM
    {2, 256, 32, 16, false, false},  // strip 16, tile 512, b held, 3 blocks/SM (rglru bwd: 2): 64 look-back hops at L = 32768
};
// (Session 5's order 4, samu's fix-up folded into the backward scan, was
// 8-150% slower than order 3 on the H200 and was removed: bench/NOTES.md.)
constexpr int kHeldOrders[] = {0, 2, 3};
// _d1 (rglru): the chained look-back (each tile takes only its predecessor's
// inclusive state), the deterministic twins of the _o3 points and of the two
// longest tiles at _o2 (fp32's; tile 512: 64 round trips per chain at
// L = 32768). Only for the deterministic selection: the decoupled look-back
// is never slower. samu's look-back backward meets dm_t by atomics, so it has
// no deterministic form; samu's is `chunked` _l..._d1 (kChainedHybrid).
struct ChainedKnobs {
  int segments, items, order;
};
constexpr ChainedKnobs kChainedHeld[] = {{8, 8, 3}, {16, 8, 3}, {8, 16, 3}, {16, 16, 3}, {16, 16, 2}, {32, 16, 2}};
// _k1 (rglru, with the packed look-back): the problem's B, L and W as the last template arguments of the forward
// and backward scans (scan::WithShape: their index arithmetic and bounds tests fold into constants; a module per
// shape), as samu's `chunked` _l..._k1 (bench/NOTES.md session 32). Twins of the two _o3 points that won the seed
// shapes in session 29 ({segments, items}); by name with _o2 and _d1.
struct BakedKnobs {
  int segments, items;
};
constexpr BakedKnobs kBakedHeld[] = {{8, 16}, {16, 16}};

// _o5 (samu, by name only): the strips of a time tile launched as one
// thread-block cluster (the tile's W / strip strips, at most kMaxCluster),
// meeting in distributed shared memory for m_t and dm_t, so no control and
// no fix-up kernel. Strips are wide: 128 or 256 channels, a segment 2 or 4
// warps at vec 2 (the backward's row sums per warp). Not enumerated: on the
// H200 (session 6, bench/NOTES.md "samu _o5") every point was 9-40% slower
// fwd_bwd than the tuner's _o3 selection at the seed shapes: the meetings
// cost more than the two streaming passes they replace. Runs by name
// (e.g. lookback_v2_t256_s4_i16_o5, lookback_v2_t512_s8_i16_o5,
// lookback_v2_t512_s4_i16_o5); its GPU test checks those.
constexpr int kClusterOrder = 5;
// Blocks per cluster: 8 is portable; up to 16 with the non-portable attribute (sm_90).
constexpr int64_t kMaxCluster = 16;

// v3 (`fused`, samu only): {strip, segments, tile}; vec 2, threads = strip /
// 2 x segments: the same geometries as the vec-2 v2 points.
struct FusedKnobs {
  int strip, segments, tile;
};
constexpr FusedKnobs kFusedKnobs[] = {
    {64, 8, 128},   // 256 threads, 16 steps each, 3 blocks/SM (fwd)
    {16, 32, 512},  // 256 threads, 16 steps each: 64 look-back hops at L = 32768
    {64, 4, 64},    // 128 threads, 16 steps each, 4 blocks/SM
    {32, 8, 128},   // 128 threads, 16 steps each, 4 blocks/SM
};
// (d64_s8_c64, d32_s16_c128 and d32_s16_c256 spilled 4-16 bytes once the meetings
// went atomic: dropped.)
constexpr int kFusedVec = 2;

// `chunked` (samu only): {threads (launch bound; the rows blocks have
// ceil(W / 8) threads rounded to a warp), chunk}; vec is 8 (16-byte packs
// staged by cp.async).
struct ChunkedKnobs {
  int threads, chunk;
};
constexpr ChunkedKnobs kChunked[] = {{256, 32}, {256, 64}, {256, 128}, {512, 32}, {512, 64}, {512, 128}};
// ... with the look-back forward (_l{strip}): {threads, chunk, strip}; the
// strips of the two _o3 forwards that won seed shapes (s8: 64 channels, s16: 32).
struct HybridKnobs {
  int threads, chunk, strip;
};
constexpr HybridKnobs kHybrid[] = {{256, 32, 64},  {512, 32, 64},  {256, 64, 64},  {256, 64, 32},
                                   {512, 64, 64},  {512, 64, 32},  {256, 128, 32}, {512, 128, 32}};
// (_h2 / _h4 run by name, not enumerated: on the H200 the forward gains what
// the backward's recompute costs at every seed shape, bench/NOTES.md session 11.)
// _y1 (bf16 fwd_bwd only) at the four points that won a seed shape without it:
// -2 to -10 us of fwd_bwd there (bench/NOTES.md session 12).
constexpr HybridKnobs kHybridFromY[] = {{256, 32, 64}, {256, 64, 32}, {512, 64, 32}, {256, 128, 32}};
// _b5 (bf16): the same four _y1 points with the forward's b at 16 bits in place of x, 5 blocks per SM
// (48 registers, no spill; _b6 spilled 20 bytes at 40): -2 to -5 us of the forward at L = 32768, level at
// 4x2048x2048 (bench/NOTES.md session 14).
constexpr int kHybridB16Blocks = 5;
// _b5_i32 (bf16 fwd_bwd): the look-back forward at strip 64 with 32 tokens per thread (tile 256): its
// forward 8-9 us faster at L = 32768 W = 2048 (130-133 against 139-140 us), level at 1x8192x2560, 1-2 us
// slower at 4x2048x2048 (bench/NOTES.md session 15); at the backward's chunks that won L = 32768 and W = 2560.
constexpr HybridKnobs kHybridLongTile[] = {{256, 128, 64}, {256, 64, 64}, {512, 64, 64}};
// _b4_i32: the same forward at 4 blocks per SM (64 registers): 2.6 us faster than _b5_i32 at 1x8192x2560
// (46.6 against 49.3 us; fwd_bwd -1 to -2 us) and 0.7 us faster in fwd_bwd than the 16-token forward at
// 4x2048x2048; level at L = 32768 (bench/NOTES.md session 24). _b3 and _i64 run by name: 3 blocks per SM and
// tiles of 512 tokens were slower at every seed shape (in fwd_bwd: _i64's early trigger lets the backward's
// first blocks take slots while the forward runs).
constexpr HybridKnobs kHybridLongTile4[] = {{256, 32, 64}, {512, 64, 64}};
// _d1 (with _l): the look-back forward chained (each tile takes only its predecessor's inclusive state), so
// with a fixed-order backward (no _a1) the same bits every run (Deterministic), for the deterministic
// selection: the twins of the points that won 4x2048x2048 and 1x8192x2560, and at L = 32768 tiles of 512
// tokens (_b4_i64: half the chain's round trips; 192.4 / 326.2 us fwd_bwd at 1x32768x1024 / 2048 against
// 213.5 / 328.7 for the _b5_i32 twins, bench/NOTES.md session 28). {threads, chunk, strip, fwd_blocks (0: _y1
// alone), fwd_items}.
struct ChainedHybridKnobs {
  int threads, chunk, strip, fwd_blocks, fwd_items;
};
constexpr ChainedHybridKnobs kChainedHybrid[] = {
    {256, 32, 64, 0, 0}, {512, 64, 64, 4, 32}, {256, 64, 64, 4, 64}, {256, 128, 64, 4, 64}};
// _k1 (with _l; bf16 fwd_bwd here): the shape baked into the scans' template arguments, twins of the points that
// won a seed shape in session 29 (bench/NOTES.md session 32: the held forward's static SASS 22-31% shorter,
// its index arithmetic folded; not yet timed). {threads, chunk, strip, fwd_blocks (0: _y1 alone), fwd_items}.
constexpr ChainedHybridKnobs kBakedHybrid[] = {
    {256, 32, 64, 0, 0}, {256, 32, 64, 4, 32}, {512, 64, 64, 4, 32}, {256, 128, 64, 5, 32}};
// These _i32 points are enumerated with _a1 (the rescan adds its parameter partials into the gradients by
// atomics, no finalize): fwd_bwd -1 to -3.5 us at three seed shapes against the same points without it, level
// at 4x2048x2048 (bench/NOTES.md session 26). Without _a1 (fixed-order parameter sums) they run by name;
// neither is deterministic in fwd_bwd (the _l forward's look-back: Deterministic).

constexpr int64_t kMaxGridX = INT_MAX;
constexpr int64_t kMaxGridY = 65535;
constexpr int64_t kMaxTickets = INT_MAX / 2;  // the ticket counter is 32-bit

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

const char* TypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "float";
    case DType::kBF16: return "__nv_bfloat16";
    case DType::kF16: return "__half";
  }
  return "float";
}

std::string Instance(const std::string& kernel, DType dtype, const std::vector<int>& knobs) {
  std::string name = kernel + "<" + TypeName(dtype);
  for (int knob : knobs) name += ", " + std::to_string(knob);
  return name + ">";
}

bool HasFwd(Mode mode) { return mode == Mode::kFwd || mode == Mode::kFwdBwd; }
bool HasBwd(Mode mode) { return mode == Mode::kBwd || mode == Mode::kFwdBwd; }
bool IsSamu(Op op) { return op == Op::kSamu; }
const char* Prefix(Op op) { return IsSamu(op) ? "samu" : "rglru"; }

bool IsFused(const Variant& v) { return v.algorithm == Algorithm::kFused; }
// A `fused` variant as the `lookback` geometry it runs (vec, threads, segments, items).
Variant HeldOf(const Variant& v) {
  if (!IsFused(v)) return v;
  Variant h;
  h.algorithm = Algorithm::kLookback;
  h.vec = kFusedVec;
  h.segments = v.state_split;
  h.threads = v.dim_block / kFusedVec * v.state_split;
  h.items = v.state_split > 0 ? v.chunk / v.state_split : 0;
  return h;
}
bool IsChunked(const Variant& v) { return v.algorithm == Algorithm::kChunked; }
bool IsHybrid(const Variant& v) { return IsChunked(v) && v.strip != 0; }
// The `lookback` point whose forward a `chunked` _l{strip} runs (gated_layout.h, HybridBase).
Variant HybridForwardOf(const Variant& v) {
  const int segments = gated::HybridSegments(v.strip);
  return {.algorithm = Algorithm::kLookback, .vec = gated::kHybridVec, .threads = gated::kHybridThreads,
          .segments = segments, .items = v.fwd_items != 0 ? v.fwd_items : gated::kHybridItems, .order = 3};
}
// Threads across the channels of samu_bwd_chunk_agg's columns (each twice, one per half of the chunk):
// kChunkColumnThreads, or half as many where that pads W less. At W = 2560, 1024-channel columns were 1024 +
// 1024 + 512 (the SMs of the 512-channel blocks half idle; the agg took 18.1 us inside fwd_bwd at 1x8192x2560,
// against 10.3 at 4x2048x2048: bench/NOTES.md session 24); 512-channel columns are 5 of equal work.
int64_t ChunkAggColumns(int64_t width) {
  constexpr int64_t kWide = int64_t{gated::kChunkColumnThreads} * gated::kChunkVec;
  auto pad = [&](int64_t channels) { return CeilDiv(width, channels) * channels - width; };
  return pad(kWide / 2) < pad(kWide) ? gated::kChunkColumnThreads / 2 : gated::kChunkColumnThreads;
}
// Threads of a `chunked` rows block: one per vec channels of a token row, whole warps.
int64_t RowsThreads(const Variant& v, int64_t width) { return CeilDiv(CeilDiv(width, v.vec), 32) * 32; }
// Dynamic and static shared memory of a `chunked` pass; mirrors gated_chunked.cuh. Dynamic: the cp.async
// ring.
int64_t ChunkedSmem(int pass, int threads, int elem_bytes) { return gated::ChunkRingBytes(pass, threads, elem_bytes); }
int64_t ChunkedStaticSmem(const Variant& v, int pass) {
  const int64_t ri = int64_t{v.chunk} * 8;  // (r_t, i_t) of the chunk
  switch (pass) {
    case gated::kChunkFwdAgg: return 2 * (v.threads / 32) * 8 * 4;
    case gated::kChunkBwdScan: return 2 * (v.threads / 32) * 16 * 4 + ri;
    default: return ri;
  }
}
bool IsHeld(const Variant& v) { return v.algorithm == Algorithm::kLookback || IsFused(v); }
// `lookback` _o2: block-index tiles, packed look-back, launch epochs, PDL.
bool IsPacked(const Variant& v) { return v.algorithm == Algorithm::kLookback && v.order >= 2; }
// samu `lookback` _o5: a time tile's strips as one thread-block cluster.
bool IsCluster(const Variant& v) { return v.algorithm == Algorithm::kLookback && v.order == kClusterOrder; }
// Channels per block and timesteps per tile of the look-back families.
int StripOf(const Variant& v) {
  if (IsFused(v)) return v.dim_block;
  return v.segments > 0 ? v.threads / v.segments * v.vec : 0;
}
int TileOfLookback(const Variant& v) { return IsFused(v) ? v.chunk : v.segments * v.items; }
// Channels per unit of the workspace's per-token sums and look-back slots.
int Unit(const Variant& v) { return v.algorithm == Algorithm::kSequential ? 32 * v.vec : StripOf(v); }
int TileOf(const Variant& v) { return v.algorithm == Algorithm::kSequential ? 0 : TileOfLookback(v); }

gated::Layout LayoutFor(const Variant& v, const Problem& p) {
  return gated::MakeLayout(p.shape.batch, p.shape.length, p.shape.width, Unit(v), TileOf(v),
                           IsSamu(p.op) ? gated::kSamuParams : gated::kRgLruParams, IsSamu(p.op),
                           IsSamu(p.op) && IsHeld(v) && !IsFused(v) && !IsCluster(v), IsPacked(v));
}

// Dynamic shared memory of a look-back kernel; mirrors SmemPlan.
int64_t SmemBytes(const Variant& variant, DType dtype, int staged_inputs) {
  const Variant v = HeldOf(variant);
  const int64_t strip = StripOf(v), tile = TileOfLookback(v);
  const int64_t segs = v.threads / (strip / v.vec);
  const int64_t staged = (int64_t{staged_inputs} * tile * strip * ElementBytes(dtype) + 15) / 16 * 16;
  return staged + (2 * segs * strip + strip) * 4 + 16;
}
// rglru fwd: ga, gx, x; bwd: ga, dh, gx, x, h. samu fwd: x; bwd: dy, x, h.
// samu's 16-bit forward at _o3 with a not held (items x vec > 16) keeps
// b in a TILE x STRIP fp32 region after the combine (gated_held.cuh,
// SamuBInSmem): the combine's end rounded to 16 bytes, then the region.
int64_t FwdSmem(const Variant& variant, Op op, DType dtype) {
  const int64_t base = SmemBytes(variant, dtype, IsSamu(op) ? 1 : 3);
  const Variant v = HeldOf(variant);
  const bool b_smem = IsSamu(op) && v.algorithm == Algorithm::kLookback &&
                      ((v.order >= 3 && ElementBytes(dtype) == 2) || v.order == kClusterOrder) && v.items * v.vec > 16;
  return b_smem ? (base + 15) / 16 * 16 + int64_t{TileOfLookback(v)} * StripOf(v) * 4 : base;
}
int64_t BwdSmem(const Variant& v, Op op, DType dtype) { return SmemBytes(v, dtype, IsSamu(op) ? 3 : 5); }
// Blocks of the persistent look-back forward (`chunked` _p, two staged tiles) that one SM holds by threads and
// shared memory: the dynamic bytes, its static bytes (s_ri, 8 bytes a token of the tile, and 1 KB more: ptxas
// reports 2048 at tile 128 and 3072 at 256) and the 1 KB the driver reserves per block.
int64_t PersistentFit(const Variant& forward, DType dtype, const DeviceLimits& device) {
  constexpr int64_t kThreadsPerSm = 2048, kReservedPerBlock = 1024;
  const int64_t shared = SmemBytes(forward, dtype, 2) + 8 * int64_t{TileOfLookback(forward)} + 1024;
  return std::min<int64_t>(kThreadsPerSm / forward.threads,
                           (int64_t{device.max_shared_per_block} + kReservedPerBlock) / (shared + kReservedPerBlock));
}

Status CheckGrid(int64_t blocks, int64_t limit, const char* what) {
  if (blocks > limit) {
    return ResourceExhausted(std::string(what) + " needs " + std::to_string(blocks) + " blocks, over the limit of " +
                             std::to_string(limit));
  }
  return Status::Ok();
}

class GatedPlannerImpl final : public OpPlanner {
 public:
  const char* MainHeader(Op) const override { return "gated_scan.cuh"; }

  std::vector<Variant> EnumerateVariants(Op op) const override {
    std::vector<Variant> variants;
    for (const SeqKnobs& k : kSequential) {
      variants.push_back({.algorithm = Algorithm::kSequential, .vec = k.vec, .threads = k.threads,
                          .prefetch = k.prefetch});
    }
    for (int order : kHeldOrders) {
      for (const HeldKnobs& k : kHeld) {
        if ((order == 3 && !k.tanh) || (order == 0 && !k.baseline)) continue;
        variants.push_back({.algorithm = Algorithm::kLookback, .vec = k.vec, .threads = k.threads,
                            .segments = k.segments, .items = k.items, .order = order});
      }
    }
    if (!IsSamu(op)) {
      for (const ChainedKnobs& k : kChainedHeld) {
        variants.push_back({.algorithm = Algorithm::kLookback, .vec = 2, .threads = 256, .segments = k.segments,
                            .items = k.items, .order = k.order, .chained = 1});
      }
      for (const BakedKnobs& k : kBakedHeld) {
        variants.push_back({.algorithm = Algorithm::kLookback, .vec = 2, .threads = 256, .segments = k.segments,
                            .items = k.items, .order = 3, .baked = 1});
      }
    }
    // Enumerated for both operators (one name list); CanImplement rejects them for rglru.
    for (const FusedKnobs& k : kFusedKnobs) {
      variants.push_back({.algorithm = Algorithm::kFused, .chunk = k.tile, .dim_block = k.strip,
                          .state_split = k.segments});
    }
    if (IsSamu(op)) {
      for (const ChunkedKnobs& k : kChunked) {
        variants.push_back(
            {.algorithm = Algorithm::kChunked, .vec = gated::kChunkVec, .threads = k.threads, .chunk = k.chunk});
      }
      for (const HybridKnobs& k : kHybrid) {
        variants.push_back({.algorithm = Algorithm::kChunked, .vec = gated::kChunkVec, .threads = k.threads,
                            .chunk = k.chunk, .strip = k.strip});
      }
      for (const HybridKnobs& k : kHybridFromY) {
        variants.push_back({.algorithm = Algorithm::kChunked, .vec = gated::kChunkVec, .threads = k.threads,
                            .chunk = k.chunk, .strip = k.strip, .h_from_y = 1});
        variants.push_back({.algorithm = Algorithm::kChunked, .vec = gated::kChunkVec, .threads = k.threads,
                            .chunk = k.chunk, .strip = k.strip, .h_from_y = 1, .fwd_blocks = kHybridB16Blocks});
      }
      for (const HybridKnobs& k : kHybridLongTile) {
        variants.push_back({.algorithm = Algorithm::kChunked, .vec = gated::kChunkVec, .threads = k.threads,
                            .chunk = k.chunk, .strip = k.strip, .h_from_y = 1, .fwd_blocks = kHybridB16Blocks,
                            .fwd_items = 2 * gated::kHybridItems, .atomic_sums = 1});
      }
      for (const HybridKnobs& k : kHybridLongTile4) {
        variants.push_back({.algorithm = Algorithm::kChunked, .vec = gated::kChunkVec, .threads = k.threads,
                            .chunk = k.chunk, .strip = k.strip, .h_from_y = 1, .fwd_blocks = 4,
                            .fwd_items = 2 * gated::kHybridItems, .atomic_sums = 1});
      }
      for (const ChainedHybridKnobs& k : kChainedHybrid) {
        variants.push_back({.algorithm = Algorithm::kChunked, .vec = gated::kChunkVec, .threads = k.threads,
                            .chunk = k.chunk, .strip = k.strip, .h_from_y = 1, .fwd_blocks = k.fwd_blocks,
                            .fwd_items = k.fwd_items, .chained = 1});
      }
      for (const ChainedHybridKnobs& k : kBakedHybrid) {  // with _a1 where the twin has _i32
        variants.push_back({.algorithm = Algorithm::kChunked, .vec = gated::kChunkVec, .threads = k.threads,
                            .chunk = k.chunk, .strip = k.strip, .h_from_y = 1, .fwd_blocks = k.fwd_blocks,
                            .fwd_items = k.fwd_items, .atomic_sums = k.fwd_items != 0 ? 1 : 0, .baked = 1});
      }
    }
    return variants;
  }

  // samu `chunked` (gated_chunked.cuh).
  static Status CanImplementChunked(const Variant& v, const Problem& problem, const DeviceLimits& device) {
    if (!IsSamu(problem.op)) {
      return InvalidArgument("chunked (rows blocks meeting for m_t and dm_t) is samu's; rglru has no controller");
    }
    const Shape& s = problem.shape;
    if (s.batch < 1 || s.length < 1 || s.width < 1) {
      return InvalidArgument("shape " + FormatShape(s) + " has an empty dimension");
    }
    if (v.vec != gated::kChunkVec) {
      return InvalidArgument("vec " + std::to_string(v.vec) + ": chunked stages 8-channel packs (vec 8)");
    }
    if (v.threads < 32 || v.threads % 32 != 0 || v.threads > device.max_threads_per_block) {
      return InvalidArgument("threads " + std::to_string(v.threads) + " is not a multiple of 32 in [32, " +
                             std::to_string(device.max_threads_per_block) + "]");
    }
    if (v.chunk < 8 || v.chunk > 4096) return InvalidArgument("chunk " + std::to_string(v.chunk) + " not in [8, 4096]");
    if (v.strip != 0 && v.strip != 32 && v.strip != 64) {
      return InvalidArgument("_l" + std::to_string(v.strip) + ": the look-back forward's strip is 32 or 64 channels");
    }
    if (v.chained != 0 && (v.chained != 1 || v.strip == 0)) {
      return InvalidArgument("_d" + std::to_string(v.chained) +
                             ": _d1 chains the look-back forward of _l{strip} (chunked's own forward has no look-back)");
    }
    if (v.save_every != 0) {
      if (v.save_every != 2 && v.save_every != 4) {
        return InvalidArgument("_h" + std::to_string(v.save_every) + ": h is saved at every 2nd or 4th token");
      }
      if (problem.mode == Mode::kFwd) {
        return InvalidArgument("_h" + std::to_string(v.save_every) +
                               " saves h at every " + std::to_string(v.save_every) +
                               "th token only: a fwd-only caller's h may be read by any backward later");
      }
      if (s.length % 4 != 0) {
        return InvalidArgument("_h" + std::to_string(v.save_every) + ": L " + std::to_string(s.length) +
                               " is not a multiple of 4 (the backward's groups of 4 tokens meet the saved rows)");
      }
    }
    if (v.h_from_y != 0) {
      if (v.h_from_y != 1) return InvalidArgument("_y" + std::to_string(v.h_from_y) + ": _y1 or nothing");
      if (v.save_every != 0) {
        return InvalidArgument("_y1 (the backward takes h = y / gamma) needs every token's y, so no _h{n}");
      }
      if (problem.mode != Mode::kFwdBwd) {
        return InvalidArgument(
            "_y1 stores y and not h: only a fwd_bwd problem, whose backward reads this forward's y, may use it");
      }
      if (problem.dtype != DType::kBF16) {
        return InvalidArgument("_y1 is bf16's: fp16's range may not hold gamma h where it holds h, and the fp32 "
                               "rescan spills with it at t512");
      }
    }
    if (v.fwd_blocks != 0) {
      if (v.strip == 0 || v.fwd_blocks < 3 || v.fwd_blocks > 8) {
        return InvalidArgument("_b" + std::to_string(v.fwd_blocks) +
                               ": 4 to 8 blocks per SM of the look-back forward, with _l{strip}");
      }
      if (problem.dtype != DType::kBF16) {
        return InvalidArgument("_b" + std::to_string(v.fwd_blocks) +
                               " keeps b at 16 bits: bf16's (fp16's range may not hold b = s i beta x)");
      }
    }
    if (v.fwd_items != 0 && ((v.fwd_items != 2 * gated::kHybridItems && v.fwd_items != 4 * gated::kHybridItems) ||
                             v.fwd_blocks == 0)) {
      // The _b forward keeps no per-token arrays in registers (b in place of x, a recomputed), so its tokens per
      // thread are a tile length, not a register count; without _b, b and a would be held for each of them.
      return InvalidArgument("_i" + std::to_string(v.fwd_items) + ": the look-back forward's tokens per thread are " +
                             std::to_string(2 * gated::kHybridItems) + " or " + std::to_string(4 * gated::kHybridItems) +
                             " (_i{n}, with _b{n}), or " + std::to_string(gated::kHybridItems) + " without _i");
    }
    if (v.blocks_per_sm != 0) {
      // The persistent forward's deadlock bound: every block of its grid resident at once. Its registers are
      // _b's launch bound (fwd_blocks per SM), its shared memory two staged tiles and the combine.
      if (v.fwd_blocks == 0 || v.blocks_per_sm > v.fwd_blocks) {
        return InvalidArgument("_p" + std::to_string(v.blocks_per_sm) +
                               ": the persistent look-back forward runs at most _b{n}'s n blocks per SM, with _b");
      }
      if (PersistentFit(HybridForwardOf(v), problem.dtype, device) < v.blocks_per_sm) {
        return ResourceExhausted("_p" + std::to_string(v.blocks_per_sm) + ": " +
                                 std::to_string(v.blocks_per_sm) + " blocks of the persistent forward (" +
                                 std::to_string(SmemBytes(HybridForwardOf(v), problem.dtype, 2)) +
                                 " bytes of shared memory each) do not fit one SM");
      }
    }
    if (v.atomic_sums != 0) {
      if (v.atomic_sums != 1) return InvalidArgument("_a" + std::to_string(v.atomic_sums) + ": _a1 or nothing");
      if (problem.mode == Mode::kFwd) {
        return InvalidArgument("_a1 adds the backward's parameter sums by atomics: a fwd problem has none");
      }
    }
    if (v.baked != 0) {
      if (v.baked != 1 || v.strip == 0) {
        return InvalidArgument("_k" + std::to_string(v.baked) + ": _k1 bakes the shape into the scans of _l{strip}");
      }
      if (!Bakeable(s)) {
        return InvalidArgument("_k1 bakes B, L and W into int template arguments: each from 1 to 2^31 - 1");
      }
    }
    const int64_t rows = RowsThreads(v, s.width);
    if (rows > v.threads) {
      return ResourceExhausted("a token row of W " + std::to_string(s.width) + " / vec " + std::to_string(v.vec) +
                               " needs " + std::to_string(rows) + " threads, over the variant's " +
                               std::to_string(v.threads));
    }
    const int elem = static_cast<int>(ElementBytes(problem.dtype));
    for (int pass : {gated::kChunkFwdAgg, gated::kChunkBwdScan}) {
      const int64_t shared = ChunkedSmem(pass, static_cast<int>(rows), elem) + ChunkedStaticSmem(v, pass);
      if (shared > device.max_shared_per_block) {
        return ResourceExhausted("chunked shared memory " + std::to_string(shared) + " bytes exceeds " +
                                 std::to_string(device.max_shared_per_block));
      }
    }
    const int64_t chunks = CeilDiv(s.length, v.chunk);
    RETURN_IF_ERROR(CheckGrid(chunks, kMaxGridX, "chunked rows grid.x (chunks)"));
    RETURN_IF_ERROR(CheckGrid(s.batch, kMaxGridY, "chunked grid.y (batch)"));
    RETURN_IF_ERROR(CheckGrid(chunks, kMaxGridY, "chunked columns grid.y (chunks)"));
    return CheckGrid(s.batch, kMaxGridY, "chunked columns grid.z (batch)");
  }

  // The look-back families (lookback, fused and chunked's _l forward) stop
  // at the first published inclusive prefix, so their float composition
  // order follows the timing; fused also meets m_t / dm_t by atomics; _a1
  // adds the parameter gradients by atomics. The rest sum in fixed orders,
  // as does rglru's lookback _d1 (the chained look-back; its finalize sums
  // the parameter partials in a fixed order).
  bool Deterministic(const Variant& v, const Problem& problem) const override {
    if (v.algorithm == Algorithm::kSequential) return true;
    if (v.algorithm == Algorithm::kLookback && v.chained != 0) return !IsSamu(problem.op);
    if (!IsChunked(v) || !IsSamu(problem.op)) return false;
    // chunked's own forward (rows agg, carry in order, columns scan), or _l's look-back forward chained (_d1)
    const bool fwd_ok = v.strip == 0 || v.chained != 0;
    const bool bwd_ok = v.atomic_sums == 0;  // a fwd_bwd backward also reads the forward's y / h / ctrl
    switch (problem.mode) {
      case Mode::kFwd: return fwd_ok;
      case Mode::kBwd: return bwd_ok;
      case Mode::kFwdBwd: return fwd_ok && bwd_ok;
    }
    return false;
  }

  Status CanImplement(const Variant& variant, const Problem& problem, const DeviceLimits& device) const override {
    if (problem.op != Op::kRgLru && problem.op != Op::kSamu) {
      return InvalidArgument(std::string("the gated planner has no kernels for ") + OpName(problem.op));
    }
    if (IsChunked(variant)) {
      RETURN_IF_ERROR(CanImplementChunked(variant, problem, device));
      if (!IsHybrid(variant)) return Status::Ok();
      const Variant f = HybridForwardOf(variant);
      RETURN_IF_ERROR(CanImplementHeld(f, problem, device, variant.fwd_items != 0 ? variant.fwd_items : 16));
      // The backward's sections start after the look-back region sized for 16 tokens per thread
      // (HybridBase); a longer tile has fewer tiles, so its region fits inside.
      const int64_t reserved = gated::HybridBase(problem.shape.batch, problem.shape.length, problem.shape.width,
                                                 variant.strip);
      if (LayoutFor(f, problem).zero_bytes > reserved) {
        return Internal("the look-back forward's workspace exceeds its reserved region");
      }
      return Status::Ok();
    }
    return CanImplementHeld(variant, problem, device, 16);
  }

  // lookback, fused and sequential (and the look-back forward of `chunked` _l, whose _i32 allows max_items 32).
  static Status CanImplementHeld(const Variant& variant, const Problem& problem, const DeviceLimits& device,
                                 int max_items) {
    if (IsFused(variant)) {
      if (!IsSamu(problem.op)) {
        return InvalidArgument("fused (the controller met inside the scans) is samu's; rglru has no controller");
      }
      if (variant.dim_block < 2 || variant.state_split < 1 || variant.dim_block % kFusedVec != 0 ||
          variant.chunk % variant.state_split != 0) {
        return InvalidArgument("fused needs an even strip d and a tile c that is a multiple of the segments s");
      }
    }
    if (variant.order != 0 &&
        !(variant.algorithm == Algorithm::kLookback &&
          (variant.order == 2 || variant.order == 3 || variant.order == kClusterOrder))) {
      return InvalidArgument("order " + std::to_string(variant.order) +
                             ": only the lookback family has an order knob, and only _o2 / _o3 / _o5");
    }
    if (variant.chained != 0) {
      if (variant.chained != 1) return InvalidArgument("_d" + std::to_string(variant.chained) + ": _d1 or none");
      if (IsSamu(problem.op)) {
        return InvalidArgument("_d1 (the chained look-back) is rglru's: samu's look-back backward meets dm_t by "
                               "atomics, so it has no deterministic form");
      }
      if (variant.algorithm != Algorithm::kLookback || (variant.order != 2 && variant.order != 3)) {
        return InvalidArgument("_d1 (the chained look-back) needs the packed look-back: lookback _o2 or _o3");
      }
    }
    if (variant.baked != 0) {
      if (variant.baked != 1) return InvalidArgument("_k" + std::to_string(variant.baked) + ": _k1 or nothing");
      if (IsSamu(problem.op) || variant.algorithm != Algorithm::kLookback || variant.order < 2 ||
          variant.order == kClusterOrder) {
        return InvalidArgument("_k1 on a lookback point is rglru's, with the packed look-back (_o2 or _o3); samu "
                               "bakes its shape into `chunked` _l{strip}");
      }
      if (!Bakeable(problem.shape)) {
        return InvalidArgument("_k1 bakes B, L and W into int template arguments: each from 1 to 2^31 - 1");
      }
    }
    if (IsCluster(variant) && !IsSamu(problem.op)) {
      return InvalidArgument("_o5 (a tile's strips as one cluster, meeting for m_t and dm_t) is samu's; rglru has no "
                             "controller");
    }
    if (variant.order == 3 && problem.dtype == DType::kF32) {
      return InvalidArgument("_o3 differs from _o2 only in the 16-bit gate math; fp32 runs _o2");
    }
    const Variant v = HeldOf(variant);
    const Shape& s = problem.shape;
    if (s.batch < 1 || s.length < 1 || s.width < 1) {
      return InvalidArgument("shape " + FormatShape(s) + " has an empty dimension");
    }
    if (v.algorithm != Algorithm::kSequential && !IsHeld(v)) {
      return InvalidArgument(std::string("algorithm ") + AlgorithmName(v.algorithm) + " has no " +
                             OpName(problem.op) + " kernels (sequential, lookback, fused)");
    }
    if (v.vec != 2 && v.vec != 4 && v.vec != 8) {
      return InvalidArgument("vec " + std::to_string(v.vec) + " not in {2, 4, 8}");
    }
    if (v.threads < 32 || v.threads % 32 != 0) {
      return InvalidArgument("threads " + std::to_string(v.threads) + " is not a positive multiple of 32");
    }
    if (v.threads > device.max_threads_per_block) {
      return ResourceExhausted("threads " + std::to_string(v.threads) + " exceed the device's " +
                               std::to_string(device.max_threads_per_block) + " per block");
    }
    const int64_t tokens = s.batch * s.length;
    RETURN_IF_ERROR(CheckGrid(CeilDiv(tokens, gated::kFixupTokensPerBlock), kMaxGridX, "controller / fix-up"));
    if (v.algorithm == Algorithm::kSequential) {
      if (v.prefetch < 1 || v.prefetch > 16) {
        return InvalidArgument("prefetch " + std::to_string(v.prefetch) + " not in [1, 16]");
      }
      RETURN_IF_ERROR(CheckGrid(CeilDiv(CeilDiv(s.width, v.vec), v.threads), kMaxGridX, "sequential grid.x"));
      return CheckGrid(s.batch, kMaxGridY, "sequential grid.y (batch)");
    }
    if (IsHeld(v)) {
      if (v.segments < 1 || v.threads % v.segments != 0) {
        return InvalidArgument("segments " + std::to_string(v.segments) + " must divide threads " +
                               std::to_string(v.threads));
      }
      // items: (a, b) held per thread (registers); samu's backward reduces
      // its parameter sums in the staging, which needs items x element >= 4 bytes.
      if (v.items < 2 || v.items > max_items) {
        return InvalidArgument("items " + std::to_string(v.items) + " not in [2, " + std::to_string(max_items) + "]");
      }
    }
    const int strip = StripOf(v);
    const int tile = TileOfLookback(v);
    if (strip < 8 || strip > 1024 || strip % 8 != 0) {
      return InvalidArgument("strip " + std::to_string(strip) + " is not a multiple of 8 in [8, 1024]");
    }
    const int lanes = strip / v.vec;
    if (v.threads % lanes != 0) {
      return InvalidArgument("strip / vec = " + std::to_string(lanes) + " lanes must divide threads " +
                             std::to_string(v.threads));
    }
    if (lanes < 32 ? 32 % lanes != 0 : lanes % 32 != 0) {
      return InvalidArgument("strip / vec = " + std::to_string(lanes) + " lanes must divide 32 or be whole warps");
    }
    if (IsSamu(problem.op) && lanes > 32 && !IsCluster(v)) {
      return InvalidArgument("samu's per-token sums reduce over one warp: strip / vec = " + std::to_string(lanes) +
                             " lanes must be at most 32");
    }
    const int segments = v.threads / lanes;
    if (tile < 1 || tile > 4096 || tile % segments != 0) {
      return InvalidArgument("tile " + std::to_string(tile) + " must be in [1, 4096] and a multiple of the " +
                             std::to_string(segments) + " segments");
    }
    // The `lookback` / `fused` kernels hold the strip's decay constants (at most 2 x strip
    // floats, DecayConstBytes) and samu's the tile's (r_t, i_t) in static shared memory.
    const int64_t static_shared =
        IsHeld(v) ? (IsSamu(problem.op) ? int64_t{tile} * (IsCluster(v) ? 20 : 8) : 0) + 2 * int64_t{strip} * 4 : 0;
    const int64_t shared = static_shared +
                           std::max(HasFwd(problem.mode) ? FwdSmem(v, problem.op, problem.dtype) : 0,
                                    HasBwd(problem.mode) ? BwdSmem(v, problem.op, problem.dtype) : 0);
    if (shared > device.max_shared_per_block) {
      return ResourceExhausted("shared memory " + std::to_string(shared) + " bytes exceeds " +
                               std::to_string(device.max_shared_per_block));
    }
    const gated::Layout lay = LayoutFor(v, problem);
    // Both `fused` scans make the strips of a time tile wait for each other
    // (gated_held.cuh): all of them must be resident at once, which at least
    // one block per SM guarantees. (lookback: no such wait.)
    if (IsSamu(problem.op) && IsFused(variant) && lay.strips > device.sm_count) {
      return ResourceExhausted("samu's fused scans need the " + std::to_string(lay.strips) +
                               " strips of a time tile resident at once, more than the " +
                               std::to_string(device.sm_count) + " SMs");
    }
    if (IsCluster(variant)) {
      if (lay.strips > kMaxCluster) {
        return ResourceExhausted("_o5 clusters the " + std::to_string(lay.strips) + " strips of a time tile (W " +
                                 std::to_string(s.width) + " / strip " + std::to_string(strip) + "), over " +
                                 std::to_string(kMaxCluster) + " blocks per cluster");
      }
      // The meetings' shares and controller partials live in the combine and
      // the x / h staging (gated_held.cuh's static_asserts for kCluster).
      if (3 * segments * strip * 4 > 2 * tile * strip * ElementBytes(problem.dtype) || segments * strip < tile) {
        return InvalidArgument("_o5 needs tile >= 3 x segments (the staging holds the parameter sums) and segments x "
                               "strip >= tile");
      }
    }
    if (IsFused(variant) || IsPacked(variant)) {
      RETURN_IF_ERROR(CheckGrid(s.batch, kMaxGridY, "grid.y (batch)"));
      RETURN_IF_ERROR(CheckGrid(lay.tiles, kMaxGridY, "grid.z (time tiles)"));
    }
    if (lay.seqs * lay.tiles > kMaxTickets) {
      return ResourceExhausted(std::string(AlgorithmName(v.algorithm)) + " needs " + std::to_string(lay.seqs * lay.tiles) + " tiles, over 2^30");
    }
    return Status::Ok();
  }

  // The kernels of a variant, each with its role; NameExpressions lists the
  // names in this order and MakePlan launches them by role.
  // kFinalizeWide: `chunked`'s finalize at 32 channels per block, launched in place of kFinalize's 16 where
  // ceil(W / 16) + 1 blocks of 1024 threads would not be one wave (one per SM).
  // kBwdCarryLong: `chunked`'s backward carry in batches of 16 chunks, launched in place of kBwdCarry's 4 where a
  // slice's run is longer than 4 chunks (L = 32768 at the seed shapes' chunks).
  enum class Role { kControl, kFwdAgg, kFwdCarry, kFwdScan, kBwdAgg, kBwdCarry, kBwdCarryLong, kBwdScan, kFixup,
                    kFinalize, kFinalizeWide };
  struct Kernel {
    Role role;
    std::string name;
  };
  // shape: the problem's, for `_k1` (which bakes it into its scans' template arguments; none without it).
  static std::vector<Kernel> Kernels(const Variant& v, Op op, DType dtype, const Shape& shape) {
    const std::string pre = Prefix(op);
    const bool samu = IsSamu(op);
    std::vector<Kernel> k;
    if (IsHybrid(v)) {
      if (v.baked != 0 && !Bakeable(shape)) return {};
      // _k1: every template argument spelled out, then B, L, W.
      auto baked = [&](std::vector<int> args, const std::vector<int>& defaults) {
        if (v.baked == 0) return args;
        args.insert(args.end(), defaults.begin(), defaults.end());
        for (int64_t n : {shape.batch, shape.length, shape.width}) args.push_back(static_cast<int>(n));
        return args;
      };
      const Variant f = HybridForwardOf(v);
      // SAVE: 1 (the default) every h, n (_h{n}) every n-th, 0 (_y1) none but SamuGroupKeepsH's.
      const int save = v.h_from_y != 0 ? 0 : v.save_every;
      k.push_back({Role::kControl, Instance("samu_fwd_control_fast", dtype, {})});
      // samu_fwd_held's SAVE, BLOCKS (_b{n}: b at 16 bits in place of x, n blocks per SM), PERSIST (_p{n}) and
      // CHAINED (_d1), the defaults (1, 0, 0, 0) left off the end.
      std::vector<int> args = {f.vec, f.threads, StripOf(f), TileOfLookback(f), f.order};
      std::vector<int> tail = {v.save_every == 0 && v.h_from_y == 0 ? 1 : save, v.fwd_blocks,
                               v.fwd_blocks != 0 && v.blocks_per_sm != 0 ? 1 : 0, v.chained};
      const std::vector<int> defaults = {1, 0, 0, 0};
      size_t kept = tail.size();  // _k1 spells every one out
      while (v.baked == 0 && kept > 0 && tail[kept - 1] == defaults[kept - 1]) --kept;
      args.insert(args.end(), tail.begin(), tail.begin() + static_cast<std::ptrdiff_t>(kept));
      k.push_back({Role::kFwdScan, Instance("samu_fwd_held", dtype, baked(args, {}))});
      k.push_back({Role::kBwdAgg, Instance("samu_bwd_chunk_agg", dtype, baked({v.chunk, v.strip}, {}))});
      k.push_back({Role::kBwdCarry, Instance("samu_chunk_carry", dtype, {v.chunk, 1, v.strip})});
      k.push_back({Role::kBwdCarryLong, Instance("samu_chunk_carry", dtype, {v.chunk, 1, v.strip, 16})});
      const bool every_h = v.save_every == 0 && v.h_from_y == 0;
      if (v.atomic_sums != 0) {  // _a1: the rescan adds into the gradients; no finalize
        k.push_back({Role::kBwdScan, Instance("samu_bwd_chunk_scan", dtype,
                                              baked({v.threads, v.chunk, v.strip, every_h ? 1 : save, 1}, {}))});
      } else {
        k.push_back({Role::kBwdScan,
                     v.baked != 0 ? Instance("samu_bwd_chunk_scan", dtype,
                                             baked({v.threads, v.chunk, v.strip, every_h ? 1 : save}, {0}))
                     : every_h    ? Instance("samu_bwd_chunk_scan", dtype, {v.threads, v.chunk, v.strip})
                                  : Instance("samu_bwd_chunk_scan", dtype, {v.threads, v.chunk, v.strip, save})});
        k.push_back({Role::kFinalize, Instance("samu_bwd_chunk_finalize", dtype, {v.chunk, v.strip})});
        k.push_back({Role::kFinalizeWide, Instance("samu_bwd_chunk_finalize", dtype, {v.chunk, v.strip, 32})});
      }
    } else if (IsChunked(v)) {
      k.push_back({Role::kFwdAgg, Instance("samu_fwd_chunk_agg", dtype, {v.threads, v.chunk})});
      k.push_back({Role::kFwdCarry, Instance("samu_chunk_carry", dtype, {v.chunk, 0})});
      // SAVE as the hybrid's: 1 (the default), n (_h{n}) or 0 (_y1).
      const int save = v.h_from_y != 0 ? 0 : v.save_every;
      const bool every_h = v.save_every == 0 && v.h_from_y == 0;
      k.push_back({Role::kFwdScan, every_h ? Instance("samu_fwd_chunk_scan", dtype, {v.chunk})
                                           : Instance("samu_fwd_chunk_scan", dtype, {v.chunk, save})});
      k.push_back({Role::kBwdAgg, Instance("samu_bwd_chunk_agg", dtype, {v.chunk})});
      k.push_back({Role::kBwdCarry, Instance("samu_chunk_carry", dtype, {v.chunk, 1})});
      k.push_back({Role::kBwdCarryLong, Instance("samu_chunk_carry", dtype, {v.chunk, 1, 0, 16})});
      if (v.atomic_sums != 0) {
        k.push_back({Role::kBwdScan,
                     Instance("samu_bwd_chunk_scan", dtype, {v.threads, v.chunk, 0, every_h ? 1 : save, 1})});
      } else {
        k.push_back({Role::kBwdScan, every_h ? Instance("samu_bwd_chunk_scan", dtype, {v.threads, v.chunk})
                                             : Instance("samu_bwd_chunk_scan", dtype, {v.threads, v.chunk, 0, save})});
        k.push_back({Role::kFinalize, Instance("samu_bwd_chunk_finalize", dtype, {v.chunk})});
        k.push_back({Role::kFinalizeWide, Instance("samu_bwd_chunk_finalize", dtype, {v.chunk, 0, 32})});
      }
    } else if (v.algorithm == Algorithm::kSequential) {
      if (samu) k.push_back({Role::kControl, Instance("samu_fwd_control", dtype, {v.vec})});
      k.push_back({Role::kFwdScan, Instance(pre + "_fwd_sequential", dtype, {v.vec, v.threads, v.prefetch})});
      k.push_back({Role::kBwdScan, Instance(pre + "_bwd_sequential", dtype, {v.vec, v.threads, v.prefetch})});
      if (samu) k.push_back({Role::kFixup, Instance("samu_bwd_fixup", dtype, {v.vec, Unit(v), TileOf(v)})});
      k.push_back({Role::kFinalize, Instance(pre + "_bwd_finalize", dtype, {Unit(v), TileOf(v)})});
    } else if (IsFused(v)) {
      const int strip = StripOf(v), tile = TileOfLookback(v), threads = HeldOf(v).threads;
      k.push_back({Role::kFwdScan, Instance("samu_fwd_fused", dtype, {kFusedVec, threads, strip, tile})});
      k.push_back({Role::kBwdScan, Instance("samu_bwd_fused", dtype, {kFusedVec, threads, strip, tile})});
      k.push_back({Role::kFinalize, Instance("samu_bwd_finalize", dtype, {strip, tile})});
    } else {
      const int strip = StripOf(v), tile = TileOfLookback(v);
      if (samu && !IsCluster(v)) k.push_back({Role::kControl, Instance("samu_fwd_control_fast", dtype, {})});
      // _d1 adds the kernels' CHAINED argument (the others keep their names, and their cached cubins); rglru's
      // _k1 spells it out, then B, L and W (scan::WithShape).
      if (v.baked != 0 && !Bakeable(shape)) return {};
      std::vector<int> held = {v.vec, v.threads, strip, tile, v.order};
      if (v.chained != 0 || v.baked != 0) held.push_back(v.chained);
      if (v.baked != 0) {
        for (int64_t n : {shape.batch, shape.length, shape.width}) held.push_back(static_cast<int>(n));
      }
      k.push_back({Role::kFwdScan, Instance(pre + "_fwd_held", dtype, held)});
      k.push_back({Role::kBwdScan, Instance(pre + "_bwd_held", dtype, held)});
      if (samu) {
        if (!IsCluster(v)) k.push_back({Role::kFixup, Instance("samu_bwd_fixup_fast", dtype, {strip, tile, v.order})});
        k.push_back({Role::kFinalize, Instance("samu_bwd_finalize_fixup", dtype, {strip, tile, v.order})});
      } else {
        k.push_back({Role::kFinalize, Instance(pre + "_bwd_finalize", dtype, {strip, tile, v.order})});
      }
    }
    return k;
  }

  std::vector<std::string> NameExpressions(const Variant& v, Op op, DType dtype, const SsmOptions&,
                                           const Shape& shape) const override {
    std::vector<std::string> names;
    for (const Kernel& k : Kernels(v, op, dtype, shape)) names.push_back(k.name);
    return names;
  }

  StatusOr<LaunchPlan> MakePlan(const Variant& v, const Problem& problem, const DeviceLimits& device) const override {
    RETURN_IF_ERROR(CanImplement(v, problem, device));
    const Shape& s = problem.shape;
    const bool samu = IsSamu(problem.op);
    const bool sequential = v.algorithm == Algorithm::kSequential;
    const std::vector<Kernel> kernels = Kernels(v, problem.op, problem.dtype, problem.shape);
    auto name_of = [&](Role role) -> const std::string* {
      for (const Kernel& k : kernels) {
        if (k.role == role) return &k.name;
      }
      return nullptr;
    };
    LaunchPlan plan;
    auto add = [&](Role role, const char* phase, int64_t grid_x, int64_t grid_y, int threads, int64_t shared,
                   int64_t grid_z = 1, int64_t cluster_x = 1) {
      const std::string* name = name_of(role);
      if (name == nullptr) return;
      Launch launch;
      launch.name_expression = *name;
      launch.phase = phase;
      launch.grid = {static_cast<uint32_t>(grid_x), static_cast<uint32_t>(grid_y), static_cast<uint32_t>(grid_z)};
      launch.block = {static_cast<uint32_t>(threads), 1, 1};
      launch.shared_bytes = static_cast<uint32_t>(shared);
      launch.cluster_x = static_cast<uint32_t>(cluster_x);
      plan.launches.push_back(std::move(launch));
    };
    if (IsChunked(v)) {
      // Rows (chunks, B); columns (ceil(W / (128 vec)), chunks, B; the agg's ChunkAggColumns); carries
      // (ceil(W / 32), B).
      const gated::ChunkedLayout lay = gated::MakeChunkedLayout(s.batch, s.length, s.width, v.chunk, v.strip);
      const int rows = static_cast<int>(RowsThreads(v, s.width));
      const int64_t columns = CeilDiv(s.width, int64_t{gated::kChunkColumnThreads} * v.vec);
      const int64_t carry_x = CeilDiv(s.width, 32);
      const int carry_threads = gated::CarrySlices(lay.chunks) * 32;
      const int elem = static_cast<int>(ElementBytes(problem.dtype));
      const int cols = gated::kChunkColumnThreads;
      if (HasFwd(problem.mode) && IsHybrid(v)) {
        // lookback _o3's forward on its (strips, B, tiles) grid (block-index tiles, packed look-back).
        const Variant f = HybridForwardOf(v);
        const gated::Layout held = LayoutFor(f, problem);
        add(Role::kControl, "fwd", CeilDiv(s.batch * s.length, gated::kFixupTokensPerBlock), 1, gated::kFixupThreads, 0);
        if (v.blocks_per_sm != 0) {
          // _p{n}: min(tiles, n x SMs) blocks, two staged tiles each.
          const int64_t tiles = held.strips * s.batch * held.tiles;
          add(Role::kFwdScan, "fwd", std::min<int64_t>(tiles, int64_t{v.blocks_per_sm} * device.sm_count), 1,
              f.threads, SmemBytes(f, problem.dtype, 2));
        } else {
          // _b{n}: the staging and the combine only (b in place of x).
          add(Role::kFwdScan, "fwd", held.strips, s.batch, f.threads,
              v.fwd_blocks != 0 ? SmemBytes(f, problem.dtype, 1) : FwdSmem(f, problem.op, problem.dtype), held.tiles);
        }
      } else if (HasFwd(problem.mode)) {
        add(Role::kFwdAgg, "fwd", lay.chunks, s.batch, rows, ChunkedSmem(gated::kChunkFwdAgg, rows, elem));
        add(Role::kFwdCarry, "fwd", carry_x, s.batch, carry_threads, 0);
        add(Role::kFwdScan, "fwd", columns, lay.chunks, cols, ChunkedSmem(gated::kChunkFwdScan, cols, elem), s.batch);
      }
      if (HasBwd(problem.mode)) {
        const int64_t agg_cols = ChunkAggColumns(s.width);
        const int agg_threads = static_cast<int>(2 * agg_cols);
        add(Role::kBwdAgg, "bwd", CeilDiv(s.width, agg_cols * v.vec), lay.chunks, agg_threads,
            ChunkedSmem(gated::kChunkBwdAgg, agg_threads, elem), s.batch);
        const int64_t run = CeilDiv(lay.chunks, gated::CarrySlices(lay.chunks));  // chunks per slice
        add(run > 4 ? Role::kBwdCarryLong : Role::kBwdCarry, "bwd", carry_x, s.batch, carry_threads, 0);
        add(Role::kBwdScan, "bwd", lay.chunks, s.batch, rows, ChunkedSmem(gated::kChunkBwdScan, rows, elem));
        const int64_t narrow_blocks = CeilDiv(s.width, gated::kChunkFinalizeChannels) + 1;
        if (narrow_blocks <= device.sm_count) {
          add(Role::kFinalize, "bwd", narrow_blocks, 1, gated::kFinalizeThreads, 0);
        } else {
          add(Role::kFinalizeWide, "bwd", CeilDiv(s.width, 32) + 1, 1, gated::kFinalizeThreads, 0);
        }
      }
      for (Launch& launch : plan.launches) launch.dependent_launch = true;
      plan.workspace_bytes = static_cast<uint64_t>(lay.total_bytes);
      if (IsHybrid(v)) {
        // The look-back region before lay's sections (HybridBase): zeroed once (launch epochs).
        plan.workspace_zero_bytes = static_cast<uint64_t>(lay.sum_r_offset);
        plan.workspace_zero_once = true;
      }
      return plan;
    }
    const gated::Layout lay = LayoutFor(v, problem);
    const int64_t token_blocks = CeilDiv(s.batch * s.length, gated::kFixupTokensPerBlock);
    const int64_t finalize_blocks = CeilDiv(s.width, 32) + (samu ? 1 : 0);
    const int threads = HeldOf(v).threads;
    // fused and lookback _o2: a (strips, B, tiles) grid whose linear block order is the ticket order (BlockTile).
    const bool fused = IsFused(v) || IsPacked(v);
    const int64_t scan_x = sequential ? CeilDiv(CeilDiv(s.width, v.vec), v.threads)
                           : fused    ? lay.strips
                                      : lay.seqs * lay.tiles;
    const int64_t scan_y = sequential ? s.batch : fused ? s.batch : 1;
    const int64_t scan_z = fused ? lay.tiles : 1;
    // _o5: a cluster is the strips of one (b, tile), x fastest on the grid.
    const int64_t cluster_x = IsCluster(v) ? lay.strips : 1;
    if (HasFwd(problem.mode)) {
      add(Role::kControl, "fwd", token_blocks, 1, gated::kFixupThreads, 0);
      add(Role::kFwdScan, "fwd", scan_x, scan_y, threads, sequential ? 0 : FwdSmem(v, problem.op, problem.dtype),
          scan_z, cluster_x);
    }
    if (HasBwd(problem.mode)) {
      add(Role::kBwdScan, "bwd", scan_x, scan_y, threads, sequential ? 0 : BwdSmem(v, problem.op, problem.dtype),
          scan_z, cluster_x);
      add(Role::kFixup, "bwd", token_blocks, 1, gated::kFixupThreads, 0);
      add(Role::kFinalize, "bwd", finalize_blocks, 1, gated::kFinalizeThreads, 0);
    }
    plan.workspace_bytes = static_cast<uint64_t>(lay.total_bytes);
    plan.workspace_zero_bytes = static_cast<uint64_t>(lay.zero_bytes);
    if (IsPacked(v)) {
      // Launch epochs (kernels_src/scan_common.cuh): the header and the packed
      // words are zeroed once; every kernel of the variant starts with
      // griddepcontrol.wait, so each launch may overlap its predecessor's tail.
      for (Launch& launch : plan.launches) launch.dependent_launch = true;
      plan.workspace_zero_once = true;
    }
    return plan;
  }

  std::vector<v1::ParamField> ParamLayout(Op op) const override {
    std::vector<v1::ParamField> fields;
    auto field = [&](const char* name, size_t offset, size_t size, const char* type, const char* meaning) {
      fields.push_back(ParamFieldOf(name, offset, size, type, meaning));
    };
    if (op == Op::kRgLru) {
#define SCANTUNE_FIELD(member, type, meaning) \
  field(#member, offsetof(RgLruParams, member), sizeof(RgLruParams::member), type, meaning)
      SCANTUNE_FIELD(x, "ptr", "input x (B, L, W), dtype");
      SCANTUNE_FIELD(ga, "ptr", "recurrence-gate pre-activation (B, L, W), dtype; r = sigmoid(ga)");
      SCANTUNE_FIELD(gx, "ptr", "input-gate pre-activation (B, L, W), dtype; i = sigmoid(gx)");
      SCANTUNE_FIELD(lambda, "ptr", "Lambda (W), fp32; log a = -8 softplus(Lambda) r");
      SCANTUNE_FIELD(h, "ptr", "h (B, L, W), dtype: output of fwd, input of bwd");
      SCANTUNE_FIELD(h0, "ptr", "initial state (B, W), fp32; null: zero");
      SCANTUNE_FIELD(h_final, "ptr", "final state h_{L-1} (B, W), fp32, fwd output; null: not written");
      SCANTUNE_FIELD(dh, "ptr", "gradient of h (B, L, W), dtype, bwd input");
      SCANTUNE_FIELD(dx, "ptr", "gradient of x (B, L, W), dtype, bwd output");
      SCANTUNE_FIELD(dga, "ptr", "gradient of ga (B, L, W), dtype, bwd output");
      SCANTUNE_FIELD(dgx, "ptr", "gradient of gx (B, L, W), dtype, bwd output");
      SCANTUNE_FIELD(dlambda, "ptr", "gradient of Lambda (W), fp32, bwd output (summed over B and L)");
      SCANTUNE_FIELD(dh0, "ptr", "gradient of h0 (B, W), fp32, bwd output; null: not written");
      SCANTUNE_FIELD(workspace, "ptr",
                     "workspace_bytes of scratch; first workspace_zero_bytes zeroed before each phase");
      SCANTUNE_FIELD(batch, "i64", "B");
      SCANTUNE_FIELD(length, "i64", "L (timesteps)");
      SCANTUNE_FIELD(width, "i64", "W (channels)");
#undef SCANTUNE_FIELD
    } else if (op == Op::kSamu) {
#define SCANTUNE_FIELD(member, type, meaning) \
  field(#member, offsetof(SamuParams, member), sizeof(SamuParams::member), type, meaning)
      SCANTUNE_FIELD(x, "ptr", "input x (B, L, W), dtype");
      SCANTUNE_FIELD(lambda, "ptr", "lambda (W), fp32; a = exp(-8 softplus(lambda) r_t)");
      SCANTUNE_FIELD(beta, "ptr", "beta (W), fp32: input scale");
      SCANTUNE_FIELD(gamma, "ptr", "gamma (W), fp32: output scale, y = gamma h");
      SCANTUNE_FIELD(controller, "ptr", "controller [4] fp32: w_r, b_r, w_i, b_i");
      SCANTUNE_FIELD(y, "ptr", "output y (B, L, W), dtype, fwd output; chunked _y1: also read by bwd");
      SCANTUNE_FIELD(h, "ptr",
                     "state h (B, L, W), dtype: written by fwd, read by bwd (chunked _y1: only in 8-channel groups "
                     "whose gamma y cannot invert; bwd takes h = y / gamma elsewhere)");
      SCANTUNE_FIELD(ctrl, "ptr", "control values (B, L, 2) fp32: (r_t, i_t), written by fwd, read by bwd");
      SCANTUNE_FIELD(h0, "ptr", "initial state (B, W), fp32; null: zero");
      SCANTUNE_FIELD(h_final, "ptr", "final state h_{L-1} (B, W), fp32, fwd output; null: not written");
      SCANTUNE_FIELD(dy, "ptr", "gradient of y (B, L, W), dtype, bwd input");
      SCANTUNE_FIELD(dx, "ptr", "gradient of x (B, L, W), dtype, bwd output (includes the path through m_t)");
      SCANTUNE_FIELD(dlambda, "ptr", "gradient of lambda (W), fp32, bwd output");
      SCANTUNE_FIELD(dbeta, "ptr", "gradient of beta (W), fp32, bwd output");
      SCANTUNE_FIELD(dgamma, "ptr", "gradient of gamma (W), fp32, bwd output");
      SCANTUNE_FIELD(dcontroller, "ptr", "gradient of the controller [4] fp32, bwd output");
      SCANTUNE_FIELD(dh0, "ptr", "gradient of h0 (B, W), fp32, bwd output; null: not written");
      SCANTUNE_FIELD(workspace, "ptr",
                     "workspace_bytes of scratch; first workspace_zero_bytes zeroed before each phase");
      SCANTUNE_FIELD(batch, "i64", "B");
      SCANTUNE_FIELD(length, "i64", "L (timesteps)");
      SCANTUNE_FIELD(width, "i64", "W (channels)");
#undef SCANTUNE_FIELD
    }
    return fields;
  }

  uint32_t ParamSize(Op op) const override {
    if (op == Op::kRgLru) return sizeof(RgLruParams);
    if (op == Op::kSamu) return sizeof(SamuParams);
    return 0;
  }
};

}  // namespace

const OpPlanner& GatedPlanner() {
  static const GatedPlannerImpl planner;
  return planner;
}

}  // namespace scantune
