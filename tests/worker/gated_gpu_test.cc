// Every enumerated rglru and samu variant, compiled once per dtype, verified
// through the worker's Verifier (poisoned outputs, guard bytes, float64
// reference of every output, saved tensor and parameter gradient) at shapes
// that exercise the edges: L = 1, short odd lengths, widths that are not
// multiples of 32 or of the vector width, one tile and many tiles, in
// fwd_bwd and bwd modes, with and without h0. Label: gpu.
#include <cstdio>
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "tests/worker/gpu_test_support.h"
#include "worker/verifier.h"

namespace scantune {
namespace {


// variants: the operator's enumerated ones unless given. Each one given by
// name must run (not only be pruned) on at least one of the problems.
// shapes: the fwd_bwd shapes (each with and without h0) in place of the default list.
// plan_sm_count: VerifyEveryVariant's (0: the GPU's SMs).
void VerifyOperator(Op op, std::vector<Variant> variants = {}, std::vector<Shape> shapes = {},
                    int plan_sm_count = 0) {
  const bool named = !variants.empty();
  SCANTUNE_REQUIRE_GPU(gpu);
  const NvrtcCompiler compiler;
  if (variants.empty()) variants = EnumerateVariants(op, /*include_test_variants=*/false);
  ASSERT_FALSE(variants.empty());
  // 2x602x512: W = 8 x a rows block's threads, so the `chunked` rescan's full groups take the meeting's
  // branch-free instance (absent warps' sums zeroed) and each sequence's last chunk ends in a partial group.
  if (shapes.empty()) shapes = {{1, 1, 1}, {2, 7, 33}, {3, 300, 100}, {2, 1000, 2050}, {1, 4096, 64}, {2, 602, 512}};
  std::map<std::string, testing::VerifyCounts> summary;
  std::set<std::string> ran;
  // `_k1` variants carry the shape in their template arguments: compiled for each problem; the others once.
  std::vector<Variant> baked, unbaked;
  for (const Variant& v : variants) (v.baked != 0 ? baked : unbaked).push_back(v);
  auto compile = [&](const std::vector<Variant>& which, DType dtype, const Shape& shape) {
    std::vector<CompileRequest> requests;
    for (const Variant& v : which) {
      CompileRequest r;
      r.variant = v;
      r.op = op;
      r.dtype = dtype;
      r.cc_major = gpu->limits.cc_major;
      r.cc_minor = gpu->limits.cc_minor;
      r.shape = shape;
      requests.push_back(r);
    }
    return CompileAll(compiler, requests, 16);
  };
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    const std::vector<StatusOr<CompileResult>> compiled = compile(unbaked, dtype, {});
    std::vector<Problem> problems;
    for (const Shape& shape : shapes) {
      for (bool h0 : {false, true}) problems.push_back(Problem{op, shape, dtype, Mode::kFwdBwd, h0, /*ssm=*/{}});
    }
    // bwd alone reads the reference h (and samu's control values) instead of its own.
    problems.push_back(Problem{op, {2, 7, 33}, dtype, Mode::kBwd, true, /*ssm=*/{}});
    problems.push_back(Problem{op, {3, 300, 100}, dtype, Mode::kBwd, false, /*ssm=*/{}});
    // A single long sequence: many tiles chained by the look-back, parameter
    // gradients summed over 8192 tokens.
    problems.push_back(Problem{op, {1, 8192, 256}, dtype, Mode::kFwdBwd, true, /*ssm=*/{}});
    // samu _o5: a cluster of 8 strips of 128 channels, the last one partial
    // (104 channels), meeting over tiles that end past L.
    problems.push_back(Problem{op, {2, 520, 1000}, dtype, Mode::kFwdBwd, true, /*ssm=*/{}});
    for (const Problem& problem : problems) {
      testing::VerifyEveryVariant(*gpu, problem, unbaked, compiled, &summary[problem.Key()], plan_sm_count);
      if (::testing::Test::HasFatalFailure()) return;
      std::vector<Variant> fitting;  // the baked ones this problem runs (each compile is for this shape alone)
      for (const Variant& v : baked) {
        if (CanImplement(v, problem, gpu->limits).ok()) fitting.push_back(v);
      }
      if (!fitting.empty()) {
        testing::VerifyEveryVariant(*gpu, problem, fitting, compile(fitting, dtype, problem.shape),
                                    &summary[problem.Key()], plan_sm_count);
        if (::testing::Test::HasFatalFailure()) return;
      }
      for (const Variant& v : variants) {
        if (CanImplement(v, problem, gpu->limits).ok()) ran.insert(v.Name());
      }
    }
  }
  testing::PrintCounts(summary);
  if (named) {
    for (const Variant& v : variants) EXPECT_TRUE(ran.contains(v.Name())) << v.Name() << " ran on no problem";
  }
}

// Variants run by name (not all enumerated).
const auto Named = testing::NamedVariants;

TEST(GatedGpuTest, EveryRgLruVariantIsLegal) { VerifyOperator(Op::kRgLru); }
TEST(GatedGpuTest, EverySamuVariantIsLegal) { VerifyOperator(Op::kSamu); }
// samu _o5 (not enumerated, runs by name): clusters of 1 (W <= strip), 4 and 8 strips here.
TEST(GatedGpuTest, SamuClusterVariantsAreLegal) {
  VerifyOperator(Op::kSamu,
                 Named({"lookback_v2_t256_s4_i16_o5", "lookback_v2_t512_s8_i16_o5", "lookback_v2_t512_s4_i16_o5"}));
}

// samu `chunked` _h{n} (not enumerated, runs by name): h saved at every n-th
// token, the rows between recomputed by the backward; own forward and _l's,
// fwd_bwd and bwd alone (which reads the saved rows of the reference h).
TEST(GatedGpuTest, SamuSavedEveryNthTokenVariantsAreLegal) {
  VerifyOperator(Op::kSamu, Named({"chunked_v8_t256_c32_l64_h4", "chunked_v8_t512_c64_l32_h2", "chunked_v8_t256_c64_h4",
                                   "chunked_v8_t256_c128_l32_h4"}));
}

// samu `chunked` _y1 (bf16 fwd_bwd only, the other problems refused; also
// among the enumerated points, named here as its own suite): the forward
// stores y and not h, the backward takes h = y / gamma. Widths that are not
// multiples of 8 (33, 100, 2050) give blocks whose last thread's group keeps
// h (SamuGroupKeepsH) beside threads that read y. With _l the look-back
// forward stores them; without, chunked's own columns scan.
TEST(GatedGpuTest, SamuHFromYVariantsAreLegal) {
  VerifyOperator(Op::kSamu,
                 Named({"chunked_v8_t256_c32_l64_y1", "chunked_v8_t512_c64_l32_y1", "chunked_v8_t256_c128_l32_y1",
                        "chunked_v8_t256_c32_y1", "chunked_v8_t512_c64_y1_a1"}));
}

// samu `chunked` _k1 (also among the enumerated points, named here as its own suite): the shape baked into the
// scans' template arguments, so each problem's module is its own; with and without _y1 and _b / _i32 / _a1, at
// widths with partial strips, rows and groups (33, 100, 2050) and the 8192-token chain.
TEST(GatedGpuTest, SamuBakedShapeVariantsAreLegal) {
  VerifyOperator(Op::kSamu, Named({"chunked_v8_t256_c32_l64_y1_k1", "chunked_v8_t512_c64_l64_y1_b4_i32_a1_k1",
                                   "chunked_v8_t256_c128_l64_y1_b5_i32_a1_k1", "chunked_v8_t256_c64_l32_k1"}));
}

// rglru lookback _k1 (the two _o3 points also among the enumerated ones): the shape baked into the forward's and
// the backward's scans; _o2, _o3 and the chained _d1, at partial strips and tiles and the 8192-token chain.
TEST(GatedGpuTest, RgLruBakedShapeVariantsAreLegal) {
  VerifyOperator(Op::kRgLru, Named({"lookback_v2_t256_s8_i16_o3_k1", "lookback_v2_t256_s16_i16_o3_k1",
                                    "lookback_v2_t256_s8_i16_o2_k1", "lookback_v2_t256_s8_i8_o3_d1_k1"}));
}

// samu `chunked` _b{n} (bf16; _b5 also among the enumerated _y1 points): the
// look-back forward keeps b at 16 bits in place of its staged x and is
// compiled for n blocks per SM; with and without _y1, with _h4.
TEST(GatedGpuTest, SamuB16ForwardVariantsAreLegal) {
  VerifyOperator(Op::kSamu, Named({"chunked_v8_t256_c32_l64_b5", "chunked_v8_t512_c64_l32_y1_b5",
                                   "chunked_v8_t256_c128_l32_y1_b6", "chunked_v8_t256_c64_l32_h4_b4"}));
}

// samu `chunked` _i32 / _i64 (bf16, with _b): the look-back forward's 32 or
// 64 tokens per thread, twice or four times the tile (one tile past L = 300
// at strip 64: 256 or 512 tokens; the 8192-token problem's 32 or 16 tiles
// chained by the look-back); with and without _y1, at both strips, at 3 to 5
// blocks per SM.
TEST(GatedGpuTest, SamuLongTileForwardVariantsAreLegal) {
  VerifyOperator(Op::kSamu, Named({"chunked_v8_t256_c128_l64_y1_b5_i32", "chunked_v8_t512_c64_l32_y1_b5_i32",
                                   "chunked_v8_t256_c32_l64_b4_i32", "chunked_v8_t256_c64_l64_y1_b3_i64",
                                   "chunked_v8_t512_c64_l32_y1_b4_i64", "chunked_v8_t256_c128_l64_h4_b3_i32"}));
}

// samu `chunked` _p{n} (bf16, with _b): the look-back forward as a persistent grid of n blocks per SM, the next
// tile's x staged while a block runs this one. Planned for 2 SMs, so that each block loops over many tiles (at
// 2x1000x2050, strip 64: 33 strips x 8 tiles x 2 sequences over 8 or 6 blocks), partial strips and partial last
// tiles among them; 16 and 32 tokens per thread, both strips, with _y1 and _h4.
TEST(GatedGpuTest, SamuPersistentForwardVariantsAreLegal) {
  VerifyOperator(Op::kSamu,
                 Named({"chunked_v8_t256_c32_l64_y1_b4_p4", "chunked_v8_t512_c64_l64_y1_b4_i32_p3",
                        "chunked_v8_t256_c128_l32_b5_p5", "chunked_v8_t256_c64_l64_h4_b4_p1"}),
                 {}, /*plan_sm_count=*/2);
}

// samu `chunked` at widths whose finalize takes 32 channels per block (ceil(W / 16) + 1 blocks would be more
// than one wave of the SMs) and whose backward agg takes 512-channel columns (W = 2560: five; W = 2200 and
// 3000: the last one partial), with the seed shape's selected forwards and two of the own forward (and _a1,
// whose rescan adds into the gradients instead).
TEST(GatedGpuTest, SamuChunkedWideRowsAreLegal) {
  VerifyOperator(Op::kSamu,
                 Named({"chunked_v8_t512_c64_l64_y1_b4_i32", "chunked_v8_t512_c64_l32_y1", "chunked_v8_t512_c32",
                        "chunked_v8_t512_c128_l64_h4", "chunked_v8_t512_c64_l64_y1_b4_i32_p3",
                        "chunked_v8_t512_c64_l64_y1_b4_i32_a1"}),
                 {{1, 300, 2560}, {2, 130, 2200}, {1, 77, 3000}});
}

// samu `chunked` _a1: the rescan adds its parameter and controller partials into the gradients by atomics (the
// agg zeroes them), no finalize. Every dtype and problem of the default list (bwd alone, h0, L = 8192's 256
// parts into one row), the own forward and _l's, with _y1, _h4 and the seed shapes' selected forwards.
TEST(GatedGpuTest, SamuAtomicParameterSumsAreLegal) {
  VerifyOperator(Op::kSamu, Named({"chunked_v8_t256_c32_a1", "chunked_v8_t256_c32_l64_y1_b4_i32_a1",
                                   "chunked_v8_t512_c64_l64_y1_b4_i32_a1", "chunked_v8_t256_c64_l64_y1_b5_i32_a1",
                                   "chunked_v8_t256_c64_l32_h4_a1"}));
}

}  // namespace
}  // namespace scantune
