// Enumeration, CanImplement and MakePlan: the design space's size and
// shape, explicit rejections with their reasons, and plans whose grids
// cover the problem, with CUDA-legal dimensions and consistent workspaces.
#include <algorithm>
#include <map>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "compiler/plan.h"
#include "kernels_src/linear_scan_params.h"
#include "tests/compiler/baked_twins.h"

namespace scantune {
namespace {

Problem MakeProblem(int64_t b, int64_t l, int64_t w, DType dtype = DType::kBF16, Mode mode = Mode::kFwdBwd) {
  Problem p;
  p.shape = {b, l, w};
  p.dtype = dtype;
  p.mode = mode;
  return p;
}

Variant Parsed(const char* name) {
  StatusOr<Variant> v = Variant::Parse(name);
  EXPECT_TRUE(v.ok()) << name;
  return *v;
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

TEST(Enumerate, SizeAndFamilies) {
  const std::vector<Variant> all = EnumerateVariants(Op::kLinearScan, false);
  EXPECT_GE(all.size(), 60u);
  EXPECT_LE(all.size(), 120u);
  std::set<Algorithm> families;
  std::set<int> vecs;
  for (const Variant& v : all) {
    EXPECT_FALSE(v.IsTestOnly()) << v.Name();
    families.insert(v.algorithm);
    vecs.insert(v.vec);
  }
  EXPECT_EQ(families, (std::set<Algorithm>{Algorithm::kSequential, Algorithm::kChunked, Algorithm::kLookback,
                                            Algorithm::kLookbackSmem, Algorithm::kLookbackPipe}));
  EXPECT_EQ(vecs, (std::set<int>{2, 4, 8}));
  const std::vector<Variant> with_tests = EnumerateVariants(Op::kLinearScan, true);
  EXPECT_EQ(with_tests.size(), all.size() + 2);
}

TEST(Enumerate, EveryVariantImplementsTheTargetShapes) {
  const DeviceLimits h200;
  for (const Shape& s : {Shape{4, 2048, 2048}, Shape{1, 8192, 2560}, Shape{1, 32768, 1024}, Shape{1, 32768, 2048}}) {
    int ok = 0;
    for (const Variant& v : EnumerateVariants(Op::kLinearScan, false)) {
      Problem p = MakeProblem(s.batch, s.length, s.width);
      if (CanImplement(v, p, h200).ok()) ++ok;
    }
    EXPECT_GE(ok, 60) << FormatShape(s);
  }
}

TEST(CanImplement, Rejections) {
  const DeviceLimits h200;
  const Problem p = MakeProblem(4, 2048, 2048);
  struct Case {
    const char* variant;
    Problem problem;
    StatusCode code;
    const char* says;
  };
  Problem fp32_bwd = MakeProblem(1, 4096, 1024, DType::kF32, Mode::kBwd);
  Problem bf16_fwd = MakeProblem(1, 4096, 1024, DType::kBF16, Mode::kFwd);
  for (const Case& c : {
           Case{"lookback_v3_t256_s8_i8", p, StatusCode::kInvalidArgument, "vec 3"},
           Case{"lookback_v4_t2048_s8_i8", p, StatusCode::kResourceExhausted, "exceed the device"},
           Case{"lookback_v4_t100_s4_i8", p, StatusCode::kInvalidArgument, "multiple of 32"},
           Case{"lookback_v4_t256_s24_i8", p, StatusCode::kInvalidArgument, "must divide threads"},
           Case{"lookback_v4_t256_s8_i65", p, StatusCode::kInvalidArgument, "items 65"},
           Case{"lookback_v8_t1024_s4_i4", p, StatusCode::kResourceExhausted, "shared memory"},
           Case{"lookback_v8_t256_s8_i32", fp32_bwd, StatusCode::kResourceExhausted, "would spill"},
           Case{"sequential_v4_t128_p32", p, StatusCode::kInvalidArgument, "prefetch 32"},
           Case{"chunked_v4_t128_c100000", p, StatusCode::kInvalidArgument, "chunk 100000"},
           Case{"lookbacksmem_v1_t128_c64_i256", p, StatusCode::kInvalidArgument, "vec 1"},
           Case{"lookbacksmem_v4_t128_c60_i256", p, StatusCode::kInvalidArgument, "strip 60"},
           Case{"lookbacksmem_v8_t100_c64_i256", p, StatusCode::kInvalidArgument, "multiple of 32"},
           Case{"lookbacksmem_v4_t128_c64_i12", p, StatusCode::kInvalidArgument, "tile 12"},
           Case{"lookbacksmem_v8_t128_c48_i256", p, StatusCode::kInvalidArgument, "lanes must divide"},
           Case{"lookbacksmem_v8_t128_c128_i512", p, StatusCode::kResourceExhausted, "shared memory"},
       }) {
    Status st = CanImplement(Parsed(c.variant), c.problem, h200);
    EXPECT_EQ(st.code(), c.code) << c.variant << ": " << st.ToString();
    EXPECT_NE(st.message().find(c.says), std::string::npos) << c.variant << ": " << st.message();
  }
  // The register rule depends on dtype and mode: bf16 forward holds half the bytes.
  EXPECT_TRUE(CanImplement(Parsed("lookback_v8_t256_s8_i16"), bf16_fwd, h200).ok());
  // lookbacksmem stages 2 inputs forward, 3 backward: 128 x 384 bf16 fits forward only.
  EXPECT_TRUE(CanImplement(Parsed("lookbacksmem_v8_t128_c128_i384"), bf16_fwd, h200).ok());
  EXPECT_EQ(CanImplement(Parsed("lookbacksmem_v8_t128_c128_i384"), p, h200).code(), StatusCode::kResourceExhausted);
  // A smaller device limit on shared memory is honoured.
  DeviceLimits small = h200;
  small.max_shared_per_block = 16 * 1024;
  EXPECT_EQ(CanImplement(Parsed("lookback_v8_t256_s8_i8"), p, small).code(), StatusCode::kResourceExhausted);
  // Empty shapes never reach a kernel.
  EXPECT_EQ(CanImplement(Parsed("sequential_v2_t128_p4"), MakeProblem(1, 0, 8), h200).code(),
            StatusCode::kInvalidArgument);
}

TEST(CanImplement, TestVariantsRunAnywhereByName) {
  const DeviceLimits h200;
  EXPECT_TRUE(CanImplement(Parsed("test_fault"), MakeProblem(1, 1, 1), h200).ok());
  EXPECT_TRUE(CanImplement(Parsed("test_hang"), MakeProblem(1, 1, 1), h200).ok());
}

void ExpectPlanCovers(const Variant& v, const Problem& p, const LaunchPlan& plan) {
  const Shape& s = p.shape;
  const std::vector<std::string> names = NameExpressions(v, p.op, p.dtype, {}, s);  // _k1: the shape's
  std::set<std::string> known(names.begin(), names.end());
  for (const Launch& launch : plan.launches) {
    SCOPED_TRACE(v.Name() + " " + p.Key() + " " + launch.name_expression);
    EXPECT_TRUE(known.count(launch.name_expression));
    EXPECT_TRUE(launch.phase == "fwd" || launch.phase == "bwd");
    EXPECT_GE(launch.grid[0], 1u);
    EXPECT_LE(launch.grid[1], 65535u);
    EXPECT_LE(launch.grid[2], 65535u);
    EXPECT_LE(launch.block[0] * launch.block[1] * launch.block[2], 1024u);
    const uint64_t threads = uint64_t{launch.grid[0]} * launch.block[0];
    switch (v.algorithm) {
      case Algorithm::kSequential:
        EXPECT_EQ(launch.block[0], static_cast<uint32_t>(v.threads));
        EXPECT_GE(threads, static_cast<uint64_t>(s.batch * CeilDiv(s.width, v.vec)));
        EXPECT_LT(threads - s.batch * CeilDiv(s.width, v.vec), static_cast<uint64_t>(v.threads));
        break;
      case Algorithm::kChunked: {
        const int64_t chunks = CeilDiv(s.length, v.chunk);
        const bool carry = launch.name_expression.find("carry") != std::string::npos;
        const int64_t need = carry ? s.batch * s.width : s.batch * chunks * CeilDiv(s.width, v.vec);
        EXPECT_GE(threads, static_cast<uint64_t>(need));
        EXPECT_LT(threads - need, static_cast<uint64_t>(v.threads));
        break;
      }
      case Algorithm::kLookback: {
        // One block per (batch, strip, time tile); strips x lanes x vec cover W, tiles cover L.
        const int64_t strip = v.threads / v.segments * v.vec;
        const int64_t tile = int64_t{v.segments} * v.items;
        EXPECT_EQ(launch.grid[0], static_cast<uint64_t>(s.batch * CeilDiv(s.width, strip) * CeilDiv(s.length, tile)));
        EXPECT_EQ(launch.shared_bytes, 0u);  // static shared memory
        break;
      }
      case Algorithm::kLookbackSmem: {
        EXPECT_EQ(launch.block[0], static_cast<uint32_t>(v.threads));
        EXPECT_EQ(launch.grid[0], static_cast<uint64_t>(s.batch * CeilDiv(s.width, v.strip) * CeilDiv(s.length, v.tile)));
        // Dynamic shared memory: the staged inputs (2 fwd, 3 bwd) plus the combine.
        const uint64_t staged = uint64_t{launch.phase == "fwd" ? 2u : 3u} * v.tile * v.strip * ElementBytes(p.dtype);
        EXPECT_GT(launch.shared_bytes, staged);
        EXPECT_LE(launch.shared_bytes, 227u * 1024);
        break;
      }
      case Algorithm::kLookbackPipe: {
        // Persistent: at most blocks_per_sm x SMs blocks, never more than the tiles.
        EXPECT_EQ(launch.block[0], static_cast<uint32_t>(v.threads));
        const uint64_t tiles = s.batch * CeilDiv(s.width, v.strip) * CeilDiv(s.length, v.tile);
        EXPECT_LE(launch.grid[0], tiles);
        EXPECT_LE(launch.grid[0], uint64_t{132} * v.blocks_per_sm);
        EXPECT_GE(launch.grid[0], std::min<uint64_t>(tiles, 132));
        const uint64_t staged = uint64_t{launch.phase == "fwd" ? 4u : 6u} * v.tile * v.strip * ElementBytes(p.dtype);
        EXPECT_GT(launch.shared_bytes, staged);
        EXPECT_LE(launch.shared_bytes, 227u * 1024);
        // The blocks it asks for per SM fit the SM's 228 KB of shared memory.
        if (launch.grid[0] > 132) {
          EXPECT_LE(static_cast<uint64_t>(CeilDiv(launch.grid[0], 132)) * (launch.shared_bytes + 1024), 228u * 1024)
              << v.Name();
        }
        break;
      }
      default:
        EXPECT_EQ(launch.grid[0], 1u);
    }
  }
}

TEST(MakePlan, GridsCoverEveryShapeAndMode) {
  const DeviceLimits h200;
  const Shape shapes[] = {{4, 2048, 2048}, {1, 32768, 1024}, {1, 1, 1}, {3, 17, 33}, {2, 1000, 2050}};
  for (const Variant& v : EnumerateVariants(Op::kLinearScan, true)) {
    for (const Shape& s : shapes) {
      for (Mode mode : {Mode::kFwd, Mode::kBwd, Mode::kFwdBwd}) {
        Problem p = MakeProblem(s.batch, s.length, s.width, DType::kBF16, mode);
        if (!CanImplement(v, p, h200).ok()) continue;
        StatusOr<LaunchPlan> plan = MakePlan(v, p, h200);
        ASSERT_TRUE(plan.ok()) << v.Name() << " " << p.Key() << ": " << plan.status().ToString();
        ASSERT_FALSE(plan->launches.empty());
        // fwd launches precede bwd launches, and each mode has exactly its phases.
        bool seen_bwd = false, any_fwd = false;
        for (const Launch& launch : plan->launches) {
          if (launch.phase == "bwd") seen_bwd = true;
          if (launch.phase == "fwd") {
            EXPECT_FALSE(seen_bwd);
            any_fwd = true;
          }
        }
        EXPECT_EQ(any_fwd, mode != Mode::kBwd);
        EXPECT_EQ(seen_bwd, mode != Mode::kFwd);
        EXPECT_LE(plan->workspace_zero_bytes, plan->workspace_bytes);
        ExpectPlanCovers(v, p, *plan);
      }
    }
  }
}

TEST(MakePlan, Workspaces) {
  const DeviceLimits h200;
  const Problem p = MakeProblem(4, 2048, 2048);
  StatusOr<LaunchPlan> seq = MakePlan(Parsed("sequential_v8_t128_p4"), p, h200);
  ASSERT_TRUE(seq.ok());
  EXPECT_EQ(seq->workspace_bytes, 0u);
  EXPECT_EQ(seq->launches.size(), 2u);

  StatusOr<LaunchPlan> chunked = MakePlan(Parsed("chunked_v8_t128_c64"), p, h200);
  ASSERT_TRUE(chunked.ok());
  EXPECT_EQ(chunked->launches.size(), 6u);
  EXPECT_EQ(chunked->workspace_bytes, 2ull * 4 * (2048 / 64) * 2048 * sizeof(float));
  EXPECT_EQ(chunked->workspace_zero_bytes, 0u);

  // lookback_v8_t256_s8_i8: strip 32 lanes x 8 = 256 channels, tile 64 steps.
  StatusOr<LaunchPlan> lookback = MakePlan(Parsed("lookback_v8_t256_s8_i8"), p, h200);
  ASSERT_TRUE(lookback.ok());
  const uint64_t tiles = 4 * (2048 / 256) * (2048 / 64);
  EXPECT_EQ(lookback->launches[0].grid[0], tiles);
  EXPECT_EQ(lookback->launches[0].block[0], 256u);
  const uint64_t zero = (256 + 4 * tiles + 255) / 256 * 256;
  EXPECT_EQ(lookback->workspace_zero_bytes, zero);
  EXPECT_EQ(lookback->workspace_bytes, zero + tiles * 256 * 12);

  // lookbacksmem_v4_t128_c64_i256: 16 lanes x 8 segments of 32 steps.
  StatusOr<LaunchPlan> smem = MakePlan(Parsed("lookbacksmem_v4_t128_c64_i256"), p, h200);
  ASSERT_TRUE(smem.ok());
  ASSERT_EQ(smem->launches.size(), 2u);
  const uint64_t smem_tiles = 4 * (2048 / 64) * (2048 / 256);
  EXPECT_EQ(smem->launches[0].grid[0], smem_tiles);
  EXPECT_EQ(smem->launches[0].shared_bytes, 2u * 256 * 64 * 2 + (2 * 8 * 64 + 64) * 4 + 16);
  EXPECT_EQ(smem->launches[1].shared_bytes, 3u * 256 * 64 * 2 + (2 * 8 * 64 + 64) * 4 + 16);
  const uint64_t smem_zero = (256 + 4 * smem_tiles + 255) / 256 * 256;
  EXPECT_EQ(smem->workspace_zero_bytes, smem_zero);
  EXPECT_EQ(smem->workspace_bytes, smem_zero + smem_tiles * 64 * 12);
  // Launch epochs: zeroed once, and both kernels may overlap their predecessor.
  EXPECT_TRUE(smem->workspace_zero_once);
  EXPECT_TRUE(smem->launches[0].dependent_launch);
  EXPECT_TRUE(smem->launches[1].dependent_launch);
  // _o2 (packed look-back): the header and two u64 words per tile and channel, all zeroed once.
  StatusOr<LaunchPlan> packed = MakePlan(Parsed("lookbacksmem_v4_t128_c64_i256_o2"), p, h200);
  ASSERT_TRUE(packed.ok());
  EXPECT_EQ(packed->workspace_zero_bytes, 256 + smem_tiles * 64 * 16);
  EXPECT_EQ(packed->workspace_bytes, packed->workspace_zero_bytes);
  EXPECT_TRUE(packed->workspace_zero_once);
  EXPECT_EQ(packed->launches[0].name_expression, "linear_scan_fwd_lookbacksmem<__nv_bfloat16, 4, 128, 64, 256, 2>");
  // _o3 (warp-staged forward), _o4 (its control), _o5-_o7 (_o3 with a staggered first wave) keep _o2's
  // packed workspace (o7 counts landed warps in its header's ticket word); no _o8.
  for (const char* name : {"lookbacksmem_v4_t128_c64_i256_o3", "lookbacksmem_v4_t128_c64_i256_o4",
                           "lookbacksmem_v4_t128_c64_i256_o5", "lookbacksmem_v4_t128_c64_i256_o6",
                           "lookbacksmem_v4_t128_c64_i256_o7"}) {
    StatusOr<LaunchPlan> later = MakePlan(Parsed(name), p, h200);
    ASSERT_TRUE(later.ok()) << name;
    EXPECT_EQ(later->workspace_zero_bytes, packed->workspace_zero_bytes) << name;
    EXPECT_EQ(later->workspace_bytes, packed->workspace_bytes) << name;
    EXPECT_TRUE(later->workspace_zero_once) << name;
    EXPECT_EQ(later->launches[0].shared_bytes, packed->launches[0].shared_bytes) << name;
  }
  EXPECT_EQ(CanImplement(Parsed("lookbacksmem_v4_t128_c64_i256_o8"), p, h200).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CanImplement(Parsed("lookback_v4_t256_s8_i8_o2"), p, h200).code(), StatusCode::kInvalidArgument);
}

TEST(MakePlan, LookbackPipeGridAndSharedMemory) {
  const DeviceLimits h200;
  const Problem p = MakeProblem(4, 2048, 2048);  // fwd_bwd, bf16
  // c64_i128: two buffers of 2 (fwd) / 3 (bwd) x 128 x 64 bf16; 16 lanes x 16 segments at t256.
  StatusOr<LaunchPlan> pipe = MakePlan(Parsed("lookbackpipe_v4_t256_c64_i128_b3"), p, h200);
  ASSERT_TRUE(pipe.ok()) << pipe.status().ToString();
  ASSERT_EQ(pipe->launches.size(), 2u);
  const uint32_t extra = (2 * 16 * 64 + 64) * 4 + 16;
  EXPECT_EQ(pipe->launches[0].shared_bytes, 2u * 2 * 128 * 64 * 2 + extra);
  EXPECT_EQ(pipe->launches[1].shared_bytes, 2u * 3 * 128 * 64 * 2 + extra);
  // fwd: 3 blocks of 69 KB fit an SM; bwd: only 2 of 101 KB.
  EXPECT_EQ(pipe->launches[0].grid[0], 3u * 132);
  EXPECT_EQ(pipe->launches[1].grid[0], 2u * 132);
  EXPECT_EQ(pipe->launches[0].name_expression, "linear_scan_fwd_lookbackpipe<__nv_bfloat16, 4, 256, 64, 128>");
  const uint64_t tiles = 4 * (2048 / 64) * (2048 / 128);
  // The packed look-back under launch epochs: two u64 words per tile and channel, zeroed once.
  EXPECT_EQ(pipe->workspace_zero_bytes, 256 + tiles * 64 * 16);
  EXPECT_EQ(pipe->workspace_bytes, pipe->workspace_zero_bytes);
  EXPECT_TRUE(pipe->workspace_zero_once);
  EXPECT_TRUE(pipe->launches[0].dependent_launch);
  EXPECT_TRUE(pipe->launches[1].dependent_launch);
  // Fewer tiles than SMs: one block per tile.
  StatusOr<LaunchPlan> small = MakePlan(Parsed("lookbackpipe_v4_t256_c64_i128_b3"), MakeProblem(1, 100, 70), h200);
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->launches[0].grid[0], 2u);
  EXPECT_EQ(CanImplement(Parsed("lookbackpipe_v4_t256_c64_i128_b33"), p, h200).code(), StatusCode::kInvalidArgument);
  // Two fp32 buffers of 3 x 256 x 64 do not fit backward.
  EXPECT_EQ(CanImplement(Parsed("lookbackpipe_v4_t256_c64_i256_b1"), MakeProblem(1, 4096, 64, DType::kF32), h200)
                .code(),
            StatusCode::kResourceExhausted);
}

TEST(MakePlan, RejectsWhatCanImplementRejects) {
  EXPECT_FALSE(MakePlan(Parsed("lookback_v4_t256_s24_i8"), MakeProblem(1, 64, 64), DeviceLimits()).ok());
}

// Deterministic (plan.h): sequential and chunked sum in fixed orders in every
// mode; the look-back families compose whichever inclusive prefix they find
// first, so their bits may differ from run to run.
TEST(Deterministic, LinearScanSequentialChunkedAndTheChainedLookBack) {
  const std::map<Algorithm, bool> deterministic = {{Algorithm::kSequential, true},
                                                   {Algorithm::kChunked, true},
                                                   {Algorithm::kLookback, false},
                                                   {Algorithm::kLookbackSmem, false},
                                                   {Algorithm::kLookbackPipe, false}};
  std::set<Algorithm> seen;
  int chained = 0;
  for (const Variant& v : EnumerateVariants(Op::kLinearScan, false)) {
    seen.insert(v.algorithm);
    ASSERT_TRUE(deterministic.count(v.algorithm)) << v.Name();
    // _d1: lookbacksmem's chained look-back composes in one order.
    const bool expected = deterministic.at(v.algorithm) || v.chained != 0;
    if (v.chained != 0) ++chained;
    for (Mode mode : {Mode::kFwd, Mode::kBwd, Mode::kFwdBwd}) {
      EXPECT_EQ(Deterministic(v, MakeProblem(4, 2048, 2048, DType::kBF16, mode)), expected)
          << v.Name() << " " << ModeName(mode);
    }
  }
  EXPECT_EQ(seen.size(), deterministic.size());
  EXPECT_GT(chained, 0) << "no _d1 point is enumerated";
  const Problem p = MakeProblem(4, 2048, 2048);
  EXPECT_TRUE(Deterministic(Parsed("sequential_v8_t128_p4"), p));
  EXPECT_TRUE(Deterministic(Parsed("chunked_v8_t128_c64"), p));
  EXPECT_FALSE(Deterministic(Parsed("lookback_v8_t256_s8_i8"), p));
  EXPECT_FALSE(Deterministic(Parsed("lookbacksmem_v4_t128_c64_i256_o2"), p));
  EXPECT_TRUE(Deterministic(Parsed("lookbacksmem_v4_t128_c64_i256_o2_d1"), p));
  EXPECT_FALSE(Deterministic(Parsed("lookbackpipe_v4_t256_c64_i128_b3"), p));
}

// _d1 needs the packed look-back (lookbacksmem _o2 or later); its kernels
// take one more template argument, the others keep their names.
TEST(Chained, OnlyThePackedLookBackAndOneMoreTemplateArgument) {
  const DeviceLimits h200;  // the defaults: an H200
  const Problem p = MakeProblem(1, 32768, 2048, DType::kBF16, Mode::kFwdBwd);
  EXPECT_TRUE(CanImplement(Parsed("lookbacksmem_v4_t256_c64_i256_o3_d1"), p, h200).ok());
  EXPECT_TRUE(CanImplement(Parsed("lookbacksmem_v4_t256_c64_i512_o2_d1"), p, h200).ok());
  const Status o1 = CanImplement(Parsed("lookbacksmem_v4_t128_c64_i256_o1_d1"), p, h200);
  EXPECT_EQ(o1.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(o1.message().find("packed look-back"), std::string::npos) << o1.message();
  EXPECT_EQ(CanImplement(Parsed("lookbacksmem_v4_t128_c64_i256_d1"), p, h200).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CanImplement(Parsed("lookbacksmem_v4_t128_c64_i256_o2_d2"), p, h200).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(CanImplement(Parsed("lookback_v4_t256_s8_i8_d1"), p, h200).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(NameExpressions(Parsed("lookbacksmem_v4_t256_c64_i256_o3_d1"), Op::kLinearScan, DType::kBF16),
            (std::vector<std::string>{"linear_scan_fwd_lookbacksmem<__nv_bfloat16, 4, 256, 64, 256, 3, 1>",
                                      "linear_scan_bwd_lookbacksmem<__nv_bfloat16, 4, 256, 64, 256, 3, 1>"}));
  EXPECT_EQ(NameExpressions(Parsed("lookbacksmem_v4_t256_c64_i256_o3"), Op::kLinearScan, DType::kBF16)[0],
            "linear_scan_fwd_lookbacksmem<__nv_bfloat16, 4, 256, 64, 256, 3>");
}

// _k1: the same launches as its twin, whose scans name CHAINED and then the problem's B, L and W as their last
// template arguments; another shape is another module, no shape none. lookbacksmem's only; _k2 refused.
TEST(Baked, TheShapeAsTheScansLastTemplateArguments) {
  const DeviceLimits h200;
  const Problem p = MakeProblem(1, 8192, 2560, DType::kBF16, Mode::kFwdBwd);
  const Variant baked = Parsed("lookbacksmem_v4_t128_c64_i256_o5_k1");
  EXPECT_EQ(baked.Name(), "lookbacksmem_v4_t128_c64_i256_o5_k1");
  EXPECT_EQ(baked.baked, 1);
  const StatusOr<LaunchPlan> point = MakePlan(baked, p, h200);
  const StatusOr<LaunchPlan> twin = MakePlan(Parsed("lookbacksmem_v4_t128_c64_i256_o5"), p, h200);
  ASSERT_TRUE(point.ok()) << point.status().ToString();
  ASSERT_TRUE(twin.ok()) << twin.status().ToString();
  ASSERT_EQ(point->launches.size(), 2u);
  ASSERT_EQ(twin->launches.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(point->launches[i].grid, twin->launches[i].grid) << i;
    EXPECT_EQ(point->launches[i].block, twin->launches[i].block) << i;
    EXPECT_EQ(point->launches[i].shared_bytes, twin->launches[i].shared_bytes) << i;
  }
  EXPECT_EQ(point->workspace_bytes, twin->workspace_bytes);
  EXPECT_EQ(point->launches[0].name_expression,
            "linear_scan_fwd_lookbacksmem<__nv_bfloat16, 4, 128, 64, 256, 5, 0, 1, 8192, 2560>");
  EXPECT_EQ(point->launches[1].name_expression,
            "linear_scan_bwd_lookbacksmem<__nv_bfloat16, 4, 128, 64, 256, 5, 0, 1, 8192, 2560>");
  EXPECT_EQ(NameExpressions(Parsed("lookbacksmem_v4_t256_c64_i256_o3_d1_k1"), Op::kLinearScan, DType::kBF16, {},
                            Shape{4, 2048, 2048})[1],
            "linear_scan_bwd_lookbacksmem<__nv_bfloat16, 4, 256, 64, 256, 3, 1, 4, 2048, 2048>");
  EXPECT_NE(NameExpressions(baked, Op::kLinearScan, DType::kBF16, {}, Shape{4, 2048, 2048}),
            NameExpressions(baked, Op::kLinearScan, DType::kBF16, {}, p.shape));
  EXPECT_TRUE(NameExpressions(baked, Op::kLinearScan, DType::kBF16).empty());
  EXPECT_EQ(CanImplement(Parsed("lookbacksmem_v4_t128_c64_i256_o5_k2"), p, h200).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(EnumeratedBakedTwins(Op::kLinearScan), 3);
}

TEST(NameExpressions, InstancesPerFamilyAndDtype) {
  EXPECT_EQ(NameExpressions(Parsed("lookback_v4_t256_s8_i8"), Op::kLinearScan, DType::kBF16),
            (std::vector<std::string>{"linear_scan_fwd_lookback<__nv_bfloat16, 4, 256, 8, 8>",
                                      "linear_scan_bwd_lookback<__nv_bfloat16, 4, 256, 8, 8>"}));
  EXPECT_EQ(NameExpressions(Parsed("sequential_v2_t64_p8"), Op::kLinearScan, DType::kF16)[0],
            "linear_scan_fwd_sequential<__half, 2, 64, 8>");
  EXPECT_EQ(NameExpressions(Parsed("chunked_v2_t128_c32"), Op::kLinearScan, DType::kF32).size(), 6u);
  EXPECT_EQ(NameExpressions(Parsed("lookbacksmem_v8_t128_c64_i256"), Op::kLinearScan, DType::kBF16),
            (std::vector<std::string>{"linear_scan_fwd_lookbacksmem<__nv_bfloat16, 8, 128, 64, 256, 0>",
                                      "linear_scan_bwd_lookbacksmem<__nv_bfloat16, 8, 128, 64, 256, 0>"}));
  EXPECT_EQ(NameExpressions(Parsed("lookbacksmem_v4_t128_c64_i256_o1"), Op::kLinearScan, DType::kBF16)[0],
            "linear_scan_fwd_lookbacksmem<__nv_bfloat16, 4, 128, 64, 256, 1>");
  EXPECT_EQ(NameExpressions(Parsed("test_fault"), Op::kLinearScan, DType::kF32)[0],
            "linear_scan_fwd_test_fault<float>");
}

TEST(ParamLayout, MatchesTheStruct) {
  const std::vector<v1::ParamField> fields = ParamLayout(Op::kLinearScan);
  ASSERT_EQ(fields.size(), 13u);
  EXPECT_EQ(ParamSize(Op::kLinearScan), sizeof(LinearScanParams));
  uint32_t end = 0;
  for (const v1::ParamField& f : fields) {
    EXPECT_GE(f.offset_bytes(), end) << f.name();  // in order, no overlap
    end = f.offset_bytes() + f.size_bytes();
    EXPECT_FALSE(f.meaning().empty());
  }
  EXPECT_LE(end, sizeof(LinearScanParams));
  EXPECT_EQ(fields[0].name(), "a");
  EXPECT_EQ(fields[0].offset_bytes(), offsetof(LinearScanParams, a));
  EXPECT_EQ(fields.back().name(), "width");
  EXPECT_EQ(fields.back().type(), "i64");
  EXPECT_EQ(fields.back().offset_bytes(), offsetof(LinearScanParams, width));
}

TEST(DeviceLimits, FromProto) {
  v1::DeviceInfo info;
  info.set_cc_major(8);
  info.set_cc_minor(6);
  info.set_sm_count(82);
  info.set_max_shared_per_block_bytes(99 * 1024);
  info.set_l2_bytes(6 * 1024 * 1024);
  const DeviceLimits limits = DeviceLimits::FromProto(info);
  EXPECT_EQ(limits.Arch(), "sm_86");
  EXPECT_EQ(limits.sm_count, 82);
  EXPECT_EQ(limits.max_shared_per_block, 99 * 1024);
  EXPECT_EQ(limits.l2_bytes, 6 * 1024 * 1024);
  // An empty proto keeps the H200 defaults.
  EXPECT_EQ(DeviceLimits::FromProto(v1::DeviceInfo()).Arch(), "sm_90");
}

}  // namespace
}  // namespace scantune
