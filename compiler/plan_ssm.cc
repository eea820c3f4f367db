// Plans of selective_scan (kernels_src/selective_scan.cuh). Every family is
// one set of templates <T, N, dim_block, state_split, segment, chunk, bias,
// softplus, gate>:
//   sequential_v1_t{T}_p1    one thread per channel (all N states), whole sequence
//   chunked_v1_t{T}_c{G}     one thread per channel, time segments of G steps
//   fused_d{D}_s{S}_c{C}     D channels x S lanes per channel per block, whole sequence
//   fusedseg_d{D}_s{S}_c{C}_g{G}  fused with time segments of G steps
//   tscan_d{D}_w{W}_i{I}[_s{S}]  lanes along time: D channels x S state groups x W
//                            warps per channel per block, I steps per lane; one
//                            pass, loop over the group's N / S states (templates
//                            <T, N, D, W, I, S, bias, softplus, gate>; no _s: S = 1)
// The grid and workspace formulas here mirror the kernels' index math
// (SsmWorkspaceLayout is shared with them). Pure functions; no CUDA.
#include <algorithm>
#include <array>
#include <bit>
#include <climits>
#include <cstddef>

#include "compiler/op_planner.h"
#include "kernels_src/selective_scan_params.h"

namespace scantune {
namespace {

// Time tile of the one-thread-per-channel families: their backward holds
// 2 x tile x N recomputed states in registers.
constexpr int kSequentialTile = 2;
constexpr int kSequentialThreads[] = {64, 128};
constexpr int kChunkedThreads = 128;
constexpr int kChunkedSegments[] = {128, 512};

struct FusedKnobs {
  int dim_block, state_split, chunk, segment;  // segment 0: kFused
};
constexpr FusedKnobs kFusedVariants[] = {
    {32, 4, 8, 0},  {64, 4, 8, 0},    {32, 8, 8, 0},    {16, 8, 8, 0},    {16, 16, 16, 0},
    {32, 4, 8, 256}, {32, 4, 8, 1024}, {32, 8, 8, 512}, {64, 4, 8, 512}, {16, 16, 16, 256}};

// tscan (dim_block, warps along time, items per lane, state groups; 0: one).
// No spills at N 8..64 (ptxas -v, sm_90): see bench/NOTES.md "selective_scan
// v2" and "v3". The state groups put 2-4x the warps on the same channels, for
// B * D too small to fill the GPU (D = 256, B = 4: 1024 channels); so does
// d8_w1_i16 (forward only: one 256-thread block per SM with 255 registers,
// 512-step chunks, four states per iteration; v4).
struct TscanKnobs {
  int dim_block, warps, items, groups;
};
// _f1 (fixed-order sums: the deterministic backward) at 256 threads: the fwd_bwd winner d8_w1_i8
// (bench/NOTES.md, session 4) and d8_w1_i4, the other winner d16_w1_i4's per-thread work on half
// its channels (d16_w1_i4's 512-thread backward sits at 128 registers, and _f1's stores spill
// 4-32 bytes there at fp32: CanImplement refuses _f1 above 256 threads).
constexpr TscanKnobs kTscanFixedVariants[] = {{8, 1, 8, 0}, {8, 1, 4, 0}};
constexpr int kMaxFixedSumsThreads = 256;
// Above this the _f1 partials ((D / dim_block) x B x L x N x 2 fp32) are refused.
constexpr int64_t kMaxFixedSumsBytes = int64_t{8} << 30;
constexpr TscanKnobs kTscanVariants[] = {{8, 1, 4, 0}, {8, 1, 8, 0}, {8, 2, 4, 0}, {16, 1, 4, 0},
                                         {4, 4, 2, 0}, {4, 1, 4, 0}, {4, 1, 8, 2}, {8, 1, 8, 2},
                                         {4, 1, 4, 2}, {8, 1, 4, 2}, {4, 1, 4, 4}, {8, 1, 4, 4},
                                         {8, 1, 16, 0}};

// tscan's state groups: the knob's 0 is one group.
int TscanGroups(const Variant& v) { return v.state_split == 0 ? 1 : v.state_split; }
int TscanThreads(const Variant& v) { return v.dim_block * TscanGroups(v) * v.segments * 32; }

// Estimated fp32 registers a backward thread keeps live (recomputed states
// and transitions, per-step partials, the current and next tile's inputs).
// Above this ptxas spills to local memory on a scale that defeats the kernel.
constexpr int kMaxLiveFloats = 320;
constexpr int64_t kMaxGridYZ = 65535;
constexpr int64_t kMaxStaticShared = 48 * 1024;
constexpr int kCarryThreads = 256;
constexpr int kFinalizeThreads = 256;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
bool HasFwd(Mode mode) { return mode == Mode::kFwd || mode == Mode::kFwdBwd; }
bool HasBwd(Mode mode) { return mode == Mode::kBwd || mode == Mode::kFwdBwd; }

const char* TypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "float";
    case DType::kBF16: return "__nv_bfloat16";
    case DType::kF16: return "__half";
  }
  return "float";
}

// A variant's kernel configuration.
struct Config {
  int dim_block = 0, split = 1, segment = 0, chunk = 1;
};

// What every family needs of the problem: N in {8, 16, 32, 64}, no empty dimension.
Status CheckStateAndShape(const Problem& problem) {
  const int n = problem.ssm.state;
  if (n != 8 && n != 16 && n != 32 && n != 64) {
    return InvalidArgument("state " + std::to_string(n) + " not in {8, 16, 32, 64}");
  }
  const Shape& s = problem.shape;
  if (s.batch < 1 || s.length < 1 || s.width < 1) {
    return InvalidArgument("shape " + FormatShape(s) + " has an empty dimension");
  }
  return Status::Ok();
}

StatusOr<Config> ConfigOf(const Variant& v) {
  Config c;
  switch (v.algorithm) {
    case Algorithm::kSequential:
      c.dim_block = v.threads;
      c.chunk = kSequentialTile;
      break;
    case Algorithm::kChunked:
      c.dim_block = v.threads;
      c.segment = v.chunk;
      c.chunk = kSequentialTile;
      break;
    case Algorithm::kFused:
      c.dim_block = v.dim_block;
      c.split = v.state_split;
      c.chunk = v.chunk;
      break;
    case Algorithm::kFusedSeg:
      c.dim_block = v.dim_block;
      c.split = v.state_split;
      c.chunk = v.chunk;
      c.segment = v.segment;
      break;
    default:
      return InvalidArgument(std::string("algorithm ") + AlgorithmName(v.algorithm) + " has no selective_scan kernels");
  }
  return c;
}

bool PowerOfTwo(int v) { return v > 0 && (v & (v - 1)) == 0; }

std::string Instance(const char* kernel, std::string args) { return std::string(kernel) + "<" + args + ">"; }

int64_t Segments(const Config& c, int64_t length) {
  const int64_t seg_len = SsmSegmentLength(length, c.segment, SsmCheckpointInterval(c.chunk));
  return CeilDiv(length, seg_len);
}

class SsmPlannerImpl final : public OpPlanner {
 public:
  const char* MainHeader(Op) const override { return "selective_scan.cuh"; }

  std::vector<Variant> EnumerateVariants(Op) const override {
    std::vector<Variant> variants;
    for (int threads : kSequentialThreads) {
      variants.push_back({.algorithm = Algorithm::kSequential, .vec = 1, .threads = threads, .prefetch = 1});
    }
    for (int segment : kChunkedSegments) {
      variants.push_back({.algorithm = Algorithm::kChunked, .vec = 1, .threads = kChunkedThreads, .chunk = segment});
    }
    for (const FusedKnobs& k : kFusedVariants) {
      variants.push_back({.algorithm = k.segment ? Algorithm::kFusedSeg : Algorithm::kFused, .chunk = k.chunk,
                          .dim_block = k.dim_block, .state_split = k.state_split, .segment = k.segment});
    }
    for (const TscanKnobs& k : kTscanVariants) {
      variants.push_back({.algorithm = Algorithm::kTimeScan, .segments = k.warps, .items = k.items,
                          .dim_block = k.dim_block, .state_split = k.groups});
    }
    for (const TscanKnobs& k : kTscanFixedVariants) {
      variants.push_back({.algorithm = Algorithm::kTimeScan, .segments = k.warps, .items = k.items,
                          .dim_block = k.dim_block, .state_split = k.groups, .fixed_sums = 1});
    }
    return variants;
  }

  // The forwards sum in fixed orders. Every family's backward adds dBm, dCm,
  // dA, dD and ddelta_bias by float atomics (shared, then global memory),
  // but tscan's _f1, which writes them as partials that its finalize sums in
  // a fixed order.
  bool Deterministic(const Variant& v, const Problem& problem) const override {
    return problem.mode == Mode::kFwd || (v.algorithm == Algorithm::kTimeScan && v.fixed_sums != 0);
  }

  Status CanImplement(const Variant& v, const Problem& problem, const DeviceLimits& device) const override {
    if (v.algorithm == Algorithm::kTimeScan) return CanImplementTscan(v, problem, device);
    if (v.fixed_sums != 0) return InvalidArgument("_f" + std::to_string(v.fixed_sums) + ": fixed-order sums are tscan's");
    ASSIGN_OR_RETURN(const Config c, ConfigOf(v));
    RETURN_IF_ERROR(CheckStateAndShape(problem));
    const Shape& s = problem.shape;
    const int n = problem.ssm.state;
    if (v.algorithm == Algorithm::kChunked && v.strip != 0) {
      return InvalidArgument("_l" + std::to_string(v.strip) + ": a look-back forward is samu's");
    }
    if ((v.algorithm == Algorithm::kSequential || v.algorithm == Algorithm::kChunked) && v.vec != 1) {
      return InvalidArgument("vec " + std::to_string(v.vec) + ": selective_scan's per-channel families take vec 1");
    }
    if (!PowerOfTwo(c.split) || c.split > 32 || n % c.split != 0) {
      return InvalidArgument("state_split " + std::to_string(c.split) + " must be a power of two dividing N = " +
                             std::to_string(n));
    }
    const int threads = c.dim_block * c.split;
    if (c.dim_block < 1 || threads % 32 != 0) {
      return InvalidArgument("dim_block x state_split = " + std::to_string(threads) + " is not a multiple of 32");
    }
    if (threads > device.max_threads_per_block) {
      return ResourceExhausted(std::to_string(threads) + " threads per block exceed the device's " +
                               std::to_string(device.max_threads_per_block));
    }
    if (c.chunk < 1 || c.chunk > 64 || c.chunk % c.split != 0) {
      return InvalidArgument("chunk " + std::to_string(c.chunk) + " must be in [1, 64] and a multiple of state_split " +
                             std::to_string(c.split));
    }
    const int64_t interval = SsmCheckpointInterval(c.chunk);
    if (c.segment < 0 || c.segment % interval != 0) {
      return InvalidArgument("segment " + std::to_string(c.segment) + " must be a multiple of " +
                             std::to_string(interval) + " (chunk " + std::to_string(c.chunk) +
                             ", checkpoint interval)");
    }
    const int states = n / c.split;
    const int channel_bits = 5 - std::countr_zero(static_cast<unsigned>(c.split));
    const int group = 2 * states >= (1 << channel_bits) ? 1 : (1 << channel_bits) / (2 * states);
    if (c.chunk % group != 0) {
      return InvalidArgument("chunk " + std::to_string(c.chunk) + " must be a multiple of " + std::to_string(group));
    }
    const int tile_inputs = 2 + (problem.ssm.delta_softplus ? 1 : 0) + (problem.ssm.z_gate ? 1 : 0);
    const int live_fwd = 2 * tile_inputs * c.chunk + c.chunk + 3 * states;
    const int live_bwd = 2 * c.chunk * states + 3 * c.chunk + 2 * states * group + 5 * states +
                         2 * (tile_inputs + 1) * c.chunk;
    const int live = std::max(HasFwd(problem.mode) ? live_fwd : 0, HasBwd(problem.mode) ? live_bwd : 0);
    if (live > kMaxLiveFloats) {
      return ResourceExhausted("about " + std::to_string(live) + " live fp32 values per thread at N = " +
                               std::to_string(n) + " (limit " + std::to_string(kMaxLiveFloats) +
                               "): would spill to local memory");
    }
    const int64_t shared = (2 * 2 * int64_t{c.chunk} * n + (HasBwd(problem.mode) ? 2 * int64_t{c.chunk} * n : 0)) * 4;
    if (shared > std::min<int64_t>(kMaxStaticShared, device.max_shared_per_block)) {
      return ResourceExhausted("static shared memory " + std::to_string(shared) + " bytes exceeds 48 KiB");
    }
    const int64_t segments = Segments(c, s.length);
    if (segments > kMaxGridYZ || s.batch > kMaxGridYZ) {
      return ResourceExhausted(std::to_string(segments) + " segments x " + std::to_string(s.batch) +
                               " batches: over the grid's y/z limit of 65535");
    }
    if (CeilDiv(s.batch * s.width * n, kCarryThreads) > INT_MAX) {
      return ResourceExhausted("the carry launch needs more than 2^31-1 blocks");
    }
    return Status::Ok();
  }

  StatusOr<LaunchPlan> MakePlan(const Variant& v, const Problem& problem, const DeviceLimits& device) const override {
    RETURN_IF_ERROR(CanImplement(v, problem, device));
    if (v.algorithm == Algorithm::kTimeScan) return MakePlanTscan(v, problem, device);
    ASSIGN_OR_RETURN(const Config c, ConfigOf(v));
    const Shape& s = problem.shape;
    const int n = problem.ssm.state;
    const std::vector<std::string> names = NameExpressions(v, problem.op, problem.dtype, problem.ssm, problem.shape);
    const int64_t segments = Segments(c, s.length);
    const std::array<uint32_t, 3> main_grid = {static_cast<uint32_t>(CeilDiv(s.width, c.dim_block)),
                                               static_cast<uint32_t>(segments), static_cast<uint32_t>(s.batch)};
    const uint32_t threads = static_cast<uint32_t>(c.dim_block * c.split);
    const uint32_t carry_blocks = static_cast<uint32_t>(CeilDiv(s.batch * s.width * n, kCarryThreads));
    const int64_t finalize_elements = std::max<int64_t>(s.batch * s.length * n, s.width * n);
    const uint32_t finalize_blocks =
        static_cast<uint32_t>(std::min<int64_t>(CeilDiv(finalize_elements, kFinalizeThreads), 8 * device.sm_count));
    LaunchPlan plan;
    auto add = [&](size_t index, const char* phase, std::array<uint32_t, 3> grid, uint32_t block) {
      Launch launch;
      launch.name_expression = names[index];
      launch.phase = phase;
      launch.grid = grid;
      launch.block = {block, 1, 1};
      plan.launches.push_back(std::move(launch));
    };
    // names: fwd_local, carry<fwd>, fwd_main, bwd_local, carry<bwd>, bwd_main, bwd_finalize
    if (HasFwd(problem.mode)) {
      if (segments > 1) {
        add(0, "fwd", main_grid, threads);
        add(1, "fwd", {carry_blocks, 1, 1}, kCarryThreads);
      }
      add(2, "fwd", main_grid, threads);
    }
    if (HasBwd(problem.mode)) {
      if (segments > 1) {
        add(3, "bwd", main_grid, threads);
        add(4, "bwd", {carry_blocks, 1, 1}, kCarryThreads);
      }
      add(5, "bwd", main_grid, threads);
      add(6, "bwd", {finalize_blocks, 1, 1}, kFinalizeThreads);
    }
    const SsmWorkspace w = SsmWorkspaceLayout(s.batch, s.length, s.width, n, c.segment, c.chunk);
    if (HasBwd(problem.mode)) {
      plan.workspace_bytes = static_cast<uint64_t>(w.total) * sizeof(float);
      plan.workspace_zero_bytes = static_cast<uint64_t>(w.zero_end) * sizeof(float);
    } else {
      // The forward uses the segment regions only; the accumulators stay unused and unzeroed.
      plan.workspace_bytes = static_cast<uint64_t>(segments > 1 ? w.ckpt : 0) * sizeof(float);
    }
    return plan;
  }

  std::vector<std::string> NameExpressions(const Variant& v, Op, DType dtype, const SsmOptions& ssm,
                                           const Shape&) const override {
    if (v.algorithm == Algorithm::kTimeScan) {
      const int n = ssm.state == 0 ? 16 : ssm.state;
      auto b = [](bool flag) { return flag ? std::string("true") : std::string("false"); };
      const std::string args = std::string(TypeName(dtype)) + ", " + std::to_string(n) + ", " +
                               std::to_string(v.dim_block) + ", " + std::to_string(v.segments) + ", " +
                               std::to_string(v.items) + ", " + std::to_string(TscanGroups(v)) + ", " +
                               b(ssm.delta_bias) + ", " + b(ssm.delta_softplus) + ", " + b(ssm.z_gate);
      // fwd (y), fwd (y + checkpoints), checkpoints only, bwd, bwd_finalize
      // (_f1: the backward with FIXED 1 and the fixed-order finalize).
      const std::string finalize =
          v.fixed_sums != 0
              ? Instance("selective_scan_bwd_finalize",
                         std::string(TypeName(dtype)) + ", " + std::to_string(n) + ", " + std::to_string(v.dim_block) +
                             ", " + std::to_string(SsmTscanChunk(v.segments, v.items)))
              : Instance("selective_scan_bwd_finalize", std::string(TypeName(dtype)) + ", " + std::to_string(n));
      return {Instance("selective_scan_tscan_fwd", args + ", 1"), Instance("selective_scan_tscan_fwd", args + ", 3"),
              Instance("selective_scan_tscan_fwd", args + ", 2"),
              Instance("selective_scan_tscan_bwd", v.fixed_sums != 0 ? args + ", 1" : args), finalize};
    }
    StatusOr<Config> config = ConfigOf(v);
    if (!config.ok()) return {};
    const Config& c = *config;
    const int n = ssm.state == 0 ? 16 : ssm.state;
    auto b = [](bool flag) { return flag ? std::string("true") : std::string("false"); };
    const std::string args = std::string(TypeName(dtype)) + ", " + std::to_string(n) + ", " +
                             std::to_string(c.dim_block) + ", " + std::to_string(c.split) + ", " +
                             std::to_string(c.segment) + ", " + std::to_string(c.chunk) + ", " + b(ssm.delta_bias) +
                             ", " + b(ssm.delta_softplus) + ", " + b(ssm.z_gate);
    const std::string carry = std::to_string(n) + ", " + std::to_string(c.segment) + ", " + std::to_string(c.chunk);
    return {Instance("selective_scan_fwd_local", args),
            Instance("selective_scan_carry", carry + ", false"),
            Instance("selective_scan_fwd_main", args),
            Instance("selective_scan_bwd_local", args),
            Instance("selective_scan_carry", carry + ", true"),
            Instance("selective_scan_bwd_main", args),
            Instance("selective_scan_bwd_finalize", std::string(TypeName(dtype)) + ", " + std::to_string(n))};
  }

  std::vector<v1::ParamField> ParamLayout(Op) const override {
    std::vector<v1::ParamField> fields;
    auto field = [&](const char* name, size_t offset, size_t size, const char* type, const char* meaning) {
      fields.push_back(ParamFieldOf(name, offset, size, type, meaning));
    };
#define SCANTUNE_FIELD(member, type, meaning) \
  field(#member, offsetof(SelectiveScanParams, member), sizeof(SelectiveScanParams::member), type, meaning)
    SCANTUNE_FIELD(u, "ptr", "input u (B, L, D), dtype");
    SCANTUNE_FIELD(delta, "ptr", "input delta (B, L, D), dtype (before bias and softplus)");
    SCANTUNE_FIELD(A, "ptr", "A (D, N), fp32");
    SCANTUNE_FIELD(Bm, "ptr", "input B (B, L, N), dtype");
    SCANTUNE_FIELD(Cm, "ptr", "input C (B, L, N), dtype");
    SCANTUNE_FIELD(Dv, "ptr", "skip D (D), fp32");
    SCANTUNE_FIELD(delta_bias, "ptr", "delta bias (D), fp32; null: none");
    SCANTUNE_FIELD(z, "ptr", "gate z (B, L, D), dtype; null: no gate");
    SCANTUNE_FIELD(h0, "ptr", "initial state (B, D, N), fp32; null: zero");
    SCANTUNE_FIELD(y, "ptr", "output y (B, L, D), dtype");
    SCANTUNE_FIELD(h_final, "ptr", "final state (B, D, N), fp32, fwd output; null: not written");
    SCANTUNE_FIELD(dy, "ptr", "gradient of y (B, L, D), dtype, bwd input");
    SCANTUNE_FIELD(du, "ptr", "gradient of u (B, L, D), dtype, bwd output");
    SCANTUNE_FIELD(ddelta, "ptr", "gradient of delta (B, L, D), dtype, bwd output");
    SCANTUNE_FIELD(dA, "ptr", "gradient of A (D, N), fp32, bwd output");
    SCANTUNE_FIELD(dBm, "ptr", "gradient of B (B, L, N), dtype, bwd output");
    SCANTUNE_FIELD(dCm, "ptr", "gradient of C (B, L, N), dtype, bwd output");
    SCANTUNE_FIELD(dDv, "ptr", "gradient of D (D), fp32, bwd output");
    SCANTUNE_FIELD(ddelta_bias, "ptr", "gradient of delta_bias (D), fp32, bwd output; null without bias");
    SCANTUNE_FIELD(dz, "ptr", "gradient of z (B, L, D), dtype, bwd output; null without gate");
    SCANTUNE_FIELD(dh0, "ptr", "gradient of h0 (B, D, N), fp32, bwd output; null without h0");
    SCANTUNE_FIELD(workspace, "ptr", "workspace_bytes of scratch; first workspace_zero_bytes zeroed before each phase");
    SCANTUNE_FIELD(batch, "i64", "B");
    SCANTUNE_FIELD(length, "i64", "L (timesteps)");
    SCANTUNE_FIELD(dim, "i64", "D (channels)");
    SCANTUNE_FIELD(state, "i64", "N (states per channel)");
#undef SCANTUNE_FIELD
    return fields;
  }

  uint32_t ParamSize(Op) const override { return sizeof(SelectiveScanParams); }

 private:
  static Status CanImplementTscan(const Variant& v, const Problem& problem, const DeviceLimits& device) {
    RETURN_IF_ERROR(CheckStateAndShape(problem));
    const Shape& s = problem.shape;
    const int n = problem.ssm.state;
    if (!PowerOfTwo(v.dim_block) || v.dim_block > 32) {
      return InvalidArgument("dim_block " + std::to_string(v.dim_block) + " must be a power of two <= 32");
    }
    if (v.segments != 1 && v.segments != 2 && v.segments != 4) {
      return InvalidArgument("warps along time " + std::to_string(v.segments) + " not in {1, 2, 4}");
    }
    if (v.items < 1 || v.items > 16) {
      return InvalidArgument("items " + std::to_string(v.items) + " not in [1, 16]");
    }
    if (v.fixed_sums != 0) {
      if (v.fixed_sums != 1) return InvalidArgument("_f" + std::to_string(v.fixed_sums) + ": fixed sums are _f1");
      if (!HasBwd(problem.mode)) {
        return InvalidArgument("_f1: fixed-order sums are the backward's (a forward has none; take the plain variant)");
      }
      if (v.segments != 1) {
        return InvalidArgument("_f1 needs one warp along time (w1), not " + std::to_string(v.segments));
      }
      if (TscanThreads(v) > kMaxFixedSumsThreads) {
        return ResourceExhausted("_f1 at " + std::to_string(TscanThreads(v)) + " threads per block: its fp32 backward "
                                 "would spill (at most " + std::to_string(kMaxFixedSumsThreads) + ")");
      }
      const int64_t bytes = FixedSumsBytes(v, problem);
      if (bytes > kMaxFixedSumsBytes) {
        return ResourceExhausted("_f1's partials would take " + std::to_string(bytes >> 20) + " MiB of workspace (limit " +
                                 std::to_string(kMaxFixedSumsBytes >> 20) + " MiB)");
      }
    }
    const int groups = TscanGroups(v);
    if (groups != 1 && groups != 2 && groups != 4) {
      return InvalidArgument("state groups " + std::to_string(groups) + " not in {1, 2, 4}");
    }
    if (groups > 1 && v.segments != 1) {
      return InvalidArgument("state groups need one warp along time (w1), not " + std::to_string(v.segments));
    }
    if (n / groups < 2) {
      return InvalidArgument("state groups " + std::to_string(groups) + " leave fewer than 2 of N = " +
                             std::to_string(n) + " states per group");
    }
    const int threads = TscanThreads(v);
    if (threads > device.max_threads_per_block) {
      return ResourceExhausted(std::to_string(threads) + " threads per block exceed the device's " +
                               std::to_string(device.max_threads_per_block));
    }
    if (threads % n != 0 || (int64_t{32} * v.segments * v.items * n) % threads != 0) {
      return InvalidArgument("threads per block " + std::to_string(threads) + " must be a multiple of N and divide N x chunk");
    }
    // Live fp32 values per thread (the kernels' arrays of K items): above ~255 registers ptxas spills.
    const int live_fwd = 24 + 10 * v.items, live_bwd = 32 + 24 * v.items;
    const int live = std::max(HasFwd(problem.mode) ? live_fwd : 0, HasBwd(problem.mode) ? live_bwd : 0);
    if (live > 255) {
      return ResourceExhausted("about " + std::to_string(live) + " live fp32 values per thread: would spill");
    }
    // Registers per thread a block of `threads` may hold (64 K per SM): the kernels' real needs
    // (ptxas -v, bench/NOTES.md) are ~64 (fwd, I = 4), ~128 (fwd I = 8; bwd I = 4), ~200 (bwd I = 8).
    const int reg_cap = std::min(255, 65536 / threads);
    const int need_fwd = v.items >= 8 ? 128 : 64, need_bwd = v.items >= 8 ? 200 : 120;
    if ((HasFwd(problem.mode) && need_fwd > reg_cap) || (HasBwd(problem.mode) && need_bwd > reg_cap)) {
      return ResourceExhausted(std::to_string(threads) + " threads per block leave " + std::to_string(reg_cap) +
                               " registers per thread: the " + (HasBwd(problem.mode) && need_bwd > reg_cap ? "backward" : "forward") +
                               " would spill");
    }
    if (HasBwd(problem.mode) && n == 64 && v.segments * v.items >= 8 && threads >= 512) {
      // 512 threads hold at most 128 registers; ptxas -v spills (bf16, N = 64) here.
      return ResourceExhausted("backward at N = 64 with " + std::to_string(threads) +
                               " threads and a 256-step chunk would spill (128 registers per thread)");
    }
    // ptxas -v (NVRTC, sm_90) spills in these corners: 128 threads stage 64 states' Bm/Cm in 64
    // unrolled steps per chunk; the I = 8 forward with checkpoints and state groups at N = 64.
    if (n == 64 && threads < 256) {
      return ResourceExhausted(std::to_string(threads) + " threads at N = 64 would spill (Bm/Cm staging)");
    }
    if (n == 64 && v.items >= 8 && groups > 1 && HasBwd(problem.mode)) {
      return ResourceExhausted("state groups with 8 items at N = 64: the checkpointing forward would spill");
    }
    if (n >= 32 && v.items >= 16 && problem.dtype != DType::kF32) {
      return ResourceExhausted("16 items at N >= 32 with 16-bit inputs: the forward would spill (staged through "
                               "registers)");
    }
    if (n >= 32 && v.items >= 8 && problem.ssm.z_gate && HasBwd(problem.mode)) {
      return ResourceExhausted("8 items with the gate at N >= 32: the checkpointing forward would spill (16-bit)");
    }
    const int64_t shared = TscanShared(v, problem, HasBwd(problem.mode));
    if (shared > device.max_shared_per_block) {
      return ResourceExhausted("dynamic shared memory " + std::to_string(shared) + " bytes exceeds the device's " +
                               std::to_string(device.max_shared_per_block));
    }
    if (s.batch > kMaxGridYZ) {
      return ResourceExhausted(std::to_string(s.batch) + " batches: over the grid's z limit of 65535");
    }
    return Status::Ok();
  }

  // _f1's partials (SsmFixedSums, without the layout before them).
  static int64_t FixedSumsBytes(const Variant& v, const Problem& problem) {
    const Shape& s = problem.shape;
    const SsmFixedSums f = SsmFixedSumsLayout(s.batch, s.length, s.width, problem.ssm.state, v.dim_block, 0);
    return f.total * static_cast<int64_t>(sizeof(float));
  }

  // Bytes of dynamic shared memory: the larger of the forward's and (bwd) the backward's.
  static int64_t TscanShared(const Variant& v, const Problem& problem, bool bwd) {
    const bool gate = problem.ssm.z_gate;
    const int g = TscanGroups(v);
    // The fp32 forward double-buffers its chunk (cp.async) where that keeps its blocks per SM.
    const bool prefetch =
        SsmTscanPrefetch(problem.ssm.state, v.dim_block, v.segments, v.items, g, gate, problem.dtype == DType::kF32);
    const int64_t fwd =
        SsmTscanSmemLayout(problem.ssm.state, v.dim_block, v.segments, v.items, g, gate, false, prefetch).total;
    const int64_t back =
        bwd ? SsmTscanSmemLayout(problem.ssm.state, v.dim_block, v.segments, v.items, g, gate, true).total : 0;
    return std::max(fwd, back) * static_cast<int64_t>(sizeof(float));
  }

  StatusOr<LaunchPlan> MakePlanTscan(const Variant& v, const Problem& problem, const DeviceLimits& device) const {
    const Shape& s = problem.shape;
    const int n = problem.ssm.state;
    const bool gate = problem.ssm.z_gate;
    const std::vector<std::string> names = NameExpressions(v, problem.op, problem.dtype, problem.ssm, problem.shape);
    const std::array<uint32_t, 3> grid = {static_cast<uint32_t>(CeilDiv(s.width, v.dim_block)), 1u,
                                          static_cast<uint32_t>(s.batch)};
    const uint32_t threads = static_cast<uint32_t>(TscanThreads(v));
    const int g = TscanGroups(v);
    const uint32_t fwd_shared = static_cast<uint32_t>(
        SsmTscanSmemLayout(n, v.dim_block, v.segments, v.items, g, gate, false,
                           SsmTscanPrefetch(n, v.dim_block, v.segments, v.items, g, gate, problem.dtype == DType::kF32))
            .total *
        sizeof(float));
    const uint32_t bwd_shared = static_cast<uint32_t>(
        SsmTscanSmemLayout(n, v.dim_block, v.segments, v.items, g, gate, true).total * sizeof(float));
    const int64_t finalize_elements = std::max<int64_t>(s.batch * s.length * n, s.width * n);
    const uint32_t finalize_blocks =
        static_cast<uint32_t>(std::min<int64_t>(CeilDiv(finalize_elements, kFinalizeThreads), 8 * device.sm_count));
    LaunchPlan plan;
    auto add = [&](size_t index, const char* phase, std::array<uint32_t, 3> g, uint32_t block, uint32_t shared) {
      Launch launch;
      launch.name_expression = names[index];
      launch.phase = phase;
      launch.grid = g;
      launch.block = {block, 1, 1};
      launch.shared_bytes = shared;
      // tscan_fwd/bwd and bwd_finalize wait for their predecessor first (griddepcontrol). The
      // state-blocked families' launches stay plain: with PDL their chunked forward measured 10-16%
      // slower (bench/NOTES.md, session 3 lead).
      launch.dependent_launch = true;
      plan.launches.push_back(std::move(launch));
    };
    // names: fwd<y>, fwd<y + checkpoints>, fwd<checkpoints>, bwd, bwd_finalize. In fwd_bwd the
    // backward reads the checkpoints its forward phase left in the workspace (beyond the zeroed prefix).
    switch (problem.mode) {
      case Mode::kFwd:
        add(0, "fwd", grid, threads, fwd_shared);
        break;
      case Mode::kFwdBwd:
        add(1, "fwd", grid, threads, fwd_shared);
        add(3, "bwd", grid, threads, bwd_shared);
        add(4, "bwd", {finalize_blocks, 1, 1}, kFinalizeThreads, 0);
        break;
      case Mode::kBwd:
        add(2, "bwd", grid, threads, fwd_shared);
        add(3, "bwd", grid, threads, bwd_shared);
        add(4, "bwd", {finalize_blocks, 1, 1}, kFinalizeThreads, 0);
        break;
    }
    if (HasBwd(problem.mode)) {
      const SsmWorkspace w =
          SsmWorkspaceLayout(s.batch, s.length, s.width, n, 0, SsmTscanChunk(v.segments, v.items));
      if (v.fixed_sums != 0) {  // partials after the layout, every one written: nothing to zero
        const SsmFixedSums f = SsmFixedSumsLayout(s.batch, s.length, s.width, n, v.dim_block, w.total);
        plan.workspace_bytes = static_cast<uint64_t>(f.total) * sizeof(float);
      } else {
        plan.workspace_bytes = static_cast<uint64_t>(w.total) * sizeof(float);
        plan.workspace_zero_bytes = static_cast<uint64_t>(w.zero_end) * sizeof(float);
      }
    }
    return plan;
  }
};

}  // namespace

const OpPlanner& SsmPlanner() {
  static const SsmPlannerImpl planner;
  return planner;
}

}  // namespace scantune
