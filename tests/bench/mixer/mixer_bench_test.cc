#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include "bench/mixer/bench_runner.h"
#include "bench/mixer/blockdiag_gemm.h"
#include "bench/mixer/glue_kernels.h"
#include "bench/common/json_writer.h"
#include "bench/mixer/options.h"
#include "bench/mixer/report.h"
#include "compiler/plan.h"

namespace scantune::mixer {
namespace {

using bench::JsonWriter;

std::string SeedText() {
  std::ifstream in(std::string(SCANTUNE_SOURCE_DIR) + "/tests/integration/data/seed_001.json");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

google::protobuf::Struct ParseJson(const std::string& text) {
  google::protobuf::Struct doc;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(text, &doc).ok()) << text.substr(0, 400);
  return doc;
}

// ---------------------------------------------------------------- statistics

TEST(MixerStats, MatchesSeed001Figures) {
  const google::protobuf::Struct doc = ParseJson(SeedText());
  const auto& rows = doc.fields().at("rows").list_value();
  ASSERT_GT(rows.values_size(), 0);
  for (const auto& row : rows.values()) {
    for (const char* mode : {"forward", "backward", "forward_backward"}) {
      const auto& m = row.struct_value().fields().at(mode).struct_value().fields();
      std::vector<double> samples;
      for (const auto& v : m.at("samples_ms").list_value().values()) samples.push_back(v.number_value());
      const ModeSummary s = Summarize(samples);
      EXPECT_NEAR(s.median_ms, m.at("median_ms").number_value(), 1e-12);
      EXPECT_NEAR(s.mean_ms, m.at("mean_ms").number_value(), 1e-12);
      EXPECT_NEAR(s.std_ms, m.at("std_ms").number_value(), 1e-12) << "population std, as the seed";
      EXPECT_DOUBLE_EQ(s.minimum_ms, m.at("minimum_ms").number_value());
      EXPECT_DOUBLE_EQ(s.maximum_ms, m.at("maximum_ms").number_value());
    }
  }
}

TEST(MixerStats, EmptyAndSingle) {
  EXPECT_EQ(Summarize({}).median_ms, 0.0);
  const ModeSummary one = Summarize({2.5});
  EXPECT_EQ(one.median_ms, 2.5);
  EXPECT_EQ(one.std_ms, 0.0);
}

// ---------------------------------------------------------------- JSON

TEST(JsonWriter, WritesValidOrderedJson) {
  JsonWriter w;
  w.BeginObject();
  w.Field("b", "quote \" backslash \\ newline \n tab \t ctl \x01");
  w.Field("a", 0.1);
  w.FieldInt("i", -3);
  w.FieldUint("u", 18446744073709551615ull);
  w.Key("n");
  w.Null();
  w.Field("nan", std::nan(""));
  w.Key("empty");
  w.BeginArray();
  w.EndArray();
  w.Key("obj");
  w.BeginObject();
  w.EndObject();
  w.FieldNumbers("list", {1.0, 2.5, 1e-300});
  w.EndObject();
  ASSERT_TRUE(w.complete());
  const std::string& s = w.str();
  EXPECT_LT(s.find("\"b\""), s.find("\"a\"")) << "keys keep their written order";
  EXPECT_NE(s.find("\\u0001"), std::string::npos);
  EXPECT_NE(s.find("\"a\": 0.1"), std::string::npos) << "shortest round-trip form";
  EXPECT_NE(s.find("\"nan\": null"), std::string::npos);
  const google::protobuf::Struct doc = ParseJson(s);
  EXPECT_EQ(doc.fields().at("b").string_value(), "quote \" backslash \\ newline \n tab \t ctl \x01");
  EXPECT_EQ(doc.fields().at("list").list_value().values(2).number_value(), 1e-300);
}

TEST(JsonWriter, FormatsNumbersExactly) {
  EXPECT_EQ(JsonWriter::FormatNumber(0.9044241160154343), "0.9044241160154343");
  EXPECT_EQ(JsonWriter::FormatNumber(387392512.0), "387392512");
  EXPECT_EQ(JsonWriter::FormatNumber(INFINITY), "null");
}

std::vector<std::string> KeysInOrder(const std::string& json_object_text) {
  // Top-level keys of the first object in the text, in order (depth 1 only).
  std::vector<std::string> keys;
  int depth = 0;
  bool in_string = false;
  std::string current;
  for (size_t i = 0; i < json_object_text.size(); ++i) {
    const char c = json_object_text[i];
    if (in_string) {
      if (c == '\\') {
        current += json_object_text[++i];
      } else if (c == '"') {
        in_string = false;
        size_t j = i + 1;
        while (j < json_object_text.size() && json_object_text[j] == ' ') ++j;
        if (depth == 1 && j < json_object_text.size() && json_object_text[j] == ':') keys.push_back(current);
      } else {
        current += c;
      }
      continue;
    }
    if (c == '"') in_string = true, current.clear();
    else if (c == '{' || c == '[') ++depth;
    else if (c == '}' || c == ']') {
      if (--depth == 0) break;
    }
  }
  return keys;
}

TEST(MixerReport, FollowsSeed001Schema) {
  MixerOptions o;
  o.shapes = Seed001Shapes();
  o.dry_run = true;
  const MixerReport report = DryRunReport(o);
  ASSERT_EQ(report.rows.size(), 8u);
  const std::string json = ReportToJson(report);
  const google::protobuf::Struct ours = ParseJson(json);
  const google::protobuf::Struct seed = ParseJson(SeedText());

  // Top level and protocol: every key of the seed, in the seed's order first.
  EXPECT_EQ(KeysInOrder(json), KeysInOrder(SeedText()));
  for (const auto& [key, value] : seed.fields().at("protocol").struct_value().fields()) {
    ASSERT_TRUE(ours.fields().at("protocol").struct_value().fields().count(key)) << key;
    EXPECT_EQ(ours.fields().at("protocol").struct_value().fields().at(key).kind_case(), value.kind_case()) << key;
  }
  EXPECT_TRUE(ours.fields().at("environment").struct_value().fields().count("gpu"));

  // Rows: the seed row's keys, in its order, then ours; same value kinds.
  const std::string seed_text = SeedText();
  const std::string seed_row = seed_text.substr(seed_text.find("\"rows\""));
  const std::string our_row = json.substr(json.find("\"rows\""));
  const auto seed_keys = KeysInOrder(seed_row.substr(seed_row.find('{')));
  const auto our_keys = KeysInOrder(our_row.substr(our_row.find('{')));
  ASSERT_GE(our_keys.size(), seed_keys.size());
  EXPECT_EQ(std::vector<std::string>(our_keys.begin(), our_keys.begin() + seed_keys.size()), seed_keys);

  const auto& seed_rows = seed.fields().at("rows").list_value();
  const auto& our_rows = ours.fields().at("rows").list_value();
  for (int r = 0; r < 2; ++r) {  // rglru and samu rows of the first shape
    const auto& s = seed_rows.values(r).struct_value().fields();
    const auto& m = our_rows.values(r).struct_value().fields();
    for (const auto& [key, value] : s) {
      ASSERT_TRUE(m.count(key)) << key;
      EXPECT_EQ(m.at(key).kind_case(), value.kind_case()) << key;
    }
    EXPECT_EQ(m.at("architecture").string_value(), s.at("architecture").string_value());
    EXPECT_EQ(m.at("parameters").number_value(), s.at("parameters").number_value()) << "530,432 and 6,148 at W=2048";
    EXPECT_EQ(m.at("parameter_bytes").number_value(), s.at("parameter_bytes").number_value());
    EXPECT_EQ(m.at("dynamic_control_values_per_token").number_value(),
              s.at("dynamic_control_values_per_token").number_value());
    const auto& rounds = m.at("rounds").list_value();
    ASSERT_EQ(rounds.values_size(), 2);
    EXPECT_EQ(rounds.values(0).struct_value().fields().at("order_index").number_value(), r);
    EXPECT_EQ(rounds.values(1).struct_value().fields().at("order_index").number_value(), 1 - r);
    EXPECT_EQ(m.at("forward").struct_value().fields().at("samples_ms").list_value().values_size(), 10);
  }
}

TEST(MixerReport, MemoryFieldsFromProbe) {
  MixerReport report;
  MixerRow row;
  row.shape = {1, 2, 16};
  row.architecture = "rglru";
  row.memory = {1000, 300, 1500};
  report.rows.push_back(row);
  const auto doc = ParseJson(ReportToJson(report));
  const auto& m = doc.fields().at("rows").list_value().values(0).struct_value().fields();
  EXPECT_EQ(m.at("baseline_allocated_bytes").number_value(), 1000);
  EXPECT_EQ(m.at("baseline_reserved_bytes").number_value(), 1000);
  EXPECT_EQ(m.at("peak_allocated_bytes").number_value(), 1300);
  EXPECT_EQ(m.at("peak_allocated_delta_bytes").number_value(), 300);
  EXPECT_EQ(m.at("peak_reserved_bytes").number_value(), 1500);
  EXPECT_EQ(m.at("peak_reserved_delta_bytes").number_value(), 500);
  EXPECT_EQ(m.at("controller").kind_case(), google::protobuf::Value::kNullValue);
}

TEST(SeedFigures, RatiosFromSeed001) {
  auto seed = ParseSeedFigures(SeedText());
  ASSERT_TRUE(seed.ok()) << seed.status().ToString();
  EXPECT_EQ(seed->gpu, "NVIDIA H800 PCIe");
  auto r = seed->Ratio({4, 2048, 2048});
  ASSERT_TRUE(r.has_value());
  EXPECT_NEAR(*r, 1.9239801913499832 / 2.5530625134706497, 1e-12);
  EXPECT_FALSE(seed->Ratio({1, 1, 16}).has_value());
  EXPECT_FALSE(ParseSeedFigures("{\"rows\": 3}").ok());
  EXPECT_FALSE(ParseSeedFigures("not json").ok());
}

TEST(SeedFigures, TableShowsBothRatios) {
  MixerOptions o;
  o.shapes = {{4, 2048, 2048}};
  const MixerReport report = DryRunReport(o);
  auto seed = ParseSeedFigures(SeedText());
  ASSERT_TRUE(seed.ok());
  const std::string table = FormatTable(report, &*seed);
  EXPECT_NE(table.find("shape 4x2048x2048"), std::string::npos) << table;
  EXPECT_NE(table.find("SAMU / RG-LRU fwd_bwd: 0.750"), std::string::npos) << table;
  EXPECT_NE(table.find("seed 001 (NVIDIA H800 PCIe): 0.754"), std::string::npos) << table;
  // The check column is the RG-LRU gate GEMMs' (not run in a dry run); a SAMU row has no GEMM to check.
  EXPECT_NE(table.find("gemm check"), std::string::npos) << table;
  const size_t samu = table.find("  samu ");
  ASSERT_NE(samu, std::string::npos) << table;
  const std::string samu_row = table.substr(samu, table.find('\n', samu) - samu);
  EXPECT_EQ(samu_row.substr(samu_row.size() - 3), "  -") << samu_row;
  EXPECT_NE(table.find("not run"), std::string::npos) << table;  // the dry run's rglru row
}

// ---------------------------------------------------------------- GEMM math

struct Case {
  int64_t m = 0, w = 0, heads = 0;
  std::vector<double> x, dgate, weights, dx0;
};

Case MakeCase(int64_t m, int64_t w, int64_t heads) {
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> u(-1, 1);
  Case c{m, w, heads, {}, {}, {}, {}};
  const int64_t d = w / heads;
  for (int64_t i = 0; i < m * w; ++i) c.x.push_back(u(rng)), c.dgate.push_back(u(rng)), c.dx0.push_back(u(rng));
  for (int64_t i = 0; i < heads * d * d; ++i) c.weights.push_back(u(rng));
  return c;
}

double W(const Case& c, int64_t h, int64_t out, int64_t in) {
  const int64_t d = c.w / c.heads;
  return c.weights[h * d * d + out * d + in];
}

TEST(BlockDiagGemm, ForwardIsPerHeadLinear) {
  const Case c = MakeCase(7, 12, 3);
  const BlockDiagShape s{c.m, c.w, c.heads};
  ASSERT_TRUE(ValidateShape(s).ok());
  const GemmSpec g = GateForwardGemm(s);
  ASSERT_TRUE(ValidateGemm(g).ok()) << g.ToString();
  std::vector<double> gate(c.m * c.w, NAN);
  HostGemm(g, c.weights, c.x, &gate);
  const int64_t d = s.head_dim();
  for (int64_t r = 0; r < c.m; ++r) {
    for (int64_t h = 0; h < c.heads; ++h) {
      for (int64_t j = 0; j < d; ++j) {
        double ref = 0;
        for (int64_t k = 0; k < d; ++k) ref += c.x[r * c.w + h * d + k] * W(c, h, j, k);
        EXPECT_NEAR(gate[r * c.w + h * d + j], ref, 1e-12) << "row " << r << " head " << h << " out " << j;
      }
    }
  }
}

TEST(BlockDiagGemm, InputGradAccumulates) {
  const Case c = MakeCase(5, 8, 2);
  const BlockDiagShape s{c.m, c.w, c.heads};
  const GemmSpec g = InputGradGemm(s);
  ASSERT_TRUE(ValidateGemm(g).ok());
  EXPECT_EQ(g.beta, 1.0f);
  std::vector<double> dx = c.dx0;
  HostGemm(g, c.weights, c.dgate, &dx);
  const int64_t d = s.head_dim();
  for (int64_t r = 0; r < c.m; ++r) {
    for (int64_t h = 0; h < c.heads; ++h) {
      for (int64_t k = 0; k < d; ++k) {
        double ref = c.dx0[r * c.w + h * d + k];
        for (int64_t j = 0; j < d; ++j) ref += c.dgate[r * c.w + h * d + j] * W(c, h, j, k);
        EXPECT_NEAR(dx[r * c.w + h * d + k], ref, 1e-12);
      }
    }
  }
}

TEST(BlockDiagGemm, WeightGradIsPerHeadOuterProductSum) {
  const Case c = MakeCase(9, 12, 4);
  const BlockDiagShape s{c.m, c.w, c.heads};
  const GemmSpec g = WeightGradGemm(s);
  ASSERT_TRUE(ValidateGemm(g).ok());
  const int64_t d = s.head_dim();
  std::vector<double> dw(c.heads * d * d, NAN);
  HostGemm(g, c.x, c.dgate, &dw);
  for (int64_t h = 0; h < c.heads; ++h) {
    for (int64_t j = 0; j < d; ++j) {
      for (int64_t k = 0; k < d; ++k) {
        double ref = 0;  // dW_h[out j][in k] = sum_r dgate[r, hD+j] x[r, hD+k]
        for (int64_t r = 0; r < c.m; ++r) ref += c.dgate[r * c.w + h * d + j] * c.x[r * c.w + h * d + k];
        EXPECT_NEAR(dw[h * d * d + j * d + k], ref, 1e-12);
      }
    }
  }
}

TEST(BlockDiagGemm, BiasGradIsColumnSumsOfBothGates) {
  const Case c = MakeCase(6, 8, 2);
  const BlockDiagShape s{c.m, c.w, c.heads};
  // Two gate tensors back to back, as the mixer allocates dga | dgx.
  std::vector<double> dgates = c.dgate;
  dgates.insert(dgates.end(), c.x.begin(), c.x.end());
  const GemmSpec g = BiasGradGemm(s, 2, c.m * c.w);
  ASSERT_TRUE(ValidateGemm(g).ok());
  std::vector<double> ones(c.m, 1.0), db(2 * c.w, NAN);
  HostGemm(g, dgates, ones, &db);
  for (int gate = 0; gate < 2; ++gate) {
    for (int64_t col = 0; col < c.w; ++col) {
      double ref = 0;
      for (int64_t r = 0; r < c.m; ++r) ref += dgates[gate * c.m * c.w + r * c.w + col];
      EXPECT_NEAR(db[gate * c.w + col], ref, 1e-12);
    }
  }
}

TEST(BlockDiagGemm, SeedShapesAreValidAndParametersMatch) {
  for (const ShapeKey& k : Seed001Shapes()) {
    const BlockDiagShape s{k.batch * k.length, k.width, 16};
    ASSERT_TRUE(ValidateShape(s).ok());
    for (const GemmSpec& g : {GateForwardGemm(s), InputGradGemm(s), WeightGradGemm(s), BiasGradGemm(s, 2, 1)}) {
      EXPECT_TRUE(ValidateGemm(g).ok()) << g.ToString();
    }
  }
  EXPECT_EQ(RgLruMixerParameters(2048, 16), 530432u);
  EXPECT_EQ(RgLruMixerParameters(2560, 16), 826880u);
  EXPECT_EQ(RgLruMixerParameters(1024, 16), 134144u);
  EXPECT_EQ(SamuMixerParameters(2048), 6148u);
  EXPECT_EQ(SamuMixerParameters(2560), 7684u);
  EXPECT_FALSE(ValidateShape({10, 2050, 16}).ok());
  EXPECT_FALSE(ValidateShape({int64_t{1} << 32, 2048, 16}).ok());
  GemmSpec bad = GateForwardGemm({8, 32, 2});
  bad.ldb = 4;
  EXPECT_FALSE(ValidateGemm(bad).ok());
}

// ---------------------------------------------------------------- options

TEST(MixerOptions, DefaultsAreSeed001) {
  auto o = ParseOptions({});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  ASSERT_EQ(o->shapes.size(), 4u);
  EXPECT_EQ(o->shapes[1], (ShapeKey{1, 8192, 2560}));
  EXPECT_EQ(o->rounds, 2);
  EXPECT_EQ(o->samples, 5);
  EXPECT_EQ(o->heads, 16);
  EXPECT_FALSE(o->dry_run);
  EXPECT_FALSE(o->tune_now);
}

TEST(MixerOptions, ParsesFlags) {
  auto o = ParseOptions({"--socket", "unix:///tmp/x.sock", "--shapes=2x64x256,1x8x32", "--rounds", "4", "--samples",
                         "3", "--tune-now", "--dry-run", "--out", "r.json", "--target-ms", "2.5", "--heads", "8"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->address, "unix:///tmp/x.sock");
  ASSERT_EQ(o->shapes.size(), 2u);
  EXPECT_EQ(o->shapes[0], (ShapeKey{2, 64, 256}));
  EXPECT_EQ(o->rounds, 4);
  EXPECT_EQ(o->samples, 3);
  EXPECT_TRUE(o->tune_now);
  EXPECT_TRUE(o->dry_run);
  EXPECT_EQ(o->out, "r.json");
  EXPECT_DOUBLE_EQ(o->target_ms, 2.5);
  EXPECT_EQ(o->heads, 8);
}

TEST(MixerOptions, RejectsBadInput) {
  EXPECT_FALSE(ParseOptions({"--bogus"}).ok());
  EXPECT_FALSE(ParseOptions({"--rounds", "0"}).ok());
  EXPECT_FALSE(ParseOptions({"--samples", "x"}).ok());
  EXPECT_FALSE(ParseOptions({"--shapes", "4x2048"}).ok());
  EXPECT_FALSE(ParseOptions({"--shapes", "1x8x100"}).ok()) << "width not a multiple of 16 heads";
  EXPECT_FALSE(ParseOptions({"--target-ms", "-1"}).ok());
  EXPECT_FALSE(ParseOptions({"--socket", "a", "--address", "b"}).ok());
  EXPECT_FALSE(ParseOptions({"stray"}).ok());
}

// ---------------------------------------------------------------- glue kernels

TEST(GlueKernels, CompileForHopperWithoutAGpu) {
  auto cubin = CompileGlueCubin(9, 0);
  ASSERT_TRUE(cubin.ok()) << cubin.status().ToString();
  EXPECT_GT(cubin->size(), 1000u);
}

}  // namespace
}  // namespace scantune::mixer
