#include "db/transaction.h"

#include <sqlite3.h>

#include "common/log.h"
#include "db/statement.h"

namespace scantune::db {
namespace {

// BEGIN/COMMIT/ROLLBACK go through sqlite3_exec: they take no parameters and
// keeping them out of the statement cache lets Transaction stand alone.
Status Exec(sqlite3* db, const char* sql) {
  int rc = sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) return SqliteError(db, rc, sql);
  return Status::Ok();
}

}  // namespace

Transaction::~Transaction() {
  if (!open_) return;
  Status status = Rollback();
  // A destructor cannot return the failure; after a failed ROLLBACK SQLite
  // has already rolled back or will on close, so logging is all that is left.
  if (!status.ok()) Logger("db")->error("rolling back an abandoned transaction: {}", status.ToString());
}

Status Transaction::Begin() {
  if (open_) return Internal("transaction already open");
  RETURN_IF_ERROR(Exec(db_, "BEGIN IMMEDIATE"));
  open_ = true;
  return Status::Ok();
}

Status Transaction::Commit() {
  if (!open_) return Internal("commit without an open transaction");
  Status status = Exec(db_, "COMMIT");
  if (!status.ok()) {
    // A failed COMMIT (e.g. SQLITE_BUSY, a deferred constraint) may leave the
    // transaction open; roll back so the connection is usable again.
    Status rollback = Rollback();
    if (!rollback.ok()) Logger("db")->error("rollback after failed commit: {}", rollback.ToString());
    return status;
  }
  open_ = false;
  return Status::Ok();
}

Status Transaction::Rollback() {
  if (!open_) return Status::Ok();
  open_ = false;
  // Some errors (SQLITE_FULL, SQLITE_IOERR, ...) roll the transaction back
  // automatically; a ROLLBACK then would fail with "no transaction is active".
  if (sqlite3_get_autocommit(db_)) return Status::Ok();
  return Exec(db_, "ROLLBACK");
}

}  // namespace scantune::db
