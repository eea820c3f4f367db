#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "bench/ssm/bench_runner.h"
#include "bench/ssm/direct_run.h"
#include "bench/ssm/families.h"
#include "bench/ssm/options.h"
#include "bench/ssm/report.h"
#include "common/variant.h"
#include "compiler/plan.h"
#include "worker/op_io.h"

namespace scantune::ssmbench {
namespace {

std::string SeedText() {
  std::ifstream in(std::string(SCANTUNE_SOURCE_DIR) + "/tests/integration/data/seed_004.json");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

google::protobuf::Struct ParseJson(const std::string& text) {
  google::protobuf::Struct doc;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(text, &doc).ok()) << text.substr(0, 400);
  return doc;
}

std::set<std::string> Keys(const google::protobuf::Struct& s) {
  std::set<std::string> keys;
  for (const auto& [k, v] : s.fields()) keys.insert(k);
  return keys;
}

std::string KindOf(const google::protobuf::Struct& row) {
  auto kind = row.fields().find("kind");
  if (kind != row.fields().end()) return kind->second.string_value();
  return row.fields().count("error") ? "error" : "timing";
}

v1::Record MakeRecord(int64_t id, const std::string& variant, v1::ResultState state, double median_ms,
                      const std::string& origin = "tuned", v1::Mode mode = v1::FWD) {
  v1::Record r;
  r.set_id(id);
  r.set_variant(variant);
  r.set_state(state);
  r.set_origin(origin);
  v1::Stats* s = mode == v1::FWD ? r.mutable_fwd() : r.mutable_fwd_bwd();
  s->set_median_ms(median_ms);
  s->set_q1_ms(median_ms * 0.9);
  s->set_q3_ms(median_ms * 1.1);
  s->set_inner_count(7);
  r.set_compile_ms(1500.0);
  r.mutable_memory()->set_workspace_bytes(3 << 20);
  r.set_rel_err(1e-7);
  if (state != v1::OK) r.set_detail("why " + variant);
  return r;
}

// ---------------------------------------------------------------- families

TEST(SsmFamilies, FamilyOfEveryEnumeratedVariant) {
  const auto variants = EnumerateVariants(Op::kSelectiveScan, false);
  ASSERT_FALSE(variants.empty());
  std::set<std::string> families;
  for (const Variant& v : variants) {
    EXPECT_EQ(FamilyOf(v.Name()), AlgorithmName(v.algorithm)) << v.Name();
    families.insert(FamilyOf(v.Name()));
  }
  EXPECT_TRUE(families.count("sequential"));
  EXPECT_TRUE(families.count("fused"));
}

TEST(SsmFamilies, FamilyOfNames) {
  EXPECT_EQ(FamilyOf("fusedseg_d32_s4_c8_g256"), "fusedseg");
  EXPECT_EQ(FamilyOf("fused_d32_s4_c8"), "fused");
  EXPECT_EQ(FamilyOf("sequential_v1_t64_p1"), "sequential");
  EXPECT_EQ(FamilyOf("chunked_v1_t128_c128"), "chunked");
  EXPECT_EQ(FamilyOf("test_fault"), "test_fault");
  // A family this binary's parser does not know yet: the algorithm prefix.
  EXPECT_EQ(FamilyOf("assoc_d64_w4"), "assoc");
  EXPECT_EQ(FamilyOf("plain"), "plain");
}

TEST(SsmFamilies, SeedImplMapping) {
  EXPECT_EQ(SeedImplOf("sequential"), "scan");
  EXPECT_EQ(SeedImplOf("chunked"), "chunked");
  EXPECT_EQ(SeedImplOf("assoc"), "assoc");
  EXPECT_EQ(SeedImplOf("tscan"), "assoc");
  EXPECT_EQ(SeedImplOf("fused"), "pallas");
  EXPECT_EQ(SeedImplOf("fusedseg"), "pallas");
  EXPECT_EQ(SeedImplOf("lookback"), "lookback");
  // Seed 004's row order: scan, assoc, chunked, pallas.
  EXPECT_TRUE(FamilyBefore("sequential", "assoc"));
  EXPECT_TRUE(FamilyBefore("assoc", "chunked"));
  EXPECT_TRUE(FamilyBefore("chunked", "fused"));
  EXPECT_TRUE(FamilyBefore("fused", "fusedseg"));
  EXPECT_TRUE(FamilyBefore("fusedseg", "zzz"));
  EXPECT_FALSE(FamilyBefore("fused", "fused"));
}

TEST(SsmFamilies, BestPerFamilyPicksFastestOkFirstPass) {
  std::vector<v1::Record> records = {
      MakeRecord(1, "sequential_v1_t64_p1", v1::OK, 5.0),
      MakeRecord(2, "sequential_v1_t128_p1", v1::OK, 4.0),
      MakeRecord(3, "fused_d32_s4_c8", v1::OK, 0.30),
      MakeRecord(4, "fused_d64_s4_c8", v1::WRONG_RESULT, 0.0),
      // The re-timing pass is faster here, but the first pass is what every variant shared.
      MakeRecord(5, "fused_d32_s4_c8", v1::OK, 0.25, "retime"),
      MakeRecord(6, "fused_d32_s8_c8", v1::OK, 0.31),
      // Only failures: an error pick, the lowest id.
      MakeRecord(9, "chunked_v1_t128_c512", v1::OUT_OF_MEMORY, 0.0),
      MakeRecord(8, "chunked_v1_t128_c128", v1::TIMEOUT, 0.0),
      // Only a re-timing record: it counts.
      MakeRecord(10, "fusedseg_d32_s4_c8_g256", v1::OK, 0.20, "retime"),
      // OK but no timing of this mode: not a pick.
      MakeRecord(11, "fusedseg_d32_s4_c8_g1024", v1::OK, 0.0),
  };
  const auto picks = BestPerFamily(records, v1::FWD);
  ASSERT_EQ(picks.size(), 4u);
  EXPECT_EQ(picks[0].family, "sequential");
  EXPECT_TRUE(picks[0].ok);
  EXPECT_EQ(picks[0].record.id(), 2);
  EXPECT_EQ(picks[0].variants, 2);
  EXPECT_EQ(picks[0].variants_ok, 2);
  EXPECT_EQ(picks[1].family, "chunked");
  EXPECT_FALSE(picks[1].ok);
  EXPECT_EQ(picks[1].record.id(), 8);
  EXPECT_EQ(picks[1].record.state(), v1::TIMEOUT);
  EXPECT_EQ(picks[2].family, "fused");
  EXPECT_EQ(picks[2].record.id(), 3);
  EXPECT_EQ(picks[2].variants, 3);
  EXPECT_EQ(picks[2].variants_ok, 2);
  EXPECT_EQ(picks[3].family, "fusedseg");
  EXPECT_EQ(picks[3].record.id(), 10);
}

TEST(SsmFamilies, BestPerFamilyReadsTheModesStats) {
  std::vector<v1::Record> records = {MakeRecord(1, "fused_d32_s4_c8", v1::OK, 1.0, "tuned", v1::FWD_BWD),
                                     MakeRecord(2, "fused_d64_s4_c8", v1::OK, 0.5, "tuned", v1::FWD)};
  auto fb = BestPerFamily(records, v1::FWD_BWD);
  ASSERT_EQ(fb.size(), 1u);
  EXPECT_EQ(fb[0].record.id(), 1);
  auto f = BestPerFamily(records, v1::FWD);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].record.id(), 2);
  EXPECT_TRUE(BestPerFamily({}, v1::FWD).empty());
}

TEST(SsmFamilies, RowsFromPicksFillSeedFields) {
  const SsmShape shape{4, 512, 256, 16};
  std::vector<v1::Record> records = {MakeRecord(1, "sequential_v1_t64_p1", v1::OK, 2.0),
                                     MakeRecord(2, "chunked_v1_t128_c128", v1::OUT_OF_MEMORY, 0.0)};
  const auto rows = RowsFromPicks(BestPerFamily(records, v1::FWD), shape, Mode::kFwd);
  ASSERT_EQ(rows.size(), 2u);
  const Row& ok = rows[0];
  EXPECT_EQ(ok.kind, "");
  EXPECT_EQ(ok.family, "sequential");
  EXPECT_DOUBLE_EQ(ok.median_ms, 2.0);
  EXPECT_DOUBLE_EQ(ok.q1_ms, 1.8);
  EXPECT_DOUBLE_EQ(ok.q3_ms, 2.2);
  EXPECT_EQ(ok.inner, 7);
  EXPECT_DOUBLE_EQ(ok.compile_s, 1.5);
  EXPECT_DOUBLE_EQ(ok.workspace_mb, 3.0);
  // Seed 004's xla_arg_mb at this shape is 4.27 (u, delta, A, Bm, Cm, Dv); its y is 2.0 MiB.
  EXPECT_NEAR(ok.arg_mb, 4.27, 0.005);
  EXPECT_NEAR(ok.out_mb, 2.0 + 0.0625, 1e-9);  // y + h_final
  EXPECT_FALSE(ok.rel_err_vs_scan.has_value());
  const Row& err = rows[1];
  EXPECT_EQ(err.kind, "error");
  EXPECT_EQ(err.state, "OUT_OF_MEMORY");
  EXPECT_EQ(err.error, "why chunked_v1_t128_c128");
}

TEST(SsmFamilies, ArgMbMatchesSeedAtEveryFwdShape) {
  const google::protobuf::Struct doc = ParseJson(SeedText());
  int checked = 0;
  for (const auto& v : doc.fields().at("results").list_value().values()) {
    const auto& r = v.struct_value().fields();
    if (!r.count("xla_arg_mb") || r.at("mode").string_value() != "fwd") continue;
    const auto& s = r.at("shape").struct_value().fields();
    const SsmShape shape{static_cast<int64_t>(s.at("batch").number_value()),
                         static_cast<int64_t>(s.at("seq").number_value()),
                         static_cast<int64_t>(s.at("dim").number_value()),
                         static_cast<int64_t>(s.at("state").number_value())};
    const TensorBytes t = TensorBytesOf(SsmProblem(shape, Mode::kFwd));
    EXPECT_NEAR(Mib(t.args), r.at("xla_arg_mb").number_value(), 0.006) << shape.ToString();
    ++checked;
  }
  EXPECT_GT(checked, 20);
}

TEST(SsmFamilies, MaxLenFamiliesAtTheLargestFwdBwdShape) {
  auto row = [](const char* family, int64_t seq, int64_t dim, Mode mode, double ms, const char* kind = "") {
    Row r;
    r.kind = kind;
    r.family = family;
    r.mode = mode;
    r.shape = {4, seq, dim, 16};
    r.median_ms = ms;
    return r;
  };
  const std::vector<Row> rows = {
      row("fused", 8192, 1024, Mode::kFwd, 0.1),          // fwd: not a candidate
      row("sequential", 8192, 1024, Mode::kFwdBwd, 9.0),
      row("fusedseg", 8192, 1024, Mode::kFwdBwd, 0.7),
      row("fused", 8192, 1024, Mode::kFwdBwd, 0.8),
      row("chunked", 8192, 1024, Mode::kFwdBwd, 0.0, "error"),
      row("fused", 512, 1024, Mode::kFwdBwd, 0.01),       // faster, but a smaller shape
      row("fused", 8192, 512, Mode::kFwdBwd, 0.2),
  };
  const auto best = MaxLenFamilies(rows, false);
  ASSERT_EQ(best.size(), 1u);
  EXPECT_EQ(best[0]->family, "fusedseg");
  const auto all = MaxLenFamilies(rows, true);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0]->family, "fusedseg");
  EXPECT_TRUE(MaxLenFamilies({rows[0]}, true).empty());
}

TEST(SsmFamilies, NeedBytesAndLimits) {
  const Problem p = SsmProblem({4, 131072, 1024, 16}, Mode::kFwdBwd);
  // u, delta, dy, y, du, ddelta: 6 x 2 GiB; plus the (B, L, N) and per-channel tensors.
  const uint64_t tensors = NeedBytes(p, 0);
  EXPECT_GT(tensors, 12ull << 30);
  EXPECT_LT(tensors, (12ull << 30) + (200ull << 20));
  EXPECT_EQ(NeedBytes(p, 1000), tensors + 1000);
  EXPECT_EQ(CapBytes(24.0), 24ull << 30);
  EXPECT_EQ(LengthLimit({4, 0, 1024, 16}), 262144);
  EXPECT_EQ(LengthLimit({1, 0, 256, 16}), 1 << 20);
  EXPECT_EQ(ArgOf({4, 2048, 1024, 16}), "4x2048x1024");
  EXPECT_EQ(ParseNvidiaDriverVersion(
                "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (dvs-builder@U16)"),
            "580.159.04");
  EXPECT_EQ(ParseNvidiaDriverVersion("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 2023"),
            "535.104.05");
  EXPECT_EQ(ParseNvidiaDriverVersion("no version here 1"), "");
}

// ---------------------------------------------------------------- floors

TEST(SsmFloors, MatchDeviceMdAtD1024) {
  // DEVICE.md: about 8 / 32 / 128 us fwd and 16 / 64 / 257 us fwd_bwd, the exp floor.
  const double fwd[] = {0.008, 0.032, 0.128}, fb[] = {0.016, 0.064, 0.257};
  const int64_t seqs[] = {512, 2048, 8192};
  for (int i = 0; i < 3; ++i) {
    const SsmShape s{4, seqs[i], 1024, 16};
    const Floor f = FloorOf(SsmProblem(s, Mode::kFwd));
    const Floor b = FloorOf(SsmProblem(s, Mode::kFwdBwd));
    EXPECT_NEAR(f.ms(), fwd[i], fwd[i] * 0.03) << s.ToString();
    EXPECT_NEAR(b.ms(), fb[i], fb[i] * 0.03) << s.ToString();
    EXPECT_STREQ(f.bound(), "exp");
    // exps: B*L*D*N at 132 x 16 x 1.98 GHz.
    EXPECT_NEAR(f.exp_ms, 4.0 * seqs[i] * 1024 * 16 / (132 * 16 * 1.98e9) * 1e3, 1e-12);
    EXPECT_NEAR(b.exp_ms, 2 * f.exp_ms, 1e-12);
    EXPECT_NEAR(f.bytes_ms, FloorBytes(SsmProblem(s, Mode::kFwd), Mode::kFwd) / 4.25e12 * 1e3, 1e-12);
  }
  FloorModel slow;
  slow.copy_gbps = 1.0;
  EXPECT_STREQ(FloorOf(SsmProblem({4, 512, 256, 16}, Mode::kFwd), slow).bound(), "bytes");
}

TEST(SsmFloors, ReferenceFigures) {
  EXPECT_DOUBLE_EQ(*ReferenceMs({4, 2048, 1024, 16}, Mode::kFwd), 0.349);
  EXPECT_DOUBLE_EQ(*ReferenceMs({4, 2048, 1024, 16}, Mode::kFwdBwd), 1.168);
  EXPECT_DOUBLE_EQ(*ReferenceMs({4, 512, 256, 16}, Mode::kFwd), 0.071);
  EXPECT_DOUBLE_EQ(*ReferenceMs({4, 8192, 512, 16}, Mode::kFwdBwd), 2.453);
  EXPECT_FALSE(ReferenceMs({4, 4096, 1024, 16}, Mode::kFwd).has_value());
  EXPECT_FALSE(ReferenceMs({2, 2048, 1024, 16}, Mode::kFwd).has_value());
  EXPECT_FALSE(ReferenceMs({4, 2048, 1024, 32}, Mode::kFwd).has_value());
}

// ---------------------------------------------------------------- seed ordering

TEST(SsmSeed, OrderingFromSeed004) {
  auto seed = ParseSeedOrdering(SeedText());
  ASSERT_TRUE(seed.ok()) << seed.status().ToString();
  EXPECT_EQ(seed->gpu, "NVIDIA GeForce RTX 3090");
  const auto* fwd = seed->Find(Mode::kFwd, {4, 2048, 1024, 16});
  ASSERT_NE(fwd, nullptr);
  ASSERT_EQ(fwd->size(), 4u);
  EXPECT_EQ((*fwd)[0].impl, "pallas");
  EXPECT_EQ((*fwd)[3].impl, "scan");
  EXPECT_EQ(FormatSeedOrdering(*fwd), "pallas 0.639 < assoc 5.618 < chunked 9.751 < scan 13.987");
  // The OOM row comes last, as an error.
  const auto* big = seed->Find(Mode::kFwdBwd, {4, 8192, 1024, 16});
  ASSERT_NE(big, nullptr);
  ASSERT_EQ(big->size(), 4u);
  EXPECT_EQ(big->back().impl, "scan");
  EXPECT_FALSE(big->back().median_ms.has_value());
  EXPECT_EQ(FormatSeedOrdering(*big), "pallas 9.158 < chunked 124.558 < assoc 147.544; scan: OOM");
  // device_peak and max_len rows are not timing rows.
  for (const auto& [key, list] : seed->entries) EXPECT_LE(list.size(), 4u);
  EXPECT_EQ(seed->entries.size(), 18u);
  EXPECT_EQ(seed->Find(Mode::kFwd, {4, 4096, 1024, 16}), nullptr);
}

TEST(SsmSeed, RejectsOtherSchemas) {
  EXPECT_FALSE(ParseSeedOrdering("not json").ok());
  EXPECT_FALSE(ParseSeedOrdering(R"({"rows": []})").ok());
  EXPECT_FALSE(ParseSeedOrdering(R"({"results": [{"impl": "scan"}]})").ok());
  EXPECT_FALSE(ReadSeedOrdering("/nonexistent/seed.json").ok());
}

// ---------------------------------------------------------------- JSON

SsmReport DryReport() {
  auto options = ParseOptions({"--dry-run"});
  EXPECT_TRUE(options.ok());
  return DryRunReport(*options);
}

TEST(SsmJson, DryRunHasEveryRowKind) {
  const SsmReport report = DryReport();
  std::map<std::string, int> kinds;
  for (const Row& r : report.rows) kinds[r.kind.empty() ? "timing" : r.kind]++;
  EXPECT_GT(kinds["timing"], 9 * 2 * 3);  // 9 shapes x 2 modes x >= 3 families
  EXPECT_EQ(kinds["error"], 1);           // the synthetic OOM family
  EXPECT_EQ(kinds["max_len"], 1);
  EXPECT_GT(kinds["device_peak"], 8);
  for (const Row& r : report.rows) {
    if (r.kind != "max_len") continue;
    // 24 GiB: L = 131072 fits (12 GiB of (B, L, D) tensors + workspace), 262144 does not.
    EXPECT_GE(r.max_seq, 65536);
    EXPECT_EQ(r.limit, 262144);
    EXPECT_NE(r.first_failure.find("over the cap"), std::string::npos) << r.first_failure;
    EXPECT_EQ(r.first_failure_seq, 2 * r.max_seq);
  }
}

TEST(SsmJson, KeysCoverSeed004PerRowKind) {
  const google::protobuf::Struct seed = ParseJson(SeedText());
  const google::protobuf::Struct ours = ParseJson(ReportToJson(DryReport()));
  // Top level and config.
  EXPECT_EQ(Keys(ours), Keys(seed));
  const auto config = Keys(ours.fields().at("config").struct_value());
  for (const char* k : {"batch", "state", "dtype", "note", "note_runs", "impl_map", "mem_cap_gb"}) {
    EXPECT_TRUE(config.count(k)) << k;
  }
  const auto device = Keys(ours.fields().at("device").struct_value());
  for (const char* k : {"gpu", "device_kind", "driver", "nvrtc"}) EXPECT_TRUE(device.count(k)) << k;
  // Every key of every seed row kind, XLA's memory fields aside (ours have honest names).
  std::map<std::string, std::set<std::string>> seed_keys, our_keys;
  auto collect = [](const google::protobuf::Struct& doc, std::map<std::string, std::set<std::string>>* out) {
    for (const auto& v : doc.fields().at("results").list_value().values()) {
      const auto& row = v.struct_value();
      auto& keys = (*out)[KindOf(row)];
      for (const auto& k : Keys(row)) keys.insert(k);
      if (KindOf(row) == "timing" || KindOf(row) == "device_peak") {
        EXPECT_EQ(Keys(row.fields().at("shape").struct_value()),
                  (std::set<std::string>{"batch", "seq", "dim", "state"}));
      }
    }
  };
  collect(seed, &seed_keys);
  collect(ours, &our_keys);
  ASSERT_EQ(seed_keys.size(), 4u);
  for (const auto& [kind, keys] : seed_keys) {
    ASSERT_TRUE(our_keys.count(kind)) << kind;
    for (const std::string& k : keys) {
      if (k.rfind("xla_", 0) == 0) continue;
      EXPECT_TRUE(our_keys[kind].count(k)) << kind << " row lacks seed 004's " << k;
    }
  }
  for (const char* k : {"workspace_mb", "arg_mb", "out_mb", "variant", "seed_impl", "rel_err_vs_ref"}) {
    EXPECT_TRUE(our_keys["timing"].count(k)) << k;
  }
  for (const char* k : {"baseline_mb", "delta_mb"}) EXPECT_TRUE(our_keys["device_peak"].count(k)) << k;
}

TEST(SsmJson, RowValuesRoundTrip) {
  SsmReport report;
  Row t;
  t.family = "fused";
  t.variant = "fused_d32_s4_c8";
  t.mode = Mode::kFwdBwd;
  t.shape = {4, 2048, 512, 16};
  t.median_ms = 0.123456789;
  t.q1_ms = 0.12;
  t.q3_ms = 0.13;
  t.inner = 42;
  t.compile_s = 1.25;
  t.rel_err_vs_scan = 3.5e-7;
  report.rows.push_back(t);
  Row e;
  e.kind = "error";
  e.family = "sequential";
  e.mode = Mode::kFwdBwd;
  e.shape = {4, 8192, 1024, 16};
  e.state = "OUT_OF_MEMORY";
  e.error = "cuMemAlloc failed";
  report.rows.push_back(e);
  const auto doc = ParseJson(ReportToJson(report));
  const auto& rows = doc.fields().at("results").list_value().values();
  ASSERT_EQ(rows.size(), 2);
  const auto& r0 = rows[0].struct_value().fields();
  EXPECT_EQ(r0.at("impl").string_value(), "fused");
  EXPECT_EQ(r0.at("seed_impl").string_value(), "pallas");
  EXPECT_EQ(r0.at("mode").string_value(), "fwd_bwd");
  EXPECT_DOUBLE_EQ(r0.at("median_ms").number_value(), 0.123456789);
  EXPECT_EQ(r0.at("inner").number_value(), 42);
  EXPECT_DOUBLE_EQ(r0.at("rel_err_vs_scan").number_value(), 3.5e-7);
  EXPECT_EQ(r0.at("shape").struct_value().fields().at("seq").number_value(), 2048);
  const auto& r1 = rows[1].struct_value().fields();
  EXPECT_EQ(r1.at("error").string_value(), "OUT_OF_MEMORY: cuMemAlloc failed");
  EXPECT_EQ(r1.at("seed_impl").string_value(), "scan");
  EXPECT_FALSE(r1.count("median_ms"));
}

TEST(SsmJson, TableShowsRankingSeedAndTargets) {
  auto seed = ParseSeedOrdering(SeedText());
  ASSERT_TRUE(seed.ok());
  const std::string table = FormatTable(DryReport(), &*seed);
  EXPECT_NE(table.find("L=2048 D=1024  fwd"), std::string::npos);
  EXPECT_NE(table.find("seed 004: pallas 0.639 < assoc 5.618 < chunked 9.751 < scan 13.987"), std::string::npos);
  // The dry run's synthetic figures rank the families it enumerates: the
  // fused single-pass ones first, the sequential scan last, each named beside
  // its seed implementation.
  const size_t ours = table.find("ours:     fusedseg < fused < ");
  ASSERT_NE(ours, std::string::npos) << table;
  const std::string line = table.substr(ours, table.find('\n', ours) - ours);
  EXPECT_NE(line.find("< sequential   (as seed impls: pallas < pallas < "), std::string::npos) << line;
  EXPECT_NE(line.find("< scan)"), std::string::npos) << line;
  EXPECT_NE(table.find("chunked: OUT_OF_MEMORY"), std::string::npos);
  EXPECT_NE(table.find("speedup"), std::string::npos);
  EXPECT_NE(table.find("max_len ("), std::string::npos);
  EXPECT_NE(table.find("device_peak"), std::string::npos);
  EXPECT_NE(table.find("DRY RUN"), std::string::npos);
}

// ---------------------------------------------------------------- options

TEST(SsmOptions, Defaults) {
  auto o = ParseOptions({});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  ASSERT_EQ(o->shapes.size(), 9u);
  EXPECT_EQ(o->shapes.front(), (SsmShape{4, 512, 256, 16}));
  EXPECT_EQ(o->shapes.back(), (SsmShape{4, 8192, 1024, 16}));
  EXPECT_EQ(o->modes, (std::vector<Mode>{Mode::kFwd, Mode::kFwdBwd}));
  EXPECT_EQ(o->peak_shapes.size(), 2u);
  EXPECT_DOUBLE_EQ(o->mem_cap_gib, 24.0);
  EXPECT_TRUE(o->tune);
  EXPECT_TRUE(o->max_len);
  EXPECT_FALSE(o->child);
}

TEST(SsmOptions, Flags) {
  auto o = ParseOptions({"--shapes", "4x1024x512", "--modes", "fwd_bwd", "--peak-shapes", "none", "--mem-cap-gb",
                         "80", "--no-tune", "--state", "32"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->shapes, (std::vector<SsmShape>{{4, 1024, 512, 32}}));
  EXPECT_EQ(o->modes, (std::vector<Mode>{Mode::kFwdBwd}));
  EXPECT_TRUE(o->peak_shapes.empty());
  EXPECT_DOUBLE_EQ(o->mem_cap_gib, 80.0);
  EXPECT_FALSE(o->tune);
  EXPECT_FALSE(ParseOptions({"--modes", "bwd"}).ok());
  EXPECT_FALSE(ParseOptions({"--state", "12"}).ok());
  EXPECT_FALSE(ParseOptions({"--max-len-start", "3000"}).ok());
  EXPECT_FALSE(ParseOptions({"--mem-cap-gb", "-1"}).ok());
  EXPECT_FALSE(ParseOptions({"--frobnicate"}).ok());
  EXPECT_FALSE(ParseOptions({"--shape", "4x512x256"}).ok()) << "child-only flag";
  EXPECT_DOUBLE_EQ(ParseOptions({})->deadline_s, 0.0);
  EXPECT_DOUBLE_EQ(ParseOptions({"--deadline-s", "420"})->deadline_s, 420.0);
  EXPECT_FALSE(ParseOptions({"--deadline-s", "0"}).ok());
}

TEST(SsmOptions, ChildFlags) {
  EXPECT_FALSE(ParseOptions({"--child"}).ok());
  auto o = ParseOptions({"--child", "--candidate", "c.pb", "--child-out", "r.pb", "--shape", "4x65536x1024", "--mode",
                         "fwd_bwd"});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_TRUE(o->child);
  EXPECT_EQ(o->child_shape, (SsmShape{4, 65536, 1024, 16}));
  EXPECT_EQ(o->child_mode, Mode::kFwdBwd);
}

// ---------------------------------------------------------------- direct-run helpers

TEST(SsmDirectRun, ComparedAndUsedTensors) {
  const Problem fwd = SsmProblem({4, 512, 256, 16}, Mode::kFwd);
  const auto tensors = OpIoFor(Op::kSelectiveScan).Tensors(fwd);
  auto names = [&](const std::vector<size_t>& idx) {
    std::vector<std::string> out;
    for (size_t i : idx) out.push_back(tensors[i].name);
    return out;
  };
  EXPECT_EQ(names(ComparedTensors(tensors, Mode::kFwd)), (std::vector<std::string>{"y"}));
  EXPECT_EQ(names(ComparedTensors(tensors, Mode::kFwdBwd)),
            (std::vector<std::string>{"du", "ddelta", "dA", "dBm", "dCm", "dDv"}));
  uint64_t fwd_bytes = 0, fb_bytes = 0;
  for (const TensorSpec& t : tensors) {
    if (UsedInMode(t, Mode::kFwd)) fwd_bytes += t.bytes();
    if (UsedInMode(t, Mode::kFwdBwd)) fb_bytes += t.bytes();
  }
  const TensorBytes f = TensorBytesOf(fwd), b = TensorBytesOf(SsmProblem({4, 512, 256, 16}, Mode::kFwdBwd));
  EXPECT_EQ(fwd_bytes, f.args + f.outs);
  EXPECT_EQ(fb_bytes, b.args + b.outs);
}

TEST(SsmDirectRun, RelErrVsScan) {
  EXPECT_DOUBLE_EQ(RelErrVsScan({{1.0, 2.0}}, {{1.0, 2.0}}), 0.0);
  EXPECT_DOUBLE_EQ(RelErrVsScan({{1.0, 2.5}}, {{1.0, 2.0}}), 0.25);
  // Each tensor on its own scale; the worst counts.
  EXPECT_NEAR(RelErrVsScan({{1.0}, {0.011}}, {{1.0}, {0.01}}), 0.1, 1e-12);
  EXPECT_TRUE(std::isinf(RelErrVsScan({{NAN}}, {{1.0}})));
  EXPECT_TRUE(std::isinf(RelErrVsScan({{1.0}}, {{1.0}, {1.0}})));
  EXPECT_TRUE(std::isinf(RelErrVsScan({{1.0}}, {{0.0}})));
}

}  // namespace
}  // namespace scantune::ssmbench
