// Store: the calibration database, one SQLite file owned by the daemon (the
// one writer). Holds devices, variants, the compile cache, records (with raw
// samples and every statistic) and selections. Opened in WAL mode with
// synchronous=FULL; the schema carries a version in a meta table and is
// migrated on open. Each batch of results and its selection update commit in
// one transaction. Thread-safe: calls are serialized on an internal mutex.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/problem.h"
#include "common/status.h"
#include "proto/scantune.pb.h"

struct sqlite3;

namespace scantune {
namespace db {
class StatementCache;
}  // namespace db

struct CachedCompile {
  std::string cache_key;
  std::string variant;
  std::string arch;
  std::string cubin;
  std::string lowered_names_json;  // {"name expression": "mangled", ...}
  std::string log;
  double compile_ms = 0.0;
  int state = 0;                   // v1::ResultState
};

struct SelectionUpdate {
  v1::Selection selection;
  int winner_index = -1;           // into the records committed with it
};

struct RecordPage {
  std::vector<v1::Record> records;
  std::string next_page_token;     // empty on the last page
};

struct SelectionPage {
  std::vector<v1::Selection> selections;
  std::string next_page_token;     // empty on the last page
};

class Store {
 public:
  static constexpr int kSchemaVersion = 3;

  // Creates or migrates the file. ":memory:" is not accepted: the store is a real file.
  static StatusOr<std::unique_ptr<Store>> Open(const std::string& path);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  int schema_version();

  Status UpsertDevice(const v1::DeviceInfo& device);   // keyed by uuid
  StatusOr<std::vector<v1::DeviceInfo>> ListDevices();

  StatusOr<std::optional<CachedCompile>> GetCompiled(const std::string& cache_key);
  Status PutCompiled(const CachedCompile& entry);

  // Inserts the records (ids assigned, returned in order) and upserts each
  // selection (the ordinary or the deterministic one, by its `deterministic`)
  // with record_id = the id of records[winner_index], all in one transaction:
  // either everything lands or nothing does.
  StatusOr<std::vector<int64_t>> CommitResults(const std::vector<v1::Record>& records,
                                               const std::vector<SelectionUpdate>& selections);
  // The same with at most one selection.
  StatusOr<std::vector<int64_t>> CommitResults(const std::vector<v1::Record>& records,
                                               const std::optional<v1::Selection>& selection,
                                               int winner_index);

  StatusOr<v1::Record> GetRecord(int64_t id);
  // Newest first. page_size in [1, 1000]; the token is opaque to callers.
  StatusOr<RecordPage> ListRecords(const v1::RecordFilter& filter, int page_size, const std::string& page_token);

  // The selection for (device model, op, shape, dtype, mode, has_h0), as stored
  // (stale is the caller's judgement from the fingerprint); `deterministic`:
  // the one made among the deterministic variants.
  StatusOr<std::optional<v1::Selection>> GetSelection(const std::string& device_model, const Problem& problem,
                                                      bool deterministic = false);
  // Every selection for the device model with the same op, dtype, mode and has_h0 (any shape).
  StatusOr<std::vector<v1::Selection>> ListSelections(const std::string& device_model, const Problem& like,
                                                      bool deterministic = false);

  // Every stored selection matching the filter's device model, op, shape,
  // dtype, mode and variant (unset fields match any; a state or origin is
  // INVALID_ARGUMENT: selections have neither), in the order they were first
  // made; deterministic_only: only those made among the deterministic
  // variants; history: every decision ever committed instead, newest first,
  // each flagged superseded unless it is still the selection. Paged as
  // ListRecords; stale is the caller's judgement.
  StatusOr<SelectionPage> ListAllSelections(const v1::ListSelectionsRequest& request);

  // Records with a non-OK state for this device model, problem and fingerprint:
  // those variants are not retried blindly.
  StatusOr<std::vector<v1::Record>> FailedRecords(const std::string& device_model, const Problem& problem,
                                                  const std::string& fingerprint);

 private:
  explicit Store(sqlite3* db);
  // PRAGMAs, the schema version check and migrations; run once by Open.
  Status Initialize(const std::string& path);
  // Inserts one record (and its variant row) inside the caller's transaction.
  StatusOr<int64_t> InsertRecord(const v1::Record& record, const std::string& now);
  Status UpsertSelection(const v1::Selection& selection, const std::string& now);

  sqlite3* db_;
  std::mutex mu_;
  std::unique_ptr<db::StatementCache> statements_;  // guarded by mu_; finalized before db_ closes
};

// "driver=13000;nvrtc=13.0;src=<hash>" -- a record's or selection's fingerprint.
std::string Fingerprint(const v1::DeviceInfo& device, const std::string& source_hash);
std::string FingerprintOf(const v1::Record& record);

}  // namespace scantune
