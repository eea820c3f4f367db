#include "tests/worker/gpu_test_support.h"

#include <cstdio>
#include <memory>

#include <gtest/gtest.h>

#include "worker/device_info.h"
#include "worker/verifier.h"

namespace scantune::testing {

StatusOr<TestGpu*> GetTestGpu() {
  static std::unique_ptr<TestGpu> gpu;
  static std::unique_ptr<GpuContext> ctx;
  static Status failed;
  if (gpu) return gpu.get();
  if (!failed.ok()) return failed;
  auto init = [&]() -> Status {
    ASSIGN_OR_RETURN(const CudaDriver* driver, CudaDriver::Load());
    ASSIGN_OR_RETURN(ctx, GpuContext::Open(driver, 0));
    auto g = std::make_unique<TestGpu>();
    g->driver = driver;
    g->ctx = ctx.get();
    ASSIGN_OR_RETURN(g->info, QueryDeviceInfo(*driver, 0));
    g->limits = DeviceLimits::FromProto(g->info);
    gpu = std::move(g);
    return Status::Ok();
  };
  failed = init();
  if (!failed.ok()) return failed;
  return gpu.get();
}

void VerifyEveryVariant(TestGpu& gpu, const Problem& problem, const std::vector<Variant>& variants,
                        const std::vector<StatusOr<CompileResult>>& compiled, VerifyCounts* counts,
                        int plan_sm_count) {
  Verifier verifier(*gpu.ctx, problem, /*seed=*/1234, {});
  DeviceLimits limits = gpu.limits;
  if (plan_sm_count > 0) limits.sm_count = plan_sm_count;
  for (size_t i = 0; i < variants.size(); ++i) {
    const Variant& variant = variants[i];
    SCOPED_TRACE(variant.Name() + " on " + problem.Key());
    if (!CanImplement(variant, problem, limits).ok()) {
      ++counts->pruned;
      continue;
    }
    ASSERT_TRUE(compiled[i].ok()) << compiled[i].status().ToString();
    ASSERT_EQ(compiled[i]->state, v1::OK) << compiled[i]->log;
    auto candidate = MakeCandidate(variant, problem, limits, *compiled[i]);
    ASSERT_TRUE(candidate.ok()) << candidate.status().ToString();
    auto outcome = verifier.Verify(*candidate);
    ASSERT_TRUE(outcome.ok()) << outcome.status().ToString();
    ASSERT_FALSE(outcome->context_lost) << v1::ResultState_Name(outcome->state) << ": " << outcome->detail;
    ++counts->verified;
    if (!outcome->ok()) ++counts->failed;
    EXPECT_EQ(outcome->state, v1::OK) << v1::ResultState_Name(outcome->state) << ": " << outcome->detail;
    EXPECT_LE(outcome->rel_err, Tolerance(problem.dtype));
    EXPECT_GE(outcome->memory.peak_bytes(), outcome->memory.baseline_bytes());
  }
}

std::vector<Variant> NamedVariants(std::initializer_list<const char*> names) {
  std::vector<Variant> variants;
  for (const char* name : names) {
    StatusOr<Variant> v = Variant::Parse(name);
    EXPECT_TRUE(v.ok()) << name;
    if (v.ok()) variants.push_back(*v);
  }
  return variants;
}

void PrintCounts(const std::map<std::string, VerifyCounts>& counts) {
  for (const auto& [key, c] : counts) {
    std::printf("%-56s verified %3d  pruned %3d  failed %3d\n", key.c_str(), c.verified, c.pruned, c.failed);
  }
}

}  // namespace scantune::testing
