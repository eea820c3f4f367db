// End-to-end tests of the real scantuned (child process) driven by the real
// `scantune` CLI (subprocesses), with the GPU played by the test double
// scantune-fake-worker. No GPU needed. The daemon runs with test variants
// enabled and a short watchdog so that a hung candidate is caught quickly.
#include <signal.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <mutex>
#include <thread>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/problem.h"
#include "compiler/plan.h"
#include "tests/integration/test_daemon.h"

namespace scantune::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kShape = "2x256x512";

template <typename Message>
Message ParseJson(const std::string& text) {
  Message message;
  auto status = google::protobuf::util::JsonStringToMessage(text, &message);
  EXPECT_TRUE(status.ok()) << status.ToString() << "\n" << text;
  return message;
}

// One real variant of each algorithm that can run the test problem; the
// last one is made to produce a wrong result by the fake worker.
std::vector<std::string> RealVariants() { return OneVariantPerAlgorithm(kShape); }

std::string Join(const std::vector<std::string>& items) {
  std::string text;
  for (const std::string& item : items) text += (text.empty() ? "" : ",") + item;
  return text;
}

// linear_scan, bf16, at `shape` in `mode`.
Problem LinearScan(const std::string& shape, Mode mode) {
  Problem problem;
  problem.op = Op::kLinearScan;
  problem.shape = *ParseShape(shape);
  problem.dtype = DType::kBF16;
  problem.mode = mode;
  return problem;
}

// head followed by tail (CLI arguments).
std::vector<std::string> With(std::vector<std::string> head, const std::vector<std::string>& tail) {
  head.insert(head.end(), tail.begin(), tail.end());
  return head;
}

class FakeDaemonTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    variants_ = new std::vector<std::string>(RealVariants());
    ASSERT_GE(variants_->size(), 2u) << "need at least two variants that can run " << kShape;
    TestDaemonOptions options;
    options.worker = SCANTUNE_FAKE_WORKER_PATH;
    options.flags = {"--enable-test-variants", "--candidate-timeout-s", "3"};
    options.env = {{"SCANTUNE_FAKE_WRONG", Wrong()}};
    auto daemon = TestDaemon::Start(options);
    ASSERT_TRUE(daemon.ok()) << daemon.status().ToString();
    daemon_ = daemon->release();
  }
  static void TearDownTestSuite() {
    if (daemon_) {
      EXPECT_TRUE(daemon_->Stop().ok()) << "scantuned did not stop cleanly; its log:\n" << daemon_->Log();
    }
    delete daemon_;
    daemon_ = nullptr;
    delete variants_;
  }
  void SetUp() override { ASSERT_NE(daemon_, nullptr); }

  static std::string Wrong() { return variants_->back(); }
  static std::vector<std::string> Good() { return {variants_->begin(), variants_->end() - 1}; }

  void ExpectServing() {
    Status serving = daemon_->Serving();
    EXPECT_TRUE(serving.ok()) << serving.ToString() << "\ndaemon log:\n" << daemon_->Log();
  }

  static std::vector<std::string> ProblemFlags() {
    return {"--op", "linear_scan", "--shape", kShape, "--dtype", "bf16", "--mode", "fwd_bwd"};
  }
  static TestDaemon* daemon_;
  static std::vector<std::string>* variants_;
};

TestDaemon* FakeDaemonTest::daemon_ = nullptr;
std::vector<std::string>* FakeDaemonTest::variants_ = nullptr;

TEST_F(FakeDaemonTest, DevicesListsTheFakeGpu) {
  CommandResult table = daemon_->Cli({"devices"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("Fake GPU (test double)"));
  EXPECT_THAT(table.out, HasSubstr("GPU-fake-0"));

  CommandResult json = daemon_->Cli({"devices", "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  auto devices = ParseJson<v1::ListDevicesResponse>(json.out);
  ASSERT_EQ(devices.devices_size(), 1);
  EXPECT_EQ(devices.devices(0).uuid(), "GPU-fake-0");
  ExpectServing();
}

// The whole life of a tuning request: failures of every kind are recorded
// with their state, the daemon survives each, and only an OK variant is
// selected.
TEST_F(FakeDaemonTest, TuneRecordsEveryFailureAndSelectsAnOkVariant) {
  std::vector<std::string> requested = *variants_;
  requested.push_back("test_fault");
  requested.push_back("test_hang");
  CommandResult tune = daemon_->Cli(With({"tune"}, With(ProblemFlags(), {"--variants", Join(requested)})));
  ASSERT_EQ(tune.exit_code, 0) << tune.err << "\ndaemon log:\n" << daemon_->Log();
  EXPECT_THAT(tune.err, HasSubstr("DONE")) << "progress display";
  EXPECT_THAT(tune.out, HasSubstr("variant"));
  ExpectServing();

  CommandResult records_json =
      daemon_->Cli({"records", "--json", "--op", "linear_scan", "--shape", kShape, "--limit", "1000"});
  ASSERT_EQ(records_json.exit_code, 0) << records_json.err;
  auto records = ParseJson<v1::ListRecordsResponse>(records_json.out);
  std::map<std::string, std::set<std::string>> states;
  int64_t ok_id = 0;
  for (const v1::Record& r : records.records()) {
    states[r.variant()].insert(v1::ResultState_Name(r.state()));
    if (r.state() == v1::OK && ok_id == 0) ok_id = r.id();
  }
  EXPECT_EQ(states["test_fault"], std::set<std::string>{"ILLEGAL_ADDRESS"});
  EXPECT_EQ(states["test_hang"], std::set<std::string>{"TIMEOUT"});
  EXPECT_EQ(states[Wrong()], std::set<std::string>{"WRONG_RESULT"});
  for (const std::string& good : Good()) EXPECT_EQ(states[good], std::set<std::string>{"OK"}) << good;
  ExpectServing();

  CommandResult select = daemon_->Cli(With({"select", "--json"}, ProblemFlags()));
  ASSERT_EQ(select.exit_code, 0) << select.err;
  auto selection = ParseJson<v1::Selection>(select.out);
  std::vector<std::string> good = Good();
  EXPECT_NE(std::find(good.begin(), good.end(), selection.variant()), good.end()) << selection.variant();
  EXPECT_GT(selection.record_id(), 0);

  CommandResult select_table = daemon_->Cli(With({"select"}, ProblemFlags()));
  ASSERT_EQ(select_table.exit_code, 0) << select_table.err;
  EXPECT_THAT(select_table.out, HasSubstr(selection.variant()));

  CommandResult table = daemon_->Cli({"records", "--op", "linear_scan", "--shape", kShape});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  for (const char* column : {"id", "op", "variant", "state", "fwd ms", "bwd ms", "fwd_bwd ms", "GB/s", "% of copy",
                             "rel_err", "created_at", "ILLEGAL_ADDRESS", "TIMEOUT", "WRONG_RESULT"}) {
    EXPECT_THAT(table.out, HasSubstr(column));
  }
  // Each row names its operator (the table of a database holding rglru and samu rows is read without a filter).
  CommandResult all = daemon_->Cli({"records"});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_THAT(all.out, HasSubstr(" linear_scan "));

  CommandResult filtered = daemon_->Cli({"records", "--state", "ILLEGAL_ADDRESS", "--json"});
  ASSERT_EQ(filtered.exit_code, 0) << filtered.err;
  auto illegal = ParseJson<v1::ListRecordsResponse>(filtered.out);
  ASSERT_GE(illegal.records_size(), 1);
  for (const v1::Record& r : illegal.records()) EXPECT_EQ(r.state(), v1::ILLEGAL_ADDRESS);

  ASSERT_GT(ok_id, 0);
  CommandResult detail = daemon_->Cli({"record", std::to_string(ok_id)});
  ASSERT_EQ(detail.exit_code, 0) << detail.err;
  EXPECT_THAT(detail.out, HasSubstr("samples"));
  EXPECT_THAT(detail.out, HasSubstr("GPU-fake-0"));
  CommandResult detail_json = daemon_->Cli({"record", "--json", std::to_string(ok_id)});
  ASSERT_EQ(detail_json.exit_code, 0) << detail_json.err;
  auto record = ParseJson<v1::Record>(detail_json.out);
  EXPECT_EQ(record.id(), ok_id);
  EXPECT_EQ(record.state(), v1::OK);
  EXPECT_GT(record.fwd().samples_ms_size() + record.fwd_bwd().samples_ms_size(), 0);
  ExpectServing();

  // Paging: one record per page reaches a second page through the token.
  CommandResult first = daemon_->Cli({"records", "--json", "--limit", "1"});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  auto page = ParseJson<v1::ListRecordsResponse>(first.out);
  ASSERT_EQ(page.records_size(), 1);
  ASSERT_FALSE(page.next_page_token().empty());
  CommandResult second = daemon_->Cli({"records", "--json", "--limit", "1", "--page-token", page.next_page_token()});
  ASSERT_EQ(second.exit_code, 0) << second.err;
  auto next = ParseJson<v1::ListRecordsResponse>(second.out);
  ASSERT_EQ(next.records_size(), 1);
  EXPECT_NE(next.records(0).id(), page.records(0).id());
}

// A named variant that cannot run the problem: the request is refused and
// names it, unless --skip-unfit leaves it out (named in the progress) and
// tunes the others; with nothing left it is refused again.
TEST_F(FakeDaemonTest, TuneRefusesOrSkipsUnfitNamedVariants) {
  const Problem linear = LinearScan(kShape, Mode::kFwdBwd);
  std::string unfit;
  for (const Variant& v : EnumerateVariants(Op::kSamu, false)) {
    if (!CanImplement(v, linear, DeviceLimits()).ok()) {
      unfit = v.Name();
      break;
    }
  }
  ASSERT_FALSE(unfit.empty()) << "a samu variant that linear_scan cannot run";
  const std::string good = Good().front();

  CommandResult refused = daemon_->Cli(With({"tune", "--force"}, With(ProblemFlags(), {"--variants", good + "," + unfit})));
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_THAT(refused.err, HasSubstr("INVALID_ARGUMENT"));
  EXPECT_THAT(refused.err, HasSubstr(unfit));

  CommandResult skipped = daemon_->Cli(
      With({"tune", "--force", "--skip-unfit"}, With(ProblemFlags(), {"--variants", good + "," + unfit})));
  ASSERT_EQ(skipped.exit_code, 0) << skipped.err << "\ndaemon log:\n" << daemon_->Log();
  EXPECT_THAT(skipped.err, HasSubstr("left out: variant " + unfit + " cannot run"));
  EXPECT_THAT(skipped.err, HasSubstr("DONE"));
  EXPECT_THAT(skipped.err, HasSubstr(good)) << "the variant left in is tuned";

  CommandResult none = daemon_->Cli(With({"tune", "--force", "--skip-unfit"}, With(ProblemFlags(), {"--variants", unfit})));
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_THAT(none.err, HasSubstr("none of the 1 named variants can run"));
  ExpectServing();
}

TEST_F(FakeDaemonTest, KernelReturnsAnNvrtcCubin) {
  std::string out = daemon_->dir() + "/kernel.cubin";
  CommandResult kernel = daemon_->Cli(With({"kernel", "--variant", variants_->front(), "--out", out},
                                           {"--op", "linear_scan", "--shape", "4x2048x2048", "--dtype", "bf16",
                                            "--mode", "fwd"}));
  ASSERT_EQ(kernel.exit_code, 0) << kernel.err << "\ndaemon log:\n" << daemon_->Log();
  EXPECT_THAT(kernel.out, HasSubstr("entry"));
  EXPECT_THAT(kernel.out, HasSubstr("sm_90"));
  EXPECT_THAT(kernel.out, HasSubstr("linear_scan 4x2048x2048 bf16 fwd (the launches run this shape only)"));
  std::ifstream file(out, std::ios::binary);
  std::string magic(4, '\0');
  file.read(magic.data(), 4);
  EXPECT_EQ(magic, "\x7f" "ELF") << "a cubin is an ELF image";

  CommandResult json = daemon_->Cli({"kernel", "--json", "--variant", variants_->front(), "--op", "linear_scan",
                                     "--shape", "4x2048x2048", "--dtype", "bf16", "--mode", "fwd_bwd"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  auto response = ParseJson<v1::KernelResponse>(json.out);
  EXPECT_FALSE(response.cubin().empty());
  EXPECT_GE(response.launches_size(), 2) << "fwd_bwd launches a forward and a backward kernel";
  EXPECT_EQ(response.problem().shape().width(), 2048);  // the problem it was served for
  EXPECT_EQ(response.problem().mode(), v1::FWD_BWD);
  EXPECT_GT(response.params_size(), 0);
  for (const v1::KernelLaunch& launch : response.launches()) {
    EXPECT_FALSE(launch.entry().empty());
    EXPECT_EQ(launch.grid_size(), 3);
    EXPECT_EQ(launch.block_size(), 3);
  }
  ExpectServing();
}

TEST_F(FakeDaemonTest, UsageErrorsExitWithTwo) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"frobnicate"},
           {"devices", "--bogus"},
           {"select", "--shape", "4x2048", "--dtype", "bf16", "--mode", "fwd"},
           {"select", "--shape", "4x2048x2048", "--dtype", "int8", "--mode", "fwd"},
           {"select", "--shape", "4x2048x2048", "--dtype", "bf16"},
           {"select", "--shape", "4x2048x2048", "--dtype", "bf16", "--mode", "fwd", "--on-miss", "maybe"},
           {"records", "--state", "FINE"},
           {"record"},
           {"record", "abc"},
           {"bench", "--shape", "4x2048x2048", "--variants", "x", "--seed", "abc"},
           {"bench", "--shape", "4x2048x2048", "--variants", "x", "--seed", "0"},
           {"bench", "--shape", "4x2048x2048", "--variants", "x", "--seed", "-5"},
           {"bench", "--shape", "4x2048x2048", "--variants", "x", "--seed", "18446744073709551616"},
           {}}) {
    CommandResult r = daemon_->Cli(args);
    EXPECT_EQ(r.exit_code, 2) << ::testing::PrintToString(args) << "\n" << r.err;
    EXPECT_THAT(r.err, HasSubstr("usage")) << ::testing::PrintToString(args);
  }
}

TEST_F(FakeDaemonTest, RpcErrorsExitWithOneAndNameTheCode) {
  CommandResult missing = daemon_->Cli({"record", "987654321"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, HasSubstr("NOT_FOUND"));
  EXPECT_THAT(missing.err, HasSubstr("987654321"));

  CommandResult unknown_op = daemon_->Cli({"select", "--op", "warp_scan", "--shape", kShape, "--dtype", "bf16",
                                           "--mode", "fwd"});
  EXPECT_EQ(unknown_op.exit_code, 1);
  EXPECT_THAT(unknown_op.err, HasSubstr("INVALID_ARGUMENT"));
  EXPECT_THAT(unknown_op.err, HasSubstr("warp_scan"));

  CommandResult bench = daemon_->Cli(With({"bench", "--shapes", "4x2048x2048,1x8192x2560", "--variants",
                                           variants_->front()},
                                          {"--op", "linear_scan", "--dtype", "bf16", "--mode", "fwd"}));
  EXPECT_EQ(bench.exit_code, 1) << "benchmarks are off unless enabled";
  EXPECT_THAT(bench.err, HasSubstr("FAILED_PRECONDITION"));

  CommandResult nowhere = RunCommand({SCANTUNE_CLI_PATH, "--address", "unix://" + daemon_->dir() + "/none.sock",
                                      "devices"});
  EXPECT_EQ(nowhere.exit_code, 1);
  EXPECT_THAT(nowhere.err, HasSubstr("UNAVAILABLE"));
  ExpectServing();
}

// A test with a daemon of its own (fake worker), stopped cleanly at its end.
class OwnDaemonTest : public ::testing::Test {
 protected:
  void StartDaemon(const TestDaemonOptions& options) {
    auto daemon = TestDaemon::Start(options);
    ASSERT_TRUE(daemon.ok()) << daemon.status().ToString();
    daemon_ = std::move(*daemon);
  }
  void TearDown() override {
    if (daemon_) EXPECT_TRUE(daemon_->Stop().ok()) << daemon_->Log();
  }
  std::unique_ptr<TestDaemon> daemon_;
};

// At most one job per client: a client's second tune is refused while its
// first hangs (until the watchdog), whatever connection it comes on; another
// client is admitted meanwhile. The client is the scantune-client metadata
// ScantuneClient sends.
class ClientBoundDaemonTest : public OwnDaemonTest {
 protected:
  void SetUp() override {
    TestDaemonOptions options;
    options.worker = SCANTUNE_FAKE_WORKER_PATH;
    options.flags = {"--enable-test-variants", "--candidate-timeout-s", "5", "--max-jobs-per-client", "1"};
    StartDaemon(options);
  }
  std::unique_ptr<ScantuneClient> ClientNamed(const std::string& id) const {
    ClientOptions options;
    options.address = daemon_->address();
    options.client_id = id;
    return std::make_unique<ScantuneClient>(options);
  }
  static v1::TuneRequest TuneOf(const std::string& shape, const std::string& variant) {
    v1::TuneRequest request;
    *request.mutable_problem() = ToProto(LinearScan(shape, Mode::kFwd));
    request.add_variants(variant);
    return request;
  }
};

TEST_F(ClientBoundDaemonTest, ASecondJobOfOneClientIsRefusedAndAnotherClientsIsNot) {
  std::promise<void> running;
  std::once_flag once;
  std::unique_ptr<ScantuneClient> first = ClientNamed("job-7");
  std::future<StatusOr<v1::Selection>> hung = std::async(std::launch::async, [&] {
    return first->Tune(TuneOf(kShape, "test_hang"), [&](const v1::TuneProgress& p) {
      if (p.stage() == v1::TuneProgress::VERIFYING) std::call_once(once, [&] { running.set_value(); });
    });
  });
  ASSERT_EQ(running.get_future().wait_for(std::chrono::seconds(60)), std::future_status::ready) << daemon_->Log();

  const std::string good = RealVariants().front();
  StatusOr<v1::Selection> refused = ClientNamed("job-7")->Tune(TuneOf("2x512x512", good), nullptr);
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted) << refused.status().ToString();
  EXPECT_THAT(refused.status().message(), HasSubstr("client 'job-7' already has 1 jobs"));
  EXPECT_THAT(refused.status().message(), HasSubstr("at most 1 per client"));

  // Another client's tune is admitted; it runs once the hung candidate is killed.
  std::vector<v1::TuneProgress::Stage> stages;
  StatusOr<v1::Selection> other = ClientNamed("job-8")->Tune(
      TuneOf("2x1024x512", good), [&](const v1::TuneProgress& p) { stages.push_back(p.stage()); });
  ASSERT_TRUE(other.ok()) << other.status().ToString() << "\n" << daemon_->Log();
  EXPECT_EQ(other->variant(), good);
  ASSERT_FALSE(stages.empty());
  EXPECT_EQ(stages.front(), v1::TuneProgress::QUEUED);

  StatusOr<v1::Selection> ended = hung.get();
  EXPECT_FALSE(ended.ok()) << "its only candidate hung";
  // The slot is free again: the same client may tune now.
  StatusOr<v1::Selection> again = ClientNamed("job-7")->Tune(TuneOf("2x512x512", good), nullptr);
  EXPECT_TRUE(again.ok()) << again.status().ToString();
}

// Remote benchmarks enabled, and two real variants to time.
class BenchmarkTest : public OwnDaemonTest {
 protected:
  void SetUp() override {
    TestDaemonOptions options;
    options.worker = SCANTUNE_FAKE_WORKER_PATH;
    options.flags = {"--enable-benchmark"};
    StartDaemon(options);
    const std::vector<std::string> variants = RealVariants();
    two_ = Join({variants[0], variants[1]});
  }
  std::string two_;
};

// One record per (shape, variant), in the records table layout.
TEST_F(BenchmarkTest, TimesNamedVariantsAtEachShape) {
  CommandResult table = daemon_->Cli({"bench", "--op", "linear_scan", "--shapes", "4x2048x2048,1x8192x2560",
                                      "--dtype", "bf16", "--mode", "fwd", "--variants", two_});
  ASSERT_EQ(table.exit_code, 0) << table.err << "\n" << daemon_->Log();
  EXPECT_THAT(table.out, HasSubstr("GB/s"));
  EXPECT_THAT(table.out, HasSubstr("1x8192x2560"));

  CommandResult json = daemon_->Cli({"bench", "--json", "--op", "linear_scan", "--shapes", "4x2048x2048",
                                     "--dtype", "bf16", "--mode", "fwd", "--variants", two_});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  auto response = ParseJson<v1::BenchmarkResponse>(json.out);
  ASSERT_EQ(response.records_size(), 2);
  for (const v1::Record& r : response.records()) {
    EXPECT_EQ(r.state(), v1::OK) << r.variant() << ": " << r.detail();
    EXPECT_EQ(r.origin(), "benchmark");
  }
}

// Every worker record carries its job's input seed; `bench --seed` draws the
// inputs from a record's seed again (that record's verification, repeated).
TEST_F(BenchmarkTest, RecordsCarryTheirSeedAndBenchRepeatsIt) {
  const std::vector<std::string> bench = {"bench", "--json", "--op", "linear_scan", "--shapes",
                                          "4x2048x2048,1x8192x2560", "--dtype", "bf16", "--mode", "fwd",
                                          "--variants", two_};
  CommandResult fresh = daemon_->Cli(bench);
  ASSERT_EQ(fresh.exit_code, 0) << fresh.err << "\n" << daemon_->Log();
  auto first = ParseJson<v1::BenchmarkResponse>(fresh.out);
  ASSERT_EQ(first.records_size(), 4);
  std::map<std::string, uint64_t> seed_of;  // one job per shape: one seed for its variants
  for (const v1::Record& r : first.records()) {
    EXPECT_NE(r.seed(), 0u) << r.variant();
    const std::string shape = std::to_string(r.problem().shape().width());
    if (seed_of.count(shape)) EXPECT_EQ(r.seed(), seed_of[shape]) << r.variant();
    seed_of[shape] = r.seed();
  }
  EXPECT_NE(seed_of["2048"], seed_of["2560"]) << "each shape's job draws its own seed";

  const uint64_t seed = first.records(0).seed();
  std::vector<std::string> again = bench;
  again.insert(again.end(), {"--seed", std::to_string(seed)});
  CommandResult repeated = daemon_->Cli(again);
  ASSERT_EQ(repeated.exit_code, 0) << repeated.err;
  auto second = ParseJson<v1::BenchmarkResponse>(repeated.out);
  ASSERT_EQ(second.records_size(), 4);
  for (const v1::Record& r : second.records()) EXPECT_EQ(r.seed(), seed) << r.variant();

  // Stored with it: the record read back by id has the same seed.
  CommandResult stored = daemon_->Cli({"record", "--json", std::to_string(second.records(0).id())});
  ASSERT_EQ(stored.exit_code, 0) << stored.err;
  EXPECT_EQ(ParseJson<v1::Record>(stored.out).seed(), seed);
}

// Deterministic selections end to end: one variant per linear_scan family,
// the look-back ones pinned fastest, so the ordinary selection is a look-back
// one and the deterministic one (chunked, faster than sequential) differs.
class DeterministicDaemonTest : public OwnDaemonTest {
 protected:
  void SetUp() override {
    std::string times;
    double lookback_ms = 0.2;
    for (const std::string& name : RealVariants()) {
      const Algorithm algorithm = Variant::Parse(name)->algorithm;
      double ms = 0;
      if (algorithm == Algorithm::kSequential) {
        ms = 0.9;
      } else if (algorithm == Algorithm::kChunked) {
        ms = 0.6;
        chunked_ = name;
      } else {
        ms = lookback_ms;
        lookback_ms += 0.05;
        lookback_.push_back(name);
      }
      variants_.push_back(name);
      times += (times.empty() ? "" : ",") + name + "=" + std::to_string(ms);
    }
    ASSERT_FALSE(chunked_.empty());
    ASSERT_FALSE(lookback_.empty());
    TestDaemonOptions options;
    options.worker = SCANTUNE_FAKE_WORKER_PATH;
    options.env = {{"SCANTUNE_FAKE_TIMES", times}};
    StartDaemon(options);
  }
  static std::vector<std::string> ProblemFlags(const std::string& shape) {
    return {"--op", "linear_scan", "--shape", shape, "--dtype", "bf16", "--mode", "fwd_bwd"};
  }
  static v1::Problem ProblemOf(const std::string& shape) { return ToProto(LinearScan(shape, Mode::kFwdBwd)); }
  std::vector<std::string> variants_, lookback_;
  std::string chunked_;
};

TEST_F(DeterministicDaemonTest, SelectOverGrpcAndTheCliAnswersTheDeterministicSelection) {
  CommandResult tune = daemon_->Cli(With({"tune"}, With(ProblemFlags(kShape), {"--variants", Join(variants_)})));
  ASSERT_EQ(tune.exit_code, 0) << tune.err << "\ndaemon log:\n" << daemon_->Log();
  EXPECT_THAT(tune.err, HasSubstr("deterministic selection: " + chunked_)) << "the DONE line names it";

  std::unique_ptr<ScantuneClient> client = daemon_->Client();
  v1::SelectRequest select;
  *select.mutable_problem() = ProblemOf(kShape);
  select.set_deterministic(true);
  StatusOr<v1::Selection> deterministic = client->Select(select);
  ASSERT_TRUE(deterministic.ok()) << deterministic.status().ToString();
  EXPECT_EQ(deterministic->variant(), chunked_);
  EXPECT_TRUE(deterministic->deterministic());
  EXPECT_FALSE(deterministic->stale());
  EXPECT_GT(deterministic->record_id(), 0);
  select.set_deterministic(false);
  StatusOr<v1::Selection> ordinary = client->Select(select);
  ASSERT_TRUE(ordinary.ok()) << ordinary.status().ToString();
  EXPECT_EQ(ordinary->variant(), lookback_.front());
  EXPECT_FALSE(ordinary->deterministic());
  EXPECT_NE(ordinary->record_id(), deterministic->record_id());

  CommandResult json = daemon_->Cli(With({"select", "--json", "--deterministic"}, ProblemFlags(kShape)));
  ASSERT_EQ(json.exit_code, 0) << json.err;
  auto selection = ParseJson<v1::Selection>(json.out);
  EXPECT_EQ(selection.variant(), chunked_);
  EXPECT_TRUE(selection.deterministic());
  EXPECT_EQ(selection.record_id(), deterministic->record_id());
  CommandResult table = daemon_->Cli(With({"select", "--deterministic"}, ProblemFlags(kShape)));
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr(chunked_));
  EXPECT_THAT(table.out, HasSubstr("DETERMINISTIC"));
  CommandResult plain = daemon_->Cli(With({"select", "--json"}, ProblemFlags(kShape)));
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(ParseJson<v1::Selection>(plain.out).variant(), lookback_.front());

  CommandResult kernel = daemon_->Cli(With({"kernel", "--json", "--deterministic"}, ProblemFlags(kShape)));
  ASSERT_EQ(kernel.exit_code, 0) << kernel.err;
  auto response = ParseJson<v1::KernelResponse>(kernel.out);
  EXPECT_EQ(response.variant(), chunked_);
  EXPECT_TRUE(response.selection().deterministic());
  EXPECT_FALSE(response.cubin().empty());
}

TEST_F(DeterministicDaemonTest, NoDeterministicCandidateIsNotFoundOverGrpcAndTheCli) {
  const std::string shape = "2x512x512";
  CommandResult tune = daemon_->Cli(With({"tune"}, With(ProblemFlags(shape), {"--variants", Join(lookback_)})));
  ASSERT_EQ(tune.exit_code, 0) << tune.err << "\ndaemon log:\n" << daemon_->Log();

  v1::SelectRequest select;
  *select.mutable_problem() = ProblemOf(shape);
  select.set_deterministic(true);
  StatusOr<v1::Selection> miss = daemon_->Client()->Select(select);
  ASSERT_FALSE(miss.ok());
  EXPECT_EQ(miss.status().code(), StatusCode::kNotFound) << miss.status().ToString();
  EXPECT_THAT(miss.status().message(), HasSubstr("no deterministic selection for"));
  EXPECT_THAT(miss.status().message(), HasSubstr(lookback_.front() + " is not deterministic"));

  CommandResult cli = daemon_->Cli(With({"select", "--deterministic"}, ProblemFlags(shape)));
  EXPECT_EQ(cli.exit_code, 1);
  EXPECT_THAT(cli.err, HasSubstr("NOT_FOUND"));
  EXPECT_THAT(cli.err, HasSubstr("is not deterministic"));
  CommandResult ordinary = daemon_->Cli(With({"select", "--json"}, ProblemFlags(shape)));
  ASSERT_EQ(ordinary.exit_code, 0) << ordinary.err;
  EXPECT_EQ(ParseJson<v1::Selection>(ordinary.out).variant(), lookback_.front());
}

// A client that goes away mid-tune stops getting progress; the job itself
// runs to the end and its records and selection are stored.
// `scantune selections` and ListSelections over the real socket: both
// selections of every tuned problem, filtered, paged and shown as a table.
TEST_F(DeterministicDaemonTest, SelectionsListEveryTunedProblemOverGrpcAndTheCli) {
  const std::vector<std::string> shapes = {kShape, "2x512x512"};
  for (const std::string& shape : shapes) {
    CommandResult tune = daemon_->Cli(With({"tune", "--quiet"}, With(ProblemFlags(shape), {"--variants", Join(variants_)})));
    ASSERT_EQ(tune.exit_code, 0) << tune.err << "\ndaemon log:\n" << daemon_->Log();
  }

  std::unique_ptr<ScantuneClient> client = daemon_->Client();
  StatusOr<v1::ListSelectionsResponse> all = client->ListSelections({});
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->selections_size(), 4) << "an ordinary and a deterministic selection per shape";
  for (const v1::Selection& s : all->selections()) {
    v1::SelectRequest select;
    *select.mutable_problem() = s.problem();
    select.set_deterministic(s.deterministic());
    StatusOr<v1::Selection> served = client->Select(select);
    ASSERT_TRUE(served.ok()) << served.status().ToString();
    EXPECT_EQ(s.variant(), served->variant()) << "listed as Select serves it";
    EXPECT_EQ(s.record_id(), served->record_id());
    EXPECT_FALSE(s.stale());
    EXPECT_EQ(s.variant(), s.deterministic() ? chunked_ : lookback_.front());
  }

  v1::ListSelectionsRequest paged;
  paged.set_page_size(3);
  StatusOr<v1::ListSelectionsResponse> first = client->ListSelections(paged);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_EQ(first->selections_size(), 3);
  ASSERT_FALSE(first->next_page_token().empty());
  paged.set_page_token(first->next_page_token());
  StatusOr<v1::ListSelectionsResponse> second = client->ListSelections(paged);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  ASSERT_EQ(second->selections_size(), 1);
  EXPECT_TRUE(second->next_page_token().empty());
  EXPECT_EQ(second->selections(0).SerializeAsString(), all->selections(3).SerializeAsString());

  v1::ListSelectionsRequest by_state;
  by_state.mutable_filter()->set_state(v1::OK);
  StatusOr<v1::ListSelectionsResponse> refused = client->ListSelections(by_state);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);

  CommandResult json = daemon_->Cli({"selections", "--json", "--deterministic", "--shape", "2x512x512"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  auto only = ParseJson<v1::ListSelectionsResponse>(json.out);
  ASSERT_EQ(only.selections_size(), 1);
  EXPECT_EQ(only.selections(0).variant(), chunked_);
  EXPECT_TRUE(only.selections(0).deterministic());
  EXPECT_EQ(only.selections(0).problem().shape().length(), 512u);

  CommandResult table = daemon_->Cli({"selections"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  for (const std::string& text : {std::string("device"), std::string("problem"), std::string("kind"),
                                  std::string("median ms"), std::string("fastest"), std::string("deterministic"),
                                  std::string("fresh"), chunked_, lookback_.front(),
                                  std::string("linear_scan 2x512x512 bf16 fwd_bwd")}) {
    EXPECT_THAT(table.out, HasSubstr(text)) << table.out;
  }
  CommandResult none = daemon_->Cli({"selections", "--op", "samu"});
  ASSERT_EQ(none.exit_code, 0) << none.err;
  EXPECT_THAT(none.out, HasSubstr("no selections match"));
  CommandResult more = daemon_->Cli({"selections", "--limit", "1"});
  ASSERT_EQ(more.exit_code, 0) << more.err;
  EXPECT_THAT(more.err, HasSubstr("more selections: --page-token sel:"));
  CommandResult bad = daemon_->Cli({"selections", "--state", "OK"});
  EXPECT_EQ(bad.exit_code, 2) << "a record field is not a selection flag";

  // A forced re-tune of the first shape: the selections stay four, the history
  // grows by its two decisions and keeps the replaced two, superseded.
  CommandResult retune =
      daemon_->Cli(With({"tune", "--quiet", "--force"}, With(ProblemFlags(kShape), {"--variants", Join(variants_)})));
  ASSERT_EQ(retune.exit_code, 0) << retune.err;
  StatusOr<v1::ListSelectionsResponse> after = client->ListSelections({});
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->selections_size(), 4);
  v1::ListSelectionsRequest history;
  history.set_history(true);
  history.mutable_filter()->mutable_shape()->set_length(256);
  StatusOr<v1::ListSelectionsResponse> decisions = client->ListSelections(history);
  ASSERT_TRUE(decisions.ok()) << decisions.status().ToString();
  ASSERT_EQ(decisions->selections_size(), 4);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(decisions->selections(i).superseded(), i >= 2) << i << " (newest first)";
    EXPECT_EQ(decisions->selections(i).problem().shape().length(), 256u);
  }
  EXPECT_GT(decisions->selections(0).record_id(), decisions->selections(3).record_id());
  CommandResult history_table = daemon_->Cli({"selections", "--history", "--shape", kShape});
  ASSERT_EQ(history_table.exit_code, 0) << history_table.err;
  EXPECT_THAT(history_table.out, HasSubstr("fresh, superseded"));

  // `scantune plot`: every tuned variant one bar, both selections marked, as text and as SVG.
  CommandResult plot = daemon_->Cli(With({"plot"}, ProblemFlags(kShape)));
  ASSERT_EQ(plot.exit_code, 0) << plot.err;
  EXPECT_THAT(plot.out, HasSubstr("linear_scan " + std::string(kShape) + " bf16 fwd_bwd on Fake GPU (test double)"));
  for (const std::string& variant : variants_) EXPECT_THAT(plot.out, HasSubstr(variant + " ")) << plot.out;
  EXPECT_THAT(plot.out, HasSubstr("<- fastest"));
  EXPECT_THAT(plot.out, HasSubstr("<- deterministic"));
  EXPECT_THAT(plot.out, HasSubstr("floor"));
  const std::string svg_path = daemon_->dir() + "/plot.svg";
  CommandResult svg = daemon_->Cli(With({"plot", "--svg", svg_path}, ProblemFlags(kShape)));
  ASSERT_EQ(svg.exit_code, 0) << svg.err;
  EXPECT_THAT(svg.err, HasSubstr(std::to_string(variants_.size()) + " bars plotted to " + svg_path));
  std::ifstream file(svg_path);
  const std::string document((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  EXPECT_EQ(document.rfind("<svg ", 0), 0u);
  EXPECT_THAT(document, HasSubstr(chunked_));
  CommandResult untuned = daemon_->Cli(With({"plot"}, ProblemFlags("2x1024x512")));
  ASSERT_EQ(untuned.exit_code, 0) << untuned.err;
  EXPECT_THAT(untuned.out, HasSubstr("no OK records to plot"));
  CommandResult bad_top = daemon_->Cli(With({"plot", "--top", "0"}, ProblemFlags(kShape)));
  EXPECT_EQ(bad_top.exit_code, 2);
  // Without --shape: the selections across the two tuned shapes, one bar each.
  CommandResult across = daemon_->Cli({"plot", "--op", "linear_scan", "--dtype", "bf16", "--mode", "fwd_bwd"});
  ASSERT_EQ(across.exit_code, 0) << across.err;
  EXPECT_THAT(across.out, HasSubstr("linear_scan (every shape) bf16 fwd_bwd"));
  EXPECT_THAT(across.out, HasSubstr(std::string(kShape) + "  " + lookback_.front()));
  EXPECT_THAT(across.out, HasSubstr("2x512x512  " + lookback_.front()));
  CommandResult shapes_det =
      daemon_->Cli({"plot", "--op", "linear_scan", "--dtype", "bf16", "--mode", "fwd_bwd", "--deterministic"});
  ASSERT_EQ(shapes_det.exit_code, 0) << shapes_det.err;
  EXPECT_THAT(shapes_det.out, HasSubstr("2x512x512  " + chunked_));
  EXPECT_THAT(shapes_det.out, Not(HasSubstr(lookback_.front())));
  CommandResult json_plot = daemon_->Cli(With({"plot", "--json"}, ProblemFlags(kShape)));
  EXPECT_EQ(json_plot.exit_code, 2);
  EXPECT_THAT(json_plot.err, HasSubstr("records --json and selections --json"));
}

TEST_F(FakeDaemonTest, CancelledTuneGoesOnAndStoresItsResults) {
  auto stub = v1::Scantune::NewStub(grpc::CreateChannel(daemon_->address(), grpc::InsecureChannelCredentials()));
  v1::TuneRequest request;
  v1::Problem* problem = request.mutable_problem();
  problem->set_op("linear_scan");
  problem->mutable_shape()->set_batch(1);
  problem->mutable_shape()->set_length(128);
  problem->mutable_shape()->set_width(512);
  problem->set_dtype(v1::BF16);
  problem->set_mode(v1::FWD_BWD);
  request.add_variants(variants_->front());
  request.add_variants("test_hang");  // keeps the job busy until the watchdog fires

  grpc::ClientContext context;
  auto reader = stub->Tune(&context, request);
  v1::TuneProgress progress;
  ASSERT_TRUE(reader->Read(&progress)) << reader->Finish().error_message();
  context.TryCancel();
  while (reader->Read(&progress)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  ExpectServing();

  // Waits for the job's outcome (bounded only as a safety net).
  std::unique_ptr<ScantuneClient> client = daemon_->Client();
  v1::SelectRequest select;
  *select.mutable_problem() = *problem;
  StatusOr<v1::Selection> selection = NotFound("not yet");
  auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!selection.ok() && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    selection = client->Select(select);
  }
  ASSERT_TRUE(selection.ok()) << selection.status().ToString() << "\n" << daemon_->Log();
  EXPECT_EQ(selection->variant(), variants_->front());
  v1::ListRecordsRequest list;
  *list.mutable_filter()->mutable_shape() = problem->shape();
  list.mutable_filter()->set_variant("test_hang");
  StatusOr<v1::ListRecordsResponse> hung = client->ListRecords(list);
  ASSERT_TRUE(hung.ok()) << hung.status().ToString();
  ASSERT_EQ(hung->records_size(), 1);
  EXPECT_EQ(hung->records(0).state(), v1::TIMEOUT);
}

// Start-up checks of scantuned itself.
class DaemonStartupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir_template[] = "/tmp/st-su-XXXXXX";
    ASSERT_NE(mkdtemp(dir_template), nullptr);
    dir_ = dir_template;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  CommandResult RunDaemon(const std::string& listen) {
    return RunCommand({SCANTUNED_PATH, "--listen", listen, "--db", dir_ + "/scantune.db", "--worker",
                       SCANTUNE_FAKE_WORKER_PATH},
                      {}, std::chrono::seconds(60));
  }
  std::string dir_;
};

// Without TLS and tokens (tls_daemon_test.cc has the daemons with them).
TEST_F(DaemonStartupTest, RefusesNetworkAddresses) {
  for (const char* address : {"0.0.0.0:50051", "10.1.2.3:50051", "[::]:50051", "example.com:443"}) {
    CommandResult r = RunDaemon(address);
    EXPECT_EQ(r.exit_code, 2) << address << "\n" << r.err;
    EXPECT_THAT(r.err, HasSubstr("needs TLS and tokens")) << address;
    EXPECT_THAT(r.err, HasSubstr("--token-file")) << address;
  }
  CommandResult bad_flag = RunCommand({SCANTUNED_PATH, "--frobnicate"});
  EXPECT_EQ(bad_flag.exit_code, 2);
  EXPECT_THAT(bad_flag.err, HasSubstr("--frobnicate"));
  CommandResult help = RunCommand({SCANTUNED_PATH, "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.out, HasSubstr("--listen"));
}

TEST_F(DaemonStartupTest, ReplacesAStaleSocketButNotALiveOne) {
  TestDaemonOptions options;
  options.worker = SCANTUNE_FAKE_WORKER_PATH;
  options.dir = dir_;
  auto first = TestDaemon::Start(options);
  ASSERT_TRUE(first.ok()) << first.status().ToString();

  // A second daemon must not steal the socket of a live one.
  CommandResult second = RunDaemon((*first)->address());
  EXPECT_EQ(second.exit_code, 1) << second.err;
  EXPECT_THAT(second.err, HasSubstr("another daemon"));
  EXPECT_TRUE((*first)->Serving().ok());

  // A daemon killed outright leaves its socket file behind; the next one
  // removes it and serves.
  kill((*first)->pid(), SIGKILL);
  while ((*first)->Alive()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(std::filesystem::exists(dir_ + "/scantune.sock"));
  auto restarted = TestDaemon::Start(options);
  ASSERT_TRUE(restarted.ok()) << restarted.status().ToString();
  EXPECT_TRUE((*restarted)->Serving().ok());
  EXPECT_TRUE((*restarted)->Stop().ok()) << (*restarted)->Log();
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/scantune.sock")) << "a clean stop removes the socket";
}

// A daemon whose worker finds no GPU still serves the database and compiles
// kernels; only tuning is refused.
class NoGpuDaemonTest : public OwnDaemonTest {
 protected:
  void SetUp() override {
    TestDaemonOptions options;
    options.worker = SCANTUNE_FAKE_WORKER_PATH;
    options.env = {{"SCANTUNE_FAKE_NO_GPU", "1"}};
    StartDaemon(options);
  }
};

TEST_F(NoGpuDaemonTest, ServesTheDatabaseButRefusesToTune) {
  CommandResult devices = daemon_->Cli({"devices"});
  ASSERT_EQ(devices.exit_code, 0) << devices.err;
  EXPECT_THAT(devices.out, HasSubstr("no GPU"));
  CommandResult devices_json = daemon_->Cli({"devices", "--json"});
  ASSERT_EQ(devices_json.exit_code, 0) << devices_json.err;
  EXPECT_EQ(ParseJson<v1::ListDevicesResponse>(devices_json.out).devices_size(), 0);

  CommandResult tune = daemon_->Cli({"tune", "--op", "linear_scan", "--shape", kShape, "--dtype", "bf16", "--mode",
                                     "fwd_bwd"});
  EXPECT_EQ(tune.exit_code, 1);
  EXPECT_THAT(tune.err, HasSubstr("FAILED_PRECONDITION"));
  EXPECT_THAT(tune.err, HasSubstr("no GPU"));
  EXPECT_TRUE(daemon_->Serving().ok());

  CommandResult select = daemon_->Cli({"select", "--op", "linear_scan", "--shape", kShape, "--dtype", "bf16",
                                       "--mode", "fwd_bwd", "--on-miss", "nearest"});
  EXPECT_EQ(select.exit_code, 1) << "nothing was ever tuned";
  EXPECT_THAT(select.err, HasSubstr("NOT_FOUND"));

  CommandResult records = daemon_->Cli({"records"});
  EXPECT_EQ(records.exit_code, 0) << records.err;
  EXPECT_THAT(records.out, HasSubstr("variant"));

  CommandResult kernel = daemon_->Cli({"kernel", "--variant", RealVariants().front(), "--op", "linear_scan",
                                       "--shape", "4x2048x2048", "--dtype", "bf16", "--mode", "fwd", "--json"});
  EXPECT_EQ(kernel.exit_code, 0) << kernel.err << "\n" << daemon_->Log();
  EXPECT_FALSE(ParseJson<v1::KernelResponse>(kernel.out).cubin().empty());
  EXPECT_TRUE(daemon_->Serving().ok());
}

}  // namespace
}  // namespace scantune::testing
