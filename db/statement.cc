#include "db/statement.h"

#include <sqlite3.h>

#include <utility>

namespace scantune::db {

Status SqliteError(sqlite3* db, int rc, std::string_view what) {
  std::string message = std::string(what) + ": " + (db ? sqlite3_errmsg(db) : sqlite3_errstr(rc)) +
                        " (sqlite3 code " + std::to_string(rc) + ")";
  switch (rc & 0xff) {  // primary result code; extended codes share the low byte
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return Unavailable(std::move(message));
    case SQLITE_CONSTRAINT:
    case SQLITE_CANTOPEN:   // missing directory, no permission
    case SQLITE_READONLY:
    case SQLITE_NOTADB:     // the path names some other file
      return FailedPrecondition(std::move(message));
    case SQLITE_FULL:
    case SQLITE_NOMEM:
      return ResourceExhausted(std::move(message));
    default:
      return Internal(std::move(message));
  }
}

Statement::Statement(sqlite3* db, sqlite3_stmt* stmt, bool* in_use) : db_(db), stmt_(stmt), in_use_(in_use) {
  if (in_use_) *in_use_ = true;
}

Statement::Statement(Statement&& other) noexcept
    : db_(other.db_),
      stmt_(std::exchange(other.stmt_, nullptr)),
      in_use_(std::exchange(other.in_use_, nullptr)),
      bind_error_(std::move(other.bind_error_)) {}

Statement::~Statement() {
  if (stmt_ == nullptr) return;
  if (in_use_ == nullptr) {  // a one-off statement
    sqlite3_finalize(stmt_);
    return;
  }
  // The return code of reset repeats the last step's error, which the caller
  // already received from Step(); the statement is reusable either way.
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
  *in_use_ = false;
}

Statement& Statement::Remember(int rc, int index) {
  if (rc != SQLITE_OK && bind_error_.ok()) {
    bind_error_ = SqliteError(db_, rc, "binding parameter " + std::to_string(index) + " of '" + sql() + "'");
  }
  return *this;
}

Statement& Statement::BindInt64(int index, int64_t value) {
  return Remember(sqlite3_bind_int64(stmt_, index, value), index);
}

Statement& Statement::BindDouble(int index, double value) {
  return Remember(sqlite3_bind_double(stmt_, index, value), index);
}

Statement& Statement::BindText(int index, std::string_view value) {
  return Remember(sqlite3_bind_text64(stmt_, index, value.data(), value.size(), SQLITE_TRANSIENT, SQLITE_UTF8),
                  index);
}

Statement& Statement::BindBlob(int index, std::string_view value) {
  // A zero-length blob must still be a blob, not NULL: sqlite3_bind_blob64
  // with a null pointer binds NULL, so point at a valid empty buffer.
  static const char kEmpty = 0;
  const void* data = value.empty() ? &kEmpty : value.data();
  return Remember(sqlite3_bind_blob64(stmt_, index, data, value.size(), SQLITE_TRANSIENT), index);
}

Statement& Statement::BindNull(int index) { return Remember(sqlite3_bind_null(stmt_, index), index); }

StatusOr<bool> Statement::Step() {
  if (!bind_error_.ok()) return bind_error_;
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return SqliteError(db_, rc, std::string("executing '") + sql() + "'");
}

Status Statement::Run() {
  ASSIGN_OR_RETURN(bool has_row, Step());
  if (has_row) return Internal(std::string("statement unexpectedly returned a row: '") + sql() + "'");
  return Status::Ok();
}

int64_t Statement::ColumnInt64(int column) const { return sqlite3_column_int64(stmt_, column); }

double Statement::ColumnDouble(int column) const { return sqlite3_column_double(stmt_, column); }

std::string Statement::ColumnText(int column) const {
  const unsigned char* text = sqlite3_column_text(stmt_, column);
  if (text == nullptr) return {};
  return std::string(reinterpret_cast<const char*>(text), sqlite3_column_bytes(stmt_, column));
}

std::string Statement::ColumnBlob(int column) const {
  const void* blob = sqlite3_column_blob(stmt_, column);
  if (blob == nullptr) return {};
  return std::string(static_cast<const char*>(blob), sqlite3_column_bytes(stmt_, column));
}

bool Statement::ColumnIsNull(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }

const char* Statement::sql() const { return stmt_ ? sqlite3_sql(stmt_) : ""; }

namespace {

StatusOr<sqlite3_stmt*> Prepare(sqlite3* db, std::string_view sql, unsigned flags) {
  sqlite3_stmt* stmt = nullptr;
  const char* tail = nullptr;
  int rc = sqlite3_prepare_v3(db, sql.data(), static_cast<int>(sql.size()), flags, &stmt, &tail);
  if (rc != SQLITE_OK) {
    sqlite3_finalize(stmt);
    return SqliteError(db, rc, "preparing '" + std::string(sql) + "'");
  }
  if (stmt == nullptr) return Internal("preparing '" + std::string(sql) + "': no statement in the text");
  // One statement per constant: trailing text would be silently ignored by
  // sqlite3_prepare, which hides mistakes in the SQL constants.
  std::string_view rest(tail, sql.data() + sql.size() - tail);
  if (rest.find_first_not_of(" \t\r\n;") != std::string_view::npos) {
    sqlite3_finalize(stmt);
    return Internal("preparing '" + std::string(sql) + "': more than one statement in the text");
  }
  return stmt;
}

}  // namespace

StatementCache::~StatementCache() {
  for (auto& [sql, entry] : statements_) sqlite3_finalize(entry.stmt);
}

StatusOr<Statement> StatementCache::Get(std::string_view sql) {
  auto it = statements_.find(std::string(sql));
  if (it == statements_.end()) {
    // SQLITE_PREPARE_PERSISTENT: these statements live as long as the connection.
    ASSIGN_OR_RETURN(sqlite3_stmt * stmt, Prepare(db_, sql, SQLITE_PREPARE_PERSISTENT));
    it = statements_.emplace(std::string(sql), Entry{stmt, false}).first;
  }
  // Two live borrows of one sqlite3_stmt would reset each other's bindings and
  // rows; refuse instead of returning wrong data.
  if (it->second.in_use) return Internal("statement already in use: '" + std::string(sql) + "'");
  return Statement(db_, it->second.stmt, &it->second.in_use);
}

StatusOr<Statement> StatementCache::PrepareOnce(sqlite3* db, std::string_view sql) {
  ASSIGN_OR_RETURN(sqlite3_stmt * stmt, Prepare(db, sql, 0));
  return Statement(db, stmt, /*in_use=*/nullptr);
}

}  // namespace scantune::db
