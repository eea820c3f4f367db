// rglru and samu plans (compiler/plan_gated.cc): the design space, explicit
// rejections, plans for the seed shapes whose grids, shared memory and
// workspaces agree with kernels_src/gated_layout.h, the parameter-struct
// layouts, and the real NVRTC compiling every gated variant for every dtype
// for sm_90 (no GPU needed).
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <regex>
#include <cstddef>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "compiler/nvrtc_compiler.h"
#include "compiler/plan.h"
#include "kernels_src/gated_layout.h"
#include "kernels_src/rglru_params.h"
#include "kernels_src/samu_params.h"
#include "tests/compiler/baked_twins.h"

namespace scantune {
namespace {

constexpr Op kGatedOps[] = {Op::kRgLru, Op::kSamu};
const Shape kSeedShapes[] = {{4, 2048, 2048}, {1, 8192, 2560}, {1, 32768, 1024}, {1, 32768, 2048}};

Problem MakeProblem(Op op, Shape shape, DType dtype = DType::kBF16, Mode mode = Mode::kFwdBwd, bool h0 = false) {
  Problem p;
  p.op = op;
  p.shape = shape;
  p.dtype = dtype;
  p.mode = mode;
  p.has_h0 = h0;
  return p;
}

// The plan's kernels, in launch order.
std::vector<std::string> LaunchNames(const LaunchPlan& plan) {
  std::vector<std::string> names;
  for (const Launch& l : plan.launches) names.push_back(l.name_expression);
  return names;
}

Variant Parsed(const char* name) {
  StatusOr<Variant> v = Variant::Parse(name);
  EXPECT_TRUE(v.ok()) << name;
  return *v;
}

// A named point whose name round-trips (the knob tests' first check).
Variant RoundTrip(const char* name) {
  const Variant v = Parsed(name);
  EXPECT_EQ(v.Name(), name);
  return v;
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The H200 plan of a variant by name (empty, with a failure, if refused).
LaunchPlan PlanOf(const char* name, const Problem& problem) {
  StatusOr<LaunchPlan> plan = MakePlan(Parsed(name), problem, DeviceLimits{});
  EXPECT_TRUE(plan.ok()) << name << ": " << plan.status().ToString();
  return plan.ok() ? *plan : LaunchPlan{};
}
// ... of a samu variant at 4x2048x2048 bf16 fwd_bwd.
LaunchPlan SamuSeedPlan(const char* name) { return PlanOf(name, MakeProblem(Op::kSamu, {4, 2048, 2048})); }

// A knob of the `chunked` _l point's look-back forward alone (_b{n}, _i32):
// the point's and its twin's (without the knob) plans at p have six launches
// each, the same control kernel and backward (all but launch 1) on the same
// grids and the same workspace; their forward launches.
struct Forwards {
  Launch point, twin;
};
Forwards ForwardsOfKnob(const char* point, const char* twin, const Problem& p) {
  const LaunchPlan a = PlanOf(point, p), b = PlanOf(twin, p);
  EXPECT_EQ(a.launches.size(), 6u) << point;
  EXPECT_EQ(b.launches.size(), 6u) << twin;
  if (a.launches.size() != 6 || b.launches.size() != 6) return {};
  for (size_t i : {0, 2, 3, 4, 5}) {
    EXPECT_EQ(a.launches[i].name_expression, b.launches[i].name_expression) << i;
    EXPECT_EQ(a.launches[i].grid, b.launches[i].grid) << i;
  }
  EXPECT_EQ(a.workspace_bytes, b.workspace_bytes);
  return {a.launches[1], b.launches[1]};
}

// Launch i of a point and of its twin (the point without one knob) on the same grid, block and shared memory.
void ExpectSameGeometry(const Launch& a, const Launch& b, size_t i) {
  EXPECT_EQ(a.grid, b.grid) << i;
  EXPECT_EQ(a.block, b.block) << i;
  EXPECT_EQ(a.shared_bytes, b.shared_bytes) << i;
}

// ptxas -v reports each entry's spill stores: none may spill, except the
// `chunked` rescan (samu_bwd_chunk_scan) by at most kRescanShareSpillBytes.
// At its 128-register cap ptxas spills values of the per-group share (the
// controller partials, 1 / W), which only the lanes that form the group's
// shares (4 of a warp's 32) touch, once per group, outside the element
// loop (the SASS of the seed points, read in session 17: bench/NOTES.md).
// Moving those values to shared memory by hand made it spill others.
constexpr int kRescanShareSpillBytes = 32;
void ExpectNoSpills(const std::string& log, const std::string& what) {
  std::istringstream in(log);
  std::string line, entry;
  const std::regex stores("([0-9]+) bytes spill stores");
  while (std::getline(in, line)) {
    const size_t q = line.find("entry function '");
    if (q != std::string::npos) entry = line.substr(q + 16, line.find('\'', q + 16) - q - 16);
    std::smatch m;
    if (!std::regex_search(line, m, stores)) continue;
    const int bytes = std::stoi(m[1].str());
    const bool rescan = entry.find("samu_bwd_chunk_scan") != std::string::npos;
    EXPECT_LE(bytes, rescan ? kRescanShareSpillBytes : 0) << what << " " << entry << ": " << line;
  }
}

// Each named variant refused at p as an invalid argument.
void ExpectRefused(std::initializer_list<const char*> names, const Problem& p) {
  for (const char* name : names) {
    EXPECT_EQ(CanImplement(Parsed(name), p, DeviceLimits{}).code(), StatusCode::kInvalidArgument) << name;
  }
}

// A `chunked` _l point's six launch names with the SAVE template argument
// added to the two kernels that write and read h (held forward, rescan).
std::vector<std::string> NamesWithSave(const LaunchPlan& dense, int save) {
  std::vector<std::string> names = LaunchNames(dense);
  EXPECT_EQ(names.size(), 6u);
  for (size_t i : {size_t{1}, size_t{4}}) {
    if (i < names.size()) names[i].insert(names[i].size() - 1, ", " + std::to_string(save));
  }
  return names;
}

TEST(GatedEnumerate, ThreeFamiliesWithSeveralPointsEachAndNamesRoundTrip) {
  for (Op op : kGatedOps) {
    SCOPED_TRACE(OpName(op));
    const std::vector<Variant> all = EnumerateVariants(op, /*include_test_variants=*/true);
    // The tuner times every point: samu's 50 (session 9: the eight `chunked` _l points; session 12: four
    // of them with _y1; session 14: those four with _b5; session 15: three _b5_i32; session 24: two
    // _b4_i32; session 28: four _l..._d1; session 32: four _k1 twins) are its ceiling; rglru's 27 include six _d1
    // twins (the chained look-back, for the deterministic selection) and two _k1 twins (session 33).
    EXPECT_GE(all.size(), 10u);
    EXPECT_LE(all.size(), op == Op::kSamu ? 54u : 27u);
    std::set<std::string> names;
    std::map<Algorithm, int> per_family;
    for (const Variant& v : all) {
      EXPECT_FALSE(v.IsTestOnly()) << v.Name();
      ++per_family[v.algorithm];
      EXPECT_TRUE(names.insert(v.Name()).second) << "duplicate " << v.Name();
      StatusOr<Variant> back = Variant::Parse(v.Name());
      ASSERT_TRUE(back.ok()) << v.Name();
      EXPECT_EQ(*back, v) << v.Name();
    }
    // v1's lookbacksmem dropped (session 4); samu also has `chunked` (session 7).
    EXPECT_EQ(per_family.size(), op == Op::kSamu ? 4u : 3u);
    if (op == Op::kSamu) {
      EXPECT_GE(per_family[Algorithm::kChunked], 4);
      // chunked with its own forward, and with lookback _o3's (_l{strip}).
      int hybrid = 0;
      for (const Variant& v : all) hybrid += v.algorithm == Algorithm::kChunked && v.strip != 0;
      EXPECT_GE(hybrid, 4);
      EXPECT_GE(per_family[Algorithm::kChunked] - hybrid, 4);
    }
    EXPECT_GE(per_family[Algorithm::kFused], 4);
    EXPECT_GE(per_family[Algorithm::kSequential], 3);
    EXPECT_GE(per_family[Algorithm::kLookback], 10);
    // Every lookback point in order 2 (block index, packed look-back, epochs, PDL), four also in
    // order 3 (_o2 with the tanh gate for 16-bit dtypes), one in order 0 (ticket; the baseline).
    std::map<int, int> orders, chained, baked;
    for (const Variant& v : all) {
      if (v.algorithm == Algorithm::kLookback) ++(v.chained != 0 ? chained : v.baked != 0 ? baked : orders)[v.order];
    }
    EXPECT_EQ(orders[2], 6);
    EXPECT_EQ(orders[3], 4);
    EXPECT_EQ(orders[0], 1);
    // rglru's _d1: the four _o3 points and the two longest tiles at _o2; its _k1: two _o3 points.
    EXPECT_EQ(chained[3], op == Op::kSamu ? 0 : 4);
    EXPECT_EQ(chained[2], op == Op::kSamu ? 0 : 2);
    EXPECT_EQ(baked[3], op == Op::kSamu ? 0 : 2);
    EXPECT_STREQ(MainHeader(op), "gated_scan.cuh");
  }
  // The same names for both operators (the variants table is keyed by (op, name)), plus samu's `chunked`
  // and rglru's _d1 and _k1.
  std::vector<std::string> rglru, samu;
  for (const Variant& v : EnumerateVariants(Op::kRgLru, false)) {
    if (v.chained == 0 && v.baked == 0) rglru.push_back(v.Name());
  }
  for (const Variant& v : EnumerateVariants(Op::kSamu, false)) {
    if (v.algorithm != Algorithm::kChunked) samu.push_back(v.Name());
  }
  EXPECT_EQ(rglru, samu);
}

TEST(GatedEnumerate, MostVariantsImplementTheSeedShapes) {
  const DeviceLimits h200;
  for (Op op : kGatedOps) {
    for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
      for (const Shape& s : kSeedShapes) {
        int ok = 0, lookback = 0;
        for (const Variant& v : EnumerateVariants(op, false)) {
          if (!CanImplement(v, MakeProblem(op, s, dtype), h200).ok()) continue;
          ++ok;
          lookback += v.algorithm == Algorithm::kLookback;
        }
        EXPECT_GE(ok, 8) << OpName(op) << " " << DTypeName(dtype) << " " << FormatShape(s);
        EXPECT_GE(lookback, 7) << OpName(op) << " " << DTypeName(dtype) << " " << FormatShape(s);
      }
    }
  }
}

TEST(GatedCanImplement, Rejections) {
  const DeviceLimits h200;
  struct Case {
    const char* variant;
    Problem problem;
    StatusCode code;
    const char* says;
  };
  const Problem rglru = MakeProblem(Op::kRgLru, {4, 2048, 2048});
  const Problem samu = MakeProblem(Op::kSamu, {4, 2048, 2048});
  const Problem rglru_f32_fwd = MakeProblem(Op::kRgLru, {1, 4096, 1024}, DType::kF32, Mode::kFwd);
  const Problem empty = MakeProblem(Op::kSamu, {1, 0, 64});
  for (const Case& c : {
           Case{"chunked_v8_t256_c64", rglru, StatusCode::kInvalidArgument, "rglru has no controller"},
           Case{"chunked_v4_t512_c64", samu, StatusCode::kInvalidArgument, "vec 8"},
           Case{"chunked_v8_t256_c4", samu, StatusCode::kInvalidArgument, "chunk 4"},
           Case{"chunked_v8_t100_c64", samu, StatusCode::kInvalidArgument, "multiple of 32"},
           Case{"chunked_v8_t256_c64", MakeProblem(Op::kSamu, {1, 8192, 2560}), StatusCode::kResourceExhausted,
                "needs 320 threads"},
           Case{"chunked_v8_t512_c64", MakeProblem(Op::kSamu, {1, 4096, 4096}, DType::kF32),
                StatusCode::kResourceExhausted, "shared memory"},
           Case{"chunked_v8_t256_c64", empty, StatusCode::kInvalidArgument, "empty dimension"},
           Case{"tscan_d16_w1_i4", samu, StatusCode::kInvalidArgument, "no samu kernels"},
           Case{"fused_d64_s8_c64", rglru, StatusCode::kInvalidArgument, "rglru has no controller"},
           Case{"fused_d64_s8_c60", samu, StatusCode::kInvalidArgument, "multiple of the segments"},
           Case{"fused_d128_s4_c64", samu, StatusCode::kInvalidArgument, "at most 32"},
           Case{"fused_d64_s8_c64", MakeProblem(Op::kSamu, {1, 64, 64 * 133}, DType::kBF16, Mode::kFwd),
                StatusCode::kResourceExhausted, "strips of a time tile"},
           Case{"lookback_v2_t256_s8_i1", rglru, StatusCode::kInvalidArgument, "items 1"},
           Case{"lookback_v2_t256_s3_i8", rglru, StatusCode::kInvalidArgument, "must divide threads"},
           Case{"lookback_v4_t256_s4_i8", samu, StatusCode::kInvalidArgument, "at most 32"},
           Case{"lookback_v2_t256_s8_i8_o1", samu, StatusCode::kInvalidArgument, "only _o2 / _o3"},
           Case{"lookback_v2_t256_s8_i8_o3", MakeProblem(Op::kSamu, {1, 64, 64}, DType::kF32),
                StatusCode::kInvalidArgument, "fp32 runs _o2"},
           Case{"lookbacksmem_v4_t256_c64_i128", rglru, StatusCode::kInvalidArgument, "has no rglru kernels"},
           Case{"lookback_v2_t256_s32_i16_o2", MakeProblem(Op::kRgLru, {1, 512 * 65536, 64}),
                StatusCode::kResourceExhausted, "grid.z"},
           Case{"sequential_v3_t64_p4", rglru, StatusCode::kInvalidArgument, "vec 3"},
           Case{"sequential_v4_t2048_p4", rglru, StatusCode::kResourceExhausted, "exceed the device"},
           Case{"sequential_v4_t64_p32", rglru, StatusCode::kInvalidArgument, "prefetch 32"},
           Case{"lookback_v2_t96_s32_i4", rglru, StatusCode::kInvalidArgument, "multiple of 8"},
           Case{"lookback_v2_t100_s4_i8", rglru, StatusCode::kInvalidArgument, "multiple of 32"},
           Case{"lookback_v8_t128_s1_i16", samu, StatusCode::kInvalidArgument, "at most 32"},
           Case{"lookback_v8_t1024_s8_i16", rglru_f32_fwd, StatusCode::kResourceExhausted, "shared memory"},
           Case{"sequential_v4_t64_p4", empty, StatusCode::kInvalidArgument, "empty dimension"},
       }) {
    SCOPED_TRACE(c.variant);
    const Status status = CanImplement(Parsed(c.variant), c.problem, h200);
    EXPECT_EQ(status.code(), c.code) << status.ToString();
    EXPECT_NE(status.message().find(c.says), std::string::npos) << status.ToString();
  }
  // rglru may use 64-lane strips (no per-token sums), samu may not.
  EXPECT_TRUE(CanImplement(Parsed("lookback_v8_t128_s1_i16"), rglru, h200).ok());
}

// Plans for the seed shapes: each phase's launches, legal grids, shared
// memory within the device, and the workspace of gated_layout.h.
TEST(GatedPlan, SeedShapes) {
  const DeviceLimits h200;
  for (Op op : kGatedOps) {
    const bool samu = op == Op::kSamu;
    for (const Shape& s : kSeedShapes) {
      for (const Variant& v : EnumerateVariants(op, false)) {
        const Problem p = MakeProblem(op, s);
        if (!CanImplement(v, p, h200).ok() || v.algorithm == Algorithm::kChunked) continue;  // ChunkedGeometry
        SCOPED_TRACE(std::string(OpName(op)) + " " + v.Name() + " " + FormatShape(s));
        StatusOr<LaunchPlan> plan = MakePlan(v, p, h200);
        ASSERT_TRUE(plan.ok()) << plan.status().ToString();
        const bool sequential = v.algorithm == Algorithm::kSequential;
        const bool fused = v.algorithm == Algorithm::kFused;
        const bool held = v.algorithm == Algorithm::kLookback || fused;
        const bool packed = v.algorithm == Algorithm::kLookback && v.order >= 2;
        // _o5: the strips of a time tile as one cluster meet for m_t and dm_t.
        const bool cluster = v.algorithm == Algorithm::kLookback && v.order == 5;
        const bool fixup = samu && (sequential || held) && !fused && !cluster;
        const bool control = samu && !fused && !cluster;
        const std::vector<std::string> names = NameExpressions(v, op, p.dtype, {}, s);  // _k1: the shape's
        // rglru, samu fused and _o5: fwd scan | bwd scan, finalize; samu: control, fwd scan | bwd scan,
        // (sequential, lookback: fix-up,) finalize.
        const size_t kernels = control ? (fixup ? 5u : 4u) : 3u;
        ASSERT_EQ(names.size(), kernels);
        ASSERT_EQ(plan->launches.size(), kernels);
        std::vector<std::string> phases;
        for (const Launch& l : plan->launches) {
          phases.push_back(l.phase);
          EXPECT_GE(l.grid[0], 1u);
          EXPECT_LE(l.grid[1], 65535u);
          EXPECT_LE(l.block[0], 1024u);
          EXPECT_LE(static_cast<int>(l.shared_bytes), h200.max_shared_per_block);
          EXPECT_NE(std::find(names.begin(), names.end(), l.name_expression), names.end()) << l.name_expression;
        }
        std::vector<std::string> want = {"fwd", "bwd", "bwd"};
        if (control) want.insert(want.begin(), "fwd");
        if (fixup) want.push_back("bwd");
        EXPECT_EQ(phases, want);
        // fused_d{strip}_s{segments}_c{tile} runs vec 2, threads strip / 2 x segments.
        const int vec = fused ? 2 : v.vec;
        const int threads = fused ? v.dim_block / 2 * v.state_split : v.threads;
        const int strip = fused ? v.dim_block : held ? v.threads / v.segments * v.vec : 0;
        const int tile = fused ? v.chunk : held ? v.segments * v.items : 0;
        const int unit = sequential ? 32 * v.vec : strip;
        const gated::Layout lay = gated::MakeLayout(s.batch, s.length, s.width, unit, sequential ? 0 : tile,
                                                    samu ? 3 : 1, samu, samu && held && !fused && !cluster, packed);
        // _o2: zeroed once (launch epochs), every launch a PDL dependent; the others neither.
        EXPECT_EQ(plan->workspace_zero_once, packed);
        for (const Launch& l : plan->launches) EXPECT_EQ(l.dependent_launch, packed) << l.name_expression;
        // _o5's scans launch in clusters of the tile's strips (grid.x); nothing else does.
        for (const Launch& l : plan->launches) {
          const bool scan = l.name_expression.find("_held<") != std::string::npos;
          EXPECT_EQ(l.cluster_x, cluster && scan ? l.grid[0] : 1u) << l.name_expression;
        }
        if (samu) {
          EXPECT_EQ(lay.ctrl_rows, fixup ? lay.fix_blocks : lay.parts);
        }
        EXPECT_EQ(plan->workspace_bytes, static_cast<uint64_t>(lay.total_bytes));
        EXPECT_EQ(plan->workspace_zero_bytes, static_cast<uint64_t>(lay.zero_bytes));
        const Launch& fwd_scan = plan->launches[control ? 1 : 0];
        EXPECT_EQ(fwd_scan.block[0], static_cast<uint32_t>(threads));
        if (sequential) {
          EXPECT_EQ(fwd_scan.grid[0], static_cast<uint32_t>(CeilDiv(CeilDiv(s.width, v.vec), v.threads)));
          EXPECT_EQ(fwd_scan.grid[1], static_cast<uint32_t>(s.batch));
          EXPECT_EQ(plan->workspace_zero_bytes, 0u);
        } else {
          if (fused || packed) {  // (strips, B, tiles): linear block order = ticket order
            EXPECT_EQ(fwd_scan.grid[0], static_cast<uint32_t>(CeilDiv(s.width, strip)));
            EXPECT_EQ(fwd_scan.grid[1], static_cast<uint32_t>(s.batch));
            EXPECT_EQ(fwd_scan.grid[2], static_cast<uint32_t>(CeilDiv(s.length, tile)));
          } else {
            EXPECT_EQ(fwd_scan.grid[0],
                      static_cast<uint32_t>(s.batch * CeilDiv(s.width, strip) * CeilDiv(s.length, tile)));
          }
          // Shared memory mirrors SmemPlan: staged inputs and the combine.
          const int64_t segs = threads / (strip / vec);
          const int64_t staged = (samu ? 1 : 3) * int64_t{tile} * strip * 2;
          // samu's 16-bit _o3 forward with items x vec > 16 adds b's TILE x STRIP fp32 region.
          const bool b_smem = samu && v.algorithm == Algorithm::kLookback && v.order >= 3 && v.items * v.vec > 16;
          if (cluster) EXPECT_LE(CeilDiv(s.width, strip), 16);
          const int64_t combine_end = staged + (2 * segs * strip + strip) * 4 + 16;
          EXPECT_EQ(fwd_scan.shared_bytes, static_cast<uint32_t>(b_smem ? (combine_end + 15) / 16 * 16 + int64_t{tile} * strip * 4
                                                                          : combine_end));
          EXPECT_GT(fwd_scan.shared_bytes, 0u);
          if (packed) {  // the epoch header and two u64 words per tile and channel
            EXPECT_EQ(plan->workspace_zero_bytes, (256u + 16u * lay.seqs * lay.tiles * strip + 255) / 256 * 256);
            EXPECT_EQ(lay.incl_offset - lay.agg_offset, 8);  // {w1, w2} side by side
          } else {
            EXPECT_GE(plan->workspace_zero_bytes,
                      256u + 4u * lay.seqs * lay.tiles + (samu ? 4u * s.batch * lay.tiles : 0u));
          }
          EXPECT_EQ(plan->workspace_zero_bytes % 256, 0u);
        }
        const Launch& finalize = plan->launches.back();
        EXPECT_EQ(finalize.grid[0], static_cast<uint32_t>(CeilDiv(s.width, 32) + (samu ? 1 : 0)));
        EXPECT_EQ(finalize.block[0], static_cast<uint32_t>(gated::kFinalizeThreads));
        if (control) {
          EXPECT_EQ(plan->launches[0].grid[0],
                    static_cast<uint32_t>(CeilDiv(s.batch * s.length, gated::kFixupTokensPerBlock)));
          if (fixup) {
            EXPECT_EQ(plan->launches[3].grid[0], plan->launches[0].grid[0]);
            EXPECT_EQ(plan->launches[3].block[0], static_cast<uint32_t>(gated::kFixupThreads));
          }
        }
      }
    }
  }
}

TEST(GatedPlan, ModesPlanOnlyTheirPhases) {
  const DeviceLimits h200;
  for (const char* name :
       {"sequential_v4_t64_p4", "lookback_v2_t256_s8_i8", "lookback_v2_t256_s8_i8_o2", "fused_d64_s8_c64"}) {
    const Variant v = Parsed(name);
    for (Op op : kGatedOps) {
      if (v.algorithm == Algorithm::kFused && op != Op::kSamu) continue;
      SCOPED_TRACE(std::string(name) + " " + OpName(op));
      StatusOr<LaunchPlan> fwd = MakePlan(v, MakeProblem(op, {2, 100, 70}, DType::kF16, Mode::kFwd), h200);
      StatusOr<LaunchPlan> bwd = MakePlan(v, MakeProblem(op, {2, 100, 70}, DType::kF16, Mode::kBwd), h200);
      ASSERT_TRUE(fwd.ok() && bwd.ok());
      for (const Launch& l : fwd->launches) EXPECT_EQ(l.phase, "fwd");
      for (const Launch& l : bwd->launches) EXPECT_EQ(l.phase, "bwd");
      // samu: control | bwd scan, fix-up, finalize around the scans; fused: the scans and finalize only.
      const size_t samu_kernels = v.algorithm == Algorithm::kFused ? 3u : 5u;
      EXPECT_EQ(fwd->launches.size() + bwd->launches.size(), op == Op::kSamu ? samu_kernels : 3u);
    }
  }
}

// The v2 family's geometry: strip = threads / segments x vec, tile =
// segments x items; samu's backward has no strips-per-SM limit (no meeting).
TEST(GatedPlan, HeldGeometry) {
  const DeviceLimits h200;
  const Variant v = Parsed("lookback_v2_t256_s16_i8");  // strip 32, tile 128
  const Problem rglru = MakeProblem(Op::kRgLru, {4, 2048, 2048});
  StatusOr<LaunchPlan> plan = MakePlan(v, rglru, h200);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->launches[0].name_expression, "rglru_fwd_held<__nv_bfloat16, 2, 256, 32, 128, 0>");
  EXPECT_EQ(plan->launches[0].grid[0], 4u * (2048 / 32) * (2048 / 128));
  // 3 staged bf16 inputs + combine (2 x 16 segments x 32 + 32 floats) + ticket.
  EXPECT_EQ(plan->launches[0].shared_bytes, 3u * 128 * 32 * 2 + (2 * 16 * 32 + 32) * 4 + 16);
  EXPECT_EQ(plan->launches[1].name_expression, "rglru_bwd_held<__nv_bfloat16, 2, 256, 32, 128, 0>");
  EXPECT_EQ(plan->launches[1].shared_bytes, 5u * 128 * 32 * 2 + (2 * 16 * 32 + 32) * 4 + 16);
  EXPECT_EQ(plan->launches[2].name_expression, "rglru_bwd_finalize<__nv_bfloat16, 32, 128, 0>");
  const Problem wide_samu = MakeProblem(Op::kSamu, {1, 64, 64 * 133});
  EXPECT_TRUE(CanImplement(Parsed("lookback_v2_t256_s8_i8"), wide_samu, h200).ok());
  StatusOr<LaunchPlan> samu = MakePlan(Parsed("lookback_v2_t256_s8_i8"), MakeProblem(Op::kSamu, {4, 2048, 2048}), h200);
  ASSERT_TRUE(samu.ok()) << samu.status().ToString();
  EXPECT_EQ(LaunchNames(*samu), (std::vector<std::string>{"samu_fwd_control_fast<__nv_bfloat16>",
                                             "samu_fwd_held<__nv_bfloat16, 2, 256, 64, 64, 0>",
                                             "samu_bwd_held<__nv_bfloat16, 2, 256, 64, 64, 0>",
                                             "samu_bwd_fixup_fast<__nv_bfloat16, 64, 64, 0>",
                                             "samu_bwd_finalize_fixup<__nv_bfloat16, 64, 64, 0>"}));
}

// lookback _o2: the same kernels with ORDER 2 on a (strips, B, tiles) grid,
// the packed workspace (gated_layout.h) zeroed once, every launch a PDL dependent.
TEST(GatedPlan, PackedOrderGeometry) {
  const DeviceLimits h200;
  StatusOr<LaunchPlan> plan =
      MakePlan(Parsed("lookback_v2_t256_s8_i16_o2"), MakeProblem(Op::kSamu, {4, 2048, 2048}), h200);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(LaunchNames(*plan), (std::vector<std::string>{"samu_fwd_control_fast<__nv_bfloat16>",
                                             "samu_fwd_held<__nv_bfloat16, 2, 256, 64, 128, 2>",
                                             "samu_bwd_held<__nv_bfloat16, 2, 256, 64, 128, 2>",
                                             "samu_bwd_fixup_fast<__nv_bfloat16, 64, 128, 2>",
                                             "samu_bwd_finalize_fixup<__nv_bfloat16, 64, 128, 2>"}));
  for (int k : {1, 2}) {
    EXPECT_EQ(plan->launches[k].grid[0], 2048u / 64);   // strips
    EXPECT_EQ(plan->launches[k].grid[1], 4u);           // batch
    EXPECT_EQ(plan->launches[k].grid[2], 2048u / 128);  // time tiles
  }
  EXPECT_TRUE(plan->workspace_zero_once);
  const gated::Layout lay = gated::MakeLayout(4, 2048, 2048, 64, 128, 3, true, true, true);
  EXPECT_EQ(lay.agg_offset, 256);
  EXPECT_EQ(lay.zero_bytes, 256 + 2 * 8 * (4 * 32 * 16) * 64);
  EXPECT_EQ(lay.param_offset, lay.zero_bytes);
  EXPECT_EQ(plan->workspace_zero_bytes, static_cast<uint64_t>(lay.zero_bytes));
  EXPECT_EQ(plan->workspace_bytes, static_cast<uint64_t>(lay.total_bytes));
  StatusOr<LaunchPlan> rglru =
      MakePlan(Parsed("lookback_v2_t256_s8_i16_o2"), MakeProblem(Op::kRgLru, {1, 100, 70}, DType::kF32), h200);
  ASSERT_TRUE(rglru.ok()) << rglru.status().ToString();
  EXPECT_EQ(rglru->launches.back().name_expression, "rglru_bwd_finalize<float, 64, 128, 2>");
  // _o3: the _o2 plan with ORDER 3 (the tanh gate), 16-bit dtypes only.
  StatusOr<LaunchPlan> tanh =
      MakePlan(Parsed("lookback_v2_t256_s8_i16_o3"), MakeProblem(Op::kRgLru, {1, 100, 70}, DType::kF16), h200);
  ASSERT_TRUE(tanh.ok()) << tanh.status().ToString();
  EXPECT_EQ(tanh->launches[0].name_expression, "rglru_fwd_held<__half, 2, 256, 64, 128, 3>");
  EXPECT_TRUE(tanh->workspace_zero_once);
  for (const Launch& l : tanh->launches) EXPECT_TRUE(l.dependent_launch) << l.name_expression;
}

// v3 `fused` (samu): fused_d{strip}_s{segments}_c{tile} = the v2 geometry
// with vec 2, threads = strip / 2 x segments; no control and no fix-up
// kernel; the finalize reads one controller row per (b, tile).
TEST(GatedPlan, FusedGeometry) {
  const DeviceLimits h200;
  const Problem samu = MakeProblem(Op::kSamu, {4, 2048, 2048});
  StatusOr<LaunchPlan> plan = MakePlan(Parsed("fused_d64_s8_c128"), samu, h200);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(LaunchNames(*plan), (std::vector<std::string>{"samu_fwd_fused<__nv_bfloat16, 2, 256, 64, 128>",
                                             "samu_bwd_fused<__nv_bfloat16, 2, 256, 64, 128>",
                                             "samu_bwd_finalize<__nv_bfloat16, 64, 128>"}));
  EXPECT_EQ(plan->launches[0].grid[0], 2048u / 64);  // strips
  EXPECT_EQ(plan->launches[0].grid[1], 4u);          // batch
  EXPECT_EQ(plan->launches[0].grid[2], 2048u / 128);  // time tiles
  EXPECT_EQ(plan->launches[0].block[0], 256u);
  // x staged + combine (2 x 8 segments x 64 + 64 floats) + ticket; bwd: dy, x, h.
  EXPECT_EQ(plan->launches[0].shared_bytes, 1u * 128 * 64 * 2 + (2 * 8 * 64 + 64) * 4 + 16);
  EXPECT_EQ(plan->launches[1].shared_bytes, 3u * 128 * 64 * 2 + (2 * 8 * 64 + 64) * 4 + 16);
  const gated::Layout lay = gated::MakeLayout(4, 2048, 2048, 64, 128, 3, true, false);
  EXPECT_EQ(lay.ctrl_rows, lay.parts);
  EXPECT_EQ(lay.ctrl_rows, 4 * (2048 / 128));
  EXPECT_EQ(plan->workspace_bytes, static_cast<uint64_t>(lay.total_bytes));
  // The group counters (one per (b, tile)) lie in the zeroed prefix.
  EXPECT_EQ(plan->workspace_zero_bytes, static_cast<uint64_t>(lay.zero_bytes));
  EXPECT_GE(lay.zero_bytes, 4 * (lay.group_counters + 4 * lay.tiles));
  // ... and the per-token accumulators of the meetings ([tokens][3] fp32), zeroed with them.
  EXPECT_EQ(lay.acc_offset, 4 * (lay.group_counters + 4 * lay.tiles));
  EXPECT_GE(lay.zero_bytes, lay.acc_offset + 3 * 4 * 4 * 2048);
  // Strips of a tile meet: at most one per SM (1x32768x2048 at strip 16 is 128 strips).
  EXPECT_TRUE(CanImplement(Parsed("fused_d16_s32_c512"), MakeProblem(Op::kSamu, {1, 32768, 2048}), h200).ok());
  EXPECT_FALSE(CanImplement(Parsed("fused_d16_s32_c512"), MakeProblem(Op::kSamu, {1, 8192, 2560}), h200).ok());
}

// samu _o5 (by name): the scans launch in clusters of the tile's strips; no
// control and no fix-up kernel; one controller row per (b, tile).
// samu `chunked`: rows blocks (chunks, B) of ceil(W / 8) threads for the
// passes that meet for m_t / dm_t, columns blocks (ceil(W / 1024), chunks, B)
// of 128 for the others (the backward's local pass: two halves of 128), the
// carries over chunks, the finalize's blocks of 16 channels, every launch a PDL
// dependent, the workspace of MakeChunkedLayout (nothing zeroed).
TEST(GatedPlan, ChunkedGeometry) {
  const DeviceLimits h200;
  const Problem p = MakeProblem(Op::kSamu, {1, 8192, 2560});
  StatusOr<LaunchPlan> plan = MakePlan(Parsed("chunked_v8_t512_c64"), p, h200);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const std::vector<std::string> names = NameExpressions(Parsed("chunked_v8_t512_c64"), Op::kSamu, DType::kBF16);
  // Two backward carry instances (batches of 4 and 16 chunks) and two finalize instances (16 and 32 channels
  // per block) in the module; the plan launches one of each.
  ASSERT_EQ(names.size(), 9u);
  EXPECT_EQ(names[5], "samu_chunk_carry<__nv_bfloat16, 64, 1, 0, 16>");
  EXPECT_EQ(names[7], "samu_bwd_chunk_finalize<__nv_bfloat16, 64>");
  EXPECT_EQ(names[8], "samu_bwd_chunk_finalize<__nv_bfloat16, 64, 0, 32>");
  ASSERT_EQ(plan->launches.size(), 7u);
  const int64_t chunks = 8192 / 64;
  struct Want {
    const char* kernel;
    const char* phase;
    uint32_t gx, gy, gz, threads;
  };
  const Want want[] = {
      {"samu_fwd_chunk_agg<__nv_bfloat16, 512, 64>", "fwd", chunks, 1, 1, 320},
      {"samu_chunk_carry<__nv_bfloat16, 64, 0>", "fwd", 80, 1, 1, 32 * 32},
      {"samu_fwd_chunk_scan<__nv_bfloat16, 64>", "fwd", 3, chunks, 1, 128},
      // W = 2560 in 5 columns of 512 channels (64 threads, each half of the chunk), not 1024 + 1024 + 512.
      {"samu_bwd_chunk_agg<__nv_bfloat16, 64>", "bwd", 5, chunks, 1, 128},
      {"samu_chunk_carry<__nv_bfloat16, 64, 1>", "bwd", 80, 1, 1, 32 * 32},
      {"samu_bwd_chunk_scan<__nv_bfloat16, 512, 64>", "bwd", chunks, 1, 1, 320},
      // 32 channels per block: 2560 / 16 + 1 = 161 blocks of 1024 threads would be two waves on 132 SMs.
      {"samu_bwd_chunk_finalize<__nv_bfloat16, 64, 0, 32>", "bwd", 2560 / 32 + 1, 1, 1, 1024},
  };
  for (size_t i = 0; i < 7; ++i) {
    const Launch& l = plan->launches[i];
    SCOPED_TRACE(l.name_expression);
    EXPECT_EQ(l.name_expression, want[i].kernel);
    EXPECT_EQ(names[i == 6 ? 8 : i == 5 ? 6 : i], want[i].kernel);
    EXPECT_EQ(l.phase, want[i].phase);
    EXPECT_EQ(l.grid, (std::array<uint32_t, 3>{want[i].gx, want[i].gy, want[i].gz}));
    EXPECT_EQ(l.block[0], want[i].threads);
    EXPECT_TRUE(l.dependent_launch);
    EXPECT_EQ(l.cluster_x, 1u);
  }
  // The cp.async rings: 2 stages x 8 tokens (fwd agg), 3 x 8 (columns), 2 x 3 inputs x 4 tokens (bwd scan), 16 B a thread.
  EXPECT_EQ(plan->launches[0].shared_bytes, 2u * 8 * 320 * 16);
  EXPECT_EQ(plan->launches[2].shared_bytes, 3u * 8 * 128 * 16);
  EXPECT_EQ(plan->launches[3].shared_bytes, 3u * 4 * 128 * 16);  // two halves of 64 threads, 3 x 4 tokens each
  // 1024-channel columns where they pad W no more than 512-channel ones (W = 2048, 1000), and the finalize at
  // 16 channels per block where its blocks are one wave.
  for (const Shape& shape : std::vector<Shape>{{4, 2048, 2048}, {2, 520, 1000}}) {
    StatusOr<LaunchPlan> other = MakePlan(Parsed("chunked_v8_t512_c64"), MakeProblem(Op::kSamu, shape), h200);
    ASSERT_TRUE(other.ok()) << FormatShape(shape);
    EXPECT_EQ(other->launches[3].block[0], 256u) << FormatShape(shape);
    EXPECT_EQ(other->launches[3].grid[0], (shape.width + 1023) / 1024) << FormatShape(shape);
    EXPECT_EQ(other->launches[6].name_expression, "samu_bwd_chunk_finalize<__nv_bfloat16, 64>");
    EXPECT_EQ(other->launches[6].grid[0], (shape.width + 15) / 16 + 1) << FormatShape(shape);
  }
  // The backward carry in batches of 16 where a slice's run is longer than 4 chunks: L = 32768 at chunk 64 is
  // 512 chunks over 32 slices (1x8192x2560's 128 chunks are runs of 4).
  StatusOr<LaunchPlan> long_runs =
      MakePlan(Parsed("chunked_v8_t256_c64_l64_y1_b5_i32_a1"), MakeProblem(Op::kSamu, {1, 32768, 1024}), h200);
  ASSERT_TRUE(long_runs.ok()) << long_runs.status().ToString();
  EXPECT_EQ(long_runs->launches[3].name_expression, "samu_chunk_carry<__nv_bfloat16, 64, 1, 64, 16>");
  EXPECT_EQ(long_runs->launches[3].block[0], 32u * 32);
  EXPECT_EQ(plan->launches[5].shared_bytes, 2u * 3 * 4 * 320 * 16);
  EXPECT_EQ(plan->launches[1].shared_bytes, 0u);
  const gated::ChunkedLayout lay = gated::MakeChunkedLayout(1, 8192, 2560, 64);
  EXPECT_EQ(lay.chunks, chunks);
  EXPECT_EQ(plan->workspace_bytes, static_cast<uint64_t>(lay.total_bytes));
  EXPECT_EQ(plan->workspace_zero_bytes, 0u);
  EXPECT_FALSE(plan->workspace_zero_once);
  // The rows blocks hold a whole token row: W / 8 threads, at most the variant's t.
  EXPECT_TRUE(CanImplement(Parsed("chunked_v8_t256_c32"), MakeProblem(Op::kSamu, {4, 2048, 2048}), h200).ok());
  EXPECT_EQ(CanImplement(Parsed("chunked_v8_t256_c32"), p, h200).code(), StatusCode::kResourceExhausted);
  // bwd alone: the backward's four launches.
  Problem bwd = p;
  bwd.mode = Mode::kBwd;
  StatusOr<LaunchPlan> bwd_plan = MakePlan(Parsed("chunked_v8_t512_c64"), bwd, h200);
  ASSERT_TRUE(bwd_plan.ok());
  ASSERT_EQ(bwd_plan->launches.size(), 4u);
  EXPECT_EQ(bwd_plan->launches[0].name_expression, want[3].kernel);
}

// samu `chunked` _l{strip}: lookback_v2_t256_s{512 / strip}_i16_o3's forward
// (control, then the held scan on its (strips, B, tiles) grid) and chunked's
// backward, whose sections start after the forward's look-back region; that
// region is what the plan zeroes, once (launch epochs).
TEST(GatedPlan, ChunkedWithLookbackForward) {
  const DeviceLimits h200;
  const Problem p = MakeProblem(Op::kSamu, {4, 2048, 2048});
  const Variant v = Parsed("chunked_v8_t256_c32_l64");
  EXPECT_EQ(v.Name(), "chunked_v8_t256_c32_l64");
  StatusOr<LaunchPlan> plan = MakePlan(v, p, h200);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(LaunchNames(*plan), (std::vector<std::string>{"samu_fwd_control_fast<__nv_bfloat16>",
                                                           "samu_fwd_held<__nv_bfloat16, 2, 256, 64, 128, 3>",
                                                           "samu_bwd_chunk_agg<__nv_bfloat16, 32, 64>",
                                                           "samu_chunk_carry<__nv_bfloat16, 32, 1, 64>",
                                                           "samu_bwd_chunk_scan<__nv_bfloat16, 256, 32, 64>",
                                                           "samu_bwd_chunk_finalize<__nv_bfloat16, 32, 64>"}));
  // The forward's launches are lookback_v2_t256_s8_i16_o3's, as that variant plans them.
  StatusOr<LaunchPlan> o3 = MakePlan(Parsed("lookback_v2_t256_s8_i16_o3"), p, h200);
  ASSERT_TRUE(o3.ok());
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(plan->launches[i].name_expression, o3->launches[i].name_expression);
    EXPECT_EQ(plan->launches[i].grid, o3->launches[i].grid);
    EXPECT_EQ(plan->launches[i].block, o3->launches[i].block);
    EXPECT_EQ(plan->launches[i].shared_bytes, o3->launches[i].shared_bytes);
  }
  for (const Launch& l : plan->launches) EXPECT_TRUE(l.dependent_launch);
  const gated::ChunkedLayout lay = gated::MakeChunkedLayout(4, 2048, 2048, 32, 64);
  const gated::ChunkedLayout plain = gated::MakeChunkedLayout(4, 2048, 2048, 32);
  EXPECT_EQ(plan->workspace_zero_bytes, o3->workspace_zero_bytes);
  EXPECT_TRUE(plan->workspace_zero_once);
  EXPECT_EQ(lay.sum_r_offset, static_cast<int64_t>(o3->workspace_zero_bytes));
  EXPECT_EQ(lay.total_bytes - lay.sum_r_offset, plain.total_bytes);
  EXPECT_EQ(plan->workspace_bytes, static_cast<uint64_t>(lay.total_bytes));
  // Strips other than the two _o3 forwards', and the knob on other operators, are refused.
  EXPECT_EQ(CanImplement(Parsed("chunked_v8_t256_c32_l48"), p, h200).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CanImplement(Parsed("chunked_v8_t256_c32_l64"), MakeProblem(Op::kLinearScan, {4, 2048, 2048}), h200)
                .code(),
            StatusCode::kInvalidArgument);
}

TEST(GatedPlan, ClusterGeometry) {
  const DeviceLimits h200;
  const Problem samu = MakeProblem(Op::kSamu, {4, 2048, 2048});
  StatusOr<LaunchPlan> plan = MakePlan(Parsed("lookback_v2_t256_s4_i16_o5"), samu, h200);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(LaunchNames(*plan), (std::vector<std::string>{"samu_fwd_held<__nv_bfloat16, 2, 256, 128, 64, 5>",
                                                           "samu_bwd_held<__nv_bfloat16, 2, 256, 128, 64, 5>",
                                                           "samu_bwd_finalize_fixup<__nv_bfloat16, 128, 64, 5>"}));
  for (int i = 0; i < 2; ++i) {
    const Launch& l = plan->launches[i];
    EXPECT_EQ(l.grid[0], 2048u / 128);  // strips: one cluster
    EXPECT_EQ(l.grid[1], 4u);
    EXPECT_EQ(l.grid[2], 2048u / 64);
    EXPECT_EQ(l.cluster_x, 2048u / 128);
    EXPECT_TRUE(l.dependent_launch);
  }
  EXPECT_EQ(plan->launches[2].cluster_x, 1u);
  const gated::Layout lay = gated::MakeLayout(4, 2048, 2048, 128, 64, 3, true, false, true);
  EXPECT_EQ(lay.ctrl_rows, lay.parts);
  EXPECT_EQ(plan->workspace_bytes, static_cast<uint64_t>(lay.total_bytes));
  EXPECT_TRUE(plan->workspace_zero_once);
  // W = 2560 is 20 strips of 128 (over 16 per cluster) but 10 of 256.
  const Problem wide = MakeProblem(Op::kSamu, {1, 8192, 2560});
  EXPECT_EQ(CanImplement(Parsed("lookback_v2_t256_s4_i16_o5"), wide, h200).code(), StatusCode::kResourceExhausted);
  StatusOr<LaunchPlan> ten = MakePlan(Parsed("lookback_v2_t512_s4_i16_o5"), wide, h200);
  ASSERT_TRUE(ten.ok()) << ten.status().ToString();
  EXPECT_EQ(ten->launches[0].cluster_x, 10u);
  // rglru has no controller to meet for.
  EXPECT_EQ(CanImplement(Parsed("lookback_v2_t256_s4_i16_o5"), MakeProblem(Op::kRgLru, {4, 2048, 2048}), h200).code(),
            StatusCode::kInvalidArgument);
  // Not enumerated (slower than _o3 on the H200: bench/NOTES.md).
  for (const Variant& v : EnumerateVariants(Op::kSamu, false)) EXPECT_NE(v.order, 5) << v.Name();
}

// The named _o5 points compile for sm_90 at every dtype without spills.
// Points run by name, not enumerated: samu _o5 (clusters) and `chunked` _h{n}.
TEST(GatedNvrtc, NamedPointsCompileWithoutSpills) {
  const NvrtcCompiler compiler;
  std::vector<CompileRequest> requests;
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (const char* name : {"lookback_v2_t256_s4_i16_o5", "lookback_v2_t512_s8_i16_o5", "chunked_v8_t256_c32_l64_h4",
                             "chunked_v8_t512_c64_l32_h2", "chunked_v8_t256_c64_h4"}) {
      CompileRequest r;
      r.variant = Parsed(name);
      r.op = Op::kSamu;
      r.dtype = dtype;
      requests.push_back(r);
    }
  }
  for (DType dtype : {DType::kF32, DType::kF16}) {  // _a1 (atomic parameter sums) at the dtypes of no _y1
    CompileRequest r;
    r.variant = Parsed("chunked_v8_t256_c32_a1");
    r.op = Op::kSamu;
    r.dtype = dtype;
    requests.push_back(r);
  }
  // _y1 is bf16's (CanImplement).
  for (const char* name : {"chunked_v8_t256_c32_l64_y1", "chunked_v8_t512_c64_l32_y1", "chunked_v8_t256_c128_l32_y1",
                           "chunked_v8_t256_c32_l64_y1_b4_i32_a1", "chunked_v8_t512_c64_l64_y1_b4_i32_a1"}) {
    CompileRequest r;
    r.variant = Parsed(name);
    r.op = Op::kSamu;
    r.dtype = DType::kBF16;
    requests.push_back(r);
  }
  const std::vector<StatusOr<CompileResult>> results = CompileAll(compiler, requests, 2);
  ASSERT_EQ(results.size(), requests.size());
  for (size_t i = 0; i < results.size(); ++i) {
    const std::string what = requests[i].variant.Name() + " " + DTypeName(requests[i].dtype);
    ASSERT_TRUE(results[i].ok()) << what << ": " << results[i].status().ToString();
    ASSERT_EQ(results[i]->state, v1::OK) << what << "\n" << results[i]->log;
    ExpectNoSpills(results[i]->log, what);
  }
}

template <typename Params>
void ExpectLayout(Op op, const std::vector<std::pair<std::string, size_t>>& fields) {
  const std::vector<v1::ParamField> layout = ParamLayout(op);
  ASSERT_EQ(layout.size(), fields.size());
  EXPECT_EQ(ParamSize(op), sizeof(Params));
  for (size_t i = 0; i < fields.size(); ++i) {
    SCOPED_TRACE(fields[i].first);
    EXPECT_EQ(layout[i].name(), fields[i].first);
    EXPECT_EQ(layout[i].offset_bytes(), fields[i].second);
    EXPECT_EQ(layout[i].size_bytes(), 8u);
    EXPECT_TRUE(layout[i].type() == "ptr" || layout[i].type() == "i64");
    EXPECT_EQ(layout[i].type() == "i64",
              fields[i].first == "batch" || fields[i].first == "length" || fields[i].first == "width");
    EXPECT_FALSE(layout[i].meaning().empty());
  }
}

#define FIELD(S, m) {#m, offsetof(S, m)}
TEST(GatedParamLayout, OffsetsAreOffsetof) {
  ExpectLayout<RgLruParams>(
      Op::kRgLru, {FIELD(RgLruParams, x), FIELD(RgLruParams, ga), FIELD(RgLruParams, gx),
                   FIELD(RgLruParams, lambda), FIELD(RgLruParams, h), FIELD(RgLruParams, h0),
                   FIELD(RgLruParams, h_final), FIELD(RgLruParams, dh), FIELD(RgLruParams, dx),
                   FIELD(RgLruParams, dga), FIELD(RgLruParams, dgx), FIELD(RgLruParams, dlambda),
                   FIELD(RgLruParams, dh0), FIELD(RgLruParams, workspace), FIELD(RgLruParams, batch),
                   FIELD(RgLruParams, length), FIELD(RgLruParams, width)});
  ExpectLayout<SamuParams>(
      Op::kSamu, {FIELD(SamuParams, x), FIELD(SamuParams, lambda), FIELD(SamuParams, beta),
                  FIELD(SamuParams, gamma), FIELD(SamuParams, controller), FIELD(SamuParams, y),
                  FIELD(SamuParams, h), FIELD(SamuParams, ctrl), FIELD(SamuParams, h0),
                  FIELD(SamuParams, h_final), FIELD(SamuParams, dy), FIELD(SamuParams, dx),
                  FIELD(SamuParams, dlambda), FIELD(SamuParams, dbeta), FIELD(SamuParams, dgamma),
                  FIELD(SamuParams, dcontroller), FIELD(SamuParams, dh0), FIELD(SamuParams, workspace),
                  FIELD(SamuParams, batch), FIELD(SamuParams, length), FIELD(SamuParams, width)});
}
#undef FIELD

// Every gated variant x {rglru, samu} x {fp32, bf16, fp16}, sm_90, on the CI
// machine's 2 cores. Prints how long it took; asserts nothing about time.
// _h{n}: the forward saves h at every n-th token, the backward recomputes
// the rows between; only where a backward of the same variant reads them.
TEST(GatedPlan, ChunkedSavedEveryNthToken) {
  const DeviceLimits h200;
  const Problem p = MakeProblem(Op::kSamu, {4, 2048, 2048});
  const Variant v = Parsed("chunked_v8_t256_c32_l64_h4");
  EXPECT_EQ(v.save_every, 4);
  const std::optional<LaunchPlan> plan = SamuSeedPlan("chunked_v8_t256_c32_l64_h4");
  // The kernels of the point that saves every row (ChunkedWithLookbackForward),
  // with SAVE = 4 on the two that write and read h: the held forward and the rescan.
  const std::optional<LaunchPlan> dense = SamuSeedPlan("chunked_v8_t256_c32_l64");
  const std::vector<std::string> names = NamesWithSave(*dense, 4);
  EXPECT_EQ(names[1], "samu_fwd_held<__nv_bfloat16, 2, 256, 64, 128, 3, 4>");
  EXPECT_EQ(LaunchNames(*plan), names);
  // The same grids, blocks, shared memory and workspace.
  ASSERT_EQ(plan->launches.size(), dense->launches.size());
  for (size_t i = 0; i < plan->launches.size(); ++i) {
    EXPECT_EQ(plan->launches[i].grid, dense->launches[i].grid);
    EXPECT_EQ(plan->launches[i].shared_bytes, dense->launches[i].shared_bytes);
  }
  EXPECT_EQ(plan->workspace_bytes, dense->workspace_bytes);
  // Plain chunked names FWD_STRIP 0 before SAVE.
  StatusOr<LaunchPlan> plain = MakePlan(Parsed("chunked_v8_t256_c64_h4"), p, h200);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(plain->launches[2].name_expression, "samu_fwd_chunk_scan<__nv_bfloat16, 64, 4>");
  EXPECT_EQ(plain->launches.back().name_expression, "samu_bwd_chunk_finalize<__nv_bfloat16, 64>");
  EXPECT_EQ(plain->launches[plain->launches.size() - 2].name_expression,
            "samu_bwd_chunk_scan<__nv_bfloat16, 256, 64, 0, 4>");
  // bwd alone reads the saved rows of whatever h it is given: allowed.
  EXPECT_TRUE(CanImplement(v, MakeProblem(Op::kSamu, {4, 2048, 2048}, DType::kBF16, Mode::kBwd), h200).ok());
  // Refused: a fwd-only caller's h (any backward may read it), L not a multiple of 4, other n.
  const Status fwd_only = CanImplement(v, MakeProblem(Op::kSamu, {4, 2048, 2048}, DType::kBF16, Mode::kFwd), h200);
  EXPECT_EQ(fwd_only.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(fwd_only.message().find("fwd-only"), std::string::npos) << fwd_only.message();
  const Status odd = CanImplement(v, MakeProblem(Op::kSamu, {4, 2046, 2048}), h200);
  EXPECT_EQ(odd.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(odd.message().find("multiple of 4"), std::string::npos) << odd.message();
  EXPECT_EQ(CanImplement(Parsed("chunked_v8_t256_c32_l64_h3"), p, h200).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(CanImplement(Parsed("chunked_v8_t256_c32_l64_h2"), p, h200).ok());
  // The rescan's saved steps: a group's step i holds h_{tg-1-i}, tg = 3 mod 4.
  for (int save : {1, 2, 4}) {
    for (int tg = 3; tg < 64; tg += 4) {
      for (int i = 0; i < 4; ++i) {
        const int row = tg - 1 - i;
        const bool saved = ((row % save) + save) % save == save - 1;  // h_{-1} (h0) counts as saved
        EXPECT_EQ(gated::ChunkSavedStep(i, save), saved) << "save " << save << " tg " << tg << " step " << i;
      }
    }
    EXPECT_TRUE(gated::ChunkSavedStep(3, save)) << save;
  }
}

// _y1: the forward stores y and not h, the backward takes h = y / gamma;
// only where that backward reads this forward's y (fwd_bwd), at bf16.
TEST(GatedPlan, ChunkedHFromY) {
  const DeviceLimits h200;
  const Problem p = MakeProblem(Op::kSamu, {4, 2048, 2048});
  const Variant v = RoundTrip("chunked_v8_t256_c32_l64_y1");
  EXPECT_EQ(v.h_from_y, 1);
  const std::optional<LaunchPlan> plan = SamuSeedPlan("chunked_v8_t256_c32_l64_y1");
  const std::optional<LaunchPlan> dense = SamuSeedPlan("chunked_v8_t256_c32_l64");
  // The dense point's kernels with SAVE = 0 on the two that write and read h.
  const std::vector<std::string> names = NamesWithSave(*dense, 0);
  EXPECT_EQ(names[4], "samu_bwd_chunk_scan<__nv_bfloat16, 256, 32, 64, 0>");
  EXPECT_EQ(LaunchNames(*plan), names);
  for (size_t i = 0; i < plan->launches.size(); ++i) EXPECT_EQ(plan->launches[i].grid, dense->launches[i].grid);
  // The rescan runs in y units: the same ring, no per-thread 1 / gamma after it.
  EXPECT_EQ(plan->launches[4].shared_bytes, dense->launches[4].shared_bytes);
  EXPECT_EQ(plan->workspace_bytes, dense->workspace_bytes);
  // Refused: fwd or bwd alone (h is not all there; bwd alone has no y of this forward), other dtypes,
  // without _l, with _h{n}, other values.
  for (Mode mode : {Mode::kFwd, Mode::kBwd}) {
    const Status st = CanImplement(v, MakeProblem(Op::kSamu, {4, 2048, 2048}, DType::kBF16, mode), h200);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << static_cast<int>(mode);
    EXPECT_NE(st.message().find("fwd_bwd"), std::string::npos) << st.message();
  }
  for (DType dtype : {DType::kF32, DType::kF16}) {
    EXPECT_EQ(CanImplement(v, MakeProblem(Op::kSamu, {4, 2048, 2048}, dtype), h200).code(),
              StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(CanImplement(Parsed("chunked_v8_t256_c32_l64_h4_y1"), p, h200).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CanImplement(Parsed("chunked_v8_t256_c32_h4_y1"), p, h200).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CanImplement(Parsed("chunked_v8_t256_c32_l64_y2"), p, h200).code(), StatusCode::kInvalidArgument);
}

// _y1 without _l: chunked's own forward (rows agg, carry, columns scan) with
// its scan storing y and not h, and the backward as the hybrid's _y1.
TEST(GatedPlan, ChunkedOwnForwardHFromY) {
  const DeviceLimits h200;
  const std::optional<LaunchPlan> plan = SamuSeedPlan("chunked_v8_t256_c32_y1");
  const std::optional<LaunchPlan> dense = SamuSeedPlan("chunked_v8_t256_c32");
  ASSERT_TRUE(plan && dense);
  const std::vector<std::string> names = LaunchNames(*plan);
  ASSERT_EQ(names.size(), dense->launches.size());
  EXPECT_EQ(names[2], "samu_fwd_chunk_scan<__nv_bfloat16, 32, 0>");
  EXPECT_EQ(names[5], "samu_bwd_chunk_scan<__nv_bfloat16, 256, 32, 0, 0>");
  for (size_t i = 0; i < plan->launches.size(); ++i) {
    EXPECT_EQ(plan->launches[i].grid, dense->launches[i].grid) << i;
    if (i != 2 && i != 5) {
      EXPECT_EQ(plan->launches[i].name_expression, dense->launches[i].name_expression) << i;
    }
  }
  EXPECT_EQ(plan->workspace_bytes, dense->workspace_bytes);
  const std::optional<LaunchPlan> atomic = SamuSeedPlan("chunked_v8_t256_c32_y1_a1");
  ASSERT_TRUE(atomic);
  EXPECT_EQ(LaunchNames(*atomic)[5], "samu_bwd_chunk_scan<__nv_bfloat16, 256, 32, 0, 0, 1>");
  const Status fwd = CanImplement(Parsed("chunked_v8_t256_c32_y1"),
                                  MakeProblem(Op::kSamu, {4, 2048, 2048}, DType::kBF16, Mode::kFwd), h200);
  EXPECT_EQ(fwd.code(), StatusCode::kInvalidArgument);
}

// _b{n}: the forward's b at 16 bits in place of its staged x: the forward
// launch takes the staging and the combine only and is compiled for n blocks
// per SM; bf16 only, with _l.
TEST(GatedPlan, ChunkedB16Forward) {
  const Problem p = MakeProblem(Op::kSamu, {1, 32768, 2048});
  EXPECT_EQ(RoundTrip("chunked_v8_t256_c128_l32_y1_b5").fwd_blocks, 5);
  const Forwards f = ForwardsOfKnob("chunked_v8_t256_c128_l32_y1_b5", "chunked_v8_t256_c128_l32_y1", p);
  EXPECT_EQ(f.point.name_expression, "samu_fwd_held<__nv_bfloat16, 2, 256, 32, 256, 3, 0, 5>");
  EXPECT_EQ(f.point.grid, f.twin.grid);
  // x staged (256 x 32 bf16), the combine (2 x 16 segments x 32 + 32 floats) and 16 bytes; no 32 KB of fp32 b.
  EXPECT_EQ(f.point.shared_bytes, 256u * 32 * 2 + (2 * 16 * 32 + 32) * 4 + 16);
  EXPECT_EQ(f.twin.shared_bytes, f.point.shared_bytes + 256u * 32 * 4);
  // fwd alone runs _b without _y1; refused: fp16, without _l, other block counts.
  const Problem fwd = MakeProblem(Op::kSamu, {1, 32768, 2048}, DType::kBF16, Mode::kFwd);
  EXPECT_TRUE(CanImplement(Parsed("chunked_v8_t256_c64_l32_b5"), fwd, DeviceLimits{}).ok());
  ExpectRefused({"chunked_v8_t256_c128_l32_y1_b5"}, MakeProblem(Op::kSamu, {1, 32768, 2048}, DType::kF16, Mode::kFwd));
  ExpectRefused({"chunked_v8_t256_c64_b5", "chunked_v8_t256_c64_l32_b2", "chunked_v8_t256_c64_l32_b9"}, p);
}

// _i32 (with _b): the look-back forward's 32 tokens per thread, twice the
// tile: half the forward's tiles, inside the workspace region the backward
// reserves for 16; refused without _b and for other counts.
TEST(GatedPlan, ChunkedLongTileForward) {
  const Problem p = MakeProblem(Op::kSamu, {1, 32768, 2048});
  EXPECT_EQ(RoundTrip("chunked_v8_t256_c128_l64_y1_b5_i32").fwd_items, 32);
  const Forwards f = ForwardsOfKnob("chunked_v8_t256_c128_l64_y1_b5_i32", "chunked_v8_t256_c128_l64_y1_b5", p);
  // Strip 64 at vec 2: 8 segments of 32 tokens, tile 256 (16 tokens: tile 128).
  EXPECT_EQ(f.point.name_expression, "samu_fwd_held<__nv_bfloat16, 2, 256, 64, 256, 3, 0, 5>");
  EXPECT_EQ(f.twin.name_expression, "samu_fwd_held<__nv_bfloat16, 2, 256, 64, 128, 3, 0, 5>");
  EXPECT_EQ(f.point.grid[2] * 2, f.twin.grid[2]);  // half the tiles
  EXPECT_EQ(f.point.shared_bytes, 256u * 64 * 2 + (2 * 8 * 64 + 64) * 4 + 16);
  ExpectRefused({"chunked_v8_t256_c128_l64_y1_i32", "chunked_v8_t256_c128_l64_y1_b5_i16",
                 "chunked_v8_t256_c128_l64_y1_b5_i48", "chunked_v8_t256_c128_l64_y1_b5_i128"},
                p);
  // _i64: 64 tokens per thread, tile 512 (strip 64): a quarter of the 16-token tiles; its 64 KB staging
  // leaves 3 blocks per SM.
  const Forwards q = ForwardsOfKnob("chunked_v8_t256_c128_l64_y1_b3_i64", "chunked_v8_t256_c128_l64_y1_b3", p);
  EXPECT_EQ(q.point.name_expression, "samu_fwd_held<__nv_bfloat16, 2, 256, 64, 512, 3, 0, 3>");
  EXPECT_EQ(q.point.grid[2] * 4, q.twin.grid[2]);
  EXPECT_EQ(q.point.shared_bytes, 512u * 64 * 2 + (2 * 8 * 64 + 64) * 4 + 16);
  // A sequence inside one tile, and the seed shapes (the t512 point: rows of W = 2560 need 320 threads).
  const Variant t512 = Parsed("chunked_v8_t512_c64_l64_y1_b5_i32");
  for (const Shape& shape : std::vector<Shape>{{1, 7, 2048}, {4, 2048, 2048}, {1, 8192, 2560}, {1, 32768, 1024}}) {
    EXPECT_TRUE(CanImplement(t512, MakeProblem(Op::kSamu, shape), DeviceLimits{}).ok()) << FormatShape(shape);
  }
}

// _p{n} (with _b): the look-back forward as a persistent grid of min(tiles, n x SMs) blocks with two staged
// tiles each; its other launches are _b's. Refused without _b, above _b's blocks per SM (its register bound)
// and where n blocks' shared memory does not fit one SM.
TEST(GatedPlan, ChunkedPersistentForward) {
  const Problem p = MakeProblem(Op::kSamu, {4, 2048, 2048});
  EXPECT_EQ(RoundTrip("chunked_v8_t256_c32_l64_y1_b4_p4").blocks_per_sm, 4);
  EXPECT_EQ(RoundTrip("chunked_v8_t512_c64_l64_y1_b4_i32_p3").blocks_per_sm, 3);
  const Forwards f = ForwardsOfKnob("chunked_v8_t256_c32_l64_y1_b4_p4", "chunked_v8_t256_c32_l64_y1_b4", p);
  EXPECT_EQ(f.point.name_expression, "samu_fwd_held<__nv_bfloat16, 2, 256, 64, 128, 3, 0, 4, 1>");
  EXPECT_EQ(f.twin.name_expression, "samu_fwd_held<__nv_bfloat16, 2, 256, 64, 128, 3, 0, 4>");
  // 32 strips x 4 sequences x 16 tiles = 2048 tiles over 4 x 132 blocks.
  EXPECT_EQ(f.twin.grid, (std::array<uint32_t, 3>{32, 4, 16}));
  EXPECT_EQ(f.point.grid, (std::array<uint32_t, 3>{4 * 132, 1, 1}));
  EXPECT_EQ(f.point.shared_bytes, f.twin.shared_bytes + 128u * 64 * 2);
  // Fewer tiles than blocks: one block per tile.
  const LaunchPlan small = PlanOf("chunked_v8_t256_c32_l64_y1_b4_p4", MakeProblem(Op::kSamu, {1, 300, 100}));
  ASSERT_EQ(small.launches.size(), 6u);
  EXPECT_EQ(small.launches[1].grid, (std::array<uint32_t, 3>{2 * 3, 1, 1}));
  // 32 tokens per thread: 64 KB of staging, 3 blocks per SM fit and 4 do not.
  EXPECT_TRUE(CanImplement(Parsed("chunked_v8_t512_c64_l64_y1_b4_i32_p3"), p, DeviceLimits{}).ok());
  EXPECT_EQ(CanImplement(Parsed("chunked_v8_t512_c64_l64_y1_b4_i32_p4"), p, DeviceLimits{}).code(),
            StatusCode::kResourceExhausted);
  ExpectRefused({"chunked_v8_t256_c32_l64_y1_p4", "chunked_v8_t256_c32_l64_y1_b4_p5"}, p);
}

// A _k1 point against its twin at `p`: the same launches (geometry, PDL, workspace) but for the kernels that
// bake the shape, whose names (the problem's B, L and W as their last template arguments) must be `baked`, in
// launch order. Another shape gives other instances; no shape none (its compile fails: "no kernels").
void ExpectBakedTwin(const char* point, const char* twin, const Problem& p, const std::vector<std::string>& baked) {
  SCOPED_TRACE(point);
  EXPECT_EQ(RoundTrip(point).baked, 1);
  const LaunchPlan a = PlanOf(point, p), b = PlanOf(twin, p);
  ASSERT_EQ(a.launches.size(), b.launches.size());
  std::vector<std::string> differ;
  for (size_t i = 0; i < a.launches.size(); ++i) {
    ExpectSameGeometry(a.launches[i], b.launches[i], i);
    EXPECT_EQ(a.launches[i].dependent_launch, b.launches[i].dependent_launch) << i;
    if (a.launches[i].name_expression != b.launches[i].name_expression) differ.push_back(a.launches[i].name_expression);
  }
  EXPECT_EQ(differ, baked);
  EXPECT_EQ(a.workspace_bytes, b.workspace_bytes);
  const std::vector<std::string> names = NameExpressions(Parsed(point), p.op, p.dtype, {}, p.shape);
  for (const std::string& name : baked) EXPECT_NE(std::find(names.begin(), names.end(), name), names.end());
  const std::vector<std::string> other = NameExpressions(Parsed(point), p.op, p.dtype, {}, Shape{1, 8192, 2560});
  ASSERT_EQ(other.size(), names.size());
  EXPECT_NE(other, names);
  EXPECT_TRUE(NameExpressions(Parsed(point), p.op, p.dtype).empty());
}

// samu's _k1 (`chunked` _l): the scan kernels (held forward, backward agg and rescan) bake the shape, every
// earlier template argument spelled out; the other kernels are the twin's.
TEST(GatedPlan, ChunkedBakedShape) {
  const Problem p = MakeProblem(Op::kSamu, {4, 2048, 2048});
  ExpectBakedTwin("chunked_v8_t256_c32_l64_y1_k1", "chunked_v8_t256_c32_l64_y1", p,
                  {"samu_fwd_held<__nv_bfloat16, 2, 256, 64, 128, 3, 0, 0, 0, 0, 4, 2048, 2048>",
                   "samu_bwd_chunk_agg<__nv_bfloat16, 32, 64, 4, 2048, 2048>",
                   "samu_bwd_chunk_scan<__nv_bfloat16, 256, 32, 64, 0, 0, 4, 2048, 2048>"});
  ExpectBakedTwin("chunked_v8_t512_c64_l64_y1_b4_i32_a1_k1", "chunked_v8_t512_c64_l64_y1_b4_i32_a1", p,
                  {"samu_fwd_held<__nv_bfloat16, 2, 256, 64, 256, 3, 0, 4, 0, 0, 4, 2048, 2048>",
                   "samu_bwd_chunk_agg<__nv_bfloat16, 64, 64, 4, 2048, 2048>",
                   "samu_bwd_chunk_scan<__nv_bfloat16, 512, 64, 64, 0, 1, 4, 2048, 2048>"});
  ExpectRefused({"chunked_v8_t256_c32_l64_y1_k2", "chunked_v8_t256_c32_k1"}, p);
  const Status fp16 = CanImplement(Parsed("chunked_v8_t256_c32_l64_k1"),
                                   MakeProblem(Op::kSamu, {4, 2048, 2048}, DType::kF16, Mode::kFwd), DeviceLimits{});
  EXPECT_TRUE(fp16.ok()) << fp16.ToString();  // any dtype and mode its twin takes
  EXPECT_EQ(EnumeratedBakedTwins(Op::kSamu), 4);
}

// rglru's _k1 (lookback with the packed look-back): the forward and backward scans name CHAINED and then the
// shape; the finalize is the twin's. Refused for samu's lookback, without the packed look-back and as _k2.
TEST(GatedPlan, LookbackBakedShape) {
  const Problem p = MakeProblem(Op::kRgLru, {4, 2048, 2048});
  ExpectBakedTwin("lookback_v2_t256_s8_i16_o3_k1", "lookback_v2_t256_s8_i16_o3", p,
                  {"rglru_fwd_held<__nv_bfloat16, 2, 256, 64, 128, 3, 0, 4, 2048, 2048>",
                   "rglru_bwd_held<__nv_bfloat16, 2, 256, 64, 128, 3, 0, 4, 2048, 2048>"});
  ExpectBakedTwin("lookback_v2_t256_s8_i8_o3_d1_k1", "lookback_v2_t256_s8_i8_o3_d1", p,
                  {"rglru_fwd_held<__nv_bfloat16, 2, 256, 64, 64, 3, 1, 4, 2048, 2048>",
                   "rglru_bwd_held<__nv_bfloat16, 2, 256, 64, 64, 3, 1, 4, 2048, 2048>"});
  ExpectRefused({"lookback_v2_t256_s8_i16_o3_k2", "lookback_v2_t256_s8_i16_k1"}, p);
  ExpectRefused({"lookback_v2_t256_s8_i16_o3_k1"}, MakeProblem(Op::kSamu, {4, 2048, 2048}));
  EXPECT_EQ(EnumeratedBakedTwins(Op::kRgLru), 2);
}

// `chunked` _a1: the rescan adds its partials into the gradients (ATOMIC, its last template argument) and
// there is no finalize; every other launch is its twin's. Refused for fwd problems (no backward) and as _a2.
TEST(GatedPlan, ChunkedAtomicSumsHaveNoFinalize) {
  const Problem p = MakeProblem(Op::kSamu, {4, 2048, 2048});
  EXPECT_EQ(RoundTrip("chunked_v8_t256_c32_l64_y1_b4_i32_a1").atomic_sums, 1);
  EXPECT_EQ(RoundTrip("chunked_v8_t256_c32_a1").atomic_sums, 1);
  const struct {
    const char* point;
    const char* twin;
    const char* rescan;
  } cases[] = {
      {"chunked_v8_t256_c32_l64_y1_b4_i32_a1", "chunked_v8_t256_c32_l64_y1_b4_i32",
       "samu_bwd_chunk_scan<__nv_bfloat16, 256, 32, 64, 0, 1>"},
      {"chunked_v8_t256_c32_l64_a1", "chunked_v8_t256_c32_l64", "samu_bwd_chunk_scan<__nv_bfloat16, 256, 32, 64, 1, 1>"},
      {"chunked_v8_t256_c32_a1", "chunked_v8_t256_c32", "samu_bwd_chunk_scan<__nv_bfloat16, 256, 32, 0, 1, 1>"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.point);
    const LaunchPlan point = PlanOf(c.point, p), twin = PlanOf(c.twin, p);
    ASSERT_EQ(point.launches.size() + 1, twin.launches.size());
    EXPECT_NE(twin.launches.back().name_expression.find("samu_bwd_chunk_finalize"), std::string::npos);
    for (size_t i = 0; i < point.launches.size(); ++i) {
      const Launch &a = point.launches[i], &b = twin.launches[i];
      ExpectSameGeometry(a, b, i);
      if (b.name_expression.find("samu_bwd_chunk_scan") != std::string::npos) {
        EXPECT_EQ(a.name_expression, c.rescan);
      } else {
        EXPECT_EQ(a.name_expression, b.name_expression) << i;
      }
    }
  }
  ExpectRefused({"chunked_v8_t256_c32_l64_y1_b4_i32_a2"}, p);
  Problem fwd = p;
  fwd.mode = Mode::kFwd;
  ExpectRefused({"chunked_v8_t256_c32_l64_b4_i32_a1", "chunked_v8_t256_c32_a1"}, fwd);
  EXPECT_TRUE(CanImplement(Parsed("chunked_v8_t256_c32_a1"), MakeProblem(Op::kSamu, {4, 2048, 2048}, DType::kBF16, Mode::kBwd),
                           DeviceLimits{}).ok());
}

// Deterministic (plan.h) by mode: sequential always; samu `chunked` where the mode's outputs come from its
// fixed-order parts: its own forward (no _l look-back forward) for fwd, the rescan without _a1 (atomic
// parameter sums) for bwd, both for fwd_bwd; lookback and fused never (look-back; fused's atomic meetings).
TEST(GatedDeterministic, ByFamilyAndMode) {
  struct Case {
    Op op;
    const char* variant;
    bool enumerated;  // else run by name
    bool fwd, bwd, fwd_bwd;
  };
  const Case cases[] = {
      {Op::kRgLru, "sequential_v4_t64_p4", true, true, true, true},
      {Op::kRgLru, "lookback_v2_t256_s8_i8_o2", true, false, false, false},
      {Op::kRgLru, "lookback_v2_t256_s8_i16_o3", true, false, false, false},
      {Op::kRgLru, "lookback_v2_t256_s8_i16_o3_d1", true, true, true, true},
      {Op::kRgLru, "lookback_v2_t256_s32_i16_o2_d1", true, true, true, true},
      {Op::kRgLru, "lookback_v2_t256_s8_i16_o2_d1", false, true, true, true},
      {Op::kSamu, "sequential_v4_t64_p4", true, true, true, true},
      {Op::kSamu, "lookback_v2_t256_s8_i8_o2", true, false, false, false},
      {Op::kSamu, "fused_d64_s8_c128", true, false, false, false},
      {Op::kSamu, "chunked_v8_t256_c32", true, true, true, true},
      {Op::kSamu, "chunked_v8_t512_c128", true, true, true, true},
      {Op::kSamu, "chunked_v8_t256_c32_l64", true, false, true, false},
      {Op::kSamu, "chunked_v8_t256_c32_l64_y1_b5", true, false, true, false},
      {Op::kSamu, "chunked_v8_t256_c32_l64_y1_b4_i32_a1", true, false, false, false},
      {Op::kSamu, "chunked_v8_t256_c32_a1", false, true, false, false},
      {Op::kSamu, "chunked_v8_t256_c32_y1", false, true, true, true},
      {Op::kSamu, "chunked_v8_t256_c32_l64_y1_b4_i32", false, false, true, false},
      // _d1: the _l forward's look-back chained.
      {Op::kSamu, "chunked_v8_t256_c32_l64_y1_d1", true, true, true, true},
      {Op::kSamu, "chunked_v8_t512_c64_l64_y1_b4_i32_d1", true, true, true, true},
      {Op::kSamu, "chunked_v8_t512_c64_l64_y1_b4_i32_d1_a1", false, true, false, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(OpName(c.op)) + " " + c.variant);
    const Variant v = RoundTrip(c.variant);
    const std::vector<Variant> all = EnumerateVariants(c.op, false);
    EXPECT_EQ(std::find(all.begin(), all.end(), v) != all.end(), c.enumerated);
    EXPECT_EQ(Deterministic(v, MakeProblem(c.op, {4, 2048, 2048}, DType::kBF16, Mode::kFwd)), c.fwd);
    EXPECT_EQ(Deterministic(v, MakeProblem(c.op, {4, 2048, 2048}, DType::kBF16, Mode::kBwd)), c.bwd);
    EXPECT_EQ(Deterministic(v, MakeProblem(c.op, {4, 2048, 2048}, DType::kBF16, Mode::kFwdBwd)), c.fwd_bwd);
  }
  // Over the whole enumeration: lookback (but rglru's _d1) and fused never;
  // each operator has a deterministic variant that can implement a seed
  // shape in every mode.
  for (Op op : kGatedOps) {
    for (Mode mode : {Mode::kFwd, Mode::kBwd, Mode::kFwdBwd}) {
      SCOPED_TRACE(std::string(OpName(op)) + " " + ModeName(mode));
      const Problem p = MakeProblem(op, {4, 2048, 2048}, DType::kBF16, mode);
      int implementable = 0;
      for (const Variant& v : EnumerateVariants(op, false)) {
        if ((v.algorithm == Algorithm::kLookback && v.chained == 0) || v.algorithm == Algorithm::kFused) {
          EXPECT_FALSE(Deterministic(v, p)) << v.Name();
        }
        if (v.chained != 0) {
          // samu's look-back backward meets dm_t by atomics: its _d1 is chunked _l's forward.
          EXPECT_EQ(v.algorithm, op == Op::kRgLru ? Algorithm::kLookback : Algorithm::kChunked) << v.Name();
          EXPECT_TRUE(Deterministic(v, p)) << v.Name();
        }
        if (v.algorithm == Algorithm::kSequential) EXPECT_TRUE(Deterministic(v, p)) << v.Name();
        implementable += Deterministic(v, p) && CanImplement(v, p, DeviceLimits{}).ok();
      }
      EXPECT_GE(implementable, 1);
    }
  }
}

// _d1 (the chained look-back): rglru's lookback at the packed look-back's
// orders, and samu's `chunked` _l forward; its kernels take one more template
// argument.
TEST(GatedPlan, ChainedLookBackAtThePackedOrdersAndSamusHybridForward) {
  const Problem rglru = MakeProblem(Op::kRgLru, {1, 32768, 1024}, DType::kBF16, Mode::kFwdBwd);
  const Problem samu = MakeProblem(Op::kSamu, {1, 32768, 1024}, DType::kBF16, Mode::kFwdBwd);
  EXPECT_TRUE(CanImplement(RoundTrip("lookback_v2_t256_s16_i16_o3_d1"), rglru, DeviceLimits{}).ok());
  const Status on_samu = CanImplement(RoundTrip("lookback_v2_t256_s16_i16_o3_d1"), samu, DeviceLimits{});
  EXPECT_EQ(on_samu.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(on_samu.message().find("atomics"), std::string::npos) << on_samu.message();
  EXPECT_EQ(CanImplement(RoundTrip("lookback_v2_t256_s8_i16_d1"), rglru, DeviceLimits{}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(CanImplement(RoundTrip("lookback_v2_t256_s8_i16_o2_d3"), rglru, DeviceLimits{}).code(),
            StatusCode::kInvalidArgument);
  const std::vector<std::string> names =
      NameExpressions(RoundTrip("lookback_v2_t256_s8_i16_o3_d1"), Op::kRgLru, DType::kBF16);
  EXPECT_NE(std::find(names.begin(), names.end(), "rglru_fwd_held<__nv_bfloat16, 2, 256, 64, 128, 3, 1>"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "rglru_bwd_held<__nv_bfloat16, 2, 256, 64, 128, 3, 1>"), names.end());
  const std::vector<std::string> plain =
      NameExpressions(RoundTrip("lookback_v2_t256_s8_i16_o3"), Op::kRgLru, DType::kBF16);
  EXPECT_NE(std::find(plain.begin(), plain.end(), "rglru_fwd_held<__nv_bfloat16, 2, 256, 64, 128, 3>"), plain.end());
  int samu_chained = 0;
  for (const Variant& v : EnumerateVariants(Op::kSamu, false)) {
    if (v.chained == 0) continue;
    ++samu_chained;
    EXPECT_TRUE(v.algorithm == Algorithm::kChunked && v.strip != 0) << v.Name() << ": samu's _d1 is chunked _l's";
    EXPECT_EQ(v.atomic_sums, 0) << v.Name() << ": a deterministic twin sums its parameters in a fixed order";
  }
  EXPECT_EQ(samu_chained, 4);
  // samu: _d1 chains the look-back forward of _l; chunked's own forward has none. Its samu_fwd_held takes
  // CHAINED after SAVE, BLOCKS and PERSIST; the others keep their names.
  const Problem seed = MakeProblem(Op::kSamu, {1, 8192, 2560}, DType::kBF16, Mode::kFwdBwd);
  EXPECT_TRUE(CanImplement(RoundTrip("chunked_v8_t512_c64_l64_y1_b4_i32_d1"), seed, DeviceLimits{}).ok());
  EXPECT_EQ(CanImplement(RoundTrip("chunked_v8_t512_c64_d1"), seed, DeviceLimits{}).code(),
            StatusCode::kInvalidArgument);
  auto fwd_held = [](const char* variant) {
    for (const std::string& n : NameExpressions(RoundTrip(variant), Op::kSamu, DType::kBF16)) {
      if (n.rfind("samu_fwd_held<", 0) == 0) return n;
    }
    return std::string();
  };
  EXPECT_EQ(fwd_held("chunked_v8_t256_c32_l64_y1_d1"), "samu_fwd_held<__nv_bfloat16, 2, 256, 64, 128, 3, 0, 0, 0, 1>");
  EXPECT_EQ(fwd_held("chunked_v8_t512_c64_l64_y1_b4_i32_d1"),
            "samu_fwd_held<__nv_bfloat16, 2, 256, 64, 256, 3, 0, 4, 0, 1>");
  EXPECT_EQ(fwd_held("chunked_v8_t256_c32_l64_y1"), "samu_fwd_held<__nv_bfloat16, 2, 256, 64, 128, 3, 0>");
  EXPECT_EQ(fwd_held("chunked_v8_t256_c32_l64"), "samu_fwd_held<__nv_bfloat16, 2, 256, 64, 128, 3>");
  EXPECT_EQ(fwd_held("chunked_v8_t512_c64_l64_y1_b4_i32"), "samu_fwd_held<__nv_bfloat16, 2, 256, 64, 256, 3, 0, 4>");
  EXPECT_EQ(fwd_held("chunked_v8_t256_c32_l64_h4"), "samu_fwd_held<__nv_bfloat16, 2, 256, 64, 128, 3, 4>");
}

TEST(GatedNvrtc, EveryVariantEveryDtypeCompilesForSm90) {
  const NvrtcCompiler compiler;
  std::vector<CompileRequest> requests;
  for (Op op : kGatedOps) {
    for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
      for (const Variant& v : EnumerateVariants(op, false)) {
        // _y1 is bf16's: CanImplement refuses it for every other dtype, so it is never compiled for them
        // (its fp32 rescan spills).
        if ((v.h_from_y != 0 || v.fwd_blocks != 0) && dtype != DType::kBF16) continue;
        CompileRequest r;
        r.variant = v;
        r.op = op;
        r.dtype = dtype;
        if (v.baked != 0) r.shape = {1, 8192, 2560};  // _k1: compiled for one problem's shape
        requests.push_back(r);
      }
    }
  }
  const auto start = std::chrono::steady_clock::now();
  const std::vector<StatusOr<CompileResult>> results = CompileAll(compiler, requests, 2);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(results.size(), requests.size());
  double compile_ms = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    const CompileRequest& r = requests[i];
    const std::string what = std::string(OpName(r.op)) + " " + r.variant.Name() + " " + DTypeName(r.dtype);
    ASSERT_TRUE(results[i].ok()) << what << ": " << results[i].status().ToString();
    const CompileResult& c = *results[i];
    ASSERT_EQ(c.state, v1::OK) << what << "\n" << c.log;
    EXPECT_FALSE(c.cubin.empty()) << what;
    ExpectNoSpills(c.log, what);
    const std::vector<std::string> names = NameExpressions(r.variant, r.op, r.dtype, {}, r.shape);
    EXPECT_EQ(c.lowered_names.size(), names.size()) << what;
    for (const std::string& name : names) {
      auto it = c.lowered_names.find(name);
      ASSERT_NE(it, c.lowered_names.end()) << what << ": " << name;
      EXPECT_FALSE(it->second.empty()) << what << ": " << name;
    }
    compile_ms += c.compile_ms;
  }
  std::printf("compiled %zu gated modules in %.1f s wall (2 threads), %.1f s summed, %.2f s per module\n",
              results.size(), seconds, compile_ms / 1000, compile_ms / 1000 / results.size());
}


// Developer aid, not a check: with SCANTUNE_GATED_DUMP=DIR and
// SCANTUNE_GATED_DUMP_VARIANTS="op:dtype:variant ..." (op rglru|samu, dtype
// fp32|bf16|fp16) it writes each module's cubin and NVRTC log (ptxas -v) to
// DIR, for cuobjdump -sass (the instruction counts in bench/NOTES.md).
TEST(GatedNvrtc, DumpNamedModulesWhenAsked) {
  const char* dir = std::getenv("SCANTUNE_GATED_DUMP");
  const char* list = std::getenv("SCANTUNE_GATED_DUMP_VARIANTS");
  if (dir == nullptr || list == nullptr) GTEST_SKIP() << "SCANTUNE_GATED_DUMP(_VARIANTS) not set";
  const NvrtcCompiler compiler;
  std::istringstream in(list);
  std::string item;
  while (in >> item) {
    const size_t a = item.find(':'), b = item.find(':', a + 1);
    ASSERT_NE(b, std::string::npos) << item;
    CompileRequest r;
    r.op = item.substr(0, a) == "samu" ? Op::kSamu : Op::kRgLru;
    StatusOr<DType> dtype = ParseDType(item.substr(a + 1, b - a - 1));
    ASSERT_TRUE(dtype.ok()) << item;
    r.dtype = *dtype;
    r.variant = Parsed(item.substr(b + 1).c_str());
    StatusOr<CompileResult> c = compiler.Compile(r);
    ASSERT_TRUE(c.ok()) << item << ": " << c.status().ToString();
    std::string stem = std::string(dir) + "/" + item;
    std::replace(stem.begin() + std::string(dir).size() + 1, stem.end(), ':', '_');
    std::ofstream(stem + ".cubin", std::ios::binary) << c->cubin;
    std::ofstream(stem + ".log") << c->log;
    EXPECT_EQ(c->state, v1::OK) << item << "\n" << c->log;
  }
}

}  // namespace
}  // namespace scantune
