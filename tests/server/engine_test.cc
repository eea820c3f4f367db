// Engine end to end without a GPU: the fake worker (tests/fakes) stands in for
// scantune-worker, a temporary SQLite file for the database, and NVRTC compiles
// the real kernels (it needs no GPU).
#include "server/engine.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "compiler/kernel_sources.h"
#include "compiler/nvrtc_compiler.h"
#include "compiler/plan.h"
#include "db/store.h"

namespace scantune {
namespace {

const char* const kSeq = "sequential_v2_t128_p2";
const char* const kChunked = "chunked_v4_t128_c64";
const char* const kLookback = "lookback_v4_t256_s8_i8";
const char* const kModel = "Fake GPU (test double)";

v1::Problem SmallProblem(uint32_t length = 256) {
  v1::Problem p;
  p.set_op("linear_scan");
  p.mutable_shape()->set_batch(2);
  p.mutable_shape()->set_length(length);
  p.mutable_shape()->set_width(256);
  p.set_dtype(v1::FP32);
  p.set_mode(v1::FWD);
  return p;
}

v1::TuneRequest TuneOf(const v1::Problem& problem, const std::vector<std::string>& variants, bool force = false) {
  v1::TuneRequest request;
  *request.mutable_problem() = problem;
  for (const std::string& v : variants) request.add_variants(v);
  request.set_force(force);
  return request;
}

v1::SelectRequest SelectOf(const v1::Problem& problem, bool deterministic) {
  v1::SelectRequest request;
  *request.mutable_problem() = problem;
  request.set_deterministic(deterministic);
  return request;
}

// Collects progress messages (called from the job thread).
struct ProgressLog {
  std::mutex mu;
  std::vector<v1::TuneProgress> all;
  Engine::ProgressFn fn() {
    return [this](const v1::TuneProgress& p) {
      std::lock_guard<std::mutex> lock(mu);
      all.push_back(p);
    };
  }
  // Whether a message (only_done: the DONE one) contains `fragment`.
  bool Said(const std::string& fragment, bool only_done = false) {
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& p : all) {
      if ((!only_done || p.stage() == v1::TuneProgress::DONE) && p.message().find(fragment) != std::string::npos) {
        return true;
      }
    }
    return false;
  }
  std::set<v1::TuneProgress::Stage> stages() {
    std::lock_guard<std::mutex> lock(mu);
    std::set<v1::TuneProgress::Stage> s;
    for (const auto& p : all) s.insert(p.stage());
    return s;
  }
};

class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/scantune-engine-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ::unsetenv("SCANTUNE_FAKE_WRONG");
    ::unsetenv("SCANTUNE_FAKE_TIMES");
    ::unsetenv("SCANTUNE_FAKE_RETIME_TIMEOUT");
    options_.db_path = dir_ + "/scantune.db";
    options_.worker_path = SCANTUNE_FAKE_WORKER;
    options_.candidate_timeout_s = 2.0;
    options_.compile_threads = 2;
  }
  void TearDown() override {
    engine_.reset();
    ::unsetenv("SCANTUNE_FAKE_WRONG");
    ::unsetenv("SCANTUNE_FAKE_TIMES");
    ::unsetenv("SCANTUNE_FAKE_RETIME_TIMEOUT");
    std::filesystem::remove_all(dir_);
  }

  void Start() {
    StatusOr<std::unique_ptr<Engine>> engine = Engine::Create(options_);
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    engine_ = std::move(*engine);
  }

  std::vector<v1::Record> AllRecords() {
    v1::ListRecordsRequest request;
    request.set_page_size(1000);
    StatusOr<v1::ListRecordsResponse> page = engine_->ListRecords(request);
    EXPECT_TRUE(page.ok()) << page.status().ToString();
    return page.ok() ? std::vector<v1::Record>(page->records().begin(), page->records().end())
                     : std::vector<v1::Record>{};
  }

  // Puts a record and its selection straight into the database (before the
  // Engine opens it), under the given fingerprint.
  void SeedSelection(const v1::Problem& problem, const std::string& variant, const std::string& fingerprint,
                     const v1::DeviceInfo& device) {
    StatusOr<std::unique_ptr<Store>> store = Store::Open(options_.db_path);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE((*store)->UpsertDevice(device).ok());
    v1::Record record;
    *record.mutable_device() = device;
    *record.mutable_problem() = problem;
    record.set_variant(variant);
    record.set_state(v1::OK);
    record.mutable_fwd()->set_median_ms(0.5);
    record.set_origin("tuned");
    v1::Selection selection;
    selection.set_device_model(device.name());
    *selection.mutable_problem() = problem;
    selection.set_variant(variant);
    selection.set_median_ms(0.5);
    selection.set_fingerprint(fingerprint);
    selection.set_decided_by("faster");
    ASSERT_TRUE((*store)->CommitResults({record}, selection, 0).ok());
  }

  static v1::DeviceInfo FakeDeviceInfo() {
    v1::DeviceInfo d;
    d.set_name(kModel);
    d.set_uuid("GPU-fake-0");
    d.set_cc_major(9);
    d.set_driver_version(13000);
    return d;
  }

  std::string dir_;
  EngineOptions options_;
  std::unique_ptr<Engine> engine_;
};

TEST_F(EngineTest, TuneStoresSelectionAndRecordsInOneCommit) {
  Start();
  ProgressLog progress;
  StatusOr<v1::Selection> selection = engine_->Tune(TuneOf(SmallProblem(), {kSeq, kChunked, kLookback}), progress.fn());
  ASSERT_TRUE(selection.ok()) << selection.status().ToString();
  EXPECT_EQ(selection->device_model(), kModel);
  EXPECT_GT(selection->record_id(), 0);
  EXPECT_FALSE(selection->stale());
  EXPECT_FALSE(selection->decided_by().empty());
  EXPECT_FALSE(selection->runner_up().empty());
  EXPECT_EQ(selection->fingerprint(), Fingerprint([] {
              v1::DeviceInfo d;
              d.set_driver_version(13000);
              d.set_nvrtc_version(NvrtcCompiler::Version());
              return d;
            }(), SourceHash()));

  std::set<v1::TuneProgress::Stage> stages = progress.stages();
  for (auto stage : {v1::TuneProgress::QUEUED, v1::TuneProgress::COMPILING, v1::TuneProgress::VERIFYING,
                     v1::TuneProgress::TIMING, v1::TuneProgress::RETIMING, v1::TuneProgress::DONE}) {
    EXPECT_TRUE(stages.count(stage)) << v1::TuneProgress::Stage_Name(stage);
  }
  EXPECT_FALSE(stages.count(v1::TuneProgress::FAILED));

  std::vector<v1::Record> records = AllRecords();
  ASSERT_EQ(records.size(), 6u);  // 3 tuned + 3 re-timed (retime_top = 3)
  std::map<std::string, int> origins;
  for (const v1::Record& r : records) {
    origins[r.origin()]++;
    EXPECT_EQ(r.job_id(), records[0].job_id());  // one job, one commit
    EXPECT_EQ(r.source_hash(), SourceHash());
    EXPECT_FALSE(r.daemon_version().empty());
    EXPECT_FALSE(r.created_at().empty());
    EXPECT_EQ(r.device().uuid(), "GPU-fake-0");
    EXPECT_EQ(r.state(), v1::OK);
  }
  EXPECT_EQ(origins["tuned"], 3);
  EXPECT_EQ(origins["retime"], 3);
  StatusOr<v1::Record> winner = engine_->GetRecord(selection->record_id());
  ASSERT_TRUE(winner.ok());
  EXPECT_EQ(winner->variant(), selection->variant());
  EXPECT_EQ(winner->origin(), "retime");

  // Select answers the same, and a second Tune returns the fresh selection untouched.
  v1::SelectRequest select;
  *select.mutable_problem() = SmallProblem();
  StatusOr<v1::Selection> again = engine_->Select(select);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->variant(), selection->variant());
  EXPECT_EQ(again->record_id(), selection->record_id());
  StatusOr<v1::Selection> retune = engine_->Tune(TuneOf(SmallProblem(), {kSeq}), nullptr);
  ASSERT_TRUE(retune.ok());
  EXPECT_EQ(retune->variant(), selection->variant());
  EXPECT_EQ(AllRecords().size(), 6u);
}

TEST_F(EngineTest, ClearWinnerWinsAndTiesGoToTheSimpler) {
  ::setenv("SCANTUNE_FAKE_TIMES", "sequential_v2_t128_p2=0.9,chunked_v4_t128_c64=0.5,lookback_v4_t256_s8_i8=0.7", 1);
  Start();
  StatusOr<v1::Selection> clear = engine_->Tune(TuneOf(SmallProblem(), {kSeq, kChunked, kLookback}), nullptr);
  ASSERT_TRUE(clear.ok()) << clear.status().ToString();
  EXPECT_EQ(clear->variant(), kChunked);
  EXPECT_EQ(clear->decided_by(), "faster");
  EXPECT_EQ(clear->runner_up(), kLookback);
  EXPECT_NEAR(clear->margin_pct(), 40.0, 0.5);
  engine_.reset();

  // lookback 0.3% faster than sequential: within noise, sequential (simpler) wins.
  ::setenv("SCANTUNE_FAKE_TIMES", "sequential_v2_t128_p2=0.5015,lookback_v4_t256_s8_i8=0.5", 1);
  Start();
  StatusOr<v1::Selection> tie = engine_->Tune(TuneOf(SmallProblem(512), {kSeq, kLookback}), nullptr);
  ASSERT_TRUE(tie.ok()) << tie.status().ToString();
  EXPECT_EQ(tie->variant(), kSeq);
  EXPECT_EQ(tie->decided_by(), "simpler (within noise)");
  EXPECT_EQ(tie->runner_up(), kLookback);
}

TEST_F(EngineTest, FaultAndHangAreRecordedAndTheRestIsTuned) {
  options_.enable_test_variants = true;
  Start();
  ProgressLog progress;
  StatusOr<v1::Selection> selection =
      engine_->Tune(TuneOf(SmallProblem(), {"test_fault", kSeq, "test_hang", kLookback}), progress.fn());
  ASSERT_TRUE(selection.ok()) << selection.status().ToString();
  EXPECT_TRUE(selection->variant() == kSeq || selection->variant() == kLookback) << selection->variant();

  std::map<std::string, v1::ResultState> tuned;
  for (const v1::Record& r : AllRecords()) {
    if (r.origin() == "tuned") tuned[r.variant()] = r.state();
  }
  EXPECT_EQ(tuned["test_fault"], v1::ILLEGAL_ADDRESS);
  EXPECT_EQ(tuned["test_hang"], v1::TIMEOUT);
  EXPECT_EQ(tuned[kSeq], v1::OK);
  EXPECT_EQ(tuned[kLookback], v1::OK);

  // The device is still there and its (restarted) worker serves the next job.
  StatusOr<v1::ListDevicesResponse> devices = engine_->ListDevices();
  ASSERT_TRUE(devices.ok());
  EXPECT_EQ(devices->devices_size(), 1);
  StatusOr<v1::Selection> next = engine_->Tune(TuneOf(SmallProblem(512), {kSeq}), nullptr);
  ASSERT_TRUE(next.ok()) << next.status().ToString();
}

TEST_F(EngineTest, WrongResultIsNeverSelected) {
  // chunked would be the fastest by far, but its results are wrong.
  ::setenv("SCANTUNE_FAKE_TIMES", "chunked_v4_t128_c64=0.1,sequential_v2_t128_p2=0.9,lookback_v4_t256_s8_i8=0.8", 1);
  ::setenv("SCANTUNE_FAKE_WRONG", kChunked, 1);
  Start();
  StatusOr<v1::Selection> selection = engine_->Tune(TuneOf(SmallProblem(), {kSeq, kChunked, kLookback}), nullptr);
  ASSERT_TRUE(selection.ok()) << selection.status().ToString();
  EXPECT_EQ(selection->variant(), kLookback);
  bool saw_wrong = false;
  for (const v1::Record& r : AllRecords()) {
    if (r.variant() == kChunked) {
      EXPECT_EQ(r.state(), v1::WRONG_RESULT);
      EXPECT_EQ(r.origin(), "tuned");  // never re-timed
      saw_wrong = true;
    }
  }
  EXPECT_TRUE(saw_wrong);
}

TEST_F(EngineTest, FailuresAreNotRetriedWithoutForce) {
  options_.enable_test_variants = true;
  Start();
  ProgressLog progress;
  StatusOr<v1::Selection> first = engine_->Tune(TuneOf(SmallProblem(), {"test_fault"}), progress.fn());
  ASSERT_FALSE(first.ok());
  EXPECT_NE(first.status().message().find("no legal variant"), std::string::npos) << first.status().ToString();
  EXPECT_TRUE(progress.stages().count(v1::TuneProgress::FAILED));
  ASSERT_EQ(AllRecords().size(), 1u);
  EXPECT_EQ(AllRecords()[0].state(), v1::ILLEGAL_ADDRESS);

  StatusOr<v1::Selection> again = engine_->Tune(TuneOf(SmallProblem(), {"test_fault"}), nullptr);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(again.status().message().find("failure records"), std::string::npos) << again.status().ToString();
  EXPECT_EQ(AllRecords().size(), 1u);  // not retried

  StatusOr<v1::Selection> forced = engine_->Tune(TuneOf(SmallProblem(), {"test_fault"}, /*force=*/true), nullptr);
  ASSERT_FALSE(forced.ok());
  EXPECT_EQ(AllRecords().size(), 2u);  // force retries it

  // Alongside a legal variant, the failed one is skipped and the legal one selected.
  StatusOr<v1::Selection> mixed = engine_->Tune(TuneOf(SmallProblem(), {"test_fault", kSeq}), nullptr);
  ASSERT_TRUE(mixed.ok()) << mixed.status().ToString();
  EXPECT_EQ(mixed->variant(), kSeq);
  EXPECT_EQ(mixed->decided_by(), "only legal candidate");
  EXPECT_EQ(AllRecords().size(), 3u);
}

TEST_F(EngineTest, SelectPolicies) {
  Start();
  ASSERT_TRUE(engine_->Tune(TuneOf(SmallProblem(256), {kSeq, kLookback}), nullptr).ok());

  v1::SelectRequest miss;
  *miss.mutable_problem() = SmallProblem(1024);
  StatusOr<v1::Selection> not_found = engine_->Select(miss);
  ASSERT_FALSE(not_found.ok());
  EXPECT_EQ(not_found.status().code(), StatusCode::kNotFound);
  EXPECT_NE(not_found.status().message().find("linear_scan/2x1024x256/fp32/fwd"), std::string::npos)
      << not_found.status().message();
  EXPECT_NE(not_found.status().message().find("NEAREST"), std::string::npos);

  miss.set_on_miss(v1::NEAREST);
  StatusOr<v1::Selection> nearest = engine_->Select(miss);
  ASSERT_TRUE(nearest.ok()) << nearest.status().ToString();
  EXPECT_TRUE(nearest->nearest());
  EXPECT_EQ(nearest->tuned_shape().length(), 256u);
  EXPECT_FALSE(nearest->stale());

}

// A tune stores a second selection made among the deterministic variants
// (sequential and chunked for linear_scan); Select and GetKernel with
// `deterministic` answer it. retime_top 1: the fastest of all and the fastest
// deterministic one are re-timed, and both selections come from the re-timing.
TEST_F(EngineTest, TuneStoresTheDeterministicSelectionBesideTheOrdinaryOne) {
  ::setenv("SCANTUNE_FAKE_TIMES", "lookback_v4_t256_s8_i8=0.3,chunked_v4_t128_c64=0.6,sequential_v2_t128_p2=0.9", 1);
  options_.retime_top = 1;
  Start();
  ProgressLog progress;
  StatusOr<v1::Selection> tuned = engine_->Tune(TuneOf(SmallProblem(), {kSeq, kChunked, kLookback}), progress.fn());
  ASSERT_TRUE(tuned.ok()) << tuned.status().ToString();
  EXPECT_EQ(tuned->variant(), kLookback);
  EXPECT_FALSE(tuned->deterministic());
  EXPECT_TRUE(progress.Said(std::string("deterministic selection: ") + kChunked, /*only_done=*/true))
      << "DONE names the deterministic selection";

  v1::SelectRequest select = SelectOf(SmallProblem(), true);
  StatusOr<v1::Selection> chosen = engine_->Select(select);
  ASSERT_TRUE(chosen.ok()) << chosen.status().ToString();
  EXPECT_EQ(chosen->variant(), kChunked);
  EXPECT_TRUE(chosen->deterministic());
  EXPECT_FALSE(chosen->stale());
  EXPECT_EQ(chosen->fingerprint(), tuned->fingerprint());
  StatusOr<Problem> problem = ProblemFromProto(SmallProblem());
  ASSERT_TRUE(problem.ok());
  StatusOr<Variant> variant = Variant::Parse(chosen->variant());
  ASSERT_TRUE(variant.ok());
  EXPECT_TRUE(Deterministic(*variant, *problem));
  StatusOr<v1::Record> winner = engine_->GetRecord(chosen->record_id());
  ASSERT_TRUE(winner.ok()) << winner.status().ToString();
  EXPECT_EQ(winner->variant(), kChunked);
  EXPECT_EQ(winner->origin(), "retime");
  EXPECT_EQ(winner->job_id(), engine_->GetRecord(tuned->record_id())->job_id()) << "one job, one commit";

  std::map<std::string, int> retimed;
  for (const v1::Record& r : AllRecords()) retimed[r.variant()] += r.origin() == "retime";
  EXPECT_EQ(retimed, (std::map<std::string, int>{{kLookback, 1}, {kChunked, 1}, {kSeq, 0}}));

  select.set_deterministic(false);
  StatusOr<v1::Selection> ordinary = engine_->Select(select);
  ASSERT_TRUE(ordinary.ok());
  EXPECT_EQ(ordinary->variant(), kLookback);
  EXPECT_FALSE(ordinary->deterministic());

  v1::GetKernelRequest kernel_request;
  *kernel_request.mutable_problem() = SmallProblem();
  kernel_request.set_deterministic(true);
  StatusOr<v1::KernelResponse> kernel = engine_->GetKernel(kernel_request);
  ASSERT_TRUE(kernel.ok()) << kernel.status().ToString();
  EXPECT_EQ(kernel->variant(), kChunked);
  EXPECT_TRUE(kernel->selection().deterministic());
}

// A forced tune of named variants times the fresh selections beside them: a narrower list cannot replace a
// faster selection (or deterministic selection) with a slower one, and the DONE selection says so. A named
// variant that beats them does replace them.
TEST_F(EngineTest, ForcedTuneOfNamedVariantsTimesTheFreshSelectionsBesideThem) {
  ::setenv("SCANTUNE_FAKE_TIMES", "sequential_v2_t128_p2=0.9,chunked_v4_t128_c64=0.5,lookback_v4_t256_s8_i8=0.3", 1);
  Start();
  StatusOr<v1::Selection> first = engine_->Tune(TuneOf(SmallProblem(), {kChunked, kLookback}), nullptr);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_EQ(first->variant(), kLookback);

  ProgressLog progress;
  StatusOr<v1::Selection> forced = engine_->Tune(TuneOf(SmallProblem(), {kSeq}, /*force=*/true), progress.fn());
  ASSERT_TRUE(forced.ok()) << forced.status().ToString();
  EXPECT_EQ(forced->variant(), kLookback);
  EXPECT_EQ(forced->runner_up(), kChunked);
  EXPECT_NE(forced->record_id(), first->record_id()) << "the incumbent timed again, in this job";
  EXPECT_TRUE(progress.Said("fresh selection(s) lookback_v4_t256_s8_i8, chunked_v4_t128_c64"))
      << "progress names the incumbents";
  v1::SelectRequest select = SelectOf(SmallProblem(), true);
  StatusOr<v1::Selection> deterministic = engine_->Select(select);
  ASSERT_TRUE(deterministic.ok()) << deterministic.status().ToString();
  EXPECT_EQ(deterministic->variant(), kChunked);

  // A faster named variant still wins a forced tune.
  engine_.reset();
  ::setenv("SCANTUNE_FAKE_TIMES", "sequential_v2_t128_p2=0.1,chunked_v4_t128_c64=0.5,lookback_v4_t256_s8_i8=0.3", 1);
  Start();
  StatusOr<v1::Selection> faster = engine_->Tune(TuneOf(SmallProblem(), {kSeq}, /*force=*/true), nullptr);
  ASSERT_TRUE(faster.ok()) << faster.status().ToString();
  EXPECT_EQ(faster->variant(), kSeq);
}

// The re-timed deterministic candidate fails its re-timing while the
// ordinary winner passes: the deterministic selection is decided among the
// first pass's other deterministic candidates, not dropped.
TEST_F(EngineTest, DeterministicSelectionSurvivesItsCandidateFailingTheRetiming) {
  ::setenv("SCANTUNE_FAKE_TIMES", "lookback_v4_t256_s8_i8=0.3,chunked_v4_t128_c64=0.6,sequential_v2_t128_p2=0.9", 1);
  ::setenv("SCANTUNE_FAKE_RETIME_TIMEOUT", kChunked, 1);
  options_.retime_top = 1;
  Start();
  StatusOr<v1::Selection> tuned = engine_->Tune(TuneOf(SmallProblem(), {kSeq, kChunked, kLookback}), nullptr);
  ASSERT_TRUE(tuned.ok()) << tuned.status().ToString();
  EXPECT_EQ(tuned->variant(), kLookback);
  v1::SelectRequest select = SelectOf(SmallProblem(), true);
  StatusOr<v1::Selection> chosen = engine_->Select(select);
  ASSERT_TRUE(chosen.ok()) << chosen.status().ToString();
  EXPECT_EQ(chosen->variant(), kSeq) << "the re-timing's TIMEOUT rules chunked out";
  EXPECT_TRUE(chosen->deterministic());
  StatusOr<v1::Record> winner = engine_->GetRecord(chosen->record_id());
  ASSERT_TRUE(winner.ok());
  EXPECT_EQ(winner->origin(), "tuned") << "timed in the first pass only";
  std::map<std::string, std::string> retime_states;
  for (const v1::Record& r : AllRecords()) {
    if (r.origin() == "retime") retime_states[r.variant()] = v1::ResultState_Name(r.state());
  }
  EXPECT_EQ(retime_states, (std::map<std::string, std::string>{{kLookback, "OK"}, {kChunked, "TIMEOUT"}}));
}

// Only look-back candidates: the ordinary selection is stored, no
// deterministic one, and asking for it is NOT_FOUND saying why.
TEST_F(EngineTest, NoDeterministicCandidateNoDeterministicSelection) {
  Start();
  ProgressLog progress;
  StatusOr<v1::Selection> tuned = engine_->Tune(TuneOf(SmallProblem(), {kLookback}), progress.fn());
  ASSERT_TRUE(tuned.ok()) << tuned.status().ToString();
  EXPECT_EQ(tuned->variant(), kLookback);
  EXPECT_TRUE(progress.Said("no deterministic variant is legal here", /*only_done=*/true));

  v1::SelectRequest select = SelectOf(SmallProblem(), true);
  StatusOr<v1::Selection> miss = engine_->Select(select);
  ASSERT_FALSE(miss.ok());
  EXPECT_EQ(miss.status().code(), StatusCode::kNotFound);
  EXPECT_NE(miss.status().message().find("no deterministic selection for linear_scan/2x256x256/fp32/fwd"),
            std::string::npos)
      << miss.status().message();
  EXPECT_NE(miss.status().message().find(std::string(kLookback) + " is not deterministic"), std::string::npos)
      << miss.status().message();
  select.set_deterministic(false);
  EXPECT_TRUE(engine_->Select(select).ok());
}

// A database from before deterministic selections: the ordinary selection
// answers a deterministic Select where its variant is deterministic itself,
// and is NOT_FOUND (naming it) where it is not.
TEST_F(EngineTest, DeterministicSelectOverSelectionsTunedBeforeThem) {
  SeedSelection(SmallProblem(256), kSeq, "driver=13000;nvrtc=old;src=old", FakeDeviceInfo());
  SeedSelection(SmallProblem(512), kLookback, "driver=13000;nvrtc=old;src=old", FakeDeviceInfo());
  Start();
  v1::SelectRequest select = SelectOf(SmallProblem(256), true);
  StatusOr<v1::Selection> sequential = engine_->Select(select);
  ASSERT_TRUE(sequential.ok()) << sequential.status().ToString();
  EXPECT_EQ(sequential->variant(), kSeq);
  EXPECT_TRUE(sequential->deterministic());

  *select.mutable_problem() = SmallProblem(512);
  StatusOr<v1::Selection> lookback = engine_->Select(select);
  ASSERT_FALSE(lookback.ok());
  EXPECT_EQ(lookback.status().code(), StatusCode::kNotFound);
  EXPECT_NE(lookback.status().message().find(std::string("its selection ") + kLookback + " is not deterministic"),
            std::string::npos)
      << lookback.status().message();
  EXPECT_NE(lookback.status().message().find("re-tune it"), std::string::npos) << lookback.status().message();
}

// TUNE_NOW tunes every variant that can implement the shape (about a hundred
// NVRTC compiles): the slowest test here.
TEST_F(EngineTest, SelectTuneNowTunesTheMissingShape) {
  Start();
  v1::SelectRequest miss;
  *miss.mutable_problem() = SmallProblem(1024);
  miss.set_on_miss(v1::TUNE_NOW);
  ProgressLog progress;
  StatusOr<v1::Selection> tuned = engine_->Select(miss, progress.fn());
  ASSERT_TRUE(tuned.ok()) << tuned.status().ToString();
  EXPECT_FALSE(tuned->nearest());
  EXPECT_EQ(tuned->problem().shape().length(), 1024u);
  EXPECT_TRUE(progress.stages().count(v1::TuneProgress::DONE));
  miss.set_on_miss(v1::NOT_FOUND);
  EXPECT_TRUE(engine_->Select(miss).ok());

  // Every variant was tuned: the deterministic selection is stored too.
  miss.set_deterministic(true);
  StatusOr<v1::Selection> deterministic = engine_->Select(miss);
  ASSERT_TRUE(deterministic.ok()) << deterministic.status().ToString();
  EXPECT_TRUE(deterministic->deterministic());
  EXPECT_TRUE(Deterministic(*Variant::Parse(deterministic->variant()), *ProblemFromProto(SmallProblem(1024))))
      << deterministic->variant();

  // A fresh ordinary selection that is not deterministic, and no deterministic
  // one (a problem tuned before they were kept): TUNE_NOW with deterministic
  // re-tunes it (forced past the fresh one) rather than answer NOT_FOUND. The
  // compile cache the tune above filled makes this one quick.
  SeedSelection(SmallProblem(2048), kLookback, tuned->fingerprint(), FakeDeviceInfo());
  const size_t before = AllRecords().size();
  v1::SelectRequest old;
  *old.mutable_problem() = SmallProblem(2048);
  old.set_deterministic(true);
  ASSERT_EQ(engine_->Select(old).status().code(), StatusCode::kNotFound);
  old.set_on_miss(v1::TUNE_NOW);
  StatusOr<v1::Selection> retuned = engine_->Select(old);
  ASSERT_TRUE(retuned.ok()) << retuned.status().ToString();
  EXPECT_TRUE(retuned->deterministic());
  EXPECT_FALSE(retuned->stale());
  EXPECT_TRUE(Deterministic(*Variant::Parse(retuned->variant()), *ProblemFromProto(SmallProblem(2048))))
      << retuned->variant();
  EXPECT_GT(AllRecords().size(), before);
}

TEST_F(EngineTest, SelectionUnderAnOldFingerprintIsStale) {
  SeedSelection(SmallProblem(), kSeq, "driver=12000;nvrtc=12.0;src=old", FakeDeviceInfo());
  Start();
  v1::SelectRequest select;
  *select.mutable_problem() = SmallProblem();
  StatusOr<v1::Selection> stale = engine_->Select(select);
  ASSERT_TRUE(stale.ok()) << stale.status().ToString();
  EXPECT_TRUE(stale->stale());
  EXPECT_EQ(stale->variant(), kSeq);

  // A stale selection is not fresh: Tune without force tunes it again.
  StatusOr<v1::Selection> retuned = engine_->Tune(TuneOf(SmallProblem(), {kChunked, kLookback}), nullptr);
  ASSERT_TRUE(retuned.ok()) << retuned.status().ToString();
  StatusOr<v1::Selection> fresh = engine_->Select(select);
  ASSERT_TRUE(fresh.ok());
  EXPECT_FALSE(fresh->stale());
  EXPECT_NE(fresh->variant(), kSeq);
}

// ListSelections flags each selection stale exactly as Select does: against
// the fingerprint of the live device of its model.
TEST_F(EngineTest, ListSelectionsFlagsStaleAsSelectDoes) {
  SeedSelection(SmallProblem(), kSeq, "driver=12000;nvrtc=12.0;src=old", FakeDeviceInfo());
  Start();
  StatusOr<v1::Selection> tuned = engine_->Tune(TuneOf(SmallProblem(4096), {kChunked, kLookback}), nullptr);
  ASSERT_TRUE(tuned.ok()) << tuned.status().ToString();

  StatusOr<v1::ListSelectionsResponse> listed = engine_->ListSelections({});
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  std::map<uint32_t, v1::Selection> ordinary;  // by length
  for (const v1::Selection& s : listed->selections()) {
    if (!s.deterministic()) ordinary[s.problem().shape().length()] = s;
  }
  ASSERT_EQ(ordinary.size(), 2u);
  for (const auto& [length, s] : ordinary) {
    v1::SelectRequest select;
    *select.mutable_problem() = s.problem();
    StatusOr<v1::Selection> answer = engine_->Select(select);
    ASSERT_TRUE(answer.ok()) << answer.status().ToString();
    EXPECT_EQ(s.variant(), answer->variant()) << length;
    EXPECT_EQ(s.stale(), answer->stale()) << length;
    EXPECT_EQ(s.record_id(), answer->record_id()) << length;
  }
  EXPECT_TRUE(ordinary[SmallProblem().shape().length()].stale());
  EXPECT_FALSE(ordinary[4096].stale());
  EXPECT_EQ(ordinary[4096].variant(), tuned->variant());

  v1::ListSelectionsRequest only_fresh_shape;
  only_fresh_shape.mutable_filter()->mutable_shape()->set_length(4096);
  StatusOr<v1::ListSelectionsResponse> filtered = engine_->ListSelections(only_fresh_shape);
  ASSERT_TRUE(filtered.ok());
  for (const v1::Selection& s : filtered->selections()) EXPECT_EQ(s.problem().shape().length(), 4096u);
  EXPECT_GE(filtered->selections_size(), 1);

  v1::ListSelectionsRequest by_state;
  by_state.mutable_filter()->set_state(v1::OK);
  EXPECT_EQ(engine_->ListSelections(by_state).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(EngineTest, WithoutGpuTuningFailsButTheDatabaseIsServed) {
  SeedSelection(SmallProblem(), kSeq, "driver=13000;nvrtc=old;src=old", FakeDeviceInfo());
  options_.worker_args = {"--no-gpu"};
  options_.enable_benchmark = true;
  Start();

  StatusOr<v1::ListDevicesResponse> devices = engine_->ListDevices();
  ASSERT_TRUE(devices.ok());
  EXPECT_EQ(devices->devices_size(), 0);
  EXPECT_NE(devices->note().find("no GPU"), std::string::npos) << devices->note();

  StatusOr<v1::Selection> tune = engine_->Tune(TuneOf(SmallProblem(), {kSeq}), nullptr);
  ASSERT_FALSE(tune.ok());
  EXPECT_EQ(tune.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(tune.status().message().find("no GPU"), std::string::npos);

  v1::BenchmarkRequest bench;
  *bench.add_problems() = SmallProblem();
  bench.add_variants(kSeq);
  StatusOr<v1::BenchmarkResponse> benchmark = engine_->Benchmark(bench);
  EXPECT_EQ(benchmark.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(benchmark.status().message().find("no GPU"), std::string::npos);

  v1::SelectRequest select;
  *select.mutable_problem() = SmallProblem();
  StatusOr<v1::Selection> selection = engine_->Select(select);
  ASSERT_TRUE(selection.ok()) << selection.status().ToString();
  EXPECT_EQ(selection->variant(), kSeq);
  EXPECT_TRUE(selection->stale());
  StatusOr<v1::ListSelectionsResponse> listed = engine_->ListSelections({});
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  ASSERT_EQ(listed->selections_size(), 1);
  EXPECT_EQ(listed->selections(0).variant(), kSeq);
  EXPECT_TRUE(listed->selections(0).stale()) << "judged against the stored device, as Select judges it";

  select.set_on_miss(v1::TUNE_NOW);
  *select.mutable_problem() = SmallProblem(4096);
  StatusOr<v1::Selection> tune_now = engine_->Select(select);
  EXPECT_EQ(tune_now.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(tune_now.status().message().find("no GPU"), std::string::npos);

  EXPECT_EQ(AllRecords().size(), 1u);
}

TEST_F(EngineTest, GetKernelWithoutGpuCompilesARealKernel) {
  options_.worker_args = {"--no-gpu"};
  Start();
  v1::GetKernelRequest request;
  v1::Problem problem = SmallProblem();
  problem.set_dtype(v1::BF16);
  problem.set_mode(v1::FWD_BWD);
  *request.mutable_problem() = problem;
  request.set_variant(kLookback);
  StatusOr<v1::KernelResponse> kernel = engine_->GetKernel(request);
  ASSERT_TRUE(kernel.ok()) << kernel.status().ToString();
  EXPECT_EQ(kernel->variant(), kLookback);
  EXPECT_EQ(kernel->arch(), "sm_90");
  EXPECT_GT(kernel->cubin().size(), 1000u);
  ASSERT_GE(kernel->launches_size(), 2);  // fwd and bwd
  std::set<std::string> phases;
  for (const v1::KernelLaunch& launch : kernel->launches()) {
    EXPECT_FALSE(launch.entry().empty());
    EXPECT_NE(launch.entry(), launch.name_expression());  // the lowered (mangled) name
    EXPECT_EQ(launch.grid_size(), 3);
    EXPECT_EQ(launch.block_size(), 3);
    phases.insert(launch.phase());
  }
  EXPECT_EQ(phases, (std::set<std::string>{"fwd", "bwd"}));
  EXPECT_GT(kernel->params_size(), 0);
  EXPECT_GT(kernel->params_size_bytes(), 0u);
  EXPECT_EQ(kernel->source_hash(), SourceHash());

  // The second request is served from the compile cache: the same cubin.
  StatusOr<v1::KernelResponse> cached = engine_->GetKernel(request);
  ASSERT_TRUE(cached.ok());
  EXPECT_EQ(cached->cubin(), kernel->cubin());
  EXPECT_FALSE(kernel->workspace_zero_once());  // the register look-back zeroes before each phase

  // lookbacksmem keeps its workspace ready between launches (launch epochs)
  // and lets each launch overlap its predecessor (PDL): the response says so.
  request.set_variant("lookbacksmem_v4_t128_c64_i256");
  StatusOr<v1::KernelResponse> epochs = engine_->GetKernel(request);
  ASSERT_TRUE(epochs.ok()) << epochs.status().ToString();
  EXPECT_TRUE(epochs->workspace_zero_once());
  EXPECT_GT(epochs->workspace_zero_bytes(), 0u);
  for (const v1::KernelLaunch& launch : epochs->launches()) EXPECT_TRUE(launch.dependent_launch());

  // Without a variant and nothing tuned: the miss policy's answer.
  request.clear_variant();
  StatusOr<v1::KernelResponse> none = engine_->GetKernel(request);
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
}

TEST_F(EngineTest, GetKernelForTheSelection) {
  Start();
  ASSERT_TRUE(engine_->Tune(TuneOf(SmallProblem(), {kSeq, kChunked}), nullptr).ok());
  v1::GetKernelRequest request;
  *request.mutable_problem() = SmallProblem();
  StatusOr<v1::KernelResponse> kernel = engine_->GetKernel(request);
  ASSERT_TRUE(kernel.ok()) << kernel.status().ToString();
  EXPECT_EQ(kernel->variant(), kernel->selection().variant());
  EXPECT_GT(kernel->cubin().size(), 0u);
}

TEST_F(EngineTest, ValidationErrorsAreClear) {
  options_.max_variants_per_request = 2;
  Start();
  auto expect = [](const Status& status, StatusCode code, const std::string& needle) {
    EXPECT_EQ(status.code(), code) << status.ToString();
    EXPECT_NE(status.message().find(needle), std::string::npos) << status.message() << " lacks '" << needle << "'";
  };
  v1::Problem bad_shape = SmallProblem();
  bad_shape.mutable_shape()->set_batch(0);
  expect(engine_->Tune(TuneOf(bad_shape, {kSeq}), nullptr).status(), StatusCode::kInvalidArgument, "shape.batch");

  v1::Problem huge = SmallProblem();
  huge.mutable_shape()->set_width(1u << 20);
  expect(engine_->Tune(TuneOf(huge, {kSeq}), nullptr).status(), StatusCode::kInvalidArgument, "shape.width");

  v1::Problem no_dtype = SmallProblem();
  no_dtype.set_dtype(v1::DTYPE_UNSPECIFIED);
  v1::SelectRequest select;
  *select.mutable_problem() = no_dtype;
  expect(engine_->Select(select).status(), StatusCode::kInvalidArgument, "dtype");

  v1::Problem bad_op = SmallProblem();
  bad_op.set_op("fft");
  *select.mutable_problem() = bad_op;
  expect(engine_->Select(select).status(), StatusCode::kInvalidArgument, "fft");

  expect(engine_->Tune(TuneOf(SmallProblem(), {kSeq, kChunked, kLookback}), nullptr).status(),
         StatusCode::kInvalidArgument, "too many variants");
  expect(engine_->Tune(TuneOf(SmallProblem(), {"warp_magic_v9"}), nullptr).status(), StatusCode::kInvalidArgument,
         "warp_magic_v9");
  expect(engine_->Tune(TuneOf(SmallProblem(), {"test_fault"}), nullptr).status(), StatusCode::kInvalidArgument,
         "test-only");

  v1::TuneRequest unknown_device = TuneOf(SmallProblem(), {kSeq});
  unknown_device.set_device_uuid("GPU-nope");
  expect(engine_->Tune(unknown_device, nullptr).status(), StatusCode::kNotFound, "GPU-nope");
  select.set_device_uuid("GPU-nope");
  *select.mutable_problem() = SmallProblem();
  expect(engine_->Select(select).status(), StatusCode::kNotFound, "GPU-nope");

  v1::BenchmarkRequest bench;
  *bench.add_problems() = SmallProblem();
  bench.add_variants(kSeq);
  expect(engine_->Benchmark(bench).status(), StatusCode::kFailedPrecondition,
         "remote benchmarks are disabled; start scantuned with --enable-benchmark");

  EXPECT_TRUE(AllRecords().empty());
}

TEST_F(EngineTest, BenchmarkTimesNamedVariantsAtEachProblem) {
  options_.enable_benchmark = true;
  options_.max_problems_per_benchmark = 2;
  Start();
  v1::BenchmarkRequest request;
  *request.add_problems() = SmallProblem(256);
  *request.add_problems() = SmallProblem(512);
  request.add_variants(kSeq);
  request.add_variants(kLookback);
  StatusOr<v1::BenchmarkResponse> response = engine_->Benchmark(request);
  ASSERT_TRUE(response.ok()) << response.status().ToString();
  ASSERT_EQ(response->records_size(), 4);
  for (const v1::Record& r : response->records()) {
    EXPECT_GT(r.id(), 0);
    EXPECT_EQ(r.origin(), "benchmark");
    EXPECT_EQ(r.state(), v1::OK);
    EXPECT_GT(r.fwd().median_ms(), 0.0);
    EXPECT_GT(r.gbps(), 0.0);
  }
  EXPECT_EQ(AllRecords().size(), 4u);
  // Benchmarks never make selections.
  v1::SelectRequest select;
  *select.mutable_problem() = SmallProblem(256);
  EXPECT_EQ(engine_->Select(select).status().code(), StatusCode::kNotFound);

  *request.add_problems() = SmallProblem(1024);
  EXPECT_EQ(engine_->Benchmark(request).status().code(), StatusCode::kInvalidArgument);
}

// One client cannot fill the queue: its second job is refused while its
// first hangs (until the watchdog), and another client's and an unnamed
// caller's jobs are admitted and run after it. (The engine is not destroyed
// under calls still on their way into the queue: the daemon waits for its
// calls first, so the test lets every job end.)
TEST_F(EngineTest, OneClientCannotFillTheQueue) {
  options_.enable_test_variants = true;
  options_.max_queued_jobs = 4;
  options_.max_jobs_per_client = 1;
  options_.candidate_timeout_s = 10;  // the hung job holds its place this long
  Start();
  std::promise<void> running;
  std::once_flag once;
  std::future<StatusOr<v1::Selection>> hung = std::async(std::launch::async, [&] {
    return engine_->Tune(
        TuneOf(SmallProblem(), {"test_hang"}),
        [&](const v1::TuneProgress& p) {
          if (p.stage() == v1::TuneProgress::VERIFYING) std::call_once(once, [&] { running.set_value(); });
        },
        "job-7");
  });
  running.get_future().wait();

  StatusOr<v1::Selection> second = engine_->Tune(TuneOf(SmallProblem(512), {kSeq}), nullptr, "job-7");
  EXPECT_EQ(second.status().code(), StatusCode::kResourceExhausted) << second.status().ToString();
  EXPECT_NE(second.status().message().find("client 'job-7' already has 1 jobs"), std::string::npos)
      << second.status().message();
  v1::SelectRequest tune_now;
  *tune_now.mutable_problem() = SmallProblem(1024);
  tune_now.set_on_miss(v1::TUNE_NOW);
  EXPECT_EQ(engine_->Select(tune_now, nullptr, "job-7").status().code(), StatusCode::kResourceExhausted)
      << "TUNE_NOW queues a job too";

  // Other callers are admitted (QUEUED: they hold a place) and run once the hung job ends.
  auto tune = [&](const std::string& client, uint32_t length) {
    return std::async(std::launch::async, [this, client, length] {
      bool queued = false;
      StatusOr<v1::Selection> result = engine_->Tune(
          TuneOf(SmallProblem(length), {kSeq}),
          [&](const v1::TuneProgress& p) { queued = queued || p.stage() == v1::TuneProgress::QUEUED; }, client);
      EXPECT_TRUE(queued) << client;
      return result;
    });
  };
  std::future<StatusOr<v1::Selection>> other = tune("job-8", 2048);
  std::future<StatusOr<v1::Selection>> unnamed = tune("", 4096);
  StatusOr<v1::Selection> other_result = other.get();
  ASSERT_TRUE(other_result.ok()) << other_result.status().ToString();
  EXPECT_EQ(other_result->variant(), kSeq);
  StatusOr<v1::Selection> unnamed_result = unnamed.get();
  ASSERT_TRUE(unnamed_result.ok()) << unnamed_result.status().ToString();
  EXPECT_FALSE(hung.get().ok()) << "its only candidate hung";

  // Its place is free again.
  StatusOr<v1::Selection> again = engine_->Tune(TuneOf(SmallProblem(512), {kSeq}), nullptr, "job-7");
  EXPECT_TRUE(again.ok()) << again.status().ToString();
}

TEST_F(EngineTest, QueueIsBoundedAndShutdownAbortsARunningJob) {
  options_.enable_test_variants = true;
  options_.max_queued_jobs = 1;
  options_.candidate_timeout_s = 600;  // only shutdown may end the hung job
  Start();
  std::promise<void> running;
  std::once_flag once;
  std::future<StatusOr<v1::Selection>> hung = std::async(std::launch::async, [&] {
    return engine_->Tune(TuneOf(SmallProblem(), {"test_hang"}), [&](const v1::TuneProgress& p) {
      if (p.stage() == v1::TuneProgress::VERIFYING) std::call_once(once, [&] { running.set_value(); });
    });
  });
  running.get_future().wait();
  StatusOr<v1::Selection> second = engine_->Tune(TuneOf(SmallProblem(512), {kSeq}), nullptr);
  EXPECT_EQ(second.status().code(), StatusCode::kResourceExhausted) << second.status().ToString();
  // Select is never queued behind jobs.
  v1::SelectRequest select;
  *select.mutable_problem() = SmallProblem();
  EXPECT_EQ(engine_->Select(select).status().code(), StatusCode::kNotFound);

  engine_.reset();  // stops the job threads and kills the hung worker
  StatusOr<v1::Selection> result = hung.get();
  EXPECT_EQ(result.status().code(), StatusCode::kAborted) << result.status().ToString();
}

}  // namespace
}  // namespace scantune
