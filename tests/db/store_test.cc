// Store tests on a real SQLite file in a fresh temporary directory per test.
#include "db/store.h"

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <thread>

#include "common/variant.h"
#include "db/schema.h"

namespace scantune {
namespace {

namespace fs = std::filesystem;
using google::protobuf::util::MessageDifferencer;

// A raw second connection, for what the Store API deliberately does not expose
// (journal mode, the meta table, fault injection through triggers).
class RawDb {
 public:
  explicit RawDb(const std::string& path) {
    EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE, nullptr), SQLITE_OK);
    sqlite3_busy_timeout(db_, 5000);
  }
  ~RawDb() { sqlite3_close(db_); }

  void Exec(const std::string& sql) {
    char* error = nullptr;
    int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error);
    EXPECT_EQ(rc, SQLITE_OK) << sql << ": " << (error ? error : "");
    sqlite3_free(error);
  }

  // The first column of the first row, as text ("" when there is no row).
  std::string QueryText(const std::string& sql) {
    sqlite3_stmt* stmt = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK) << sqlite3_errmsg(db_);
    std::string result;
    int rc = sqlite3_step(stmt);
    EXPECT_TRUE(rc == SQLITE_ROW || rc == SQLITE_DONE) << sql << ": " << sqlite3_errmsg(db_);
    if (rc == SQLITE_ROW && sqlite3_column_text(stmt, 0)) {
      result = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
    }
    sqlite3_finalize(stmt);
    return result;
  }
  int64_t QueryInt(const std::string& sql) { return std::stoll(QueryText(sql)); }

 private:
  sqlite3* db_ = nullptr;
};

std::string ReadFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

v1::DeviceInfo MakeDevice(const std::string& name = "NVIDIA H200", const std::string& uuid = "GPU-aaaa") {
  v1::DeviceInfo d;
  d.set_name(name);
  d.set_uuid(uuid);
  d.set_ordinal(0);
  d.set_cc_major(9);
  d.set_cc_minor(0);
  d.set_sm_count(132);
  d.set_memory_bytes(uint64_t{150} << 30);  // above 2^32, to catch truncation
  d.set_sm_clock_khz(1980000);
  d.set_memory_clock_khz(3201000);
  d.set_memory_bus_width_bits(6144);
  d.set_l2_bytes(60 << 20);
  d.set_max_shared_per_block_bytes(232448);
  d.set_max_registers_per_block(65536);
  d.set_driver_version(13000);
  d.set_nvrtc_version("13.0");
  return d;
}

v1::Problem MakeProblem(uint32_t b = 4, uint32_t l = 2048, uint32_t w = 2048, v1::DType dtype = v1::BF16,
                        v1::Mode mode = v1::FWD_BWD, bool h0 = false) {
  v1::Problem p;
  p.set_op("linear_scan");
  p.mutable_shape()->set_batch(b);
  p.mutable_shape()->set_length(l);
  p.mutable_shape()->set_width(w);
  p.set_dtype(dtype);
  p.set_mode(mode);
  p.set_has_h0(h0);
  return p;
}

Problem ToProblem(const v1::Problem& proto) {
  Problem p;
  p.shape = {proto.shape().batch(), proto.shape().length(), proto.shape().width()};
  p.dtype = proto.dtype() == v1::FP32 ? DType::kF32 : proto.dtype() == v1::BF16 ? DType::kBF16 : DType::kF16;
  p.mode = proto.mode() == v1::FWD ? Mode::kFwd : proto.mode() == v1::BWD ? Mode::kBwd : Mode::kFwdBwd;
  p.has_h0 = proto.has_h0();
  return p;
}

void FillStats(v1::Stats* s, double base) {
  for (int i = 0; i < 7; ++i) s->add_samples_ms(base + 0.01 * i);
  s->set_median_ms(base + 0.03);
  s->set_mean_ms(base + 0.031);
  s->set_std_ms(0.02);
  s->set_mad_ms(0.01);
  s->set_min_ms(base);
  s->set_max_ms(base + 0.06);
  s->set_q1_ms(base + 0.015);
  s->set_q3_ms(base + 0.045);
  s->set_inner_count(37);
  s->set_input_sets(3);
}

std::string VariantName(int threads) {
  Variant v;
  v.threads = threads;
  return v.Name();
}

// A record with every field set, so a round trip that drops one shows up.
v1::Record MakeRecord(const std::string& variant, v1::ResultState state = v1::OK,
                      const v1::Problem& problem = MakeProblem(), const v1::DeviceInfo& device = MakeDevice(),
                      const std::string& source_hash = "src1") {
  v1::Record r;
  *r.mutable_device() = device;
  r.set_source_hash(source_hash);
  r.set_daemon_version("0.1.0");
  *r.mutable_problem() = problem;
  r.set_variant(variant);
  r.set_state(state);
  r.set_detail(state == v1::OK ? "" : "max rel err 3e-2 at index 17");
  FillStats(r.mutable_fwd(), 1.0);
  FillStats(r.mutable_bwd(), 2.0);
  FillStats(r.mutable_fwd_bwd(), 3.0);
  for (int round = 0; round < 2; ++round) {
    v1::Round* rd = r.add_rounds();
    rd->set_round(round);
    rd->set_order_index(1 - round);
    rd->add_fwd_ms(1.01 + round);
    rd->add_bwd_ms(2.02 + round);
    rd->add_fwd_bwd_ms(3.03 + round);
    rd->add_fwd_bwd_ms(3.04 + round);
  }
  r.mutable_memory()->set_baseline_bytes(uint64_t{5} << 32);
  r.mutable_memory()->set_peak_bytes((uint64_t{5} << 32) + 123456789);
  r.mutable_memory()->set_delta_bytes(123456789);
  r.mutable_memory()->set_workspace_bytes(4096);
  r.set_compile_ms(412.5);
  r.set_rel_err(3.2e-6);
  r.set_bytes_moved(uint64_t{1} << 33);
  r.set_gbps(2864.5);
  r.set_pct_of_copy(71.2);
  r.set_parameters(0);
  r.set_dynamic_control_values_per_token(0);
  r.set_materialized_state_sized_transition(false);
  r.set_created_at("2025-11-29T19:45:00.000Z");
  r.set_origin("tuned");
  r.set_job_id(uint64_t{1} << 40);
  return r;
}

v1::Selection MakeSelection(const v1::Record& winner, const std::string& runner_up = "") {
  v1::Selection s;
  s.set_device_model(winner.device().name());
  *s.mutable_problem() = winner.problem();
  s.set_variant(winner.variant());
  s.set_median_ms(winner.fwd_bwd().median_ms());
  *s.mutable_tuned_shape() = winner.problem().shape();
  s.set_runner_up(runner_up);
  s.set_margin_pct(4.5);
  s.set_decided_by("faster");
  return s;
}

v1::ListSelectionsRequest Request(const v1::RecordFilter& filter, bool deterministic_only = false, int page_size = 0,
                                  const std::string& token = "", bool history = false) {
  v1::ListSelectionsRequest request;
  *request.mutable_filter() = filter;
  request.set_deterministic_only(deterministic_only);
  request.set_page_size(page_size);
  request.set_page_token(token);
  request.set_history(history);
  return request;
}

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::path(::testing::TempDir()) / "scantune_store_XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    path_ = (fs::path(dir_) / "scantune.db").string();
    OpenStore();
  }
  void TearDown() override {
    store_.reset();
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }

  void OpenStore() {
    auto store = Store::Open(path_);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
  }

  std::vector<int64_t> Commit(const std::vector<v1::Record>& records,
                              const std::optional<v1::Selection>& selection = std::nullopt, int winner = 0) {
    auto ids = store_->CommitResults(records, selection, winner);
    EXPECT_TRUE(ids.ok()) << ids.status().ToString();
    return ids.ok() ? *ids : std::vector<int64_t>{};
  }

  std::vector<v1::Record> ListAll(const v1::RecordFilter& filter = {}) {
    std::vector<v1::Record> all;
    std::string token;
    do {
      auto page = store_->ListRecords(filter, 1000, token);
      EXPECT_TRUE(page.ok()) << page.status().ToString();
      if (!page.ok()) break;
      all.insert(all.end(), page->records.begin(), page->records.end());
      token = page->next_page_token;
    } while (!token.empty());
    return all;
  }

  std::string dir_;
  std::string path_;
  std::unique_ptr<Store> store_;
};

// ---- open, schema, settings ---------------------------------------------------

TEST_F(StoreTest, OpenCreatesFileWithCurrentSchemaVersion) {
  EXPECT_TRUE(fs::exists(path_));
  EXPECT_EQ(store_->schema_version(), Store::kSchemaVersion);
  EXPECT_EQ(Store::kSchemaVersion, 3);
  RawDb raw(path_);
  EXPECT_EQ(raw.QueryText("SELECT value FROM meta WHERE key = 'schema_version'"), "3");
  for (const char* table :
       {"meta", "devices", "variants", "compile_cache", "records", "selections", "selection_history"}) {
    EXPECT_EQ(raw.QueryInt(std::string("SELECT count(*) FROM sqlite_master WHERE type='table' AND name='") +
                           table + "'"),
              1)
        << table;
  }
}

TEST_F(StoreTest, RefusesInMemoryAndEmptyPaths) {
  for (const std::string path : {":memory:", "", "file::memory:?cache=shared"}) {
    auto store = Store::Open(path);
    ASSERT_FALSE(store.ok()) << path;
    EXPECT_EQ(store.status().code(), StatusCode::kInvalidArgument) << path;
  }
}

TEST_F(StoreTest, WalModeIsOnInTheFile) {
  RawDb raw(path_);
  // journal_mode=WAL is persistent: a second connection reads it back from the file.
  EXPECT_EQ(raw.QueryText("PRAGMA journal_mode"), "wal");
}

TEST_F(StoreTest, ReopenKeepsData) {
  std::vector<int64_t> ids = Commit({MakeRecord(VariantName(128))}, MakeSelection(MakeRecord(VariantName(128))));
  ASSERT_EQ(ids.size(), 1u);
  ASSERT_TRUE(store_->UpsertDevice(MakeDevice()).ok());
  store_.reset();
  OpenStore();
  EXPECT_EQ(store_->schema_version(), Store::kSchemaVersion);
  auto record = store_->GetRecord(ids[0]);
  ASSERT_TRUE(record.ok()) << record.status().ToString();
  EXPECT_EQ(record->variant(), VariantName(128));
  auto selection = store_->GetSelection("NVIDIA H200", ToProblem(MakeProblem()));
  ASSERT_TRUE(selection.ok());
  ASSERT_TRUE(selection->has_value());
  EXPECT_EQ((*selection)->record_id(), ids[0]);
  auto devices = store_->ListDevices();
  ASSERT_TRUE(devices.ok());
  EXPECT_EQ(devices->size(), 1u);
}

TEST_F(StoreTest, NewerSchemaVersionIsRefusedAndFileUntouched) {
  Commit({MakeRecord(VariantName(128))});
  store_.reset();
  {
    RawDb raw(path_);
    raw.Exec("UPDATE meta SET value = '" + std::to_string(Store::kSchemaVersion + 1) +
             "' WHERE key = 'schema_version'");
  }
  const std::string before = ReadFileBytes(path_);
  auto store = Store::Open(path_);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(store.status().message().find("schema version " + std::to_string(Store::kSchemaVersion + 1)),
            std::string::npos)
      << store.status().message();
  EXPECT_EQ(ReadFileBytes(path_), before);
  RawDb raw(path_);
  EXPECT_EQ(raw.QueryInt("SELECT count(*) FROM records"), 1);
}

// A version-1 file (selections keyed without `deterministic`, no history)
// opens as the current version with its selections kept as the ordinary ones
// and as the first rows of the history; the rebuilt key then holds a
// deterministic selection beside each.
TEST_F(StoreTest, Version1FileMigratesKeepingItsSelectionsAsOrdinary) {
  v1::Record a = MakeRecord(VariantName(128));
  v1::Record b = MakeRecord(VariantName(256));
  const std::vector<int64_t> ids = Commit({a, b}, MakeSelection(b, a.variant()), 1);
  ASSERT_EQ(ids.size(), 2u);
  v1::Record fwd = MakeRecord(VariantName(512), v1::OK, MakeProblem(4, 2048, 2048, v1::BF16, v1::FWD));
  const std::vector<int64_t> fwd_ids = Commit({fwd}, MakeSelection(fwd), 0);
  ASSERT_EQ(fwd_ids.size(), 1u);
  store_.reset();
  {
    // Version 2 changed only the selections table: rebuild it from version 1's
    // statements with the same rows, and mark the file version 1.
    RawDb raw(path_);
    raw.Exec("ALTER TABLE selections RENAME TO selections_of_v2");
    raw.Exec("DROP INDEX selections_by_family");
    raw.Exec(db::kCreateSelections);
    raw.Exec(db::kCreateSelectionsFamilyIndex);
    const std::string columns =
        "device_model, op, batch, length, width, dtype, mode, has_h0, variant, record_id, median_ms, runner_up,"
        " margin_pct, decided_by, fingerprint, updated_at, selection";
    raw.Exec("INSERT INTO selections (" + columns + ") SELECT " + columns + " FROM selections_of_v2");
    raw.Exec("DROP TABLE selections_of_v2");
    raw.Exec("DROP TABLE selection_history");
    raw.Exec("UPDATE meta SET value = '1' WHERE key = 'schema_version'");
    ASSERT_EQ(raw.QueryInt("SELECT count(*) FROM pragma_table_info('selections') WHERE name = 'deterministic'"), 0);
    ASSERT_EQ(raw.QueryInt("SELECT count(*) FROM selections"), 2);
  }

  OpenStore();
  EXPECT_EQ(store_->schema_version(), Store::kSchemaVersion);
  {
    RawDb raw(path_);
    EXPECT_EQ(raw.QueryText("SELECT value FROM meta WHERE key = 'schema_version'"), std::to_string(Store::kSchemaVersion));
    EXPECT_EQ(raw.QueryInt("SELECT count(*) FROM selection_history WHERE deterministic = 0"), 2);
    EXPECT_EQ(raw.QueryInt("SELECT count(*) FROM selections WHERE deterministic = 0"), 2);
    EXPECT_EQ(raw.QueryInt("SELECT count(*) FROM selections"), 2);
    EXPECT_EQ(raw.QueryInt("SELECT count(*) FROM sqlite_master WHERE name = 'selections_of_v2'"), 0);
    EXPECT_NE(raw.QueryText("SELECT sql FROM sqlite_master WHERE type = 'index' AND name = 'selections_by_family'")
                  .find("deterministic"),
              std::string::npos);
  }
  const Problem problem = ToProblem(MakeProblem());
  auto ordinary = store_->GetSelection("NVIDIA H200", problem, false);
  ASSERT_TRUE(ordinary.ok()) << ordinary.status().ToString();
  ASSERT_TRUE(ordinary->has_value());
  EXPECT_EQ((*ordinary)->variant(), b.variant());
  EXPECT_EQ((*ordinary)->record_id(), ids[1]);
  EXPECT_EQ((*ordinary)->runner_up(), a.variant());
  EXPECT_FALSE((*ordinary)->deterministic());
  auto fwd_selection = store_->GetSelection("NVIDIA H200", ToProblem(fwd.problem()), false);
  ASSERT_TRUE(fwd_selection.ok() && fwd_selection->has_value());
  EXPECT_EQ((*fwd_selection)->record_id(), fwd_ids[0]);
  auto none = store_->GetSelection("NVIDIA H200", problem, true);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_FALSE(none->has_value());

  v1::Record c = MakeRecord(VariantName(64));
  v1::Selection deterministic = MakeSelection(c);
  deterministic.set_deterministic(true);
  const std::vector<int64_t> c_ids = Commit({c}, deterministic, 0);
  ASSERT_EQ(c_ids.size(), 1u);
  auto both = store_->GetSelection("NVIDIA H200", problem, true);
  ASSERT_TRUE(both.ok() && both->has_value());
  EXPECT_EQ((*both)->record_id(), c_ids[0]);
  ordinary = store_->GetSelection("NVIDIA H200", problem, false);
  ASSERT_TRUE(ordinary.ok() && ordinary->has_value());
  EXPECT_EQ((*ordinary)->record_id(), ids[1]) << "the migrated row is kept beside the deterministic one";

  v1::ListSelectionsRequest history;
  history.set_history(true);
  auto decisions = store_->ListAllSelections(history);
  ASSERT_TRUE(decisions.ok()) << decisions.status().ToString();
  ASSERT_EQ(decisions->selections.size(), 3u);
  EXPECT_EQ(decisions->selections[0].record_id(), c_ids[0]);
  std::set<int64_t> migrated = {decisions->selections[1].record_id(), decisions->selections[2].record_id()};
  EXPECT_EQ(migrated, (std::set<int64_t>{ids[1], fwd_ids[0]}));
  for (const v1::Selection& s : decisions->selections) EXPECT_FALSE(s.superseded()) << s.variant();
}

TEST_F(StoreTest, ForeignDatabaseIsRefused) {
  const std::string other = (fs::path(dir_) / "other.db").string();
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(other.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE t (x)", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  auto store = Store::Open(other);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kFailedPrecondition) << store.status().ToString();
}

TEST_F(StoreTest, FileThatIsNotADatabaseIsAnError) {
  const std::string junk = (fs::path(dir_) / "junk.db").string();
  std::ofstream(junk) << std::string(8192, 'x');
  auto store = Store::Open(junk);
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find("not a database"), std::string::npos) << store.status().ToString();
}

// ---- devices ------------------------------------------------------------------

TEST_F(StoreTest, DevicesUpsertAndList) {
  v1::DeviceInfo a = MakeDevice("NVIDIA H200", "GPU-a");
  v1::DeviceInfo b = MakeDevice("NVIDIA H200", "GPU-b");
  b.set_ordinal(1);
  ASSERT_TRUE(store_->UpsertDevice(a).ok());
  ASSERT_TRUE(store_->UpsertDevice(b).ok());
  RawDb raw(path_);
  const std::string first_seen = raw.QueryText("SELECT first_seen FROM devices WHERE uuid = 'GPU-a'");

  a.set_driver_version(13010);
  a.set_nvrtc_version("13.1");
  ASSERT_TRUE(store_->UpsertDevice(a).ok());
  auto devices = store_->ListDevices();
  ASSERT_TRUE(devices.ok()) << devices.status().ToString();
  ASSERT_EQ(devices->size(), 2u);
  auto it = std::find_if(devices->begin(), devices->end(), [](const auto& d) { return d.uuid() == "GPU-a"; });
  ASSERT_NE(it, devices->end());
  EXPECT_TRUE(MessageDifferencer::Equals(*it, a)) << it->DebugString();
  EXPECT_EQ(raw.QueryInt("SELECT driver_version FROM devices WHERE uuid = 'GPU-a'"), 13010);
  EXPECT_EQ(raw.QueryInt("SELECT memory_bytes FROM devices WHERE uuid = 'GPU-a'"),
            static_cast<int64_t>(a.memory_bytes()));
  EXPECT_EQ(raw.QueryText("SELECT first_seen FROM devices WHERE uuid = 'GPU-a'"), first_seen);

  v1::DeviceInfo nameless;
  EXPECT_EQ(store_->UpsertDevice(nameless).code(), StatusCode::kInvalidArgument);
}

// ---- compile cache --------------------------------------------------------------

TEST_F(StoreTest, CompileCacheRoundTrip) {
  auto missing = store_->GetCompiled("key-1");
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->has_value());

  CachedCompile entry;
  entry.cache_key = "key-1";
  entry.variant = VariantName(256);
  entry.arch = "sm_90";
  entry.cubin = std::string("\x7f" "ELF\0\0\x01\x02", 8) + std::string(100000, '\xab');  // binary, embedded NULs
  entry.lowered_names_json = R"({"scan<float,128>": "_Z4scanIfLi128EEvv"})";
  entry.log = "ptxas info: 32 registers";
  entry.compile_ms = 123.25;
  entry.state = v1::OK;
  ASSERT_TRUE(store_->PutCompiled(entry).ok());

  auto found = store_->GetCompiled("key-1");
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  ASSERT_TRUE(found->has_value());
  const CachedCompile& got = **found;
  EXPECT_EQ(got.cache_key, entry.cache_key);
  EXPECT_EQ(got.variant, entry.variant);
  EXPECT_EQ(got.arch, entry.arch);
  EXPECT_EQ(got.cubin, entry.cubin);
  EXPECT_EQ(got.lowered_names_json, entry.lowered_names_json);
  EXPECT_EQ(got.log, entry.log);
  EXPECT_EQ(got.compile_ms, entry.compile_ms);
  EXPECT_EQ(got.state, entry.state);

  // A failed compile is cached too (never retried blindly), replacing the entry.
  entry.cubin.clear();
  entry.log = "error: too many resources requested";
  entry.state = v1::COMPILE_FAILED;
  ASSERT_TRUE(store_->PutCompiled(entry).ok());
  found = store_->GetCompiled("key-1");
  ASSERT_TRUE(found.ok() && found->has_value());
  EXPECT_EQ((*found)->state, v1::COMPILE_FAILED);
  EXPECT_EQ((*found)->cubin, "");
  EXPECT_EQ((*found)->log, entry.log);
}

// ---- records and selections -------------------------------------------------------

TEST_F(StoreTest, CommitAndGetRecordRoundTripsEveryField) {
  v1::Record ok = MakeRecord(VariantName(128));
  v1::Record failed = MakeRecord(VariantName(256), v1::WRONG_RESULT);
  failed.set_created_at("");  // the store stamps it
  std::vector<int64_t> ids = Commit({ok, failed});
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_LT(ids[0], ids[1]);

  auto got = store_->GetRecord(ids[0]);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  v1::Record expected = ok;
  expected.set_id(ids[0]);
  std::string diff;
  MessageDifferencer differencer;
  differencer.ReportDifferencesToString(&diff);
  EXPECT_TRUE(differencer.Compare(expected, *got)) << diff;
  EXPECT_EQ(got->fwd_bwd().samples_ms_size(), 7);
  EXPECT_EQ(got->rounds_size(), 2);
  EXPECT_EQ(got->memory().peak_bytes(), ok.memory().peak_bytes());

  auto second = store_->GetRecord(ids[1]);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->id(), ids[1]);
  EXPECT_EQ(second->state(), v1::WRONG_RESULT);
  EXPECT_EQ(second->detail(), failed.detail());
  EXPECT_FALSE(second->created_at().empty());

  // The filter columns agree with the blob.
  RawDb raw(path_);
  const std::string where = " FROM records WHERE id = " + std::to_string(ids[0]);
  EXPECT_EQ(raw.QueryText("SELECT device_model" + where), "NVIDIA H200");
  EXPECT_EQ(raw.QueryText("SELECT dtype" + where), "BF16");
  EXPECT_EQ(raw.QueryText("SELECT mode" + where), "FWD_BWD");
  EXPECT_EQ(raw.QueryText("SELECT state" + where), "OK");
  EXPECT_EQ(raw.QueryText("SELECT fingerprint" + where), "driver=13000;nvrtc=13.0;src=src1");
  EXPECT_EQ(std::stod(raw.QueryText("SELECT median_ms" + where)), ok.fwd_bwd().median_ms());
  EXPECT_EQ(raw.QueryInt("SELECT job_id" + where), static_cast<int64_t>(ok.job_id()));
  EXPECT_EQ(raw.QueryText("SELECT algorithm FROM variants WHERE name = '" + VariantName(128) + "'"), "sequential");
}

TEST_F(StoreTest, GetRecordMissingIsNotFoundWithId) {
  auto got = store_->GetRecord(424242);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kNotFound);
  EXPECT_NE(got.status().message().find("424242"), std::string::npos);
}

TEST_F(StoreTest, SelectionIsUpsertedAndReplacedByALaterCommit) {
  v1::Record a = MakeRecord(VariantName(128));
  v1::Record b = MakeRecord(VariantName(256));
  std::vector<int64_t> first = Commit({a, b}, MakeSelection(b, a.variant()), 1);
  ASSERT_EQ(first.size(), 2u);

  const Problem problem = ToProblem(MakeProblem());
  auto selection = store_->GetSelection("NVIDIA H200", problem);
  ASSERT_TRUE(selection.ok()) << selection.status().ToString();
  ASSERT_TRUE(selection->has_value());
  EXPECT_EQ((*selection)->variant(), b.variant());
  EXPECT_EQ((*selection)->record_id(), first[1]);
  EXPECT_EQ((*selection)->runner_up(), a.variant());
  EXPECT_EQ((*selection)->fingerprint(), FingerprintOf(b));
  EXPECT_FALSE((*selection)->updated_at().empty());

  v1::Record c = MakeRecord(VariantName(512));
  c.set_origin("retime");
  std::vector<int64_t> second = Commit({c}, MakeSelection(c, b.variant()), 0);
  ASSERT_EQ(second.size(), 1u);
  selection = store_->GetSelection("NVIDIA H200", problem);
  ASSERT_TRUE(selection.ok() && selection->has_value());
  EXPECT_EQ((*selection)->variant(), c.variant());
  EXPECT_EQ((*selection)->record_id(), second[0]);

  auto family = store_->ListSelections("NVIDIA H200", problem);
  ASSERT_TRUE(family.ok());
  EXPECT_EQ(family->size(), 1u);  // replaced, not added
  EXPECT_EQ(ListAll().size(), 3u);  // records are history: all kept
}

// ListAllSelections: the calibration database's decisions, filtered by the
// problem's key, paged in the order they were first made; a re-tune updates a
// selection in place (same position, new variant).
TEST_F(StoreTest, ListAllSelectionsFiltersAndPagesInTheOrderTheyWereMade) {
  auto problem_at = [](uint32_t length, v1::Mode mode) {
    v1::Problem p = MakeProblem();
    p.mutable_shape()->set_length(length);
    p.set_mode(mode);
    return p;
  };
  const std::vector<v1::Problem> problems = {problem_at(2048, v1::FWD_BWD), problem_at(4096, v1::FWD_BWD),
                                             problem_at(2048, v1::FWD)};
  std::vector<std::string> made;  // variant of each selection, in the order made
  for (size_t i = 0; i < problems.size(); ++i) {
    v1::Record r = MakeRecord(VariantName(64 << i), v1::OK, problems[i]);
    Commit({r}, MakeSelection(r), 0);
    made.push_back(r.variant());
  }
  v1::Record d = MakeRecord(VariantName(1024), v1::OK, problems[0]);
  v1::Selection deterministic = MakeSelection(d);
  deterministic.set_deterministic(true);
  Commit({d}, deterministic, 0);
  made.push_back(d.variant());

  auto list = [&](const v1::RecordFilter& filter, bool deterministic_only, int page_size = 0, bool history = false) {
    std::vector<v1::Selection> all;
    std::string token;
    int pages = 0;
    do {
      auto page = store_->ListAllSelections(Request(filter, deterministic_only, page_size, token, history));
      EXPECT_TRUE(page.ok()) << page.status().ToString();
      if (!page.ok() || ++pages > 10) break;
      all.insert(all.end(), page->selections.begin(), page->selections.end());
      token = page->next_page_token;
    } while (!token.empty());
    return all;
  };
  auto variants = [](const std::vector<v1::Selection>& selections) {
    std::vector<std::string> names;
    for (const v1::Selection& s : selections) names.push_back(s.variant());
    return names;
  };

  EXPECT_EQ(variants(list({}, false)), made);
  EXPECT_EQ(variants(list({}, false, 1)), made) << "one per page: none repeated, none skipped";
  EXPECT_EQ(variants(list({}, true)), std::vector<std::string>{d.variant()});
  std::vector<v1::Selection> det = list({}, true);
  ASSERT_EQ(det.size(), 1u);
  EXPECT_TRUE(det[0].deterministic());
  EXPECT_GT(det[0].record_id(), 0);

  v1::RecordFilter by_length;
  by_length.mutable_shape()->set_length(2048);
  EXPECT_EQ(variants(list(by_length, false)), (std::vector<std::string>{made[0], made[2], made[3]}));
  v1::RecordFilter by_mode;
  by_mode.set_mode(v1::FWD);
  EXPECT_EQ(variants(list(by_mode, false)), std::vector<std::string>{made[2]});
  v1::RecordFilter by_variant;
  by_variant.set_variant(made[1]);
  EXPECT_EQ(variants(list(by_variant, false)), std::vector<std::string>{made[1]});
  v1::RecordFilter other_model;
  other_model.set_device_model("NVIDIA H100");
  EXPECT_TRUE(list(other_model, false).empty());
  v1::RecordFilter by_op;
  by_op.set_op("linear_scan");
  EXPECT_EQ(list(by_op, false).size(), made.size());
  by_op.set_op("samu");
  EXPECT_TRUE(list(by_op, false).empty());

  // A re-tune of the first problem replaces its selection where it stands.
  v1::Record again = MakeRecord(VariantName(32), v1::OK, problems[0]);
  Commit({again}, MakeSelection(again), 0);
  made[0] = again.variant();
  EXPECT_EQ(variants(list({}, false)), made);

  // Record-only fields and bad tokens are refused with the reason.
  v1::RecordFilter by_state;
  by_state.set_state(v1::OK);
  auto refused = store_->ListAllSelections(Request(by_state));
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("state or origin"), std::string::npos) << refused.status().ToString();
  v1::RecordFilter by_origin;
  by_origin.set_origin("tuned");
  EXPECT_EQ(store_->ListAllSelections(Request(by_origin)).status().code(), StatusCode::kInvalidArgument);
  for (const std::string token : {"id:3", "sel:", "sel:x", "sel:-1", "hist:2"}) {
    auto bad = store_->ListAllSelections(Request({}, false, 0, token));
    EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument) << token;
  }
  EXPECT_EQ(store_->ListAllSelections(Request({}, false, -1)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->ListAllSelections(Request({}, false, 0, "sel:2", true)).status().code(),
            StatusCode::kInvalidArgument)
      << "a listing's token does not page the history";

  // The history keeps every decision, newest first: the replaced one superseded.
  std::vector<v1::Selection> history = list({}, false, 2, true);
  ASSERT_EQ(history.size(), made.size() + 1);
  EXPECT_EQ(history[0].variant(), again.variant());
  EXPECT_FALSE(history[0].superseded());
  EXPECT_EQ(history[1].variant(), d.variant());
  EXPECT_FALSE(history[1].superseded());
  EXPECT_EQ(history.back().variant(), VariantName(64));
  EXPECT_TRUE(history.back().superseded()) << "replaced by the re-tune";
  for (size_t i = 1; i + 1 < history.size(); ++i) EXPECT_FALSE(history[i].superseded()) << i;
  v1::RecordFilter first_only = by_length;
  first_only.set_mode(v1::FWD_BWD);
  std::vector<v1::Selection> its = list(first_only, false, 0, true);
  ASSERT_EQ(its.size(), 3u) << "two ordinary decisions and one deterministic";
  EXPECT_EQ(list(first_only, true, 0, true).size(), 1u);
}

TEST_F(StoreTest, GetSelectionMissIsEmptyNotError) {
  auto selection = store_->GetSelection("NVIDIA H200", ToProblem(MakeProblem()));
  ASSERT_TRUE(selection.ok());
  EXPECT_FALSE(selection->has_value());
}

TEST_F(StoreTest, InvalidCommitsAreRefusedBeforeWriting) {
  v1::Record ok = MakeRecord(VariantName(128));
  auto out_of_range = store_->CommitResults({ok}, MakeSelection(ok), 1);
  EXPECT_EQ(out_of_range.status().code(), StatusCode::kInvalidArgument);
  auto negative = store_->CommitResults({ok}, MakeSelection(ok), -1);
  EXPECT_EQ(negative.status().code(), StatusCode::kInvalidArgument);

  v1::Record bad = MakeRecord(VariantName(256), v1::GUARD_VIOLATION);
  auto not_ok = store_->CommitResults({ok, bad}, MakeSelection(bad), 1);
  EXPECT_EQ(not_ok.status().code(), StatusCode::kFailedPrecondition);

  v1::Selection mismatched = MakeSelection(ok);
  mismatched.set_variant(VariantName(512));
  EXPECT_EQ(store_->CommitResults({ok}, mismatched, 0).status().code(), StatusCode::kInvalidArgument);

  v1::Record no_variant = ok;
  no_variant.clear_variant();
  EXPECT_EQ(store_->CommitResults({ok, no_variant}, std::nullopt, 0).status().code(),
            StatusCode::kInvalidArgument);

  EXPECT_TRUE(ListAll().empty());
  auto selection = store_->GetSelection("NVIDIA H200", ToProblem(MakeProblem()));
  ASSERT_TRUE(selection.ok());
  EXPECT_FALSE(selection->has_value());
}

TEST_F(StoreTest, FailureMidwayRollsBackEverything) {
  v1::Record a = MakeRecord(VariantName(128));
  v1::Record b = MakeRecord(VariantName(256));
  v1::Record c = MakeRecord(VariantName(512));
  RawDb raw(path_);

  // The selection upsert fails after all records were inserted.
  raw.Exec("CREATE TRIGGER inject_selection BEFORE INSERT ON selections BEGIN SELECT RAISE(ABORT, 'injected'); END");
  auto result = store_->CommitResults({a, b, c}, MakeSelection(b), 1);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("injected"), std::string::npos) << result.status().ToString();
  EXPECT_TRUE(ListAll().empty());
  EXPECT_EQ(raw.QueryInt("SELECT count(*) FROM records"), 0);
  EXPECT_EQ(raw.QueryInt("SELECT count(*) FROM variants"), 0);
  raw.Exec("DROP TRIGGER inject_selection");

  // The second record's insert fails after the first one landed.
  raw.Exec("CREATE TRIGGER inject_record BEFORE INSERT ON records WHEN NEW.variant = '" + b.variant() +
           "' BEGIN SELECT RAISE(ABORT, 'injected record'); END");
  result = store_->CommitResults({a, b, c}, MakeSelection(a), 0);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("records[1]"), std::string::npos) << result.status().ToString();
  EXPECT_EQ(raw.QueryInt("SELECT count(*) FROM records"), 0);
  EXPECT_EQ(raw.QueryInt("SELECT count(*) FROM selections"), 0);
  raw.Exec("DROP TRIGGER inject_record");

  // The store is still usable and the same commit now lands whole.
  std::vector<int64_t> ids = Commit({a, b, c}, MakeSelection(b), 1);
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(raw.QueryInt("SELECT count(*) FROM records"), 3);
  EXPECT_EQ(raw.QueryInt("SELECT record_id FROM selections"), ids[1]);
}

TEST_F(StoreTest, ListRecordsFilters) {
  v1::DeviceInfo rtx = MakeDevice("NVIDIA GeForce RTX 3090", "GPU-rtx");
  std::vector<v1::Record> records = {
      MakeRecord(VariantName(128), v1::OK, MakeProblem(4, 2048, 2048, v1::BF16, v1::FWD_BWD)),
      MakeRecord(VariantName(256), v1::OK, MakeProblem(4, 2048, 2048, v1::BF16, v1::FWD)),
      MakeRecord(VariantName(128), v1::WRONG_RESULT, MakeProblem(1, 512, 256, v1::FP32, v1::FWD)),
      MakeRecord(VariantName(512), v1::TIMEOUT, MakeProblem(4, 512, 2048, v1::FP16, v1::BWD), rtx),
      MakeRecord(VariantName(128), v1::OK, MakeProblem(4, 2048, 2048, v1::BF16, v1::FWD_BWD), rtx),
  };
  records[4].set_origin("imported");
  Commit(records);

  auto count = [&](auto configure) {
    v1::RecordFilter filter;
    configure(filter);
    std::vector<v1::Record> found = ListAll(filter);
    return found.size();
  };
  EXPECT_EQ(count([](v1::RecordFilter&) {}), 5u);
  EXPECT_EQ(count([](v1::RecordFilter& f) { f.set_op("linear_scan"); }), 5u);
  EXPECT_EQ(count([](v1::RecordFilter& f) { f.set_op("rglru"); }), 0u);
  EXPECT_EQ(count([](v1::RecordFilter& f) { f.mutable_shape()->set_batch(4); }), 4u);
  EXPECT_EQ(count([](v1::RecordFilter& f) { f.mutable_shape()->set_length(512); }), 2u);
  EXPECT_EQ(count([](v1::RecordFilter& f) { f.mutable_shape()->set_width(2048); }), 4u);
  EXPECT_EQ(count([](v1::RecordFilter& f) {
              f.mutable_shape()->set_batch(4);
              f.mutable_shape()->set_length(2048);
              f.mutable_shape()->set_width(2048);
            }),
            3u);
  EXPECT_EQ(count([](v1::RecordFilter& f) { f.set_dtype(v1::BF16); }), 3u);
  EXPECT_EQ(count([](v1::RecordFilter& f) { f.set_mode(v1::FWD); }), 2u);
  EXPECT_EQ(count([](v1::RecordFilter& f) { f.set_variant(VariantName(128)); }), 3u);
  EXPECT_EQ(count([](v1::RecordFilter& f) { f.set_state(v1::OK); }), 3u);
  EXPECT_EQ(count([](v1::RecordFilter& f) { f.set_state(v1::TIMEOUT); }), 1u);
  EXPECT_EQ(count([](v1::RecordFilter& f) { f.set_device_model("NVIDIA GeForce RTX 3090"); }), 2u);
  EXPECT_EQ(count([](v1::RecordFilter& f) { f.set_origin("imported"); }), 1u);
  EXPECT_EQ(count([](v1::RecordFilter& f) {
              f.set_device_model("NVIDIA H200");
              f.set_dtype(v1::BF16);
              f.set_mode(v1::FWD_BWD);
              f.set_state(v1::OK);
            }),
            1u);

  // Newest first.
  std::vector<v1::Record> all = ListAll();
  ASSERT_EQ(all.size(), 5u);
  for (size_t i = 1; i < all.size(); ++i) EXPECT_GT(all[i - 1].id(), all[i].id());
}

TEST_F(StoreTest, ListRecordsPagesWithoutDuplicatesOrGaps) {
  std::vector<v1::Record> records;
  for (int i = 0; i < 25; ++i) {
    records.push_back(MakeRecord(VariantName(32 * (1 + i % 4)), i % 5 == 0 ? v1::TIMEOUT : v1::OK));
  }
  std::vector<int64_t> ids = Commit(records);
  ASSERT_EQ(ids.size(), 25u);

  for (auto [filter_state, expected] : {std::pair{v1::STATE_UNSPECIFIED, 25}, std::pair{v1::OK, 20}}) {
    v1::RecordFilter filter;
    filter.set_state(filter_state);
    std::vector<int64_t> seen;
    std::vector<size_t> page_sizes;
    std::string token;
    int pages = 0;
    do {
      auto page = store_->ListRecords(filter, 7, token);
      ASSERT_TRUE(page.ok()) << page.status().ToString();
      page_sizes.push_back(page->records.size());
      for (const auto& r : page->records) seen.push_back(r.id());
      token = page->next_page_token;
      ASSERT_LT(++pages, 10);
    } while (!token.empty());
    EXPECT_EQ(seen.size(), static_cast<size_t>(expected));
    EXPECT_TRUE(std::is_sorted(seen.rbegin(), seen.rend()));
    EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), seen.size());
    EXPECT_EQ(page_sizes.back(), static_cast<size_t>(expected % 7 == 0 ? 7 : expected % 7));
    for (size_t i = 0; i + 1 < page_sizes.size(); ++i) EXPECT_EQ(page_sizes[i], 7u);
  }

  // A record committed between pages does not shift the later pages.
  auto page1 = store_->ListRecords({}, 10, "");
  ASSERT_TRUE(page1.ok());
  Commit({MakeRecord(VariantName(64))});
  auto page2 = store_->ListRecords({}, 10, page1->next_page_token);
  ASSERT_TRUE(page2.ok());
  EXPECT_EQ(page2->records.front().id(), page1->records.back().id() - 1);
}

TEST_F(StoreTest, ListRecordsPageSizeDefaultAndClamp) {
  std::vector<v1::Record> records(1005, MakeRecord(VariantName(128)));
  Commit(records);
  auto by_default = store_->ListRecords({}, 0, "");
  ASSERT_TRUE(by_default.ok());
  EXPECT_EQ(by_default->records.size(), 100u);
  auto clamped = store_->ListRecords({}, 5000, "");
  ASSERT_TRUE(clamped.ok());
  EXPECT_EQ(clamped->records.size(), 1000u);
  EXPECT_FALSE(clamped->next_page_token.empty());
  auto one = store_->ListRecords({}, 1, "");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->records.size(), 1u);
  EXPECT_EQ(store_->ListRecords({}, -1, "").status().code(), StatusCode::kInvalidArgument);
}

TEST_F(StoreTest, ListRecordsRejectsMalformedPageTokens) {
  Commit({MakeRecord(VariantName(128))});
  for (const std::string token : {"garbage", "id:", "id:-3", "id:0", "id:12x", "id: 12", "ID:12",
                                  "id:99999999999999999999999"}) {
    auto page = store_->ListRecords({}, 10, token);
    ASSERT_FALSE(page.ok()) << token;
    EXPECT_EQ(page.status().code(), StatusCode::kInvalidArgument) << token;
  }
  auto empty = store_->ListRecords({}, 10, "");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->records.size(), 1u);
  EXPECT_TRUE(empty->next_page_token.empty());
}

TEST_F(StoreTest, FailedRecordsMatchDeviceProblemAndFingerprint) {
  const v1::Problem problem = MakeProblem(4, 2048, 2048, v1::BF16, v1::FWD_BWD);
  v1::DeviceInfo new_driver = MakeDevice();
  new_driver.set_driver_version(13010);
  Commit({
      MakeRecord(VariantName(128), v1::OK, problem),
      MakeRecord(VariantName(256), v1::WRONG_RESULT, problem),
      MakeRecord(VariantName(512), v1::OUT_OF_RESOURCES, problem),
      MakeRecord("test_fault", v1::ILLEGAL_ADDRESS, problem),
      MakeRecord(VariantName(256), v1::TIMEOUT, problem, new_driver),                        // other driver
      MakeRecord(VariantName(256), v1::TIMEOUT, problem, MakeDevice(), "src2"),              // other sources
      MakeRecord(VariantName(256), v1::TIMEOUT, MakeProblem(4, 2048, 2048, v1::BF16, v1::FWD)),  // other mode
      MakeRecord(VariantName(256), v1::TIMEOUT, MakeProblem(4, 2048, 2048, v1::BF16, v1::FWD_BWD, true)),
      MakeRecord(VariantName(256), v1::TIMEOUT, problem, MakeDevice("NVIDIA H100", "GPU-h100")),
  });
  const std::string fingerprint = Fingerprint(MakeDevice(), "src1");
  auto failed = store_->FailedRecords("NVIDIA H200", ToProblem(problem), fingerprint);
  ASSERT_TRUE(failed.ok()) << failed.status().ToString();
  std::vector<std::string> variants;
  for (const auto& r : *failed) {
    EXPECT_NE(r.state(), v1::OK);
    EXPECT_GT(r.id(), 0);
    variants.push_back(r.variant());
  }
  EXPECT_EQ(variants, (std::vector<std::string>{VariantName(256), VariantName(512), "test_fault"}));

  auto other = store_->FailedRecords("NVIDIA H200", ToProblem(problem), Fingerprint(new_driver, "src1"));
  ASSERT_TRUE(other.ok());
  ASSERT_EQ(other->size(), 1u);
  EXPECT_EQ(other->front().state(), v1::TIMEOUT);
}

TEST_F(StoreTest, ListSelectionsReturnsTheFamilyForNearestShapeLookup) {
  auto commit_winner = [&](const v1::Problem& problem, const std::string& model = "NVIDIA H200") {
    v1::DeviceInfo device = MakeDevice(model, "GPU-" + model);
    v1::Record winner = MakeRecord(VariantName(128), v1::OK, problem, device);
    Commit({winner}, MakeSelection(winner), 0);
  };
  commit_winner(MakeProblem(8, 4096, 1024, v1::BF16, v1::FWD));
  commit_winner(MakeProblem(1, 1024, 256, v1::BF16, v1::FWD));
  commit_winner(MakeProblem(4, 2048, 2048, v1::BF16, v1::FWD));
  commit_winner(MakeProblem(4, 2048, 2048, v1::FP32, v1::FWD));        // other dtype
  commit_winner(MakeProblem(4, 2048, 2048, v1::BF16, v1::FWD_BWD));    // other mode
  commit_winner(MakeProblem(4, 2048, 2048, v1::BF16, v1::FWD, true));  // with h0
  commit_winner(MakeProblem(2, 2048, 2048, v1::BF16, v1::FWD), "NVIDIA H100");

  // An untuned shape of the family: the caller picks the nearest of these.
  Problem like = ToProblem(MakeProblem(2, 3000, 1500, v1::BF16, v1::FWD));
  auto family = store_->ListSelections("NVIDIA H200", like);
  ASSERT_TRUE(family.ok()) << family.status().ToString();
  ASSERT_EQ(family->size(), 3u);
  EXPECT_EQ((*family)[0].problem().shape().batch(), 1u);
  EXPECT_EQ((*family)[1].problem().shape().batch(), 4u);
  EXPECT_EQ((*family)[2].problem().shape().batch(), 8u);
  for (const auto& s : *family) {
    EXPECT_EQ(s.problem().dtype(), v1::BF16);
    EXPECT_EQ(s.problem().mode(), v1::FWD);
    EXPECT_FALSE(s.problem().has_h0());
    EXPECT_GT(s.record_id(), 0);
  }
  auto none = store_->ListSelections("NVIDIA A100", like);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

// ---- deterministic selections ------------------------------------------------

TEST_F(StoreTest, DeterministicAndOrdinarySelectionsOfOneProblemCoexist) {
  v1::Record a = MakeRecord(VariantName(128));
  v1::Record b = MakeRecord(VariantName(256));
  const std::vector<int64_t> first = Commit({a, b}, MakeSelection(b), 1);
  ASSERT_EQ(first.size(), 2u);
  v1::Selection deterministic = MakeSelection(a);
  deterministic.set_deterministic(true);
  const std::vector<int64_t> second = Commit({a}, deterministic, 0);
  ASSERT_EQ(second.size(), 1u);

  const Problem problem = ToProblem(MakeProblem());
  auto ordinary = store_->GetSelection("NVIDIA H200", problem, false);
  ASSERT_TRUE(ordinary.ok() && ordinary->has_value());
  EXPECT_EQ((*ordinary)->variant(), b.variant());
  EXPECT_EQ((*ordinary)->record_id(), first[1]);
  EXPECT_FALSE((*ordinary)->deterministic());
  auto chosen = store_->GetSelection("NVIDIA H200", problem, true);
  ASSERT_TRUE(chosen.ok() && chosen->has_value());
  EXPECT_EQ((*chosen)->variant(), a.variant());
  EXPECT_EQ((*chosen)->record_id(), second[0]);
  EXPECT_TRUE((*chosen)->deterministic());
  EXPECT_EQ(store_->GetSelection("NVIDIA H200", problem)->value().record_id(), first[1]) << "the default is ordinary";

  // A later deterministic commit replaces only the deterministic one.
  v1::Record c = MakeRecord(VariantName(512));
  v1::Selection replaced = MakeSelection(c);
  replaced.set_deterministic(true);
  const std::vector<int64_t> third = Commit({c}, replaced, 0);
  ASSERT_EQ(third.size(), 1u);
  EXPECT_EQ(store_->GetSelection("NVIDIA H200", problem, true)->value().record_id(), third[0]);
  EXPECT_EQ(store_->GetSelection("NVIDIA H200", problem, false)->value().record_id(), first[1]);

  auto ordinary_family = store_->ListSelections("NVIDIA H200", problem, false);
  auto deterministic_family = store_->ListSelections("NVIDIA H200", problem, true);
  ASSERT_TRUE(ordinary_family.ok() && deterministic_family.ok());
  ASSERT_EQ(ordinary_family->size(), 1u);
  ASSERT_EQ(deterministic_family->size(), 1u);
  EXPECT_EQ(ordinary_family->front().variant(), b.variant());
  EXPECT_EQ(deterministic_family->front().variant(), c.variant());
  RawDb raw(path_);
  EXPECT_EQ(raw.QueryInt("SELECT count(*) FROM selections"), 2);
  EXPECT_EQ(raw.QueryInt("SELECT count(*) FROM selections WHERE deterministic = 1"), 1);
}

TEST_F(StoreTest, CommitResultsStoresBothSelectionsInOneTransaction) {
  v1::Record a = MakeRecord(VariantName(128));
  v1::Record b = MakeRecord(VariantName(256));
  v1::Record c = MakeRecord(VariantName(512));
  v1::Selection deterministic = MakeSelection(c, a.variant());
  deterministic.set_deterministic(true);
  auto ids = store_->CommitResults({a, b, c}, {SelectionUpdate{MakeSelection(b), 1}, SelectionUpdate{deterministic, 2}});
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  ASSERT_EQ(ids->size(), 3u);
  const Problem problem = ToProblem(MakeProblem());
  auto ordinary = store_->GetSelection("NVIDIA H200", problem, false);
  auto chosen = store_->GetSelection("NVIDIA H200", problem, true);
  ASSERT_TRUE(ordinary.ok() && ordinary->has_value());
  ASSERT_TRUE(chosen.ok() && chosen->has_value());
  EXPECT_EQ((*ordinary)->variant(), b.variant());
  EXPECT_EQ((*ordinary)->record_id(), (*ids)[1]);
  EXPECT_EQ((*chosen)->variant(), c.variant());
  EXPECT_EQ((*chosen)->record_id(), (*ids)[2]);
  EXPECT_EQ((*chosen)->runner_up(), a.variant());
  EXPECT_TRUE((*chosen)->deterministic());
  EXPECT_EQ((*chosen)->fingerprint(), FingerprintOf(c));

  // A bad second update is refused before anything is written.
  RawDb raw(path_);
  const v1::Problem fwd = MakeProblem(4, 2048, 2048, v1::BF16, v1::FWD);
  v1::Record d = MakeRecord(VariantName(64), v1::OK, fwd);
  v1::Record e = MakeRecord(VariantName(32), v1::OK, fwd);
  v1::Selection e_deterministic = MakeSelection(e);
  e_deterministic.set_deterministic(true);
  auto refused =
      store_->CommitResults({d, e}, {SelectionUpdate{MakeSelection(d), 0}, SelectionUpdate{e_deterministic, 2}});
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument) << refused.status().ToString();
  EXPECT_EQ(raw.QueryInt("SELECT count(*) FROM records"), 3);

  // The deterministic upsert fails after the ordinary one ran: neither lands, nor do the records.
  raw.Exec("CREATE TRIGGER inject_deterministic BEFORE INSERT ON selections WHEN NEW.deterministic = 1"
           " BEGIN SELECT RAISE(ABORT, 'injected'); END");
  auto failed =
      store_->CommitResults({d, e}, {SelectionUpdate{MakeSelection(d), 0}, SelectionUpdate{e_deterministic, 1}});
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find("injected"), std::string::npos) << failed.status().ToString();
  EXPECT_NE(failed.status().message().find("deterministic selection"), std::string::npos)
      << failed.status().ToString();
  EXPECT_EQ(raw.QueryInt("SELECT count(*) FROM records"), 3);
  auto after = store_->GetSelection("NVIDIA H200", ToProblem(fwd), false);
  ASSERT_TRUE(after.ok());
  EXPECT_FALSE(after->has_value()) << "the ordinary upsert is rolled back with the deterministic one";
  raw.Exec("DROP TRIGGER inject_deterministic");
}

TEST(FingerprintTest, Format) {
  v1::DeviceInfo device = MakeDevice();
  EXPECT_EQ(Fingerprint(device, "abc123"), "driver=13000;nvrtc=13.0;src=abc123");
  v1::Record record = MakeRecord(VariantName(128));
  record.set_source_hash("h");
  EXPECT_EQ(FingerprintOf(record), "driver=13000;nvrtc=13.0;src=h");
}

// ---- concurrency (WAL) --------------------------------------------------------------

TEST_F(StoreTest, ReaderSnapshotDoesNotBlockTheWriter) {
  Commit({MakeRecord(VariantName(128))});
  RawDb reader(path_);
  reader.Exec("BEGIN");
  EXPECT_EQ(reader.QueryInt("SELECT count(*) FROM records"), 1);  // the read snapshot starts here

  // With a rollback journal this commit would wait on the reader's lock and
  // fail with SQLITE_BUSY; in WAL mode it lands while the reader stays open.
  std::vector<int64_t> ids = Commit({MakeRecord(VariantName(256)), MakeRecord(VariantName(512))});
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(reader.QueryInt("SELECT count(*) FROM records"), 1);  // still its snapshot
  reader.Exec("COMMIT");
  EXPECT_EQ(reader.QueryInt("SELECT count(*) FROM records"), 3);
}

TEST_F(StoreTest, SecondConnectionReadsWhileWriting) {
  auto second = Store::Open(path_);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  std::unique_ptr<Store> reader = std::move(second).value();

  constexpr int kBatches = 40;
  std::atomic<bool> done{false};
  std::thread writer([&] {
    for (int i = 0; i < kBatches; ++i) {
      v1::Record a = MakeRecord(VariantName(128));
      v1::Record b = MakeRecord(VariantName(256));
      auto ids = store_->CommitResults({a, b}, MakeSelection(b), 1);
      EXPECT_TRUE(ids.ok()) << ids.status().ToString();
    }
    done = true;
  });

  size_t last = 0;
  int reads = 0;
  const Problem problem = ToProblem(MakeProblem());
  while (!done || reads == 0) {
    auto page = reader->ListRecords({}, 1000, "");
    ASSERT_TRUE(page.ok()) << page.status().ToString();
    // Whole batches only: a reader never sees half a commit.
    EXPECT_EQ(page->records.size() % 2, 0u);
    EXPECT_GE(page->records.size(), last);
    last = page->records.size();
    auto selection = reader->GetSelection("NVIDIA H200", problem);
    ASSERT_TRUE(selection.ok()) << selection.status().ToString();
    if (selection->has_value()) {
      auto winner = reader->GetRecord((*selection)->record_id());
      ASSERT_TRUE(winner.ok()) << winner.status().ToString();
      EXPECT_EQ(winner->variant(), (*selection)->variant());
    }
    ++reads;
  }
  writer.join();
  auto final_page = reader->ListRecords({}, 1000, "");
  ASSERT_TRUE(final_page.ok());
  EXPECT_EQ(final_page->records.size(), 2u * kBatches);
}

}  // namespace
}  // namespace scantune
