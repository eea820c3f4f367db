#include "db/store.h"

#include <sqlite3.h>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <algorithm>
#include <limits>
#include <string_view>
#include <variant>

#include "common/log.h"
#include "common/variant.h"
#include "db/schema.h"
#include "db/statement.h"
#include "db/transaction.h"

namespace scantune {

static_assert(Store::kSchemaVersion == db::kLatestSchemaVersion,
              "Store::kSchemaVersion must equal the last migration step in db/schema.h");

namespace {

using db::Statement;

constexpr int kDefaultPageSize = 100;
constexpr int kMaxPageSize = 1000;
constexpr char kPageTokenPrefix[] = "id:";
constexpr char kSelectionPageTokenPrefix[] = "sel:";
constexpr char kHistoryPageTokenPrefix[] = "hist:";

// ISO-8601 UTC with milliseconds: sorts as text, reads as a date in the shell.
std::string NowIso8601() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char buffer[32];
  size_t n = std::strftime(buffer, sizeof(buffer), "%Y-%m-%dT%H:%M:%S", &utc);
  std::snprintf(buffer + n, sizeof(buffer) - n, ".%03dZ", static_cast<int>(millis));
  return buffer;
}

// Proto enum values are stored by name ("BF16"); a value this binary does not
// know (open proto3 enums) is stored as its number so nothing is lost.
std::string EnumText(const google::protobuf::EnumDescriptor* descriptor, int value) {
  const google::protobuf::EnumValueDescriptor* v = descriptor->FindValueByNumber(value);
  return v ? v->name() : std::to_string(value);
}

StatusOr<int> EnumFromText(const google::protobuf::EnumDescriptor* descriptor, const std::string& text) {
  if (const google::protobuf::EnumValueDescriptor* v = descriptor->FindValueByName(text)) return v->number();
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    return Internal("stored " + descriptor->name() + " '" + text + "' is neither a name nor a number");
  }
  return value;
}

std::string DTypeText(v1::DType dtype) { return EnumText(v1::DType_descriptor(), dtype); }
std::string ModeText(v1::Mode mode) { return EnumText(v1::Mode_descriptor(), mode); }
std::string StateText(int state) { return EnumText(v1::ResultState_descriptor(), state); }

// The op column's text: Problem::OpKey() ("selective_scan:n16+softplus"), so
// that problems with other structural options never share a selection. A
// problem that does not parse (an imported record of an unknown operator) keys by its op name.
std::string OpKeyOf(const v1::Problem& problem) {
  auto parsed = ProblemFromProto(problem);
  return parsed.ok() ? parsed->OpKey() : problem.op();
}

// Binds the eight key columns (device_model, op, batch, length, width, dtype,
// mode, has_h0) that records and selections share, from parameter `first`.
// Returns the next free parameter index.
int BindProblemKey(Statement& stmt, int first, const std::string& device_model, const v1::Problem& problem) {
  stmt.BindText(first, device_model)
      .BindText(first + 1, OpKeyOf(problem))
      .BindInt64(first + 2, problem.shape().batch())
      .BindInt64(first + 3, problem.shape().length())
      .BindInt64(first + 4, problem.shape().width())
      .BindText(first + 5, DTypeText(problem.dtype()))
      .BindText(first + 6, ModeText(problem.mode()))
      .BindInt64(first + 7, problem.has_h0() ? 1 : 0);
  return first + 8;
}

// The statistics of the mode a record is ranked by: its problem's mode.
const v1::Stats* RankedStats(const v1::Record& record) {
  switch (record.problem().mode()) {
    case v1::FWD: return &record.fwd();
    case v1::BWD: return &record.bwd();
    case v1::FWD_BWD: return &record.fwd_bwd();
    default: return nullptr;
  }
}

// The algorithm part of a variant name, for the variants table. Names that do
// not parse (imported seed implementations such as "pallas") keep their first word.
std::string AlgorithmOf(const std::string& variant) {
  StatusOr<Variant> parsed = Variant::Parse(variant);
  if (parsed.ok()) return AlgorithmName(parsed->algorithm);
  return variant.substr(0, variant.find('_'));
}

template <typename Message>
StatusOr<Message> ParseBlob(const std::string& blob, const char* what, int64_t id) {
  Message message;
  if (!message.ParseFromString(blob)) {
    return Internal(std::string("stored ") + what + (id ? " " + std::to_string(id) : "") +
                    " does not parse as " + Message::descriptor()->full_name());
  }
  return message;
}

StatusOr<v1::Record> RecordFromRow(const Statement& stmt) {
  const int64_t id = stmt.ColumnInt64(0);
  ASSIGN_OR_RETURN(v1::Record record, ParseBlob<v1::Record>(stmt.ColumnBlob(1), "record", id));
  record.set_id(id);
  return record;
}

StatusOr<int64_t> ParsePageToken(const std::string& token, std::string_view prefix) {
  auto malformed = [&] { return InvalidArgument("malformed page_token '" + token + "'"); };
  if (token.compare(0, prefix.size(), prefix) != 0) return malformed();
  const char* begin = token.data() + prefix.size();
  const char* end = token.data() + token.size();
  int64_t id = 0;
  auto [stop, ec] = std::from_chars(begin, end, id);
  if (ec != std::errc() || stop != end || begin == end || id <= 0) return malformed();
  return id;
}

// 0 takes the default; above the maximum is capped.
StatusOr<int> PageSize(int page_size) {
  if (page_size < 0) return InvalidArgument("page_size must not be negative, got " + std::to_string(page_size));
  if (page_size == 0) return kDefaultPageSize;
  return std::min(page_size, kMaxPageSize);
}

// A listing's SQL built from a filter: the head (whose one parameter is the
// page's key bound), one condition per set field of the filter (unset fields:
// empty, 0, UNSPECIFIED match anything), the tail (whose one parameter is the
// row limit). Records and selections share the key columns the filter names.
class FilteredQuery {
 public:
  FilteredQuery(const char* head, int64_t page_bound) : sql_(head) { params_.emplace_back(page_bound); }

  template <typename Value>
  void AddCondition(const char* condition, Value value) {
    sql_ += condition;
    params_.emplace_back(std::move(value));
  }
  // The fields a record and a selection share.
  void AddRecordFilter(const v1::RecordFilter& filter) {
    AddText(db::kWhereDeviceModel, filter.device_model());
    if (!filter.op().empty()) {
      AddCondition(db::kWhereOp, filter.op());
      params_.emplace_back(filter.op() + ":*");
    }
    AddNumber(db::kWhereBatch, filter.shape().batch());
    AddNumber(db::kWhereLength, filter.shape().length());
    AddNumber(db::kWhereWidth, filter.shape().width());
    AddText(db::kWhereDType, filter.dtype() == v1::DTYPE_UNSPECIFIED ? "" : DTypeText(filter.dtype()));
    AddText(db::kWhereMode, filter.mode() == v1::MODE_UNSPECIFIED ? "" : ModeText(filter.mode()));
    AddText(db::kWhereVariant, filter.variant());
  }
  void AddRecordOnlyFilter(const v1::RecordFilter& filter) {
    AddText(db::kWhereState, filter.state() == v1::STATE_UNSPECIFIED ? "" : StateText(filter.state()));
    AddText(db::kWhereOrigin, filter.origin());
  }
  // The statement with every parameter bound; it fetches one row more than the
  // page, which tells whether another page exists (so the last page carries no
  // token and callers never fetch an empty page).
  StatusOr<Statement> Prepare(db::StatementCache& cache, const char* tail, int page_size) const {
    ASSIGN_OR_RETURN(Statement stmt, cache.Get(sql_ + tail));
    int index = 1;
    for (const auto& param : params_) {
      if (const auto* value = std::get_if<int64_t>(&param)) {
        stmt.BindInt64(index++, *value);
      } else {
        stmt.BindText(index++, std::get<std::string>(param));
      }
    }
    stmt.BindInt64(index, page_size + 1);
    return stmt;
  }

 private:
  void AddText(const char* condition, const std::string& value) {
    if (!value.empty()) AddCondition(condition, value);
  }
  void AddNumber(const char* condition, int64_t value) {
    if (value != 0) AddCondition(condition, value);
  }

  std::string sql_;
  std::vector<std::variant<int64_t, std::string>> params_;
};

Status ValidateRecord(const v1::Record& record, size_t index) {
  const std::string where = "records[" + std::to_string(index) + "]";
  if (record.problem().op().empty()) return InvalidArgument(where + ".problem.op is empty");
  if (record.variant().empty()) return InvalidArgument(where + ".variant is empty");
  return Status::Ok();
}

}  // namespace

std::string Fingerprint(const v1::DeviceInfo& device, const std::string& source_hash) {
  return "driver=" + std::to_string(device.driver_version()) + ";nvrtc=" + device.nvrtc_version() +
         ";src=" + source_hash;
}

std::string FingerprintOf(const v1::Record& record) { return Fingerprint(record.device(), record.source_hash()); }

Store::Store(sqlite3* db) : db_(db), statements_(std::make_unique<db::StatementCache>(db)) {}

Store::~Store() {
  // Statements must be finalized first: sqlite3_close refuses (SQLITE_BUSY)
  // while any remain, and would leave the file handle open.
  statements_.reset();
  int rc = sqlite3_close(db_);
  if (rc != SQLITE_OK) Logger("db")->error("closing the database: {}", sqlite3_errstr(rc));
}

StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& path) {
  if (path.empty() || path == ":memory:" || path.rfind("file:", 0) == 0) {
    return InvalidArgument("store path must name a real file, got '" + path + "'");
  }
  sqlite3* db = nullptr;
  // NOMUTEX: Store serializes every call on mu_, SQLite's own lock would be redundant.
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                           nullptr);
  if (rc != SQLITE_OK) {
    Status status = db::SqliteError(db, rc, "opening '" + path + "'");
    sqlite3_close(db);  // sqlite3_open_v2 allocates a handle even on failure
    return status;
  }
  sqlite3_extended_result_codes(db, 1);
  std::unique_ptr<Store> store(new Store(db));
  RETURN_IF_ERROR(store->Initialize(path));
  return store;
}

Status Store::Initialize(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  auto run_pragma = [&](const char* sql) -> StatusOr<std::string> {
    ASSIGN_OR_RETURN(Statement stmt, db::StatementCache::PrepareOnce(db_, sql));
    ASSIGN_OR_RETURN(bool has_row, stmt.Step());
    return has_row ? stmt.ColumnText(0) : std::string();
  };

  // Connection-local settings first: they do not write to the file.
  RETURN_IF_ERROR(run_pragma(db::kPragmaBusyTimeout).status());
  RETURN_IF_ERROR(run_pragma(db::kPragmaForeignKeys).status());
  ASSIGN_OR_RETURN(std::string foreign_keys, run_pragma(db::kPragmaForeignKeysQuery));
  if (foreign_keys != "1") return FailedPrecondition("this SQLite build does not enforce foreign keys");

  // The version check comes before anything that writes (journal_mode=WAL
  // rewrites the header), so a file from a newer daemon is left untouched.
  ASSIGN_OR_RETURN(int version, db::ReadSchemaVersion(db_));
  auto too_new = [&](int found) {
    return FailedPrecondition("'" + path + "' has schema version " + std::to_string(found) +
                              ", newer than this binary supports (" + std::to_string(kSchemaVersion) +
                              "); use a newer scantune. The file was not modified.");
  };
  if (version > kSchemaVersion) return too_new(version);

  ASSIGN_OR_RETURN(std::string journal_mode, run_pragma(db::kPragmaJournalModeWal));
  if (journal_mode != "wal") {
    return FailedPrecondition("'" + path + "' cannot use WAL journal mode (got '" + journal_mode +
                              "'); is it on a network filesystem?");
  }
  RETURN_IF_ERROR(run_pragma(db::kPragmaSynchronousFull).status());

  if (version < kSchemaVersion) {
    db::Transaction transaction(db_);
    RETURN_IF_ERROR(transaction.Begin());
    // Re-read under the write lock: another process may have migrated meanwhile.
    ASSIGN_OR_RETURN(version, db::ReadSchemaVersion(db_));
    if (version > kSchemaVersion) return too_new(version);
    RETURN_IF_ERROR(db::MigrateSchema(db_, version, kSchemaVersion));
    RETURN_IF_ERROR(transaction.Commit());
    Logger("db")->info("'{}': schema migrated from version {} to {}", path, version, kSchemaVersion);
  }
  return Status::Ok();
}

int Store::schema_version() {
  std::lock_guard<std::mutex> lock(mu_);
  StatusOr<int> version = db::ReadSchemaVersion(db_);
  if (!version.ok()) {
    Logger("db")->error("reading the schema version: {}", version.status().ToString());
    return 0;
  }
  return *version;
}

Status Store::UpsertDevice(const v1::DeviceInfo& device) {
  if (device.uuid().empty()) return InvalidArgument("device uuid is empty");
  std::lock_guard<std::mutex> lock(mu_);
  const std::string now = NowIso8601();
  ASSIGN_OR_RETURN(Statement stmt, statements_->Get(db::kUpsertDevice));
  stmt.BindText(1, device.uuid())
      .BindText(2, device.name())
      .BindInt64(3, device.cc_major())
      .BindInt64(4, device.cc_minor())
      .BindInt64(5, device.sm_count())
      .BindInt64(6, static_cast<int64_t>(device.memory_bytes()))
      .BindInt64(7, device.sm_clock_khz())
      .BindInt64(8, device.memory_clock_khz())
      .BindInt64(9, device.driver_version())
      .BindText(10, device.nvrtc_version())
      .BindBlob(11, device.SerializeAsString())
      .BindText(12, now)
      .BindText(13, now);
  return stmt.Run();
}

StatusOr<std::vector<v1::DeviceInfo>> Store::ListDevices() {
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(Statement stmt, statements_->Get(db::kListDevices));
  std::vector<v1::DeviceInfo> devices;
  while (true) {
    ASSIGN_OR_RETURN(bool has_row, stmt.Step());
    if (!has_row) break;
    ASSIGN_OR_RETURN(v1::DeviceInfo device, ParseBlob<v1::DeviceInfo>(stmt.ColumnBlob(0), "device", 0));
    devices.push_back(std::move(device));
  }
  return devices;
}

StatusOr<std::optional<CachedCompile>> Store::GetCompiled(const std::string& cache_key) {
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(Statement stmt, statements_->Get(db::kSelectCompiled));
  stmt.BindText(1, cache_key);
  ASSIGN_OR_RETURN(bool has_row, stmt.Step());
  if (!has_row) return std::optional<CachedCompile>();
  CachedCompile entry;
  entry.cache_key = stmt.ColumnText(0);
  entry.variant = stmt.ColumnText(1);
  entry.arch = stmt.ColumnText(2);
  entry.cubin = stmt.ColumnBlob(3);
  entry.lowered_names_json = stmt.ColumnText(4);
  entry.log = stmt.ColumnText(5);
  entry.compile_ms = stmt.ColumnDouble(6);
  ASSIGN_OR_RETURN(entry.state, EnumFromText(v1::ResultState_descriptor(), stmt.ColumnText(7)));
  return std::optional<CachedCompile>(std::move(entry));
}

Status Store::PutCompiled(const CachedCompile& entry) {
  if (entry.cache_key.empty()) return InvalidArgument("compile cache key is empty");
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(Statement stmt, statements_->Get(db::kUpsertCompiled));
  stmt.BindText(1, entry.cache_key)
      .BindText(2, entry.variant)
      .BindText(3, entry.arch)
      .BindBlob(4, entry.cubin)
      .BindText(5, entry.lowered_names_json)
      .BindText(6, entry.log)
      .BindDouble(7, entry.compile_ms)
      .BindText(8, StateText(entry.state))
      .BindText(9, NowIso8601());
  return stmt.Run();
}

StatusOr<int64_t> Store::InsertRecord(const v1::Record& record, const std::string& now) {
  {
    ASSIGN_OR_RETURN(Statement variant, statements_->Get(db::kInsertVariant));
    variant.BindText(1, OpKeyOf(record.problem()))
        .BindText(2, record.variant())
        .BindText(3, AlgorithmOf(record.variant()))
        .BindText(4, now);
    RETURN_IF_ERROR(variant.Run());
  }
  // The id column is the truth for ids; the blob is stored without one so a
  // stale id from the caller can never disagree with it.
  v1::Record stored = record;
  stored.clear_id();
  if (stored.created_at().empty()) stored.set_created_at(now);

  const v1::Stats* ranked = RankedStats(stored);
  ASSIGN_OR_RETURN(Statement stmt, statements_->Get(db::kInsertRecord));
  stmt.BindText(1, stored.device().uuid());
  int next = BindProblemKey(stmt, 2, stored.device().name(), stored.problem());
  stmt.BindText(next, stored.variant())
      .BindText(next + 1, StateText(stored.state()))
      .BindText(next + 2, stored.origin())
      .BindInt64(next + 3, static_cast<int64_t>(stored.job_id()))
      .BindText(next + 4, FingerprintOf(stored));
  // NULL rather than 0 for an untimed record, so "ORDER BY median_ms" never
  // ranks a failure as the fastest.
  if (ranked != nullptr && ranked->median_ms() > 0) {
    stmt.BindDouble(next + 5, ranked->median_ms());
  } else {
    stmt.BindNull(next + 5);
  }
  stmt.BindDouble(next + 6, stored.rel_err())
      .BindText(next + 7, stored.created_at())
      .BindBlob(next + 8, stored.SerializeAsString());
  RETURN_IF_ERROR(stmt.Run());
  return sqlite3_last_insert_rowid(db_);
}

Status Store::UpsertSelection(const v1::Selection& selection, const std::string& now) {
  ASSIGN_OR_RETURN(Statement stmt, statements_->Get(db::kUpsertSelection));
  int next = BindProblemKey(stmt, 1, selection.device_model(), selection.problem());
  stmt.BindInt64(next, selection.deterministic() ? 1 : 0)
      .BindText(next + 1, selection.variant())
      .BindInt64(next + 2, selection.record_id())
      .BindDouble(next + 3, selection.median_ms())
      .BindText(next + 4, selection.runner_up())
      .BindDouble(next + 5, selection.margin_pct())
      .BindText(next + 6, selection.decided_by())
      .BindText(next + 7, selection.fingerprint())
      .BindText(next + 8, selection.updated_at().empty() ? now : selection.updated_at())
      .BindBlob(next + 9, selection.SerializeAsString());
  RETURN_IF_ERROR(stmt.Run());
  ASSIGN_OR_RETURN(Statement history, statements_->Get(db::kInsertSelectionHistory));
  next = BindProblemKey(history, 1, selection.device_model(), selection.problem());
  history.BindInt64(next, selection.deterministic() ? 1 : 0)
      .BindText(next + 1, selection.variant())
      .BindInt64(next + 2, selection.record_id())
      .BindText(next + 3, selection.fingerprint())
      .BindText(next + 4, selection.updated_at().empty() ? now : selection.updated_at())
      .BindBlob(next + 5, selection.SerializeAsString());
  return history.Run();
}

StatusOr<std::vector<int64_t>> Store::CommitResults(const std::vector<v1::Record>& records,
                                                    const std::optional<v1::Selection>& selection,
                                                    int winner_index) {
  std::vector<SelectionUpdate> updates;
  if (selection) updates.push_back({*selection, winner_index});
  return CommitResults(records, updates);
}

StatusOr<std::vector<int64_t>> Store::CommitResults(const std::vector<v1::Record>& records,
                                                    const std::vector<SelectionUpdate>& selections) {
  // Everything that can be checked without the database is checked before the
  // transaction starts, so a bad call costs no write lock.
  for (size_t i = 0; i < records.size(); ++i) RETURN_IF_ERROR(ValidateRecord(records[i], i));
  for (const auto& [selection, winner_index] : selections) {
    if (winner_index < 0 || static_cast<size_t>(winner_index) >= records.size()) {
      return InvalidArgument("winner_index " + std::to_string(winner_index) + " is out of range for " +
                             std::to_string(records.size()) + " records");
    }
    const v1::Record& winner = records[winner_index];
    if (selection.device_model().empty()) return InvalidArgument("selection.device_model is empty");
    if (selection.problem().op().empty()) return InvalidArgument("selection.problem.op is empty");
    if (winner.state() != v1::OK) {
      return FailedPrecondition("only an OK record can be selected; records[" + std::to_string(winner_index) +
                                "] (" + winner.variant() + ") is " + StateText(winner.state()));
    }
    if (winner.variant() != selection.variant()) {
      return InvalidArgument("selection.variant '" + selection.variant() + "' is not the winner's variant '" +
                             winner.variant() + "'");
    }
  }

  std::lock_guard<std::mutex> lock(mu_);
  const std::string now = NowIso8601();
  db::Transaction transaction(db_);
  RETURN_IF_ERROR(transaction.Begin());
  std::vector<int64_t> ids;
  ids.reserve(records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    StatusOr<int64_t> id = InsertRecord(records[i], now);
    if (!id.ok()) return id.status().Annotate("inserting records[" + std::to_string(i) + "]");
    ids.push_back(*id);
  }
  for (const auto& [selection, winner_index] : selections) {
    v1::Selection stored = selection;
    stored.set_record_id(ids[winner_index]);
    if (stored.updated_at().empty()) stored.set_updated_at(now);
    if (stored.fingerprint().empty()) stored.set_fingerprint(FingerprintOf(records[winner_index]));
    Status status = UpsertSelection(stored, now);
    if (!status.ok()) return status.Annotate(stored.deterministic() ? "upserting the deterministic selection"
                                                                    : "upserting the selection");
  }
  RETURN_IF_ERROR(transaction.Commit());
  return ids;
}

StatusOr<v1::Record> Store::GetRecord(int64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(Statement stmt, statements_->Get(db::kSelectRecord));
  stmt.BindInt64(1, id);
  ASSIGN_OR_RETURN(bool has_row, stmt.Step());
  if (!has_row) return NotFound("no record with id " + std::to_string(id));
  return RecordFromRow(stmt);
}

StatusOr<RecordPage> Store::ListRecords(const v1::RecordFilter& filter, int page_size,
                                        const std::string& page_token) {
  ASSIGN_OR_RETURN(page_size, PageSize(page_size));
  int64_t before_id = std::numeric_limits<int64_t>::max();
  if (!page_token.empty()) {
    ASSIGN_OR_RETURN(before_id, ParsePageToken(page_token, kPageTokenPrefix));
  }
  FilteredQuery query(db::kListRecordsHead, before_id);
  query.AddRecordFilter(filter);
  query.AddRecordOnlyFilter(filter);

  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(Statement stmt, query.Prepare(*statements_, db::kListRecordsTail, page_size));
  RecordPage page;
  while (true) {
    ASSIGN_OR_RETURN(bool has_row, stmt.Step());
    if (!has_row) break;
    if (static_cast<int>(page.records.size()) == page_size) {
      page.next_page_token = kPageTokenPrefix + std::to_string(page.records.back().id());
      break;
    }
    ASSIGN_OR_RETURN(v1::Record record, RecordFromRow(stmt));
    page.records.push_back(std::move(record));
  }
  return page;
}

StatusOr<SelectionPage> Store::ListAllSelections(const v1::ListSelectionsRequest& request) {
  const v1::RecordFilter& filter = request.filter();
  if (filter.state() != v1::STATE_UNSPECIFIED || !filter.origin().empty()) {
    return InvalidArgument("a selection has no state or origin to filter by (only OK records are selected)");
  }
  ASSIGN_OR_RETURN(const int page_size, PageSize(request.page_size()));
  // The current selections go up by rowid from 0, the history down by id.
  const bool history = request.history();
  const char* const prefix = history ? kHistoryPageTokenPrefix : kSelectionPageTokenPrefix;
  int64_t bound = history ? std::numeric_limits<int64_t>::max() : 0;
  if (!request.page_token().empty()) {
    ASSIGN_OR_RETURN(bound, ParsePageToken(request.page_token(), prefix));
  }
  FilteredQuery query(history ? db::kListSelectionHistoryHead : db::kListSelectionsHead, bound);
  query.AddRecordFilter(filter);
  if (request.deterministic_only()) query.AddCondition(db::kWhereDeterministic, int64_t{1});

  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(Statement stmt, query.Prepare(*statements_,
                                                 history ? db::kListSelectionHistoryTail : db::kListSelectionsTail,
                                                 page_size));
  SelectionPage page;
  int64_t last_key = 0;
  while (true) {
    ASSIGN_OR_RETURN(bool has_row, stmt.Step());
    if (!has_row) break;
    if (static_cast<int>(page.selections.size()) == page_size) {
      page.next_page_token = prefix + std::to_string(last_key);
      break;
    }
    last_key = stmt.ColumnInt64(0);
    ASSIGN_OR_RETURN(v1::Selection selection, ParseBlob<v1::Selection>(stmt.ColumnBlob(1), "selection", 0));
    if (history) selection.set_superseded(stmt.ColumnInt64(2) == 0);
    page.selections.push_back(std::move(selection));
  }
  return page;
}

StatusOr<std::optional<v1::Selection>> Store::GetSelection(const std::string& device_model, const Problem& problem,
                                                           bool deterministic) {
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(Statement stmt, statements_->Get(db::kSelectSelection));
  const int next = BindProblemKey(stmt, 1, device_model, ToProto(problem));
  stmt.BindInt64(next, deterministic ? 1 : 0);
  ASSIGN_OR_RETURN(bool has_row, stmt.Step());
  if (!has_row) return std::optional<v1::Selection>();
  ASSIGN_OR_RETURN(v1::Selection selection, ParseBlob<v1::Selection>(stmt.ColumnBlob(0), "selection", 0));
  return std::optional<v1::Selection>(std::move(selection));
}

StatusOr<std::vector<v1::Selection>> Store::ListSelections(const std::string& device_model, const Problem& like,
                                                           bool deterministic) {
  const v1::Problem problem = ToProto(like);
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(Statement stmt, statements_->Get(db::kListSelectionFamily));
  stmt.BindText(1, device_model)
      .BindText(2, OpKeyOf(problem))
      .BindText(3, DTypeText(problem.dtype()))
      .BindText(4, ModeText(problem.mode()))
      .BindInt64(5, problem.has_h0() ? 1 : 0)
      .BindInt64(6, deterministic ? 1 : 0);
  std::vector<v1::Selection> selections;
  while (true) {
    ASSIGN_OR_RETURN(bool has_row, stmt.Step());
    if (!has_row) break;
    ASSIGN_OR_RETURN(v1::Selection selection, ParseBlob<v1::Selection>(stmt.ColumnBlob(0), "selection", 0));
    selections.push_back(std::move(selection));
  }
  return selections;
}

StatusOr<std::vector<v1::Record>> Store::FailedRecords(const std::string& device_model, const Problem& problem,
                                                       const std::string& fingerprint) {
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(Statement stmt, statements_->Get(db::kSelectFailedRecords));
  int next = BindProblemKey(stmt, 1, device_model, ToProto(problem));
  stmt.BindText(next, fingerprint).BindText(next + 1, StateText(v1::OK));
  std::vector<v1::Record> records;
  while (true) {
    ASSIGN_OR_RETURN(bool has_row, stmt.Step());
    if (!has_row) break;
    ASSIGN_OR_RETURN(v1::Record record, RecordFromRow(stmt));
    records.push_back(std::move(record));
  }
  return records;
}

}  // namespace scantune
