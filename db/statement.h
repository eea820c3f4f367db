// Statement and StatementCache: prepared SQLite statements with checked return
// codes, after Chromium's sql::Statement / cached statements.
//
// StatementCache owns every sqlite3_stmt it prepared (one per distinct SQL
// text, prepared on first use and finalized with the cache). Statement is a
// short-lived, move-only borrow of one cached statement: it binds, steps and
// reads columns, and on destruction resets the statement and clears its
// bindings, so a half-read SELECT never keeps a WAL read snapshot open.
//
// Thread safety: none. Both belong to one sqlite3 connection and are used
// under the owner's (Store's) mutex.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "common/status.h"

struct sqlite3;
struct sqlite3_stmt;

namespace scantune::db {

// A Status for a failed sqlite3 call: `what` plus the connection's error message and code.
Status SqliteError(sqlite3* db, int rc, std::string_view what);

class Statement {
 public:
  // `in_use` is the cache's flag for a cached statement (cleared on
  // destruction); nullptr for a one-off statement, finalized on destruction.
  Statement(sqlite3* db, sqlite3_stmt* stmt, bool* in_use);
  ~Statement();
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&&) = delete;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Bind* take 1-based parameter indexes, as sqlite3_bind_* does. A failed bind
  // is remembered and returned by the next Step()/Run(), so call sites read as
  // a plain list of binds followed by one checked step.
  Statement& BindInt64(int index, int64_t value);
  Statement& BindDouble(int index, double value);
  Statement& BindText(int index, std::string_view value);
  Statement& BindBlob(int index, std::string_view value);
  Statement& BindNull(int index);

  // true: a row is ready to read; false: the statement is done.
  StatusOr<bool> Step();
  // Steps a statement that returns no rows (INSERT/UPDATE/DDL); a row is an error.
  Status Run();

  // Column readers for the current row (0-based, as sqlite3_column_*).
  int64_t ColumnInt64(int column) const;
  double ColumnDouble(int column) const;
  std::string ColumnText(int column) const;
  std::string ColumnBlob(int column) const;
  bool ColumnIsNull(int column) const;

  const char* sql() const;

 private:
  Statement& Remember(int rc, int index);

  sqlite3* db_;
  sqlite3_stmt* stmt_;
  bool* in_use_;
  Status bind_error_;
};

class StatementCache {
 public:
  explicit StatementCache(sqlite3* db) : db_(db) {}
  ~StatementCache();
  StatementCache(const StatementCache&) = delete;
  StatementCache& operator=(const StatementCache&) = delete;

  // The cached statement for `sql`, prepared on first use. `sql` should be one
  // of the named constants of db/schema.h (or composed only from them), so the
  // cache stays bounded.
  StatusOr<Statement> Get(std::string_view sql);

  // Prepares a statement used once (PRAGMAs and migrations at open); it is
  // finalized when the returned Statement is destroyed.
  static StatusOr<Statement> PrepareOnce(sqlite3* db, std::string_view sql);

 private:
  struct Entry {
    sqlite3_stmt* stmt;
    bool in_use;
  };
  sqlite3* db_;
  // Node-based map: Entry addresses stay valid while Statements point at them.
  std::unordered_map<std::string, Entry> statements_;
};

}  // namespace scantune::db
