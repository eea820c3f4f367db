// selective_scan's planner (compiler/plan_ssm.cc): enumeration, CanImplement,
// plans at the DEVICE.md shapes, the parameter layout, and the real NVRTC
// compiling every variant for sm_90 (fp32 and bf16 at N = 16 with options
// off and on; N 8 / 32 / 64 and fp16 for one variant per family).
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "compiler/nvrtc_compiler.h"
#include "compiler/plan.h"
#include "kernels_src/selective_scan_params.h"

namespace scantune {
namespace {

Problem Ssm(int64_t b, int64_t l, int64_t d, int n, Mode mode, DType dtype = DType::kF32, bool options = false,
            bool h0 = false) {
  Problem p;
  p.op = Op::kSelectiveScan;
  p.shape = {b, l, d};
  p.dtype = dtype;
  p.mode = mode;
  p.has_h0 = h0;
  p.ssm.state = n;
  p.ssm.delta_bias = options;
  p.ssm.delta_softplus = options;
  p.ssm.z_gate = options;
  return p;
}

TEST(SsmEnumerate, FamiliesAndNames) {
  const std::vector<Variant> variants = EnumerateVariants(Op::kSelectiveScan, false);
  EXPECT_GE(variants.size(), 10u);
  EXPECT_LE(variants.size(), 30u);
  std::set<Algorithm> families;
  std::set<std::string> names;
  for (const Variant& v : variants) {
    families.insert(v.algorithm);
    EXPECT_TRUE(names.insert(v.Name()).second) << v.Name();
    StatusOr<Variant> parsed = Variant::Parse(v.Name());
    ASSERT_TRUE(parsed.ok()) << v.Name();
    EXPECT_EQ(*parsed, v);
  }
  EXPECT_EQ(families, (std::set<Algorithm>{Algorithm::kSequential, Algorithm::kChunked, Algorithm::kFused,
                                           Algorithm::kFusedSeg, Algorithm::kTimeScan}));
  EXPECT_TRUE(names.count("tscan_d8_w1_i4"));
  EXPECT_TRUE(names.count("tscan_d4_w1_i8_s2"));
  EXPECT_TRUE(names.count("tscan_d4_w1_i4_s4"));
  EXPECT_TRUE(names.count("tscan_d8_w1_i16"));
  EXPECT_TRUE(names.count("tscan_d8_w1_i8_f1"));
  EXPECT_TRUE(names.count("tscan_d8_w1_i4_f1"));
  EXPECT_TRUE(names.count("fused_d32_s4_c8"));
  EXPECT_TRUE(names.count("fusedseg_d32_s4_c8_g256"));
  EXPECT_EQ(std::string(MainHeader(Op::kSelectiveScan)), "selective_scan.cuh");
}

TEST(SsmCanImplement, DeviceShapesHaveFusedVariants) {
  const DeviceLimits h200;
  for (int64_t d : {256, 512, 1024}) {
    for (int64_t l : {512, 2048, 8192}) {
      for (Mode mode : {Mode::kFwd, Mode::kFwdBwd}) {
        const Problem p = Ssm(4, l, d, 16, mode);
        int fused = 0;
        for (const Variant& v : EnumerateVariants(Op::kSelectiveScan, false)) {
          const Status st = CanImplement(v, p, h200);
          // Forward-only tscan variants (512-1024 threads: too few registers for the backward) excepted,
          // and the backward-only _f1 (fixed-order sums) in fwd.
          const bool fwd_only = v.algorithm == Algorithm::kTimeScan && mode == Mode::kFwdBwd &&
                                st.code() == StatusCode::kResourceExhausted;
          const bool bwd_only = v.fixed_sums != 0 && mode == Mode::kFwd;
          if ((v.algorithm == Algorithm::kFused || v.algorithm == Algorithm::kFusedSeg ||
               v.algorithm == Algorithm::kTimeScan) && !fwd_only && !bwd_only) {
            EXPECT_TRUE(st.ok()) << v.Name() << " " << p.Key() << ": " << st.ToString();
            fused += st.ok();
          }
          if (!st.ok()) continue;
          StatusOr<LaunchPlan> plan = MakePlan(v, p, h200);
          ASSERT_TRUE(plan.ok()) << v.Name();
          // The workspace stays far below a (B, L, D, N) fp32 tensor; _f1's partials (2 N / dim_block
          // fp32 per element: a quarter of it at d8) below half of it.
          const uint64_t full = 4ull * l * d * 16 * sizeof(float);
          EXPECT_LE(plan->workspace_bytes * (v.fixed_sums != 0 ? 2 : 4), full) << v.Name() << " " << p.Key();
        }
        EXPECT_GE(fused, 12);
      }
    }
  }
}

TEST(SsmCanImplement, Rejections) {
  const DeviceLimits h200;
  // Eight states cannot be split over 16 lanes.
  EXPECT_FALSE(CanImplement(*Variant::Parse("fused_d32_s16_c16"), Ssm(1, 64, 64, 8, Mode::kFwd), h200).ok());
  // Per-channel families hold N states per thread: N = 64 backward would spill.
  const Status spill = CanImplement(*Variant::Parse("sequential_v1_t64_p1"), Ssm(1, 64, 64, 64, Mode::kFwdBwd), h200);
  EXPECT_EQ(spill.code(), StatusCode::kResourceExhausted) << spill.ToString();
  EXPECT_TRUE(CanImplement(*Variant::Parse("sequential_v1_t64_p1"), Ssm(1, 64, 64, 64, Mode::kFwd), h200).ok());
  // Knobs the kernels cannot take.
  EXPECT_FALSE(CanImplement(*Variant::Parse("fusedseg_d32_s4_c8_g100"), Ssm(1, 64, 64, 16, Mode::kFwd), h200).ok());
  EXPECT_FALSE(CanImplement(*Variant::Parse("fused_d8_s2_c8"), Ssm(1, 64, 64, 16, Mode::kFwd), h200).ok());
  EXPECT_FALSE(CanImplement(*Variant::Parse("fused_d32_s4_c6"), Ssm(1, 64, 64, 16, Mode::kFwd), h200).ok());
  EXPECT_FALSE(CanImplement(*Variant::Parse("lookback_v4_t256_s8_i8"), Ssm(1, 64, 64, 16, Mode::kFwd), h200).ok());
  EXPECT_FALSE(CanImplement(*Variant::Parse("sequential_v2_t64_p1"), Ssm(1, 64, 64, 16, Mode::kFwd), h200).ok());
  // More segments than grid.y holds.
  EXPECT_FALSE(
      CanImplement(*Variant::Parse("fusedseg_d32_s4_c8_g256"), Ssm(1, 256 * 70000, 32, 16, Mode::kFwd), h200).ok());
}

// Deterministic (plan.h): every family's forward sums in fixed orders; every
// backward adds dBm, dCm, dA, dD and ddelta_bias by float atomics, but tscan's
// _f1, whose finalize sums its partials in a fixed order.
TEST(SsmDeterministic, ForwardsAndFixedSumBackwards) {
  std::set<Algorithm> families;
  int fixed = 0;
  for (const Variant& v : EnumerateVariants(Op::kSelectiveScan, false)) {
    families.insert(v.algorithm);
    fixed += v.fixed_sums != 0;
    for (bool options : {false, true}) {
      EXPECT_TRUE(Deterministic(v, Ssm(4, 2048, 1024, 16, Mode::kFwd, DType::kBF16, options))) << v.Name();
      EXPECT_EQ(Deterministic(v, Ssm(4, 2048, 1024, 16, Mode::kBwd, DType::kBF16, options)), v.fixed_sums != 0)
          << v.Name();
      EXPECT_EQ(Deterministic(v, Ssm(4, 2048, 1024, 16, Mode::kFwdBwd, DType::kBF16, options)), v.fixed_sums != 0)
          << v.Name();
    }
  }
  EXPECT_EQ(families.size(), 5u);
  EXPECT_GE(fixed, 2);
  for (const char* name : {"tscan_d8_w1_i4", "fused_d32_s4_c8", "fusedseg_d32_s4_c8_g256"}) {
    const Variant v = *Variant::Parse(name);
    EXPECT_TRUE(Deterministic(v, Ssm(1, 512, 256, 16, Mode::kFwd))) << name;
    EXPECT_FALSE(Deterministic(v, Ssm(1, 512, 256, 16, Mode::kFwdBwd))) << name;
  }
  EXPECT_TRUE(Deterministic(*Variant::Parse("tscan_d4_w1_i4_s2_f1"), Ssm(1, 512, 256, 16, Mode::kFwdBwd)));
}

// _f1: the backward stores its reductions as partials (SsmFixedSums, after the
// tscan layout, nothing zeroed) and the fixed-order finalize sums them.
TEST(SsmMakePlan, TscanFixedSums) {
  const DeviceLimits h200;
  const Variant v = *Variant::Parse("tscan_d8_w1_i8_f1");
  EXPECT_EQ(v.fixed_sums, 1);
  EXPECT_EQ(v.Name(), "tscan_d8_w1_i8_f1");
  const Problem p = Ssm(4, 1000, 100, 16, Mode::kFwdBwd, DType::kBF16, true);
  StatusOr<LaunchPlan> plan = MakePlan(v, p, h200);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->launches.size(), 3u);
  EXPECT_EQ(plan->launches[0].name_expression,
            "selective_scan_tscan_fwd<__nv_bfloat16, 16, 8, 1, 8, 1, true, true, true, 3>");
  EXPECT_EQ(plan->launches[1].name_expression,
            "selective_scan_tscan_bwd<__nv_bfloat16, 16, 8, 1, 8, 1, true, true, true, 1>");
  EXPECT_EQ(plan->launches[2].name_expression, "selective_scan_bwd_finalize<__nv_bfloat16, 16, 8, 256>");
  const SsmWorkspace w = SsmWorkspaceLayout(4, 1000, 100, 16, 0, 256);
  const SsmFixedSums f = SsmFixedSumsLayout(4, 1000, 100, 16, 8, w.total);
  EXPECT_EQ(f.groups, 13);  // ceil(100 / 8)
  EXPECT_GE(f.dB, w.total);
  EXPECT_EQ(f.dC - f.dB, SsmRound(13 * 4 * 1000 * 16));
  EXPECT_EQ(f.total - f.dA, SsmRound(4 * 100 * 16) + 2 * SsmRound(4 * 100));
  EXPECT_EQ(plan->workspace_bytes, static_cast<uint64_t>(f.total) * 4);
  EXPECT_EQ(plan->workspace_zero_bytes, 0u);
  plan = MakePlan(v, Ssm(4, 1000, 100, 16, Mode::kBwd), h200);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->launches.size(), 3u);
  EXPECT_EQ(plan->launches[1].name_expression, "selective_scan_tscan_bwd<float, 16, 8, 1, 8, 1, false, false, false, 1>");

  // Rejections: a forward (no sums), several warps along time, a family other than tscan, a value
  // other than 1, partials over the cap.
  EXPECT_EQ(CanImplement(v, Ssm(4, 1000, 100, 16, Mode::kFwd), h200).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CanImplement(*Variant::Parse("tscan_d8_w2_i4_f1"), p, h200).code(), StatusCode::kInvalidArgument);
  Variant fused = *Variant::Parse("fused_d32_s4_c8");
  fused.fixed_sums = 1;
  EXPECT_EQ(CanImplement(fused, p, h200).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CanImplement(*Variant::Parse("tscan_d8_w1_i8_f2"), p, h200).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CanImplement(*Variant::Parse("tscan_d16_w1_i4_f1"), p, h200).code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(CanImplement(*Variant::Parse("tscan_d16_w1_i4"), p, h200).ok());
  const Status huge = CanImplement(*Variant::Parse("tscan_d4_w1_i4_f1"), Ssm(64, 1 << 20, 256, 16, Mode::kFwdBwd), h200);
  EXPECT_EQ(huge.code(), StatusCode::kResourceExhausted) << huge.ToString();
  EXPECT_NE(huge.ToString().find("partials"), std::string::npos) << huge.ToString();
}

TEST(SsmMakePlan, LaunchesAndWorkspace) {
  const DeviceLimits h200;
  const Variant seg = *Variant::Parse("fusedseg_d32_s4_c8_g256");
  const Problem p = Ssm(4, 1000, 100, 16, Mode::kFwdBwd);
  StatusOr<LaunchPlan> plan = MakePlan(seg, p, h200);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->launches.size(), 7u);
  const char* phases[] = {"fwd", "fwd", "fwd", "bwd", "bwd", "bwd", "bwd"};
  for (size_t i = 0; i < 7; ++i) EXPECT_EQ(plan->launches[i].phase, phases[i]) << i;
  const Launch& main = plan->launches[2];
  EXPECT_EQ(main.name_expression, "selective_scan_fwd_main<float, 16, 32, 4, 256, 8, false, false, false>");
  EXPECT_EQ(main.grid, (std::array<uint32_t, 3>{4, 4, 4}));  // ceil(100/32) x ceil(1000/256) x B
  EXPECT_EQ(main.block, (std::array<uint32_t, 3>{128, 1, 1}));
  EXPECT_EQ(plan->launches[1].name_expression, "selective_scan_carry<16, 256, 8, false>");
  EXPECT_EQ(plan->launches[1].grid[0], (4u * 100 * 16 + 255) / 256);
  const SsmWorkspace w = SsmWorkspaceLayout(4, 1000, 100, 16, 256, 8);
  EXPECT_EQ(plan->workspace_zero_bytes, static_cast<uint64_t>(w.zero_end) * 4);
  EXPECT_EQ(plan->workspace_bytes, static_cast<uint64_t>(w.total) * 4);
  EXPECT_GE(w.zero_end, 16 * 100 + 100 + 100 + 2 * 4 * 1000 * 16);
  EXPECT_EQ(plan->workspace_zero_bytes % 256, 0u);

  // One segment: no local/carry launches; forward alone zeroes nothing.
  const Problem fwd = Ssm(4, 1000, 100, 16, Mode::kFwd);
  plan = MakePlan(*Variant::Parse("fused_d32_s4_c8"), fwd, h200);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->launches.size(), 1u);
  EXPECT_EQ(plan->launches[0].grid, (std::array<uint32_t, 3>{4, 1, 4}));
  EXPECT_EQ(plan->workspace_zero_bytes, 0u);
  plan = MakePlan(*Variant::Parse("fused_d32_s4_c8"), Ssm(4, 1000, 100, 16, Mode::kBwd, DType::kBF16, true), h200);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->launches.size(), 2u);
  EXPECT_EQ(plan->launches[0].name_expression,
            "selective_scan_bwd_main<__nv_bfloat16, 16, 32, 4, 0, 8, true, true, true>");
  EXPECT_EQ(plan->launches[1].name_expression, "selective_scan_bwd_finalize<__nv_bfloat16, 16>");
}

// tscan: one launch per phase (plus the finalize), dynamic shared memory, the
// checkpoints of the forward phase read by the backward (bwd alone recomputes them).
TEST(SsmMakePlan, TscanLaunches) {
  const DeviceLimits h200;
  const Variant v = *Variant::Parse("tscan_d8_w2_i4");
  EXPECT_EQ(v.algorithm, Algorithm::kTimeScan);
  EXPECT_EQ(v.Name(), "tscan_d8_w2_i4");
  const Problem p = Ssm(4, 1000, 100, 16, Mode::kFwdBwd);
  StatusOr<LaunchPlan> plan = MakePlan(v, p, h200);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->launches.size(), 3u);
  EXPECT_EQ(plan->launches[0].name_expression,
            "selective_scan_tscan_fwd<float, 16, 8, 2, 4, 1, false, false, false, 3>");
  EXPECT_EQ(plan->launches[0].phase, "fwd");
  EXPECT_EQ(plan->launches[0].grid, (std::array<uint32_t, 3>{13, 1, 4}));  // ceil(100 / 8) x 1 x B
  EXPECT_EQ(plan->launches[0].block, (std::array<uint32_t, 3>{512, 1, 1}));
  ASSERT_TRUE(SsmTscanPrefetch(16, 8, 2, 4, 1, false, true));
  EXPECT_FALSE(SsmTscanPrefetch(16, 8, 2, 4, 1, false, false));  // 16-bit inputs: staged through registers
  EXPECT_FALSE(SsmTscanPrefetch(64, 8, 1, 8, 1, false, true));   // 2 x 131 KB of Bm/Cm would not fit
  const SsmTscanSmem fl = SsmTscanSmemLayout(16, 8, 2, 4, 1, false, false, /*prefetch=*/true);  // fp32
  const SsmTscanSmem bl = SsmTscanSmemLayout(16, 8, 2, 4, 1, false, true);
  EXPECT_EQ(plan->launches[0].shared_bytes, fl.total * 4);
  EXPECT_EQ(plan->launches[1].name_expression, "selective_scan_tscan_bwd<float, 16, 8, 2, 4, 1, false, false, false>");
  EXPECT_EQ(plan->launches[1].phase, "bwd");
  EXPECT_EQ(plan->launches[1].shared_bytes, bl.total * 4);
  EXPECT_EQ(plan->launches[2].name_expression, "selective_scan_bwd_finalize<float, 16>");
  // Chunk 256 steps: ceil(1000 / 256) = 4 checkpoints of (B, D, N) after the zeroed prefix.
  const SsmWorkspace w = SsmWorkspaceLayout(4, 1000, 100, 16, 0, 256);
  EXPECT_EQ(w.total - w.ckpt, SsmRound(4 * 4 * 100 * 16));
  EXPECT_EQ(plan->workspace_bytes, static_cast<uint64_t>(w.total) * 4);
  EXPECT_EQ(plan->workspace_zero_bytes, static_cast<uint64_t>(w.zero_end) * 4);
  // Shared memory: staged rows (delta, u; bwd + dy), Bm and Cm (bwd + the (dBm, dCm) sums) of one chunk.
  EXPECT_EQ(fl.bc, 2 * 8 * (256 + 4));
  EXPECT_EQ(bl.bc, 3 * 8 * (256 + 4));
  EXPECT_EQ(bl.carry - bl.bc, 4 * 16 * 257);

  plan = MakePlan(v, Ssm(4, 1000, 100, 16, Mode::kFwd), h200);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->launches.size(), 1u);
  EXPECT_EQ(plan->launches[0].name_expression,
            "selective_scan_tscan_fwd<float, 16, 8, 2, 4, 1, false, false, false, 1>");
  EXPECT_EQ(plan->workspace_bytes, 0u);
  plan = MakePlan(v, Ssm(4, 1000, 100, 16, Mode::kBwd, DType::kBF16, true), h200);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->launches.size(), 3u);
  EXPECT_EQ(plan->launches[0].name_expression,
            "selective_scan_tscan_fwd<__nv_bfloat16, 16, 8, 2, 4, 1, true, true, true, 2>");
  EXPECT_EQ(plan->launches[0].phase, "bwd");
  EXPECT_EQ(plan->launches[0].shared_bytes, SsmTscanSmemLayout(16, 8, 2, 4, 1, true, false).total * 4);
  EXPECT_EQ(plan->launches[1].shared_bytes, SsmTscanSmemLayout(16, 8, 2, 4, 1, true, true).total * 4);

  // Rejections: shared memory at N = 64 with 8 items, knobs out of range.
  EXPECT_EQ(CanImplement(*Variant::Parse("tscan_d8_w1_i8"), Ssm(1, 64, 64, 64, Mode::kFwdBwd), h200).code(),
            StatusCode::kResourceExhausted);
  EXPECT_TRUE(CanImplement(*Variant::Parse("tscan_d8_w1_i8"), Ssm(1, 64, 64, 64, Mode::kFwd), h200).ok());
  EXPECT_FALSE(CanImplement(*Variant::Parse("tscan_d6_w1_i4"), Ssm(1, 64, 64, 16, Mode::kFwd), h200).ok());
  EXPECT_FALSE(CanImplement(*Variant::Parse("tscan_d8_w3_i4"), Ssm(1, 64, 64, 16, Mode::kFwd), h200).ok());
  EXPECT_FALSE(CanImplement(*Variant::Parse("tscan_d32_w2_i4"), Ssm(1, 64, 64, 16, Mode::kFwd), h200).ok());
}

// tscan with state groups: S x the threads on the same channels and grid, the group count in
// the templates, the name's optional "_s" knob (absent: one group, the v2 names unchanged).
TEST(SsmMakePlan, TscanStateGroups) {
  const DeviceLimits h200;
  const Variant v = *Variant::Parse("tscan_d4_w1_i8_s2");
  EXPECT_EQ(v.state_split, 2);
  EXPECT_EQ(v.Name(), "tscan_d4_w1_i8_s2");
  EXPECT_EQ(Variant::Parse("tscan_d4_w1_i8")->state_split, 0);
  EXPECT_EQ(Variant::Parse("tscan_d4_w1_i8")->Name(), "tscan_d4_w1_i8");
  EXPECT_FALSE(Variant::Parse("tscan_d4_w1").ok());
  EXPECT_FALSE(Variant::Parse("tscan_d4_w1_i8_g2").ok());
  StatusOr<LaunchPlan> plan = MakePlan(v, Ssm(4, 8192, 256, 16, Mode::kFwdBwd), h200);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->launches.size(), 3u);
  EXPECT_EQ(plan->launches[0].name_expression,
            "selective_scan_tscan_fwd<float, 16, 4, 1, 8, 2, false, false, false, 3>");
  EXPECT_EQ(plan->launches[1].name_expression, "selective_scan_tscan_bwd<float, 16, 4, 1, 8, 2, false, false, false>");
  EXPECT_EQ(plan->launches[0].grid, (std::array<uint32_t, 3>{64, 1, 4}));  // 256 blocks at D = 256
  EXPECT_EQ(plan->launches[0].block, (std::array<uint32_t, 3>{256, 1, 1}));
  ASSERT_TRUE(SsmTscanPrefetch(16, 4, 1, 8, 2, false, true));
  const SsmTscanSmem fl = SsmTscanSmemLayout(16, 4, 1, 8, 2, false, false, /*prefetch=*/true);  // fp32
  const SsmTscanSmem bl = SsmTscanSmemLayout(16, 4, 1, 8, 2, false, true);
  EXPECT_EQ(plan->launches[0].shared_bytes, fl.total * 4);
  EXPECT_EQ(plan->launches[1].shared_bytes, bl.total * 4);
  EXPECT_EQ(fl.rows2 - fl.red, 1 * 4 * (256 + 8));     // group 1's y partials
  EXPECT_EQ(fl.total - fl.rows2, fl.carry - fl.rows);  // the second rows and Bm/Cm buffers (cp.async)
  EXPECT_EQ(bl.total - bl.red, 2 * 2 * 2 * 4 * 256);   // the double-buffered channel reduction
  // 512 threads hold 128 registers: the I = 8 backward would spill; the forward fits.
  const Variant wide = *Variant::Parse("tscan_d8_w1_i8_s2");
  EXPECT_EQ(CanImplement(wide, Ssm(4, 8192, 256, 16, Mode::kFwdBwd), h200).code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(CanImplement(wide, Ssm(4, 8192, 256, 16, Mode::kFwd), h200).ok());
  // Groups need one warp along time and at least two states each; 3 groups do not exist.
  EXPECT_FALSE(CanImplement(*Variant::Parse("tscan_d4_w2_i4_s2"), Ssm(1, 64, 64, 16, Mode::kFwd), h200).ok());
  EXPECT_FALSE(CanImplement(*Variant::Parse("tscan_d4_w1_i4_s3"), Ssm(1, 64, 64, 16, Mode::kFwd), h200).ok());
  EXPECT_TRUE(CanImplement(*Variant::Parse("tscan_d4_w1_i4_s4"), Ssm(1, 64, 64, 8, Mode::kFwd), h200).ok());
}

// tscan_d8_w1_i16 (v4): a forward for B x D too small to fill the GPU twice (D = 256, B = 4: one
// 256-thread block per SM): 512-step chunks, 255 registers, four states per iteration; the
// backward (~416 live values per thread), N = 64 (shared memory) and 16-bit inputs at N = 32 are refused.
TEST(SsmMakePlan, TscanSixteenItems) {
  const DeviceLimits h200;
  const Variant v = *Variant::Parse("tscan_d8_w1_i16");
  StatusOr<LaunchPlan> plan = MakePlan(v, Ssm(4, 8192, 256, 16, Mode::kFwd), h200);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->launches.size(), 1u);
  EXPECT_EQ(plan->launches[0].name_expression,
            "selective_scan_tscan_fwd<float, 16, 8, 1, 16, 1, false, false, false, 1>");
  EXPECT_EQ(plan->launches[0].grid, (std::array<uint32_t, 3>{32, 1, 4}));
  EXPECT_EQ(plan->launches[0].block, (std::array<uint32_t, 3>{256, 1, 1}));
  ASSERT_TRUE(SsmTscanPrefetch(16, 8, 1, 16, 1, false, true));  // one block per SM: two 512-step buffers fit
  EXPECT_EQ(plan->launches[0].shared_bytes, SsmTscanSmemLayout(16, 8, 1, 16, 1, false, false, true).total * 4);
  EXPECT_LE(plan->launches[0].shared_bytes, 227u * 1024);
  EXPECT_EQ(CanImplement(v, Ssm(4, 8192, 256, 16, Mode::kFwdBwd), h200).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(CanImplement(v, Ssm(4, 8192, 256, 64, Mode::kFwd), h200).code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(CanImplement(v, Ssm(4, 8192, 256, 32, Mode::kFwd, DType::kF32, true), h200).ok());
  EXPECT_EQ(CanImplement(v, Ssm(4, 8192, 256, 32, Mode::kFwd, DType::kBF16), h200).code(),
            StatusCode::kResourceExhausted);  // staged through registers: ptxas -v spills 20 bytes
  EXPECT_TRUE(CanImplement(v, Ssm(4, 8192, 256, 16, Mode::kFwd, DType::kF16, true), h200).ok());
}

TEST(SsmParamLayout, MatchesTheStruct) {
  const std::vector<v1::ParamField> fields = ParamLayout(Op::kSelectiveScan);
  EXPECT_EQ(ParamSize(Op::kSelectiveScan), sizeof(SelectiveScanParams));
  ASSERT_EQ(fields.size(), 26u);
#define EXPECT_FIELD(i, member)                                                  \
  EXPECT_EQ(fields[i].name(), #member);                                          \
  EXPECT_EQ(fields[i].offset_bytes(), offsetof(SelectiveScanParams, member));    \
  EXPECT_EQ(fields[i].size_bytes(), sizeof(SelectiveScanParams::member))
  EXPECT_FIELD(0, u);
  EXPECT_FIELD(1, delta);
  EXPECT_FIELD(2, A);
  EXPECT_FIELD(3, Bm);
  EXPECT_FIELD(4, Cm);
  EXPECT_FIELD(5, Dv);
  EXPECT_FIELD(6, delta_bias);
  EXPECT_FIELD(7, z);
  EXPECT_FIELD(8, h0);
  EXPECT_FIELD(9, y);
  EXPECT_FIELD(10, h_final);
  EXPECT_FIELD(11, dy);
  EXPECT_FIELD(12, du);
  EXPECT_FIELD(13, ddelta);
  EXPECT_FIELD(14, dA);
  EXPECT_FIELD(15, dBm);
  EXPECT_FIELD(16, dCm);
  EXPECT_FIELD(17, dDv);
  EXPECT_FIELD(18, ddelta_bias);
  EXPECT_FIELD(19, dz);
  EXPECT_FIELD(20, dh0);
  EXPECT_FIELD(21, workspace);
  EXPECT_FIELD(22, batch);
  EXPECT_FIELD(23, length);
  EXPECT_FIELD(24, dim);
  EXPECT_FIELD(25, state);
#undef EXPECT_FIELD
}

CompileRequest Request(const Variant& v, DType dtype, int n, bool options) {
  CompileRequest r;
  r.variant = v;
  r.op = Op::kSelectiveScan;
  r.dtype = dtype;
  r.ssm.state = n;
  r.ssm.delta_bias = options;
  r.ssm.delta_softplus = options;
  r.ssm.z_gate = options;
  return r;
}

// "variant dtype nN[ +options]", for failure messages.
std::string Describe(const CompileRequest& r) {
  return r.variant.Name() + " " + DTypeName(r.dtype) + " n" + std::to_string(r.ssm.state) +
         (r.ssm.z_gate ? " +options" : "");
}

void CompileAndCheck(const std::vector<CompileRequest>& requests) {
  NvrtcCompiler compiler;
  const auto start = std::chrono::steady_clock::now();
  const std::vector<StatusOr<CompileResult>> results = CompileAll(compiler, requests, 2);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(results.size(), requests.size());
  for (size_t i = 0; i < results.size(); ++i) {
    const CompileRequest& r = requests[i];
    const std::string what = Describe(r);
    ASSERT_TRUE(results[i].ok()) << what << ": " << results[i].status().ToString();
    ASSERT_EQ(results[i]->state, v1::OK) << what << "\n" << results[i]->log;
    const std::vector<std::string> names = NameExpressions(r.variant, r.op, r.dtype, r.ssm);
    EXPECT_EQ(results[i]->lowered_names.size(), names.size()) << what;
    for (const std::string& name : names) EXPECT_TRUE(results[i]->lowered_names.count(name)) << what << " " << name;
  }
  std::printf("%zu selective_scan modules compiled in %.1f s\n", requests.size(), seconds);
}

TEST(SsmNvrtc, EveryVariantFp32Bf16N16) {
  std::vector<CompileRequest> requests;
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    for (const Variant& v : EnumerateVariants(Op::kSelectiveScan, false)) requests.push_back(Request(v, dtype, 16, false));
  }
  CompileAndCheck(requests);
}

TEST(SsmNvrtc, OtherStatesOptionsAndFp16OnePerFamily) {
  std::vector<CompileRequest> requests;
  for (const char* name : {"sequential_v1_t64_p1", "chunked_v1_t128_c128", "fused_d32_s8_c8", "fusedseg_d32_s4_c8_g256",
                           "tscan_d8_w1_i4", "tscan_d8_w1_i8", "tscan_d8_w2_i4", "tscan_d16_w1_i4", "tscan_d4_w4_i2",
                           "tscan_d4_w1_i4", "tscan_d4_w1_i8_s2", "tscan_d8_w1_i8_s2", "tscan_d4_w1_i4_s2", "tscan_d8_w1_i4_s2",
                           "tscan_d4_w1_i4_s4", "tscan_d8_w1_i4_s4", "tscan_d8_w1_i16"}) {
    const Variant v = *Variant::Parse(name);
    for (int n : {8, 32, 64}) requests.push_back(Request(v, DType::kBF16, n, n == 32));
    requests.push_back(Request(v, DType::kF16, 16, true));
    requests.push_back(Request(v, DType::kF32, 16, true));
  }
  CompileAndCheck(requests);
}

// Every tscan instance (each variant x fp32 / bf16 / fp16 x N 8 / 16 / 32 / 64 x options off / on)
// compiles, and ptxas -v reports no spill in any kernel the planner may launch (a backward that
// CanImplement refuses -- 512+ threads at I = 8 -- is compiled with the module but never run).
// SCANTUNE_PRINT_REGS=1 prints each kernel's registers.
TEST(SsmNvrtc, TscanEveryInstanceNoSpills) {
  const DeviceLimits h200;
  std::vector<CompileRequest> requests;
  for (const Variant& v : EnumerateVariants(Op::kSelectiveScan, false)) {
    if (v.algorithm != Algorithm::kTimeScan) continue;
    for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
      for (int n : {8, 16, 32, 64}) {
        for (bool options : {false, true}) requests.push_back(Request(v, dtype, n, options));
      }
    }
  }
  NvrtcCompiler compiler;
  const std::vector<StatusOr<CompileResult>> results = CompileAll(compiler, requests, 2);
  ASSERT_EQ(results.size(), requests.size());
  const bool print = std::getenv("SCANTUNE_PRINT_REGS") != nullptr;
  for (size_t i = 0; i < results.size(); ++i) {
    const CompileRequest& r = requests[i];
    const std::string what = Describe(r);
    ASSERT_TRUE(results[i].ok()) << what << ": " << results[i].status().ToString();
    ASSERT_EQ(results[i]->state, v1::OK) << what << "\n" << results[i]->log;
    Problem p = Ssm(4, 8192, 256, r.ssm.state, Mode::kFwdBwd, r.dtype, r.ssm.z_gate);
    const bool bwd_ok = CanImplement(r.variant, p, h200).ok();
    p.mode = Mode::kFwd;
    const bool fwd_ok = CanImplement(r.variant, p, h200).ok();
    // ptxas -v: "Compiling entry function '<mangled>'" ... "N bytes spill stores, M bytes spill loads" ... "Used R registers".
    std::istringstream log(results[i]->log);
    std::string line, entry, regs_line;
    while (std::getline(log, line)) {
      const size_t q = line.find("entry function '");
      if (q != std::string::npos) entry = line.substr(q + 16, line.find('\'', q + 16) - q - 16);
      const bool is_bwd = entry.find("tscan_bwd") != std::string::npos;
      // The forward's last template argument OUT: 1 (y) runs in fwd, 2 and 3 (checkpoints) before a backward.
      const bool is_fwd = entry.find("tscan_fwd") != std::string::npos;
      const bool y_only = entry.find("Li1EEv19SelectiveScanParams") != std::string::npos;
      const bool used = is_bwd ? bwd_ok : is_fwd ? (y_only ? fwd_ok : bwd_ok) : true;
      if (line.find("spill stores") != std::string::npos && used) {
        EXPECT_NE(line.find(" 0 bytes spill stores, 0 bytes spill loads"), std::string::npos)
            << what << " " << entry << ": " << line;
      }
      if (print && line.find("Used ") != std::string::npos && used) {
        std::printf("%-22s %-5s n%-2d %s %-4s %s\n", r.variant.Name().c_str(), DTypeName(r.dtype), r.ssm.state,
                    r.ssm.z_gate ? "opt" : "-", is_bwd ? "bwd" : (entry.find("tscan_fwd") != std::string::npos ? "fwd" : "fin"),
                    line.substr(line.find("Used ")).c_str());
      }
    }
  }
  std::printf("%zu tscan modules compiled\n", requests.size());
}

}  // namespace
}  // namespace scantune
