// Transaction: an RAII write transaction on one sqlite3 connection, after
// Chromium's sql::Transaction. Begin() takes the write lock up front
// (BEGIN IMMEDIATE) so a transaction never fails halfway on a lock upgrade;
// unless Commit() succeeded, the destructor rolls back, so every early
// `return status` inside a transaction leaves the file as it was.
//
// Thread safety: none; used under the owner's (Store's) mutex. Not nestable.
#pragma once

#include "common/status.h"

struct sqlite3;

namespace scantune::db {

class Transaction {
 public:
  explicit Transaction(sqlite3* db) : db_(db) {}
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  Status Begin();
  Status Commit();
  // Explicit rollback; the destructor does the same for an open transaction.
  Status Rollback();

  bool is_open() const { return open_; }

 private:
  sqlite3* db_;
  bool open_ = false;
};

}  // namespace scantune::db
