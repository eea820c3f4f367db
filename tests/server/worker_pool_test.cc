// WorkerPool against the fake worker: discovery, jobs, the watchdog (hang ->
// TIMEOUT), crashes (-> ILLEGAL_ADDRESS), restarts, and reaping.
#include "server/worker_pool.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <cerrno>
#include <future>
#include <thread>

namespace scantune {
namespace {

WorkerPoolOptions FakeOptions() {
  WorkerPoolOptions options;
  options.worker_path = SCANTUNE_FAKE_WORKER;
  options.candidate_timeout_s = 1.0;
  options.backoff_initial_ms = 10;
  return options;
}

v1::Job MakeJob(uint64_t id, const std::vector<std::string>& variants) {
  v1::Job job;
  job.set_job_id(id);
  job.mutable_problem()->set_op("linear_scan");
  job.mutable_problem()->mutable_shape()->set_batch(2);
  job.mutable_problem()->mutable_shape()->set_length(256);
  job.mutable_problem()->mutable_shape()->set_width(256);
  job.mutable_problem()->set_dtype(v1::FP32);
  job.mutable_problem()->set_mode(v1::FWD);
  job.set_verify(true);
  job.set_time(true);
  job.set_origin("tuned");
  for (const std::string& v : variants) job.add_candidates()->set_variant(v);
  return job;
}

bool Reaped(pid_t pid) {
  // ECHILD: the child is gone and was waited for (no zombie left behind).
  return ::waitpid(pid, nullptr, WNOHANG) < 0 && errno == ECHILD;
}

TEST(ParseListOrdinalsTest, ReadsOrdinalsAndSkipsNoise) {
  EXPECT_EQ(ParseListOrdinals("{\"ordinal\": 0, \"name\": \"A\"}\n{\"name\": \"B\", \"ordinal\":1}\n"),
            (std::vector<int>{0, 1}));
  EXPECT_EQ(ParseListOrdinals("no GPU\n\n"), std::vector<int>{});
  EXPECT_EQ(ParseListOrdinals("{\"name\": \"A\"}\n{\"name\": \"B\"}\n"), (std::vector<int>{0, 1}));
}

TEST(WorkerPoolTest, DiscoversTheFakeDevice) {
  auto pool = WorkerPool::Create(FakeOptions());
  ASSERT_EQ(pool->device_count(), 1);
  EXPECT_EQ(pool->device(0).name(), "Fake GPU (test double)");
  EXPECT_EQ(pool->device(0).uuid(), "GPU-fake-0");
  EXPECT_EQ(pool->device(0).cc_major(), 9);
  EXPECT_TRUE(pool->note().empty());
  const pid_t pid = pool->worker_pid(0);
  EXPECT_GT(pid, 0);
  pool.reset();
  EXPECT_TRUE(Reaped(pid));
}

TEST(WorkerPoolTest, NoGpuMeansNoDevices) {
  WorkerPoolOptions options = FakeOptions();
  options.worker_args = {"--no-gpu"};
  auto pool = WorkerPool::Create(options);
  EXPECT_EQ(pool->device_count(), 0);
  EXPECT_NE(pool->note().find("no GPU"), std::string::npos) << pool->note();
}

TEST(WorkerPoolTest, MissingWorkerBinaryMeansNoDevicesNotACrash) {
  WorkerPoolOptions options = FakeOptions();
  options.worker_path = "/nonexistent/scantune-worker";
  auto pool = WorkerPool::Create(options);
  EXPECT_EQ(pool->device_count(), 0);
  EXPECT_NE(pool->note().find("no GPU"), std::string::npos);
}

TEST(WorkerPoolTest, RunsAJob) {
  auto pool = WorkerPool::Create(FakeOptions());
  ASSERT_EQ(pool->device_count(), 1);
  int events = 0;
  auto records = pool->RunJob(0, MakeJob(7, {"sequential_v2_t128_p2", "chunked_v4_t128_c64"}),
                              [&](const v1::WorkerEvent&) { ++events; });
  ASSERT_TRUE(records.ok()) << records.status().ToString();
  ASSERT_EQ(records->size(), 2u);
  EXPECT_EQ((*records)[0].variant(), "sequential_v2_t128_p2");
  EXPECT_EQ((*records)[0].state(), v1::OK);
  EXPECT_GT((*records)[0].fwd().median_ms(), 0.0);
  EXPECT_GT(events, 4);  // started verify + time and a record per candidate, and done
  EXPECT_EQ(pool->restarts(0), 0);
}

TEST(WorkerPoolTest, FaultAndHangAreBlamedAndTheRestStillRuns) {
  auto pool = WorkerPool::Create(FakeOptions());
  ASSERT_EQ(pool->device_count(), 1);
  const pid_t first_pid = pool->worker_pid(0);
  auto records =
      pool->RunJob(0, MakeJob(8, {"test_fault", "sequential_v2_t128_p2", "test_hang", "chunked_v4_t128_c64"}), nullptr);
  ASSERT_TRUE(records.ok()) << records.status().ToString();
  ASSERT_EQ(records->size(), 4u);
  EXPECT_EQ((*records)[0].state(), v1::ILLEGAL_ADDRESS);
  EXPECT_NE((*records)[0].detail().find("signal 6"), std::string::npos) << (*records)[0].detail();
  EXPECT_EQ((*records)[1].state(), v1::OK);
  EXPECT_EQ((*records)[2].state(), v1::TIMEOUT);
  EXPECT_EQ((*records)[3].state(), v1::OK);
  EXPECT_EQ(pool->restarts(0), 2);
  EXPECT_TRUE(Reaped(first_pid));
  // The restarted worker serves the next job.
  auto next = pool->RunJob(0, MakeJob(9, {"sequential_v2_t128_p2"}), nullptr);
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_EQ((*next)[0].state(), v1::OK);
}

TEST(WorkerPoolTest, WrongResultIsReportedAsSuch) {
  ::setenv("SCANTUNE_FAKE_WRONG", "chunked_v4_t128_c64", 1);
  auto pool = WorkerPool::Create(FakeOptions());
  ::unsetenv("SCANTUNE_FAKE_WRONG");
  auto records = pool->RunJob(0, MakeJob(10, {"sequential_v2_t128_p2", "chunked_v4_t128_c64"}), nullptr);
  ASSERT_TRUE(records.ok());
  EXPECT_EQ((*records)[0].state(), v1::OK);
  EXPECT_EQ((*records)[1].state(), v1::WRONG_RESULT);
}

TEST(WorkerPoolTest, InterruptAbortsARunningJob) {
  WorkerPoolOptions options = FakeOptions();
  options.candidate_timeout_s = 600;  // the watchdog must not be what ends this job
  auto pool = WorkerPool::Create(options);
  ASSERT_EQ(pool->device_count(), 1);
  std::promise<void> started;
  bool signalled = false;
  std::thread job([&] {
    auto records = pool->RunJob(0, MakeJob(11, {"test_hang"}), [&](const v1::WorkerEvent& e) {
      if (e.has_started() && !signalled) {
        signalled = true;
        started.set_value();
      }
    });
    EXPECT_EQ(records.status().code(), StatusCode::kAborted);
  });
  started.get_future().wait();
  pool->Interrupt();
  job.join();
}

}  // namespace
}  // namespace scantune
