// The GPU suite's inputs build without a GPU: one variant per algorithm (the
// test-only ones included) compiles with NVRTC and turns into a Candidate
// whose every launch names an entry of its cubin. Catches a mismatch between
// plan name expressions and compiled instances before GPU time is spent.
#include <set>

#include <gtest/gtest.h>

#include "tests/worker/gpu_test_support.h"

namespace scantune {
namespace {

TEST(CandidateTest, OneVariantPerAlgorithmBuildsACandidate) {
  const NvrtcCompiler compiler;
  const DeviceLimits limits;  // the H200 defaults
  std::set<Algorithm> seen;
  for (const Variant& v : EnumerateVariants(Op::kLinearScan, true)) {
    if (!seen.insert(v.algorithm).second) continue;
    SCOPED_TRACE(v.Name());
    for (Mode mode : {Mode::kFwd, Mode::kFwdBwd}) {
      const Problem problem{Op::kLinearScan, {2, 7, 33}, DType::kBF16, mode, true};
      if (!CanImplement(v, problem, limits).ok()) continue;
      auto compiled = compiler.Compile({v, Op::kLinearScan, DType::kBF16, {}, limits.cc_major, limits.cc_minor});
      ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
      ASSERT_EQ(compiled->state, v1::OK) << compiled->log;
      auto candidate = MakeCandidate(v, problem, limits, *compiled);
      ASSERT_TRUE(candidate.ok()) << candidate.status().ToString();
      EXPECT_FALSE(candidate->cubin().empty());
      ASSERT_GT(candidate->launches_size(), 0);
      for (const v1::KernelLaunch& l : candidate->launches()) {
        EXPECT_FALSE(l.entry().empty());
        EXPECT_TRUE(l.phase() == "fwd" || l.phase() == "bwd") << l.phase();
        EXPECT_NE(candidate->cubin().find(l.entry()), std::string::npos) << l.entry() << " not in the cubin";
      }
    }
  }
  EXPECT_GE(seen.size(), 3u);
}

}  // namespace
}  // namespace scantune
