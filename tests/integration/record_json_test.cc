// Unit tests of the record <-> seed-JSON conversions (server/record_json.h),
// on the real seed files copied under data/ and on hand-made records. No
// daemon: the integration tests cover the RPCs and the CLI.
#include "server/record_json.h"

#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace scantune {
namespace {

using ::testing::HasSubstr;

std::string ReadData(const std::string& name) {
  std::ifstream file(std::string(SCANTUNE_TEST_DATA_DIR) + "/" + name);
  std::stringstream text;
  text << file.rdbuf();
  EXPECT_FALSE(text.str().empty()) << name;
  return text.str();
}

TEST(RecordJson, ReadsSeed001Rows) {
  auto imported = RecordsFromSeedJson(ReadData("seed_001.json"), "seed_001.json");
  ASSERT_TRUE(imported.ok()) << imported.status().ToString();
  ASSERT_EQ(imported->records.size(), 8u);
  EXPECT_EQ(imported->skipped, 0);
  const v1::Record& r = imported->records[0];
  EXPECT_EQ(r.origin(), "imported");
  EXPECT_EQ(r.state(), v1::OK);
  EXPECT_EQ(r.device().name(), "NVIDIA H800 PCIe");
  EXPECT_EQ(r.problem().op(), "rglru");
  EXPECT_EQ(r.variant(), "fused_grouped_prefix32_hierarchical_chunk16");
  EXPECT_EQ(r.problem().shape().batch(), 4u);
  EXPECT_EQ(r.problem().shape().length(), 2048u);
  EXPECT_EQ(r.problem().shape().width(), 2048u);
  EXPECT_EQ(r.problem().dtype(), v1::BF16);
  EXPECT_EQ(r.problem().mode(), v1::FWD_BWD);
  EXPECT_DOUBLE_EQ(r.fwd_bwd().median_ms(), 2.5530625134706497);
  EXPECT_DOUBLE_EQ(r.fwd().min_ms(), 0.890243798494339);
  EXPECT_EQ(r.fwd().samples_ms_size(), 10);
  EXPECT_EQ(r.rounds_size(), 2);
  EXPECT_EQ(r.rounds(0).fwd_ms_size(), 5);
  EXPECT_EQ(r.memory().peak_bytes(), 523784704u);
  EXPECT_EQ(r.parameters(), 530432u);
  EXPECT_EQ(r.dynamic_control_values_per_token(), 4096);
  // No driver or NVRTC: the fingerprint can never match a live device.
  EXPECT_EQ(r.device().driver_version(), 0);
}

TEST(RecordJson, ReadsSeed000CasesAndSeed004Results) {
  auto cases = RecordsFromSeedJson(ReadData("seed_000.json"), "seed_000.json");
  ASSERT_TRUE(cases.ok()) << cases.status().ToString();
  EXPECT_EQ(cases->records.size(), 8u);
  EXPECT_EQ(cases->records[0].problem().shape().width(), 2048u);
  EXPECT_THAT(cases->records[0].detail(), HasSubstr("case state2048_short"));

  auto results = RecordsFromSeedJson(ReadData("seed_004.json"), "seed_004.json");
  ASSERT_TRUE(results.ok()) << results.status().ToString();
  ASSERT_EQ(results->records.size(), 92u);
  const v1::Record& first = results->records[0];
  EXPECT_EQ(first.device().name(), "NVIDIA GeForce RTX 3090");
  EXPECT_EQ(first.problem().op(), "scan");
  EXPECT_EQ(first.problem().mode(), v1::FWD);
  EXPECT_EQ(first.problem().dtype(), v1::FP32);
  EXPECT_EQ(first.problem().shape().length(), 512u);
  EXPECT_DOUBLE_EQ(first.fwd().median_ms(), 3.5174815004990836);
  EXPECT_DOUBLE_EQ(first.fwd().q1_ms(), 3.5124241434719545);
  int oom = 0;
  for (const v1::Record& r : results->records) oom += r.state() == v1::OUT_OF_MEMORY;
  EXPECT_GE(oom, 1);
}

TEST(RecordJson, ExportReadsBack) {
  v1::Record r;
  r.set_id(42);
  r.mutable_device()->set_name("NVIDIA H200");
  r.mutable_device()->set_uuid("GPU-1");
  r.mutable_device()->set_driver_version(13000);
  r.set_source_hash("abc");
  r.mutable_problem()->set_op("linear_scan");
  r.mutable_problem()->mutable_shape()->set_batch(4);
  r.mutable_problem()->mutable_shape()->set_length(2048);
  r.mutable_problem()->mutable_shape()->set_width(2560);
  r.mutable_problem()->set_dtype(v1::FP16);
  r.mutable_problem()->set_mode(v1::FWD);
  r.set_variant("v1");
  r.set_state(v1::WRONG_RESULT);
  r.set_detail("first bad index 7");
  r.mutable_fwd()->add_samples_ms(1.5);
  r.mutable_fwd()->set_median_ms(1.5);
  r.mutable_fwd()->set_q3_ms(1.75);
  r.mutable_memory()->set_peak_bytes(1 << 20);
  r.add_rounds()->add_fwd_ms(1.25);
  r.set_rel_err(0.5);
  r.set_origin("tuned");
  r.set_seed(0xfedcba9876543210ull);  // above 2^53: kept exactly (as a string)
  auto json = RecordsToSeedJson({r});
  ASSERT_TRUE(json.ok());
  EXPECT_THAT(*json, HasSubstr("\"architecture\": \"linear_scan\""));
  EXPECT_THAT(*json, HasSubstr("\"minimum_ms\""));

  auto back = RecordsFromSeedJson(*json, "mine");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->records.size(), 1u);
  const v1::Record& b = back->records[0];
  EXPECT_EQ(b.origin(), "imported");
  EXPECT_EQ(b.device().name(), "NVIDIA H200");
  EXPECT_EQ(b.device().uuid(), "GPU-1");
  EXPECT_EQ(b.device().driver_version(), 0);
  EXPECT_EQ(b.problem().shape().width(), 2560u);
  EXPECT_EQ(b.problem().dtype(), v1::FP16);
  EXPECT_EQ(b.problem().mode(), v1::FWD);
  EXPECT_EQ(b.state(), v1::WRONG_RESULT);
  EXPECT_THAT(b.detail(), HasSubstr("first bad index 7"));
  EXPECT_THAT(b.detail(), HasSubstr("record 42"));
  EXPECT_EQ(b.fwd().q3_ms(), 1.75);
  EXPECT_EQ(b.memory().peak_bytes(), 1u << 20);
  ASSERT_EQ(b.rounds_size(), 1);
  EXPECT_EQ(b.rounds(0).fwd_ms(0), 1.25);
  EXPECT_EQ(b.rel_err(), 0.5);
  EXPECT_EQ(b.source_hash(), "abc");
  EXPECT_EQ(b.seed(), 0xfedcba9876543210ull);
}

TEST(RecordJson, RefusesOversizedAndMalformedDocuments) {
  auto big = RecordsFromSeedJson(std::string(kMaxImportJsonBytes + 1, ' '), "big");
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), StatusCode::kResourceExhausted);

  for (const char* bad : {"", "{", "[1, 2]", "{\"rows\": [1,,]}", "nul"}) {
    auto parsed = RecordsFromSeedJson(bad, "bad");
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument) << bad;
  }
  auto wrong_type = RecordsFromSeedJson(R"({"results": {"impl": "x"}})", "bad");
  ASSERT_FALSE(wrong_type.ok());
  EXPECT_THAT(wrong_type.status().message(), HasSubstr("'results' is not an array"));

  auto bad_rows = RecordsFromSeedJson(
      R"({"results": [{"impl": "x", "mode": "sideways", "shape": {"batch": 1, "seq": 2, "dim": 3}},
                      {"impl": "y", "mode": "fwd", "shape": {"batch": 1.5, "seq": 2, "dim": 3}}]})",
      "bad");
  ASSERT_TRUE(bad_rows.ok());
  EXPECT_EQ(bad_rows->records.size(), 0u);
  EXPECT_EQ(bad_rows->skipped, 2);
  ASSERT_EQ(bad_rows->warnings.size(), 3u);  // [0]: the file names no GPU
  EXPECT_THAT(bad_rows->warnings[1], HasSubstr("results[0].mode"));
  EXPECT_THAT(bad_rows->warnings[2], HasSubstr("results[1].shape.batch"));
}

}  // namespace
}  // namespace scantune
