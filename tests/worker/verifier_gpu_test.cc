// Every enumerated linear_scan variant, compiled once per dtype (`_k1` per problem), verified
// through the worker's Verifier at shapes that exercise the edges (L = 1,
// short odd lengths, widths that are not multiples of 32 or of the vector
// width) and one shape of interior tiles only, in fwd_bwd and bwd modes, with
// and without h0. Label: gpu.
#include <cstdio>
#include <map>

#include <gtest/gtest.h>

#include "tests/worker/gpu_test_support.h"
#include "worker/verifier.h"

namespace scantune {
namespace {

TEST(VerifierGpuTest, EveryVariantIsLegal) {
  SCANTUNE_REQUIRE_GPU(gpu);
  const NvrtcCompiler compiler;
  const std::vector<Variant> variants = EnumerateVariants(Op::kLinearScan, /*include_test_variants=*/false);
  ASSERT_FALSE(variants.empty());
  // {2, 1024, 256}: interior tiles (aligned rows, whole strips and tiles) for every strip and tile, 16-bit too.
  const std::vector<Shape> shapes = {{1, 1, 1},       {2, 7, 33},   {3, 1000, 100},
                                     {2, 1000, 2050}, {1, 4096, 64}, {2, 1024, 256}};
  std::map<std::string, testing::VerifyCounts> summary;
  // `_k1` variants carry the shape in their template arguments: compiled for each problem; the others once.
  std::vector<Variant> baked, unbaked;
  for (const Variant& v : variants) (v.baked != 0 ? baked : unbaked).push_back(v);
  auto compile = [&](const std::vector<Variant>& which, DType dtype, const Shape& shape) {
    std::vector<CompileRequest> requests;
    for (const Variant& v : which) {
      requests.push_back({v, Op::kLinearScan, dtype, {}, gpu->limits.cc_major, gpu->limits.cc_minor, shape});
    }
    return CompileAll(compiler, requests, 16);
  };
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    const std::vector<StatusOr<CompileResult>> compiled = compile(unbaked, dtype, {});
    std::vector<Problem> problems;
    for (const Shape& shape : shapes) {
      for (bool h0 : {false, true}) problems.push_back({Op::kLinearScan, shape, dtype, Mode::kFwdBwd, h0});
    }
    // bwd alone reads the reference h instead of the candidate's own.
    problems.push_back({Op::kLinearScan, {2, 7, 33}, dtype, Mode::kBwd, true});
    problems.push_back({Op::kLinearScan, {3, 1000, 100}, dtype, Mode::kBwd, false});
    for (const Problem& problem : problems) {
      testing::VerifyEveryVariant(*gpu, problem, unbaked, compiled, &summary[problem.Key()]);
      if (::testing::Test::HasFatalFailure()) return;
      std::vector<Variant> fitting;  // the baked ones this problem runs (each compile is for this shape alone)
      for (const Variant& v : baked) {
        if (CanImplement(v, problem, gpu->limits).ok()) fitting.push_back(v);
      }
      if (!fitting.empty()) {
        testing::VerifyEveryVariant(*gpu, problem, fitting, compile(fitting, dtype, problem.shape),
                                    &summary[problem.Key()]);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
  testing::PrintCounts(summary);
}

}  // namespace
}  // namespace scantune
