// Shared pieces of the worker's GPU tests: the device (opened once per test
// process) and turning a compiled variant plus its plan into the Candidate a
// Job carries. Not thread-safe; tests run on one thread.
#pragma once

#include <initializer_list>
#include <map>
#include <string>
#include <vector>

#include "common/problem.h"
#include "common/status.h"
#include "common/variant.h"
#include "compiler/candidate.h"
#include "compiler/nvrtc_compiler.h"
#include "compiler/plan.h"
#include "proto/worker.pb.h"
#include "worker/gpu_context.h"

namespace scantune::testing {

struct TestGpu {
  const CudaDriver* driver = nullptr;
  GpuContext* ctx = nullptr;
  v1::DeviceInfo info;
  DeviceLimits limits;
};

// The device 0 of this machine, or why there is none.
StatusOr<TestGpu*> GetTestGpu();

// What VerifyEveryVariant did on one problem.
struct VerifyCounts {
  int verified = 0;
  int pruned = 0;  // CanImplement said no: never compiled for it, never run
  int failed = 0;
};

// Verifies every variant (compiled[i] is variants[i]'s module) on `problem`
// with one Verifier (the job's inputs and reference made once), recording
// gtest failures for a variant that is not OK, is over the dtype's tolerance
// or reports a peak below its baseline. Stops at the first fatal problem
// (a compile that failed, a lost context). plan_sm_count > 0: the plans take
// that many SMs (persistent grids of fewer blocks, each looping over more
// tiles); 0: the GPU's own.
void VerifyEveryVariant(TestGpu& gpu, const Problem& problem, const std::vector<Variant>& variants,
                        const std::vector<StatusOr<CompileResult>>& compiled, VerifyCounts* counts,
                        int plan_sm_count = 0);

// Variants run by name (parsed; a name that does not parse is a test failure).
std::vector<Variant> NamedVariants(std::initializer_list<const char*> names);

// One line per problem key: verified, pruned, failed.
void PrintCounts(const std::map<std::string, VerifyCounts>& counts);

}  // namespace scantune::testing

// Skips the test, printing why, when no GPU is usable (the `gpu` label keeps
// these out of CI; a GPU run that skips says so in its output).
#define SCANTUNE_REQUIRE_GPU(gpu_var)                                                        \
  auto gpu_var##_or = ::scantune::testing::GetTestGpu();                                     \
  if (!gpu_var##_or.ok()) GTEST_SKIP() << "no GPU: " << gpu_var##_or.status().message();     \
  ::scantune::testing::TestGpu* gpu_var = *gpu_var##_or
