// Schema of the calibration database: every SQL statement the store runs, as
// named constants with explicit column lists and `?` placeholders, and the
// migrations that bring a file from its schema version to the latest one.
//
// Enums are stored as their proto names ("BF16", "FWD_BWD", "WRONG_RESULT") so
// that the file reads well in the sqlite3 shell; timestamps are ISO-8601 UTC.
// Every records/selections row also keeps its whole proto as a blob: the
// columns exist to filter and sort, the blob is what is returned, so nothing
// the worker measured is lost (raw samples, rounds, memory, ...).
//
// Adding version 3: write kMigrateToV3[] and append {3, kMigrateToV3} to
// kMigrations; Store::kSchemaVersion must then be 3 (a static_assert checks).
#pragma once

#include <iterator>
#include <span>

#include "common/status.h"

struct sqlite3;

namespace scantune::db {

// ---- connection settings (set once at open) -----------------------------------

// The daemon is the one writer, but a CLI or a second reader may hold the file
// briefly; wait rather than fail at once.
inline constexpr char kPragmaBusyTimeout[] = "PRAGMA busy_timeout = 5000";
inline constexpr char kPragmaForeignKeys[] = "PRAGMA foreign_keys = ON";
inline constexpr char kPragmaForeignKeysQuery[] = "PRAGMA foreign_keys";
// Readers (selections served while a tuning job commits) never block the writer.
inline constexpr char kPragmaJournalModeWal[] = "PRAGMA journal_mode = WAL";
// FULL: a committed selection survives a power loss, not only a crash.
inline constexpr char kPragmaSynchronousFull[] = "PRAGMA synchronous = FULL";

// ---- meta -----------------------------------------------------------------

inline constexpr char kMetaTableExists[] =
    "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'meta'";
inline constexpr char kCountTables[] =
    "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'";
inline constexpr char kSelectMetaValue[] = "SELECT value FROM meta WHERE key = ?";
inline constexpr char kUpsertMetaValue[] =
    "INSERT INTO meta (key, value) VALUES (?, ?) "
    "ON CONFLICT (key) DO UPDATE SET value = excluded.value";
inline constexpr char kSchemaVersionKey[] = "schema_version";

// ---- version 1 --------------------------------------------------------------

inline constexpr char kCreateMeta[] =
    "CREATE TABLE meta ("
    " key TEXT PRIMARY KEY NOT NULL,"
    " value TEXT NOT NULL)";

inline constexpr char kCreateDevices[] =
    "CREATE TABLE devices ("
    " uuid TEXT PRIMARY KEY NOT NULL,"
    " name TEXT NOT NULL,"
    " cc_major INTEGER NOT NULL,"
    " cc_minor INTEGER NOT NULL,"
    " sm_count INTEGER NOT NULL,"
    " memory_bytes INTEGER NOT NULL,"
    " sm_clock_khz INTEGER NOT NULL,"
    " memory_clock_khz INTEGER NOT NULL,"
    " driver_version INTEGER NOT NULL,"
    " nvrtc_version TEXT NOT NULL,"
    " info BLOB NOT NULL,"                 // v1::DeviceInfo
    " first_seen TEXT NOT NULL,"
    " last_seen TEXT NOT NULL)";

// A variant name is operator-independent, but which names were run for which
// operator is what an inspector asks, hence (op, name).
inline constexpr char kCreateVariants[] =
    "CREATE TABLE variants ("
    " op TEXT NOT NULL,"
    " name TEXT NOT NULL,"
    " algorithm TEXT NOT NULL,"
    " first_seen TEXT NOT NULL,"
    " PRIMARY KEY (op, name))";

inline constexpr char kCreateCompileCache[] =
    "CREATE TABLE compile_cache ("
    " cache_key TEXT PRIMARY KEY NOT NULL,"
    " variant TEXT NOT NULL,"
    " arch TEXT NOT NULL,"
    " cubin BLOB NOT NULL,"
    " lowered_names_json TEXT NOT NULL,"
    " log TEXT NOT NULL,"
    " compile_ms REAL NOT NULL,"
    " state TEXT NOT NULL,"                // v1::ResultState name
    " created_at TEXT NOT NULL)";

// AUTOINCREMENT: ids are never reused, so a record id quoted in a log or a
// selection keeps naming the same measurement forever.
inline constexpr char kCreateRecords[] =
    "CREATE TABLE records ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " device_uuid TEXT NOT NULL,"
    " device_model TEXT NOT NULL,"         // DeviceInfo.name
    " op TEXT NOT NULL,"
    " batch INTEGER NOT NULL,"
    " length INTEGER NOT NULL,"
    " width INTEGER NOT NULL,"
    " dtype TEXT NOT NULL,"
    " mode TEXT NOT NULL,"
    " has_h0 INTEGER NOT NULL,"
    " variant TEXT NOT NULL,"
    " state TEXT NOT NULL,"
    " origin TEXT NOT NULL,"
    " job_id INTEGER NOT NULL,"
    " fingerprint TEXT NOT NULL,"
    " median_ms REAL,"                     // ranked mode (problem.mode); NULL when not timed
    " rel_err REAL NOT NULL,"
    " created_at TEXT NOT NULL,"
    " record BLOB NOT NULL,"               // v1::Record, id cleared (the column is the truth)
    " FOREIGN KEY (op, variant) REFERENCES variants (op, name))";

// FailedRecords and per-device browsing: equality on the whole key.
inline constexpr char kCreateRecordsProblemIndex[] =
    "CREATE INDEX records_by_problem ON records"
    " (device_model, op, batch, length, width, dtype, mode, has_h0, fingerprint, state)";
// Single-column indexes for ListRecords: equality on one column plus the
// implicit rowid gives rows already in id order, so a page needs no sort.
inline constexpr char kCreateRecordsVariantIndex[] = "CREATE INDEX records_by_variant ON records (variant)";
inline constexpr char kCreateRecordsStateIndex[] = "CREATE INDEX records_by_state ON records (state)";
inline constexpr char kCreateRecordsJobIndex[] = "CREATE INDEX records_by_job ON records (job_id)";

inline constexpr char kCreateSelections[] =
    "CREATE TABLE selections ("
    " device_model TEXT NOT NULL,"
    " op TEXT NOT NULL,"
    " batch INTEGER NOT NULL,"
    " length INTEGER NOT NULL,"
    " width INTEGER NOT NULL,"
    " dtype TEXT NOT NULL,"
    " mode TEXT NOT NULL,"
    " has_h0 INTEGER NOT NULL,"
    " variant TEXT NOT NULL,"
    " record_id INTEGER NOT NULL REFERENCES records (id),"
    " median_ms REAL NOT NULL,"
    " runner_up TEXT NOT NULL,"
    " margin_pct REAL NOT NULL,"
    " decided_by TEXT NOT NULL,"
    " fingerprint TEXT NOT NULL,"
    " updated_at TEXT NOT NULL,"
    " selection BLOB NOT NULL,"            // v1::Selection
    " PRIMARY KEY (device_model, op, batch, length, width, dtype, mode, has_h0))";

// ListSelections: every shape of one (device model, op, dtype, mode, h0) family.
inline constexpr char kCreateSelectionsFamilyIndex[] =
    "CREATE INDEX selections_by_family ON selections (device_model, op, dtype, mode, has_h0)";

inline constexpr const char* kMigrateToV1[] = {
    kCreateMeta,
    kCreateDevices,
    kCreateVariants,
    kCreateCompileCache,
    kCreateRecords,
    kCreateRecordsProblemIndex,
    kCreateRecordsVariantIndex,
    kCreateRecordsStateIndex,
    kCreateRecordsJobIndex,
    kCreateSelections,
    kCreateSelectionsFamilyIndex,
};

// ---- version 2: deterministic selections ------------------------------------
// A second selection per problem, made among the variants whose outputs have
// the same bits on every run (Selection.deterministic): the column joins the
// key. SQLite cannot change a primary key in place, so the table is rebuilt;
// the rows of version 1 are the ordinary selections (deterministic = 0).

inline constexpr char kCreateSelectionsV2[] =
    "CREATE TABLE selections_v2 ("
    " device_model TEXT NOT NULL,"
    " op TEXT NOT NULL,"
    " batch INTEGER NOT NULL,"
    " length INTEGER NOT NULL,"
    " width INTEGER NOT NULL,"
    " dtype TEXT NOT NULL,"
    " mode TEXT NOT NULL,"
    " has_h0 INTEGER NOT NULL,"
    " deterministic INTEGER NOT NULL,"
    " variant TEXT NOT NULL,"
    " record_id INTEGER NOT NULL REFERENCES records (id),"
    " median_ms REAL NOT NULL,"
    " runner_up TEXT NOT NULL,"
    " margin_pct REAL NOT NULL,"
    " decided_by TEXT NOT NULL,"
    " fingerprint TEXT NOT NULL,"
    " updated_at TEXT NOT NULL,"
    " selection BLOB NOT NULL,"            // v1::Selection
    " PRIMARY KEY (device_model, op, batch, length, width, dtype, mode, has_h0, deterministic))";
inline constexpr char kCopySelectionsToV2[] =
    "INSERT INTO selections_v2 (device_model, op, batch, length, width, dtype, mode, has_h0, deterministic,"
    " variant, record_id, median_ms, runner_up, margin_pct, decided_by, fingerprint, updated_at, selection)"
    " SELECT device_model, op, batch, length, width, dtype, mode, has_h0, 0,"
    " variant, record_id, median_ms, runner_up, margin_pct, decided_by, fingerprint, updated_at, selection"
    " FROM selections";
inline constexpr char kDropSelectionsV1[] = "DROP TABLE selections";
inline constexpr char kRenameSelectionsV2[] = "ALTER TABLE selections_v2 RENAME TO selections";
inline constexpr char kCreateSelectionsFamilyIndexV2[] =
    "CREATE INDEX selections_by_family ON selections (device_model, op, dtype, mode, has_h0, deterministic)";

inline constexpr const char* kMigrateToV2[] = {
    kCreateSelectionsV2, kCopySelectionsToV2, kDropSelectionsV1, kRenameSelectionsV2, kCreateSelectionsFamilyIndexV2,
};

// ---- version 3: the selections' history ---------------------------------------
// Every selection decision, appended in the transaction that upserts it, so a
// selection a re-tune replaces (a stale one, or one a new kernel beat) is kept
// and can be listed. The selections of version 2 become its first rows.

inline constexpr char kCreateSelectionHistory[] =
    "CREATE TABLE selection_history ("
    " id INTEGER PRIMARY KEY,"
    " device_model TEXT NOT NULL,"
    " op TEXT NOT NULL,"
    " batch INTEGER NOT NULL,"
    " length INTEGER NOT NULL,"
    " width INTEGER NOT NULL,"
    " dtype TEXT NOT NULL,"
    " mode TEXT NOT NULL,"
    " has_h0 INTEGER NOT NULL,"
    " deterministic INTEGER NOT NULL,"
    " variant TEXT NOT NULL,"
    " record_id INTEGER NOT NULL REFERENCES records (id),"
    " fingerprint TEXT NOT NULL,"
    " updated_at TEXT NOT NULL,"
    " selection BLOB NOT NULL)";            // v1::Selection
inline constexpr char kCreateSelectionHistoryIndex[] =
    "CREATE INDEX selection_history_by_problem ON selection_history"
    " (device_model, op, batch, length, width, dtype, mode, has_h0, deterministic)";
inline constexpr char kCopySelectionsToHistory[] =
    "INSERT INTO selection_history (device_model, op, batch, length, width, dtype, mode, has_h0, deterministic,"
    " variant, record_id, fingerprint, updated_at, selection)"
    " SELECT device_model, op, batch, length, width, dtype, mode, has_h0, deterministic,"
    " variant, record_id, fingerprint, updated_at, selection FROM selections ORDER BY updated_at, rowid";

inline constexpr const char* kMigrateToV3[] = {
    kCreateSelectionHistory, kCreateSelectionHistoryIndex, kCopySelectionsToHistory,
};

struct MigrationStep {
  int to_version;
  std::span<const char* const> statements;
};

inline constexpr MigrationStep kMigrations[] = {
    {1, kMigrateToV1},
    {2, kMigrateToV2},
    {3, kMigrateToV3},
};

inline constexpr int kLatestSchemaVersion = kMigrations[std::size(kMigrations) - 1].to_version;

// ---- devices ----------------------------------------------------------------

inline constexpr char kUpsertDevice[] =
    "INSERT INTO devices (uuid, name, cc_major, cc_minor, sm_count, memory_bytes, sm_clock_khz,"
    " memory_clock_khz, driver_version, nvrtc_version, info, first_seen, last_seen)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (uuid) DO UPDATE SET name = excluded.name, cc_major = excluded.cc_major,"
    " cc_minor = excluded.cc_minor, sm_count = excluded.sm_count, memory_bytes = excluded.memory_bytes,"
    " sm_clock_khz = excluded.sm_clock_khz, memory_clock_khz = excluded.memory_clock_khz,"
    " driver_version = excluded.driver_version, nvrtc_version = excluded.nvrtc_version,"
    " info = excluded.info, last_seen = excluded.last_seen";
inline constexpr char kListDevices[] = "SELECT info FROM devices ORDER BY first_seen, uuid";

// ---- variants ---------------------------------------------------------------

inline constexpr char kInsertVariant[] =
    "INSERT INTO variants (op, name, algorithm, first_seen) VALUES (?, ?, ?, ?)"
    " ON CONFLICT (op, name) DO NOTHING";

// ---- compile cache ----------------------------------------------------------

inline constexpr char kSelectCompiled[] =
    "SELECT cache_key, variant, arch, cubin, lowered_names_json, log, compile_ms, state"
    " FROM compile_cache WHERE cache_key = ?";
inline constexpr char kUpsertCompiled[] =
    "INSERT INTO compile_cache (cache_key, variant, arch, cubin, lowered_names_json, log, compile_ms, state,"
    " created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (cache_key) DO UPDATE SET variant = excluded.variant, arch = excluded.arch,"
    " cubin = excluded.cubin, lowered_names_json = excluded.lowered_names_json, log = excluded.log,"
    " compile_ms = excluded.compile_ms, state = excluded.state, created_at = excluded.created_at";

// ---- records ----------------------------------------------------------------

inline constexpr char kInsertRecord[] =
    "INSERT INTO records (device_uuid, device_model, op, batch, length, width, dtype, mode, has_h0, variant,"
    " state, origin, job_id, fingerprint, median_ms, rel_err, created_at, record)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
inline constexpr char kSelectRecord[] = "SELECT id, record FROM records WHERE id = ?";

// ListRecords is composed from these fragments only: the head, one condition
// per set filter field (in this order), the tail. The keyset cursor is bound
// first, the limit last. Composing per filter (rather than one statement with
// "? = '' OR col = ?" for every field) lets SQLite use an index.
// The unary `+` keeps SQLite off indexes whose order is not id order (the
// multi-column records_by_problem): with them it would sort every matching
// row, blob included, for each page. Unindexed conditions are checked during
// a newest-first rowid walk that stops at the page size; the blob is the last
// column, so rows that do not match never read its overflow pages.
inline constexpr char kListRecordsHead[] = "SELECT id, record FROM records WHERE id < ?";
inline constexpr char kWhereDeviceModel[] = " AND +device_model = ?";
// The op column holds Problem::OpKey(): "selective_scan:n16+z" matches a filter
// of "selective_scan" (the GLOB parameter is the filter + ":*") or of the whole key.
inline constexpr char kWhereOp[] = " AND (+op = ? OR +op GLOB ?)";
inline constexpr char kWhereBatch[] = " AND +batch = ?";
inline constexpr char kWhereLength[] = " AND +length = ?";
inline constexpr char kWhereWidth[] = " AND +width = ?";
inline constexpr char kWhereDType[] = " AND +dtype = ?";
inline constexpr char kWhereMode[] = " AND +mode = ?";
inline constexpr char kWhereVariant[] = " AND variant = ?";   // records_by_variant
inline constexpr char kWhereState[] = " AND state = ?";       // records_by_state
inline constexpr char kWhereOrigin[] = " AND +origin = ?";
inline constexpr char kListRecordsTail[] = " ORDER BY id DESC LIMIT ?";

inline constexpr char kSelectFailedRecords[] =
    "SELECT id, record FROM records"
    " WHERE device_model = ? AND op = ? AND batch = ? AND length = ? AND width = ? AND dtype = ?"
    " AND mode = ? AND has_h0 = ? AND fingerprint = ? AND state != ?"
    " ORDER BY id";

// ---- selections -------------------------------------------------------------

inline constexpr char kUpsertSelection[] =
    "INSERT INTO selections (device_model, op, batch, length, width, dtype, mode, has_h0, deterministic, variant,"
    " record_id, median_ms, runner_up, margin_pct, decided_by, fingerprint, updated_at, selection)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (device_model, op, batch, length, width, dtype, mode, has_h0, deterministic) DO UPDATE SET"
    " variant = excluded.variant, record_id = excluded.record_id, median_ms = excluded.median_ms,"
    " runner_up = excluded.runner_up, margin_pct = excluded.margin_pct, decided_by = excluded.decided_by,"
    " fingerprint = excluded.fingerprint, updated_at = excluded.updated_at, selection = excluded.selection";
inline constexpr char kInsertSelectionHistory[] =
    "INSERT INTO selection_history (device_model, op, batch, length, width, dtype, mode, has_h0, deterministic,"
    " variant, record_id, fingerprint, updated_at, selection) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
inline constexpr char kSelectSelection[] =
    "SELECT selection FROM selections"
    " WHERE device_model = ? AND op = ? AND batch = ? AND length = ? AND width = ? AND dtype = ?"
    " AND mode = ? AND has_h0 = ? AND deterministic = ?";
inline constexpr char kListSelectionFamily[] =
    "SELECT selection FROM selections"
    " WHERE device_model = ? AND op = ? AND dtype = ? AND mode = ? AND has_h0 = ? AND deterministic = ?"
    " ORDER BY batch, length, width";
// ListAllSelections: every selection matching a filter (the kWhere* conditions
// of the records' listing that name key columns, plus kWhereDeterministic), in
// rowid order from the page's bound (a row keeps its rowid when re-tuned: the
// upsert updates in place), so pages neither repeat nor skip a selection.
inline constexpr char kListSelectionsHead[] = "SELECT rowid, selection FROM selections WHERE rowid > ?";
inline constexpr char kWhereDeterministic[] = " AND deterministic = ?";
inline constexpr char kListSelectionsTail[] = " ORDER BY rowid LIMIT ?";
// The history, newest first, each decision with whether it is still the
// problem's selection (the same winning record).
inline constexpr char kListSelectionHistoryHead[] =
    "SELECT id, selection, EXISTS (SELECT 1 FROM selections s WHERE s.device_model = selection_history.device_model"
    " AND s.op = selection_history.op AND s.batch = selection_history.batch"
    " AND s.length = selection_history.length AND s.width = selection_history.width"
    " AND s.dtype = selection_history.dtype AND s.mode = selection_history.mode"
    " AND s.has_h0 = selection_history.has_h0 AND s.deterministic = selection_history.deterministic"
    " AND s.record_id = selection_history.record_id)"
    " FROM selection_history WHERE id < ?";
inline constexpr char kListSelectionHistoryTail[] = " ORDER BY id DESC LIMIT ?";

// ---- migrations ---------------------------------------------------------------

// The file's schema version: 0 for a new (empty) file. FAILED_PRECONDITION for
// a database that has tables but no meta table (not a scantune store).
StatusOr<int> ReadSchemaVersion(sqlite3* db);

// Runs the steps after `from_version` up to `to_version` and records the new
// version. The caller holds the transaction, so a failed step changes nothing.
Status MigrateSchema(sqlite3* db, int from_version, int to_version);

}  // namespace scantune::db
