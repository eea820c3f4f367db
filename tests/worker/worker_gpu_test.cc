// The worker binary end to end on a GPU, spawned as the daemon spawns it:
// the test_fault variant is recorded ILLEGAL_ADDRESS and the worker exits 3;
// test_hang is recorded TIMEOUT; legal candidates are verified, timed in
// counterbalanced rounds and recorded with their statistics. Label: gpu.
#include <sys/wait.h>

#include <algorithm>
#include <vector>

#include <gtest/gtest.h>

#include "tests/worker/gpu_test_support.h"
#include "tests/worker/spawned_worker.h"

namespace scantune {
namespace {

constexpr int kTimeoutMs = 120000;

StatusOr<v1::Candidate> Compile(const Variant& variant, const Problem& problem, const testing::TestGpu& gpu) {
  const NvrtcCompiler compiler;
  ASSIGN_OR_RETURN(CompileResult compiled,
                   compiler.Compile({variant, problem.op, problem.dtype, problem.ssm, gpu.limits.cc_major, gpu.limits.cc_minor}));
  if (compiled.state != v1::OK) return Internal("compile of " + variant.Name() + " failed: " + compiled.log);
  return MakeCandidate(variant, problem, gpu.limits, compiled);
}

Variant TestOnly(Algorithm algorithm) {
  for (const Variant& v : EnumerateVariants(Op::kLinearScan, true)) {
    if (v.algorithm == algorithm) return v;
  }
  ADD_FAILURE() << "no test variant " << AlgorithmName(algorithm);
  return {};
}

void ExpectHello(testing::SpawnedWorker& worker) {
  v1::WorkerEvent event;
  ASSERT_TRUE(worker.Receive(&event, kTimeoutMs).ok());
  ASSERT_TRUE(event.has_hello());
  EXPECT_TRUE(event.hello().error().empty()) << event.hello().error();
  ASSERT_EQ(event.hello().devices_size(), 1);
  EXPECT_EQ(event.hello().devices(0).uuid().rfind("GPU-", 0), 0u);
  EXPECT_GT(event.hello().devices(0).copy_gbps(), 0.0);
}

// Sends one job with one test-only candidate; expects its Record in `state`,
// then the worker's exit with code 3.
void ExpectFatal(Algorithm algorithm, v1::ResultState state) {
  SCANTUNE_REQUIRE_GPU(gpu);
  const Problem problem{Op::kLinearScan, {2, 7, 33}, DType::kF32, Mode::kFwd, false};
  auto candidate = Compile(TestOnly(algorithm), problem, *gpu);
  ASSERT_TRUE(candidate.ok()) << candidate.status().ToString();
  testing::SpawnedWorker worker;
  ASSERT_TRUE(worker.Start(SCANTUNE_WORKER_BINARY, 0));
  ExpectHello(worker);
  v1::WorkerCommand command;
  v1::Job* job = command.mutable_job();
  job->set_job_id(7);
  *job->mutable_problem() = ToProto(problem);
  *job->add_candidates() = *candidate;
  job->set_seed(1);
  job->set_verify(true);
  job->set_time(true);
  job->set_kernel_timeout_ms(2000);
  ASSERT_TRUE(worker.Send(command).ok());
  v1::WorkerEvent event;
  ASSERT_TRUE(worker.Receive(&event, kTimeoutMs).ok());
  ASSERT_TRUE(event.has_started());
  EXPECT_EQ(event.started().variant(), candidate->variant());
  EXPECT_EQ(event.started().phase(), "verify");
  ASSERT_TRUE(worker.Receive(&event, kTimeoutMs).ok());
  ASSERT_TRUE(event.has_record());
  EXPECT_EQ(event.record().state(), state) << event.record().detail();
  EXPECT_EQ(event.record().job_id(), 7u);
  EXPECT_FALSE(event.record().detail().empty());
  const int status = worker.Wait();
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 3);
}

TEST(WorkerGpuTest, FaultVariantIsIllegalAddressAndTheWorkerExits) {
  ExpectFatal(Algorithm::kTestFault, v1::ILLEGAL_ADDRESS);
}

TEST(WorkerGpuTest, HangVariantIsTimeoutAndTheWorkerExits) { ExpectFatal(Algorithm::kTestHang, v1::TIMEOUT); }

TEST(WorkerGpuTest, LegalCandidatesAreTimedInCounterbalancedRounds) {
  SCANTUNE_REQUIRE_GPU(gpu);
  const Problem problem{Op::kLinearScan, {2, 1000, 2050}, DType::kBF16, Mode::kFwdBwd, true};
  std::vector<v1::Candidate> candidates;
  for (const Variant& v : EnumerateVariants(Op::kLinearScan, false)) {
    if (candidates.size() == 3) break;
    // One of each algorithm that can run the problem.
    bool seen = false;
    for (const v1::Candidate& c : candidates) seen |= Variant::Parse(c.variant())->algorithm == v.algorithm;
    if (seen || !CanImplement(v, problem, gpu->limits).ok()) continue;
    auto c = Compile(v, problem, *gpu);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    candidates.push_back(*c);
  }
  ASSERT_GE(candidates.size(), 2u);
  testing::SpawnedWorker worker;
  ASSERT_TRUE(worker.Start(SCANTUNE_WORKER_BINARY, 0));
  ExpectHello(worker);
  v1::WorkerCommand command;
  v1::Job* job = command.mutable_job();
  job->set_job_id(9);
  *job->mutable_problem() = ToProto(problem);
  for (const v1::Candidate& c : candidates) *job->add_candidates() = c;
  job->set_seed(3);
  job->set_verify(true);
  job->set_time(true);
  job->set_origin("benchmark");
  job->mutable_timing()->set_rounds(2);
  job->mutable_timing()->set_samples_per_round(3);
  job->mutable_timing()->set_rotate_inputs(true);
  ASSERT_TRUE(worker.Send(command).ok());

  std::vector<std::string> timed_order;
  std::vector<v1::Record> records;
  while (true) {
    v1::WorkerEvent event;
    ASSERT_TRUE(worker.Receive(&event, kTimeoutMs).ok());
    if (event.has_started() && event.started().phase() == "time") timed_order.push_back(event.started().variant());
    if (event.has_record()) records.push_back(event.record());
    if (event.has_done()) {
      EXPECT_EQ(event.done().error(), "");
      break;
    }
  }
  // Round 0 forward, round 1 backward.
  std::vector<std::string> expected;
  for (const v1::Candidate& c : candidates) expected.push_back(c.variant());
  for (auto it = candidates.rbegin(); it != candidates.rend(); ++it) expected.push_back(it->variant());
  EXPECT_EQ(timed_order, expected);

  ASSERT_EQ(records.size(), candidates.size());
  for (const v1::Record& r : records) {
    SCOPED_TRACE(r.variant());
    EXPECT_EQ(r.state(), v1::OK) << r.detail();
    EXPECT_EQ(r.origin(), "benchmark");
    EXPECT_FALSE(r.created_at().empty());
    EXPECT_EQ(r.device().uuid().rfind("GPU-", 0), 0u);
    EXPECT_FALSE(r.source_hash().empty());
    for (const v1::Stats* s : {&r.fwd(), &r.bwd(), &r.fwd_bwd()}) {
      EXPECT_EQ(s->samples_ms_size(), 6);
      EXPECT_GT(s->median_ms(), 0.0);
      EXPECT_GE(s->inner_count(), 1);
      EXPECT_GE(s->input_sets(), 1);
      EXPECT_LE(s->min_ms(), s->median_ms());
    }
    EXPECT_EQ(r.rounds_size(), 2);
    EXPECT_EQ(r.bytes_moved(), FloorBytes(problem, Mode::kFwdBwd));
    EXPECT_GT(r.gbps(), 0.0);
    EXPECT_GT(r.pct_of_copy(), 0.0);
    EXPECT_GT(r.memory().delta_bytes(), 0u);
    EXPECT_LE(r.rel_err(), 1e-2);
  }
  worker.ShutdownAndExpectCleanExit();
}

}  // namespace
}  // namespace scantune
