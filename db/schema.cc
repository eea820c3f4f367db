#include "db/schema.h"

#include <charconv>
#include <string>

#include "db/statement.h"

namespace scantune::db {
namespace {

StatusOr<int64_t> QueryCount(sqlite3* db, const char* sql) {
  ASSIGN_OR_RETURN(Statement stmt, StatementCache::PrepareOnce(db, sql));
  ASSIGN_OR_RETURN(bool has_row, stmt.Step());
  if (!has_row) return Internal(std::string("no row from '") + sql + "'");
  return stmt.ColumnInt64(0);
}

}  // namespace

StatusOr<int> ReadSchemaVersion(sqlite3* db) {
  ASSIGN_OR_RETURN(int64_t has_meta, QueryCount(db, kMetaTableExists));
  if (has_meta == 0) {
    ASSIGN_OR_RETURN(int64_t tables, QueryCount(db, kCountTables));
    // Migrating would add our tables next to somebody else's: refuse instead.
    if (tables != 0) {
      return FailedPrecondition("the file is an SQLite database with " + std::to_string(tables) +
                                " tables but no scantune meta table; not a scantune store");
    }
    return 0;
  }
  ASSIGN_OR_RETURN(Statement stmt, StatementCache::PrepareOnce(db, kSelectMetaValue));
  stmt.BindText(1, kSchemaVersionKey);
  ASSIGN_OR_RETURN(bool has_row, stmt.Step());
  if (!has_row) return FailedPrecondition("meta table has no schema_version");
  std::string text = stmt.ColumnText(0);
  int version = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), version);
  if (ec != std::errc() || end != text.data() + text.size() || version <= 0) {
    return FailedPrecondition("meta schema_version is not a positive integer: '" + text + "'");
  }
  return version;
}

Status MigrateSchema(sqlite3* db, int from_version, int to_version) {
  for (const MigrationStep& step : kMigrations) {
    if (step.to_version <= from_version || step.to_version > to_version) continue;
    for (const char* sql : step.statements) {
      ASSIGN_OR_RETURN(Statement stmt, StatementCache::PrepareOnce(db, sql));
      Status status = stmt.Run();
      if (!status.ok()) return status.Annotate("migrating to schema version " + std::to_string(step.to_version));
    }
    ASSIGN_OR_RETURN(Statement stmt, StatementCache::PrepareOnce(db, kUpsertMetaValue));
    stmt.BindText(1, kSchemaVersionKey).BindText(2, std::to_string(step.to_version));
    RETURN_IF_ERROR(stmt.Run());
  }
  return Status::Ok();
}

}  // namespace scantune::db
