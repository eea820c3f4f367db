// Enumeration, pruning and launch plans for the linear_scan kernels of
// kernels_src/linear_scan.cuh. The grid and workspace formulas here mirror the
// index math in the kernels: a change to one is a change to both.
#include "compiler/plan.h"

#include <algorithm>
#include <climits>
#include <cstddef>
#include <limits>
#include <utility>

#include "compiler/op_planner.h"
#include "kernels_src/linear_scan_params.h"

namespace scantune {
namespace {

// Knob ranges. Chosen so that the design space has real choice for the tuner
// (narrow vs 16-byte accesses, occupancy, time tiles of 64..512 steps) while
// NVRTC can compile all of it for three dtypes in a few minutes on 2 cores:
// compile time grows with items x vec (the unrolled register block), which
// is why the largest tiles come only as 16 x 16 / 32 x 16 (see bench/NOTES.md).
constexpr int kVecs[] = {2, 4, 8};
// Sequential parallelism is B*W/vec threads: small blocks spread them over more SMs.
constexpr int kSequentialThreads[] = {64, 128};
constexpr int kPrefetches[] = {2, 4, 8};
constexpr int kChunkedThreads[] = {128, 256};
constexpr int kChunks[] = {32, 64, 128, 256};
// Register look-back: lookbacksmem beat every one of them at every target
// shape on the H200 (bench/NOTES.md), so only the six best of the former
// 33 (v {2,4,8} x t {128,256,512} x (s,i)) stay, for the tuner to compare.
// {vec, threads, segments, items}.
struct LookbackKnobs {
  int vec, threads, segments, items;
};
constexpr LookbackKnobs kLookbackKept[] = {{4, 256, 16, 16}, {4, 256, 8, 16}, {4, 128, 8, 16},
                                           {2, 256, 16, 16}, {4, 256, 16, 8}, {4, 256, 8, 8}};

// CUDA's limit on grid.x; every plan here uses grid.x only.
constexpr int64_t kMaxGridX = INT_MAX;
// Static shared memory cannot exceed 48 KiB, whatever the device allows.
constexpr int64_t kMaxStaticShared = 48 * 1024;
// A look-back thread keeps ITEMS x VEC elements of each streamed input in
// registers (2 inputs forward, 3 backward). Up to 512 bytes ptxas fits them
// in <= 223 registers without spilling; at 768 every measured case spilled
// (--ptxas-options=-v, sm_90, NVRTC 13.0; table in bench/NOTES.md), which
// defeats the point of holding them.
constexpr int64_t kMaxLookbackHeldBytes = 512;

// lookbacksmem: channels x timesteps per block, staged in shared memory.
// bf16 fwd stages 4 bytes per element (a, x), bwd 6 (a, dh, h): 64 x 256 is
// 64 KB fwd (3 blocks per SM) and 96 KB bwd (2 per SM). See bench/NOTES.md.
// vec 8 lost to vec 4 at every shape and tile on the H200 (bench/NOTES.md).
constexpr int kSmemVecs[] = {4};
constexpr int kSmemThreads[] = {128, 256};
constexpr std::pair<int, int> kSmemStripTiles[] = {{64, 128}, {64, 256}, {128, 64}, {128, 128}, {32, 512}};
// More segments than this make the per-thread prefix over segments (O(segments)
// shared loads per channel) cost more than the scan; fewer steps per thread
// than this leave the segments too short to amortise it.
constexpr int kMaxSmemSegments = 16;
constexpr int kMinSmemSteps = 8;
// Orders >= 3 (kernels_src/linear_scan_smem.cuh): 3 (the forward stages each
// warp's rows itself in kWarpStagingGroups cp.async groups and scans each as it
// lands, WarpStaging), 4 (order 2 with only order 3's register bound) and 5 / 6
// (order 3 with the first wave's starts spread over ~2 / ~4 us, FirstWaveRamp)
// and 7 (order 3 with the first wave paced by its landed tiles,
// FirstWaveThrottle). Session 5's GPU run (bench/NOTES.md) timed o3 at 4 points,
// o4, o5 and o6 at c64_i256: kept are o3 at t128/t256_c64_i256 (t256 won every
// fwd_bwd) and o5 at t128_c64_i256 (won the forward at three shapes); o4 and o6
// stay valid by name. o7 (after that run) at both c64_i256 points.
constexpr int kWarpStagingGroups = 4;
struct SmemPoint {
  int threads, strip, tile, order;
};
constexpr SmemPoint kLaterOrderPoints[] = {
    {128, 64, 256, 3}, {256, 64, 256, 3}, {128, 64, 256, 5}, {128, 64, 256, 7}, {256, 64, 256, 7}};
// _d1: the chained look-back (each tile takes only its predecessor's
// inclusive state: Deterministic), for the deterministic selection only: the
// fwd_bwd winners' twins, and tile 512 (half the round trips per chain; its
// _o2 does not spill, where t128's 16-bit _o2 spills 8-24 bytes).
constexpr SmemPoint kChainedPoints[] = {{128, 64, 256, 3}, {256, 64, 256, 3}, {256, 64, 512, 2}};
// _k1: the problem's B, L and W as the scans' last template arguments (scan::WithShape; a module per shape), as
// samu's `chunked` _l..._k1 (bench/NOTES.md session 32): twins of the fwd_bwd winner (t256_o3) and of the two
// forward winners (t128 _o3, _o5).
constexpr SmemPoint kBakedPoints[] = {{128, 64, 256, 3}, {256, 64, 256, 3}, {128, 64, 256, 5}};

// lookbackpipe: {threads, strip, tile, blocks per SM (at most)}, all vec 4.
// bf16 per block: two buffers of 2 (fwd) / 3 (bwd) x strip x tile x 2 B.
// c64_i128: 64 + 5 KB fwd (3/SM), 96 + 5 KB bwd (2/SM); c64_i64 and
// c128_i64 half/equal of that; c64_i256: 128 / 192 KB (1/SM); c32_i256 as
// c64_i128. MakePlan
// lowers blocks per SM to what the shared memory fits, per phase.
struct PipeKnobs {
  int threads, strip, tile, blocks_per_sm;
};
constexpr PipeKnobs kPipeVariants[] = {{256, 64, 128, 2}, {256, 64, 128, 3}, {128, 64, 128, 2},
                                       {128, 64, 128, 3}, {128, 64, 64, 3},  {128, 64, 64, 6},
                                       {256, 128, 64, 2}, {256, 128, 64, 3}, {256, 64, 256, 1},
                                       {128, 32, 256, 3}};
constexpr int kPipeVec = 4;
constexpr int kMaxPipeBlocksPerSm = 32;
// Shared memory the driver reserves per resident block (sm_80+); an SM holds
// max_shared_per_block + this in total (228 KB on sm_90).
constexpr int64_t kReservedSharedPerBlock = 1024;

constexpr uint64_t kLookbackHeaderBytes = 256;  // ticket counter, padded

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
uint64_t RoundUp(uint64_t a, uint64_t b) { return (a + b - 1) / b * b; }

const char* TypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "float";
    case DType::kBF16: return "__nv_bfloat16";
    case DType::kF16: return "__half";
  }
  return "float";
}

std::string Instance(const char* kernel, DType dtype, const std::vector<int>& knobs) {
  std::string name = std::string(kernel) + "<" + TypeName(dtype);
  for (int knob : knobs) name += ", " + std::to_string(knob);
  return name + ">";
}

bool HasFwd(Mode mode) { return mode == Mode::kFwd || mode == Mode::kFwdBwd; }
bool HasBwd(Mode mode) { return mode == Mode::kBwd || mode == Mode::kFwdBwd; }

// Lookback geometry for a problem, shared by CanImplement and MakePlan.
struct LookbackGeometry {
  int64_t lanes, strip, tile, strips, tiles, blocks;
  uint64_t zero_bytes, workspace_bytes;
  int64_t static_shared;
};

LookbackGeometry Geometry(const Variant& v, const Shape& s) {
  LookbackGeometry g;
  g.lanes = v.threads / v.segments;
  g.strip = g.lanes * v.vec;
  g.tile = int64_t{v.segments} * v.items;
  g.strips = CeilDiv(s.width, g.strip);
  g.tiles = CeilDiv(s.length, g.tile);
  g.blocks = s.batch * g.strips * g.tiles;
  const uint64_t n = static_cast<uint64_t>(g.blocks);
  g.zero_bytes = RoundUp(kLookbackHeaderBytes + 4 * n, 256);
  g.workspace_bytes = g.zero_bytes + n * static_cast<uint64_t>(g.strip) * (sizeof(float) * 2 + sizeof(float));
  // s_ticket, s_A and s_H [segments][strip], s_carry [strip]
  g.static_shared = 16 + 2 * int64_t{v.segments} * g.strip * 4 + g.strip * 4;
  return g;
}

// lookbacksmem geometry: blocks and workspace as the register look-back, with
// kStrip = strip and kTile = tile; dynamic shared memory per phase.
struct SmemGeometry {
  int64_t lanes, segments, strips, tiles, blocks;
  uint64_t zero_bytes, workspace_bytes;
  int64_t fwd_shared, bwd_shared;
};

SmemGeometry GeometrySmem(const Variant& v, const Shape& s, DType dtype) {
  SmemGeometry g;
  g.lanes = v.strip / v.vec;
  g.segments = v.threads / g.lanes;
  g.strips = CeilDiv(s.width, v.strip);
  g.tiles = CeilDiv(s.length, v.tile);
  g.blocks = s.batch * g.strips * g.tiles;
  const uint64_t n = static_cast<uint64_t>(g.blocks);
  g.zero_bytes = RoundUp(kLookbackHeaderBytes + 4 * n, 256);
  g.workspace_bytes = g.zero_bytes + n * static_cast<uint64_t>(v.strip) * (sizeof(float) * 2 + sizeof(float));
  if ((v.algorithm == Algorithm::kLookbackSmem && v.order >= 2) || v.algorithm == Algorithm::kLookbackPipe) {
    // Packed look-back: the header, then two u64 words per tile and channel, all zero once.
    g.zero_bytes = RoundUp(kLookbackHeaderBytes + n * static_cast<uint64_t>(v.strip) * 2 * sizeof(uint64_t), 256);
    g.workspace_bytes = g.zero_bytes;
  }
  // Mirrors SmemLayout in kernels_src/linear_scan_smem.cuh: [kIn][tile][strip]
  // elements, s_A and s_H [segments][strip] fp32, s_carry [strip] fp32, ticket.
  const int64_t tile_elems = int64_t{v.tile} * v.strip;
  const int64_t extra = (2 * g.segments * v.strip + v.strip) * 4 + 16;
  // lookbackpipe stages two tiles (double buffer); its ticket pair fits the same 16 bytes.
  const int64_t buffers = v.algorithm == Algorithm::kLookbackPipe ? 2 : 1;
  g.fwd_shared = buffers * 2 * tile_elems * ElementBytes(dtype) + extra;
  g.bwd_shared = buffers * 3 * tile_elems * ElementBytes(dtype) + extra;
  return g;
}

// lookbackpipe's persistent grid for one phase: blocks_per_sm per SM, fewer
// if the SM's shared memory holds fewer, never more blocks than tiles.
int64_t PipeGrid(const Variant& v, const SmemGeometry& g, int64_t shared, const DeviceLimits& device) {
  const int64_t fit = (int64_t{device.max_shared_per_block} + kReservedSharedPerBlock) / (shared + kReservedSharedPerBlock);
  const int64_t per_sm = std::max<int64_t>(1, std::min<int64_t>(v.blocks_per_sm, fit));
  return std::min<int64_t>(g.blocks, per_sm * std::max(1, device.sm_count));
}

Status CheckCommonKnobs(const Variant& v, const DeviceLimits& device) {
  if (v.vec != 1 && v.vec != 2 && v.vec != 4 && v.vec != 8) {
    return InvalidArgument("vec " + std::to_string(v.vec) + " not in {1, 2, 4, 8}");
  }
  if (v.threads < 32 || v.threads % 32 != 0) {
    return InvalidArgument("threads " + std::to_string(v.threads) + " is not a positive multiple of 32");
  }
  if (v.threads > device.max_threads_per_block) {
    return ResourceExhausted("threads " + std::to_string(v.threads) + " exceed the device's " +
                             std::to_string(device.max_threads_per_block) + " per block");
  }
  return Status::Ok();
}

// Mirrors WarpStaging's static_asserts (kernels_src/linear_scan_smem.cuh):
// a warp holds whole segments, copies whole 16-byte-chunked rows per pass,
// and each of the groups is whole passes of the warp.
Status CheckWarpStaging(const Variant& v, int lanes, int segments, DType dtype) {
  const int64_t per_row = int64_t{v.strip} * ElementBytes(dtype) / 16;
  const int steps = v.tile / segments;
  if (lanes > 32 || per_row > 32 || 32 % per_row != 0 || steps % kWarpStagingGroups != 0 ||
      (steps / kWarpStagingGroups) % (32 / per_row) != 0) {
    return InvalidArgument("order 3 stages whole rows per warp in " + std::to_string(kWarpStagingGroups) +
                           " groups: needs strip / vec <= 32 lanes, 16-byte chunks per strip row dividing 32, and " +
                           std::to_string(steps) + " steps per thread a multiple of " +
                           std::to_string(kWarpStagingGroups) + " x (32 / chunks per row)");
  }
  return Status::Ok();
}

Status CheckGrid(int64_t blocks, const char* what) {
  if (blocks > kMaxGridX) {
    return ResourceExhausted(std::string(what) + " needs " + std::to_string(blocks) +
                             " blocks, over the grid.x limit of 2^31-1");
  }
  return Status::Ok();
}

}  // namespace

DeviceLimits DeviceLimits::FromProto(const v1::DeviceInfo& device) {
  DeviceLimits limits;
  if (device.cc_major() > 0) {
    limits.cc_major = device.cc_major();
    limits.cc_minor = device.cc_minor();
  }
  if (device.sm_count() > 0) limits.sm_count = device.sm_count();
  if (device.max_shared_per_block_bytes() > 0) limits.max_shared_per_block = device.max_shared_per_block_bytes();
  if (device.l2_bytes() > 0) limits.l2_bytes = device.l2_bytes();
  // Every CUDA device since sm_20 allows 1024 threads per block; the proto does not carry it.
  limits.max_threads_per_block = 1024;
  return limits;
}

namespace {

// Null for linear_scan, whose plans are this file's.
const OpPlanner* PlannerFor(Op op) {
  switch (op) {
    case Op::kLinearScan: return nullptr;
    case Op::kRgLru:
    case Op::kSamu: return &GatedPlanner();
    case Op::kSelectiveScan: return &SsmPlanner();
  }
  return nullptr;
}

}  // namespace

const char* MainHeader(Op op) {
  if (const OpPlanner* planner = PlannerFor(op)) return planner->MainHeader(op);
  return "linear_scan.cuh";
}

std::vector<Variant> EnumerateVariants(Op op, bool include_test_variants) {
  if (const OpPlanner* planner = PlannerFor(op)) return planner->EnumerateVariants(op);
  std::vector<Variant> variants;
  for (int vec : kVecs) {
    for (int threads : kSequentialThreads) {
      for (int prefetch : kPrefetches) {
        variants.push_back({.algorithm = Algorithm::kSequential, .vec = vec, .threads = threads, .prefetch = prefetch});
      }
    }
  }
  for (int vec : kVecs) {
    for (int threads : kChunkedThreads) {
      for (int chunk : kChunks) {
        variants.push_back({.algorithm = Algorithm::kChunked, .vec = vec, .threads = threads, .chunk = chunk});
      }
    }
  }
  for (int vec : kSmemVecs) {
    for (int threads : kSmemThreads) {
      for (auto [strip, tile] : kSmemStripTiles) {
        const int lanes = strip / vec;
        if (threads % lanes != 0) continue;
        const int segments = threads / lanes;
        if (segments > kMaxSmemSegments || tile % segments != 0 || tile / segments < kMinSmemSteps) continue;
        // order 1: tiles in block-index order, no ticket atomic at the block's start;
        // order 2: also the packed look-back (no fences, the flag travels with each value)
        for (int order : {0, 1, 2}) {
          variants.push_back({.algorithm = Algorithm::kLookbackSmem, .vec = vec, .threads = threads, .strip = strip,
                              .tile = tile, .order = order});
        }
      }
    }
  }
  for (const SmemPoint& k : kLaterOrderPoints) {
    variants.push_back({.algorithm = Algorithm::kLookbackSmem, .vec = 4, .threads = k.threads, .strip = k.strip,
                        .tile = k.tile, .order = k.order});
  }
  for (const SmemPoint& k : kChainedPoints) {
    variants.push_back({.algorithm = Algorithm::kLookbackSmem, .vec = 4, .threads = k.threads, .strip = k.strip,
                        .tile = k.tile, .order = k.order, .chained = 1});
  }
  for (const SmemPoint& k : kBakedPoints) {
    variants.push_back({.algorithm = Algorithm::kLookbackSmem, .vec = 4, .threads = k.threads, .strip = k.strip,
                        .tile = k.tile, .order = k.order, .baked = 1});
  }
  for (const PipeKnobs& k : kPipeVariants) {
    variants.push_back({.algorithm = Algorithm::kLookbackPipe, .vec = kPipeVec, .threads = k.threads, .strip = k.strip,
                        .tile = k.tile, .blocks_per_sm = k.blocks_per_sm});
  }
  for (const LookbackKnobs& k : kLookbackKept) {
    variants.push_back({.algorithm = Algorithm::kLookback, .vec = k.vec, .threads = k.threads, .segments = k.segments,
                        .items = k.items});
  }
  if (include_test_variants) {
    variants.push_back({.algorithm = Algorithm::kTestFault});
    variants.push_back({.algorithm = Algorithm::kTestHang});
  }
  return variants;
}

bool Deterministic(const Variant& v, const Problem& problem) {
  if (const OpPlanner* planner = PlannerFor(problem.op)) return planner->Deterministic(v, problem);
  // linear_scan: the look-back families stop at the first published inclusive prefix, but for _d1's chained one.
  return v.algorithm == Algorithm::kSequential || v.algorithm == Algorithm::kChunked ||
         (v.algorithm == Algorithm::kLookbackSmem && v.chained != 0);
}

Status CanImplement(const Variant& v, const Problem& problem, const DeviceLimits& device) {
  if (const OpPlanner* planner = PlannerFor(problem.op)) return planner->CanImplement(v, problem, device);
  const Shape& s = problem.shape;
  if (s.batch < 1 || s.length < 1 || s.width < 1) {
    return InvalidArgument("shape " + FormatShape(s) + " has an empty dimension");
  }
  switch (v.algorithm) {
    case Algorithm::kTestFault:
    case Algorithm::kTestHang:
      // Never enumerated unless asked for; by name they run anywhere, since
      // their point is to fail on the device.
      return Status::Ok();
    case Algorithm::kSequential: {
      RETURN_IF_ERROR(CheckCommonKnobs(v, device));
      if (v.prefetch < 1 || v.prefetch > 16) {
        return InvalidArgument("prefetch " + std::to_string(v.prefetch) + " not in [1, 16]");
      }
      return CheckGrid(CeilDiv(s.batch * CeilDiv(s.width, v.vec), v.threads), "sequential");
    }
    case Algorithm::kChunked: {
      RETURN_IF_ERROR(CheckCommonKnobs(v, device));
      if (v.strip != 0) return InvalidArgument("_l" + std::to_string(v.strip) + ": a look-back forward is samu's");
      if (v.chunk < 1 || v.chunk > (1 << 16)) {
        return InvalidArgument("chunk " + std::to_string(v.chunk) + " not in [1, 65536]");
      }
      const int64_t chunks = CeilDiv(s.length, v.chunk);
      RETURN_IF_ERROR(CheckGrid(CeilDiv(s.batch * chunks * CeilDiv(s.width, v.vec), v.threads), "chunked"));
      return CheckGrid(CeilDiv(s.batch * s.width, v.threads), "chunked carry");
    }
    case Algorithm::kLookback: {
      RETURN_IF_ERROR(CheckCommonKnobs(v, device));
      // The `_o` knob orders the gated operators' lookback kernels; linear_scan's has one order.
      if (v.order != 0) {
        return InvalidArgument("order " + std::to_string(v.order) + " not 0 (linear_scan lookback)");
      }
      if (v.chained != 0) {
        return InvalidArgument("_d" + std::to_string(v.chained) +
                               ": linear_scan's chained look-back is lookbacksmem's (_o2 or later)");
      }
      if (v.segments < 1 || v.threads % v.segments != 0) {
        return InvalidArgument("segments " + std::to_string(v.segments) + " must divide threads " +
                               std::to_string(v.threads));
      }
      if (v.items < 1 || v.items > 64) {
        return InvalidArgument("items " + std::to_string(v.items) + " not in [1, 64]");
      }
      const int64_t streams = HasBwd(problem.mode) ? 3 : 2;
      const int64_t held = streams * v.items * v.vec * ElementBytes(problem.dtype);
      if (held > kMaxLookbackHeldBytes) {
        return ResourceExhausted("items x vec x inputs hold " + std::to_string(held) +
                                 " bytes per thread in registers (limit " + std::to_string(kMaxLookbackHeldBytes) +
                                 "): would spill to local memory");
      }
      const LookbackGeometry g = Geometry(v, s);
      const int64_t shared_limit = std::min<int64_t>(kMaxStaticShared, device.max_shared_per_block);
      if (g.static_shared > shared_limit) {
        return ResourceExhausted("shared memory " + std::to_string(g.static_shared) + " bytes exceeds " +
                                 std::to_string(shared_limit));
      }
      if (g.blocks > INT_MAX / 2) {
        // The ticket counter is 32-bit; stay far from its wrap.
        return ResourceExhausted("lookback needs " + std::to_string(g.blocks) + " tiles, over 2^30");
      }
      return CheckGrid(g.blocks, "lookback");
    }
    case Algorithm::kLookbackSmem:
    case Algorithm::kLookbackPipe: {
      const bool pipe = v.algorithm == Algorithm::kLookbackPipe;
      const char* family = pipe ? "lookbackpipe" : "lookbacksmem";
      RETURN_IF_ERROR(CheckCommonKnobs(v, device));
      if (v.vec < 2) {
        return InvalidArgument("vec " + std::to_string(v.vec) + " not in {2, 4, 8} (" + family + ")");
      }
      if (!pipe && (v.order < 0 || v.order > 7)) {
        return InvalidArgument("order " + std::to_string(v.order) + " not in [0, 7] (" + family + ")");
      }
      if (v.chained != 0 && (pipe || v.chained != 1 || v.order < 2)) {
        return InvalidArgument("_d" + std::to_string(v.chained) +
                               ": _d1 (the chained look-back) needs lookbacksmem's packed look-back (_o2 or later)");
      }
      if (v.baked != 0) {
        if (pipe || v.baked != 1) {
          return InvalidArgument("_k" + std::to_string(v.baked) + ": _k1 (the shape baked in) is lookbacksmem's");
        }
        if (!Bakeable(s)) {
          return InvalidArgument("_k1 bakes B, L and W into int template arguments: each from 1 to 2^31 - 1");
        }
      }
      if (pipe && (v.blocks_per_sm < 1 || v.blocks_per_sm > kMaxPipeBlocksPerSm)) {
        return InvalidArgument("blocks per SM " + std::to_string(v.blocks_per_sm) + " not in [1, " +
                               std::to_string(kMaxPipeBlocksPerSm) + "]");
      }
      if (v.strip < 8 || v.strip > 1024 || v.strip % 8 != 0) {
        return InvalidArgument("strip " + std::to_string(v.strip) + " is not a multiple of 8 in [8, 1024]");
      }
      const int lanes = v.strip / v.vec;
      if (v.threads % lanes != 0) {
        return InvalidArgument("strip / vec = " + std::to_string(lanes) + " lanes must divide threads " +
                               std::to_string(v.threads));
      }
      // The last segment's lanes synchronise among themselves (kernels_src/
      // linear_scan_smem.cuh): part of one warp, or whole warps.
      if (lanes < 32 ? 32 % lanes != 0 : lanes % 32 != 0) {
        return InvalidArgument("strip / vec = " + std::to_string(lanes) +
                               " lanes must divide 32 or be a multiple of 32 (" + family + ")");
      }
      const int segments = v.threads / lanes;
      if (v.tile < 1 || v.tile > 4096 || v.tile % segments != 0) {
        return InvalidArgument("tile " + std::to_string(v.tile) + " must be in [1, 4096] and a multiple of the " +
                               std::to_string(segments) + " segments");
      }
      if (!pipe && (v.order == 3 || v.order >= 5)) RETURN_IF_ERROR(CheckWarpStaging(v, lanes, segments, problem.dtype));
      const SmemGeometry g = GeometrySmem(v, s, problem.dtype);
      const int64_t shared = std::max(HasFwd(problem.mode) ? g.fwd_shared : 0, HasBwd(problem.mode) ? g.bwd_shared : 0);
      if (shared > device.max_shared_per_block) {
        return ResourceExhausted("shared memory " + std::to_string(shared) + " bytes exceeds " +
                                 std::to_string(device.max_shared_per_block));
      }
      if (g.blocks > INT_MAX / 2) {
        return ResourceExhausted(std::string(family) + " needs " + std::to_string(g.blocks) + " tiles, over 2^30");
      }
      return CheckGrid(g.blocks, family);
    }
    case Algorithm::kFused:
    case Algorithm::kFusedSeg:
    case Algorithm::kTimeScan:
      break;  // selective_scan's families
  }
  return InvalidArgument(std::string("algorithm ") + AlgorithmName(v.algorithm) + " has no linear_scan kernels");
}

std::vector<std::string> NameExpressions(const Variant& v, Op op, DType dtype, const SsmOptions& ssm,
                                         const Shape& shape) {
  if (const OpPlanner* planner = PlannerFor(op)) return planner->NameExpressions(v, op, dtype, ssm, shape);
  switch (v.algorithm) {
    case Algorithm::kSequential:
      return {Instance("linear_scan_fwd_sequential", dtype, {v.vec, v.threads, v.prefetch}),
              Instance("linear_scan_bwd_sequential", dtype, {v.vec, v.threads, v.prefetch})};
    case Algorithm::kChunked: {
      std::vector<std::string> names;
      for (const char* kernel : {"linear_scan_fwd_chunk_local", "linear_scan_fwd_chunk_carry",
                                 "linear_scan_fwd_chunk_apply", "linear_scan_bwd_chunk_local",
                                 "linear_scan_bwd_chunk_carry", "linear_scan_bwd_chunk_apply"}) {
        names.push_back(Instance(kernel, dtype, {v.vec, v.threads, v.chunk}));
      }
      return names;
    }
    case Algorithm::kLookback:
      return {Instance("linear_scan_fwd_lookback", dtype, {v.vec, v.threads, v.segments, v.items}),
              Instance("linear_scan_bwd_lookback", dtype, {v.vec, v.threads, v.segments, v.items})};
    case Algorithm::kLookbackSmem: {
      // _d1 adds the kernels' CHAINED argument (the others keep their names, and their cached cubins); _k1
      // spells it out, then B, L and W (scan::WithShape).
      if (v.baked != 0 && !Bakeable(shape)) return {};
      std::vector<int> args = {v.vec, v.threads, v.strip, v.tile, v.order};
      if (v.chained != 0 || v.baked != 0) args.push_back(v.chained);
      if (v.baked != 0) {
        for (int64_t n : {shape.batch, shape.length, shape.width}) args.push_back(static_cast<int>(n));
      }
      return {Instance("linear_scan_fwd_lookbacksmem", dtype, args),
              Instance("linear_scan_bwd_lookbacksmem", dtype, args)};
    }
    case Algorithm::kLookbackPipe:
      // blocks_per_sm only sizes the grid: not a template argument.
      return {Instance("linear_scan_fwd_lookbackpipe", dtype, {v.vec, v.threads, v.strip, v.tile}),
              Instance("linear_scan_bwd_lookbackpipe", dtype, {v.vec, v.threads, v.strip, v.tile})};
    case Algorithm::kTestFault:
      return {Instance("linear_scan_fwd_test_fault", dtype, {}), Instance("linear_scan_bwd_test_fault", dtype, {})};
    case Algorithm::kTestHang:
      return {Instance("linear_scan_fwd_test_hang", dtype, {}), Instance("linear_scan_bwd_test_hang", dtype, {})};
    case Algorithm::kFused:
    case Algorithm::kFusedSeg:
    case Algorithm::kTimeScan:
      break;  // selective_scan's families: no linear_scan instances
  }
  return {};
}

bool Bakeable(const Shape& shape) {
  for (int64_t n : {shape.batch, shape.length, shape.width}) {
    if (n < 1 || n > std::numeric_limits<int32_t>::max()) return false;
  }
  return true;
}

StatusOr<LaunchPlan> MakePlan(const Variant& v, const Problem& problem, const DeviceLimits& device) {
  if (const OpPlanner* planner = PlannerFor(problem.op)) return planner->MakePlan(v, problem, device);
  RETURN_IF_ERROR(CanImplement(v, problem, device));
  const Shape& s = problem.shape;
  const std::vector<std::string> names = NameExpressions(v, problem.op, problem.dtype, {}, s);
  LaunchPlan plan;
  auto add = [&](size_t name_index, const char* phase, int64_t blocks, int threads, uint32_t shared = 0) {
    Launch launch;
    launch.name_expression = names[name_index];
    launch.phase = phase;
    launch.grid = {static_cast<uint32_t>(blocks), 1, 1};
    launch.block = {static_cast<uint32_t>(threads), 1, 1};
    launch.shared_bytes = shared;
    plan.launches.push_back(std::move(launch));
  };
  const bool fwd = HasFwd(problem.mode);
  const bool bwd = HasBwd(problem.mode);
  switch (v.algorithm) {
    case Algorithm::kSequential: {
      const int64_t blocks = CeilDiv(s.batch * CeilDiv(s.width, v.vec), v.threads);
      if (fwd) add(0, "fwd", blocks, v.threads);
      if (bwd) add(1, "bwd", blocks, v.threads);
      break;
    }
    case Algorithm::kChunked: {
      const int64_t chunks = CeilDiv(s.length, v.chunk);
      const int64_t chunk_blocks = CeilDiv(s.batch * chunks * CeilDiv(s.width, v.vec), v.threads);
      const int64_t carry_blocks = CeilDiv(s.batch * s.width, v.threads);
      if (fwd) {
        add(0, "fwd", chunk_blocks, v.threads);
        add(1, "fwd", carry_blocks, v.threads);
        add(2, "fwd", chunk_blocks, v.threads);
      }
      if (bwd) {
        add(3, "bwd", chunk_blocks, v.threads);
        add(4, "bwd", carry_blocks, v.threads);
        add(5, "bwd", chunk_blocks, v.threads);
      }
      // A and H (or U): fp32 (B, chunks, W) each; fully rewritten by each phase.
      plan.workspace_bytes = 2 * static_cast<uint64_t>(s.batch * chunks * s.width) * sizeof(float);
      break;
    }
    case Algorithm::kLookback: {
      const LookbackGeometry g = Geometry(v, s);
      // Shared memory is static in the kernel: nothing dynamic to pass.
      if (fwd) add(0, "fwd", g.blocks, v.threads);
      if (bwd) add(1, "bwd", g.blocks, v.threads);
      plan.workspace_bytes = g.workspace_bytes;
      plan.workspace_zero_bytes = g.zero_bytes;
      break;
    }
    case Algorithm::kLookbackSmem: {
      const SmemGeometry g = GeometrySmem(v, s, problem.dtype);
      // Dynamic shared memory; over 48 KiB the worker raises the function's limit.
      if (fwd) add(0, "fwd", g.blocks, v.threads, static_cast<uint32_t>(g.fwd_shared));
      if (bwd) add(1, "bwd", g.blocks, v.threads, static_cast<uint32_t>(g.bwd_shared));
      // Launch epochs (kernels_src/scan_common.cuh): the header and flags are
      // zeroed once; each launch waits for its predecessor in the kernel.
      for (Launch& launch : plan.launches) launch.dependent_launch = true;
      plan.workspace_bytes = g.workspace_bytes;
      plan.workspace_zero_bytes = g.zero_bytes;
      plan.workspace_zero_once = true;
      break;
    }
    case Algorithm::kLookbackPipe: {
      const SmemGeometry g = GeometrySmem(v, s, problem.dtype);
      if (fwd) add(0, "fwd", PipeGrid(v, g, g.fwd_shared, device), v.threads, static_cast<uint32_t>(g.fwd_shared));
      if (bwd) add(1, "bwd", PipeGrid(v, g, g.bwd_shared, device), v.threads, static_cast<uint32_t>(g.bwd_shared));
      // The packed look-back of lookbacksmem's order 2, under launch epochs.
      for (Launch& launch : plan.launches) launch.dependent_launch = true;
      plan.workspace_bytes = g.workspace_bytes;
      plan.workspace_zero_bytes = g.zero_bytes;
      plan.workspace_zero_once = true;
      break;
    }
    case Algorithm::kTestFault:
    case Algorithm::kTestHang:
      if (fwd) add(0, "fwd", 1, 32);
      if (bwd) add(1, "bwd", 1, 32);
      break;
    case Algorithm::kFused:
    case Algorithm::kFusedSeg:
    case Algorithm::kTimeScan:
      break;  // refused by CanImplement above
  }
  return plan;
}

v1::ParamField ParamFieldOf(const char* name, size_t offset, size_t size, const char* type, const char* meaning) {
  v1::ParamField f;
  f.set_name(name);
  f.set_offset_bytes(static_cast<uint32_t>(offset));
  f.set_size_bytes(static_cast<uint32_t>(size));
  f.set_type(type);
  f.set_meaning(meaning);
  return f;
}

std::vector<v1::ParamField> ParamLayout(Op op) {
  if (const OpPlanner* planner = PlannerFor(op)) return planner->ParamLayout(op);
  std::vector<v1::ParamField> fields;
  auto field = [&](const char* name, size_t offset, size_t size, const char* type, const char* meaning) {
    fields.push_back(ParamFieldOf(name, offset, size, type, meaning));
  };
#define SCANTUNE_FIELD(member, type, meaning) \
  field(#member, offsetof(LinearScanParams, member), sizeof(LinearScanParams::member), type, meaning)
  SCANTUNE_FIELD(a, "ptr", "input a (B, L, W), dtype; decay per step");
  SCANTUNE_FIELD(x, "ptr", "input x (B, L, W), dtype");
  SCANTUNE_FIELD(h, "ptr", "h (B, L, W), dtype: output of fwd, input of bwd");
  SCANTUNE_FIELD(h0, "ptr", "initial state (B, W), fp32; null: zero");
  SCANTUNE_FIELD(h_final, "ptr", "final state h_{L-1} (B, W), fp32, fwd output; null: not written");
  SCANTUNE_FIELD(dh, "ptr", "gradient of h (B, L, W), dtype, bwd input");
  SCANTUNE_FIELD(da, "ptr", "gradient of a (B, L, W), dtype, bwd output");
  SCANTUNE_FIELD(dx, "ptr", "gradient of x (B, L, W), dtype, bwd output");
  SCANTUNE_FIELD(dh0, "ptr", "gradient of h0 (B, W), fp32, bwd output; null: not written");
  SCANTUNE_FIELD(workspace, "ptr", "workspace_bytes of scratch; first workspace_zero_bytes zeroed before each phase");
  SCANTUNE_FIELD(batch, "i64", "B");
  SCANTUNE_FIELD(length, "i64", "L (timesteps)");
  SCANTUNE_FIELD(width, "i64", "W (channels)");
#undef SCANTUNE_FIELD
  return fields;
}

uint32_t ParamSize(Op op) {
  if (const OpPlanner* planner = PlannerFor(op)) return planner->ParamSize(op);
  return sizeof(LinearScanParams);
}

}  // namespace scantune
