// End-to-end tests of Export and Import: the real scantuned (child process,
// fake worker standing in for the GPU) driven by the real `scantune` CLI and
// the client library. The seed files under data/ are copies of the real
// benchmark records in ../shared/seeds (000: cases[].rows[], 001: rows[],
// 004: results[]). Each test gets a fresh daemon and database (ctest runs
// every test in a process of its own).
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/problem.h"
#include "compiler/plan.h"
#include "tests/integration/test_daemon.h"

namespace scantune::testing {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;
using ::testing::HasSubstr;

constexpr const char* kShape = "2x256x512";
const std::string kData = SCANTUNE_TEST_DATA_DIR;

template <typename Message>
Message ParseJson(const std::string& text) {
  Message message;
  auto status = google::protobuf::util::JsonStringToMessage(text, &message);
  EXPECT_TRUE(status.ok()) << status.ToString() << "\n" << text.substr(0, 2000);
  return message;
}

// Two real variants that can run the test problem: enough for a selection,
// few enough to compile quickly.
std::vector<std::string> TwoVariants() {
  std::vector<std::string> names = OneVariantPerAlgorithm(kShape);
  if (names.size() > 2) names.resize(2);
  return names;
}

std::vector<std::string> ProblemFlags() {
  return {"--op", "linear_scan", "--shape", kShape, "--dtype", "bf16", "--mode", "fwd_bwd"};
}
std::vector<std::string> With(std::vector<std::string> head, const std::vector<std::string>& tail) {
  head.insert(head.end(), tail.begin(), tail.end());
  return head;
}

const Value& At(const Struct& s, const std::string& key) {
  static const Value kMissing;
  auto it = s.fields().find(key);
  EXPECT_NE(it, s.fields().end()) << "no field '" << key << "'";
  return it == s.fields().end() ? kMissing : it->second;
}

class ExportImportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TestDaemonOptions options;
    options.worker = SCANTUNE_FAKE_WORKER_PATH;
    options.flags = {"--candidate-timeout-s", "10"};
    auto daemon = TestDaemon::Start(options);
    ASSERT_TRUE(daemon.ok()) << daemon.status().ToString();
    daemon_ = std::move(*daemon);
  }
  void TearDown() override {
    if (daemon_) {
      EXPECT_TRUE(daemon_->Stop().ok()) << "scantuned did not stop cleanly; its log:\n" << daemon_->Log();
    }
  }

  void ExpectServing() {
    Status serving = daemon_->Serving();
    EXPECT_TRUE(serving.ok()) << serving.ToString() << "\ndaemon log:\n" << daemon_->Log();
  }

  void TuneTheTestProblem() {
    std::string variants;
    for (const std::string& v : TwoVariants()) variants += (variants.empty() ? "" : ",") + v;
    CommandResult tune = daemon_->Cli(With({"tune", "--quiet"}, With(ProblemFlags(), {"--variants", variants})));
    ASSERT_EQ(tune.exit_code, 0) << tune.err << "\ndaemon log:\n" << daemon_->Log();
  }

  v1::Selection SelectTheTestProblem() {
    CommandResult select = daemon_->Cli(With({"select", "--json"}, ProblemFlags()));
    EXPECT_EQ(select.exit_code, 0) << select.err;
    return ParseJson<v1::Selection>(select.out);
  }

  // `scantune import FILE`; the counts it printed.
  std::pair<int, int> Import(const std::string& path) {
    CommandResult import = daemon_->Cli({"--json", "import", path});
    EXPECT_EQ(import.exit_code, 0) << import.err;
    auto response = ParseJson<v1::ImportResponse>(import.out);
    return {response.imported(), response.skipped()};
  }

  int CountRecords(const std::string& origin) {
    std::vector<std::string> args = {"records", "--json", "--limit", "1000"};
    if (!origin.empty()) args.insert(args.end(), {"--origin", origin});
    CommandResult records = daemon_->Cli(args);
    EXPECT_EQ(records.exit_code, 0) << records.err;
    auto response = ParseJson<v1::ListRecordsResponse>(records.out);
    EXPECT_TRUE(response.next_page_token().empty());
    return response.records_size();
  }

  std::unique_ptr<TestDaemon> daemon_;
};

TEST_F(ExportImportTest, ExportWritesSeedRowsWithOurFields) {
  TuneTheTestProblem();
  const int stored = CountRecords("");
  ASSERT_GT(stored, 0);

  CommandResult exported = daemon_->Cli({"export", "--op", "linear_scan", "--shape", kShape});
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  auto doc = ParseJson<Struct>(exported.out);
  EXPECT_EQ(At(doc, "schema_version").number_value(), 1);
  EXPECT_EQ(At(At(doc, "environment").struct_value(), "gpu").string_value(), "Fake GPU (test double)");
  const auto& rows = At(doc, "rows").list_value();
  ASSERT_EQ(rows.values_size(), stored);
  bool saw_ok = false;
  for (const Value& value : rows.values()) {
    const Struct& row = value.struct_value();
    const Struct& shape = At(row, "shape").struct_value();
    EXPECT_EQ(At(shape, "batch").number_value(), 2);
    EXPECT_EQ(At(shape, "length").number_value(), 256);
    EXPECT_EQ(At(shape, "width").number_value(), 512);
    EXPECT_EQ(At(row, "architecture").string_value(), "linear_scan");
    EXPECT_FALSE(At(row, "backend").string_value().empty());
    EXPECT_EQ(At(row, "dtype").string_value(), "BF16");
    EXPECT_EQ(At(row, "mode").string_value(), "FWD_BWD");
    EXPECT_GT(At(row, "record_id").number_value(), 0);
    EXPECT_FALSE(At(row, "source_hash").string_value().empty());
    EXPECT_EQ(At(At(row, "device").struct_value(), "uuid").string_value(), "GPU-fake-0");
    for (const char* key : {"parameters", "materialized_state_sized_transition", "dynamic_control_values_per_token",
                            "rel_err", "origin", "created_at"}) {
      At(row, key);
    }
    if (At(row, "state").string_value() == "OK") {
      saw_ok = true;
      const Struct& fwd_bwd = At(row, "forward_backward").struct_value();
      EXPECT_GT(At(fwd_bwd, "median_ms").number_value(), 0);
      for (const char* key : {"samples_ms", "mean_ms", "std_ms", "minimum_ms", "maximum_ms"}) At(fwd_bwd, key);
      At(row, "forward");
      At(row, "backward");
    }
  }
  EXPECT_TRUE(saw_ok);

  // --out writes the same document to a file; --limit caps it.
  const std::string path = daemon_->dir() + "/export.json";
  CommandResult to_file = daemon_->Cli({"export", "--out", path, "--limit", "1"});
  ASSERT_EQ(to_file.exit_code, 0) << to_file.err;
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  EXPECT_EQ(At(ParseJson<Struct>(text.str()), "rows").list_value().values_size(), 1);
}

TEST_F(ExportImportTest, ImportsTheSeedsAsExternalRecordsWithoutTouchingSelections) {
  TuneTheTestProblem();
  const v1::Selection before = SelectTheTestProblem();
  ASSERT_FALSE(before.variant().empty());
  const int tuned = CountRecords("");

  // Seed 000: 4 cases of 2 rows; seed 001: 8 rows; seed 004: 92 results.
  EXPECT_EQ(Import(kData + "/seed_000.json"), std::make_pair(8, 0));
  EXPECT_EQ(Import(kData + "/seed_001.json"), std::make_pair(8, 0));
  EXPECT_EQ(Import(kData + "/seed_004.json"), std::make_pair(92, 0));

  CommandResult listed = daemon_->Cli({"records", "--json", "--origin", "imported", "--limit", "1000"});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  auto imported = ParseJson<v1::ListRecordsResponse>(listed.out);
  ASSERT_EQ(imported.records_size(), 108);
  std::set<std::string> ops, devices;
  int oom = 0;
  for (const v1::Record& r : imported.records()) {
    EXPECT_EQ(r.origin(), "imported");
    EXPECT_THAT(r.detail(), HasSubstr("imported from seed_00"));
    ops.insert(r.problem().op());
    devices.insert(r.device().name());
    if (r.state() == v1::OUT_OF_MEMORY) ++oom;
  }
  EXPECT_EQ(ops, (std::set<std::string>{"rglru", "samu", "scan", "assoc", "chunked", "pallas"}));
  EXPECT_EQ(devices, (std::set<std::string>{"NVIDIA H800 PCIe", "NVIDIA GeForce RTX 3090"}));
  EXPECT_GE(oom, 1) << "seed 004's out-of-memory results";
  EXPECT_EQ(CountRecords(""), tuned + 108);

  // The table lists them too; seed 001's first row keeps its statistics.
  CommandResult table = daemon_->Cli({"records", "--origin", "imported", "--op", "rglru", "--shape", "4x2048x2048"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("fused_grouped_prefix32_hierarchical_chunk16"));
  EXPECT_THAT(table.out, HasSubstr("2.5531"));

  // The tuned selection is unaffected, even by a re-import of our own records
  // (same device model, same problem).
  const std::string ours = daemon_->dir() + "/ours.json";
  ASSERT_EQ(daemon_->Cli({"export", "--origin", "tuned", "--out", ours}).exit_code, 0);
  EXPECT_GT(Import(ours).first, 0);
  const v1::Selection after = SelectTheTestProblem();
  EXPECT_EQ(after.variant(), before.variant());
  EXPECT_EQ(after.record_id(), before.record_id());
  EXPECT_EQ(after.median_ms(), before.median_ms());
  ExpectServing();
}

TEST_F(ExportImportTest, ExportThenImportKeepsTheCount) {
  TuneTheTestProblem();
  ASSERT_EQ(Import(kData + "/seed_001.json"), std::make_pair(8, 0));
  const int before = CountRecords("");

  const std::string path = daemon_->dir() + "/all.json";
  CommandResult exported = daemon_->Cli({"export", "--out", path});
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  EXPECT_THAT(exported.err, HasSubstr(std::to_string(before) + " records written"));

  CommandResult import = daemon_->Cli({"import", path, "--source", "round-trip"});
  ASSERT_EQ(import.exit_code, 0) << import.err;
  EXPECT_THAT(import.out, HasSubstr("imported " + std::to_string(before) + " records, skipped 0 rows"));
  EXPECT_EQ(CountRecords(""), 2 * before);

  // What came back matches what went out, field for field where it matters.
  auto client = daemon_->Client();
  v1::ExportRequest all;
  all.set_max_records(10000);
  auto second = client->Export(all);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(second->records(), 2 * before);
  v1::ListRecordsRequest list;
  list.set_page_size(1000);
  auto records = client->ListRecords(list);
  ASSERT_TRUE(records.ok());
  std::multiset<std::string> out_keys, back_keys;
  for (const v1::Record& r : records->records()) {
    std::string key = r.problem().op() + "|" + r.variant() + "|" + v1::ResultState_Name(r.state()) + "|" +
                      v1::Mode_Name(r.problem().mode()) + "|" + v1::DType_Name(r.problem().dtype()) + "|" +
                      std::to_string(r.fwd_bwd().median_ms()) + "|" + std::to_string(r.fwd_bwd().samples_ms_size());
    (r.detail().find("round-trip") != std::string::npos ? back_keys : out_keys).insert(key);
  }
  EXPECT_EQ(out_keys, back_keys);
  ExpectServing();
}

TEST_F(ExportImportTest, RefusesMalformedAndOversizedJsonAndKeepsServing) {
  auto write = [&](const std::string& name, const std::string& text) {
    const std::string path = daemon_->dir() + "/" + name;
    std::ofstream(path) << text;
    return path;
  };
  CommandResult garbage = daemon_->Cli({"import", write("garbage.json", "{\"rows\": [1, 2,, }")});
  EXPECT_EQ(garbage.exit_code, 1);
  EXPECT_THAT(garbage.err, HasSubstr("INVALID_ARGUMENT"));
  EXPECT_THAT(garbage.err, HasSubstr("malformed JSON"));

  CommandResult not_array = daemon_->Cli({"import", write("not_array.json", "{\"rows\": 5}")});
  EXPECT_EQ(not_array.exit_code, 1);
  EXPECT_THAT(not_array.err, HasSubstr("INVALID_ARGUMENT"));
  EXPECT_THAT(not_array.err, HasSubstr("'rows' is not an array"));

  CommandResult unknown = daemon_->Cli({"import", write("unknown.json", "{\"measurements\": []}")});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_THAT(unknown.err, HasSubstr("unknown layout"));

  // Unreadable rows are skipped with a warning that names them; the rest lands.
  CommandResult partial = daemon_->Cli(
      {"import", write("partial.json", R"({"environment": {"gpu": "X"}, "rows": [{"architecture": "a"}, 3,
        {"architecture": "b", "shape": {"batch": 1, "length": 2, "width": 3}}]})")});
  ASSERT_EQ(partial.exit_code, 0) << partial.err;
  EXPECT_THAT(partial.out, HasSubstr("imported 1 records, skipped 2 rows"));
  EXPECT_THAT(partial.out, HasSubstr("rows[0].shape"));
  EXPECT_THAT(partial.out, HasSubstr("rows[1] is not an object"));

  // Beyond the daemon's request size (4 MiB by default) gRPC itself refuses.
  auto client = daemon_->Client();
  v1::ImportRequest big;
  big.set_json("{\"rows\": [" + std::string(5 << 20, ' ') + "]}");
  auto refused = client->Import(big);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted) << refused.status().ToString();
  ExpectServing();
  EXPECT_EQ(CountRecords("imported"), 1);
}

TEST(ExportImportLimitTest, RefusesJsonOver16MiBEvenWhenGrpcWouldTakeIt) {
  TestDaemonOptions options;
  options.worker = SCANTUNE_FAKE_WORKER_PATH;
  options.flags = {"--max-message-bytes", std::to_string(64 << 20)};
  auto daemon = TestDaemon::Start(options);
  ASSERT_TRUE(daemon.ok()) << daemon.status().ToString();
  auto client = (*daemon)->Client();
  v1::ImportRequest big;
  big.set_json("{\"rows\": [" + std::string(17 << 20, ' ') + "]}");
  auto refused = client->Import(big);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(), HasSubstr("16 MiB"));
  EXPECT_TRUE((*daemon)->Serving().ok());
  v1::ImportRequest small;
  small.set_json(R"({"rows": []})");
  auto fine = client->Import(small);
  ASSERT_TRUE(fine.ok()) << fine.status().ToString();
  EXPECT_EQ(fine->imported(), 0);
  EXPECT_TRUE((*daemon)->Stop().ok());
}

}  // namespace
}  // namespace scantune::testing
