// Tests of the store's SQLite helpers (StatementCache, Statement, Transaction)
// on a real file in a fresh temporary directory.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>

#include <filesystem>

#include "db/schema.h"
#include "db/statement.h"
#include "db/transaction.h"

namespace scantune::db {
namespace {

namespace fs = std::filesystem;

class SqlHelpersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::path(::testing::TempDir()) / "scantune_sql_XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    ASSERT_EQ(sqlite3_open((fs::path(dir_) / "t.db").c_str(), &db_), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db_, "CREATE TABLE t (k TEXT PRIMARY KEY, v INTEGER)", nullptr, nullptr, nullptr),
              SQLITE_OK);
    cache_ = std::make_unique<StatementCache>(db_);
  }
  void TearDown() override {
    cache_.reset();
    sqlite3_close(db_);
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }

  Status Insert(const std::string& k, int64_t v) {
    ASSIGN_OR_RETURN(Statement stmt, cache_->Get("INSERT INTO t (k, v) VALUES (?, ?)"));
    stmt.BindText(1, k).BindInt64(2, v);
    return stmt.Run();
  }
  int64_t Count() {
    auto stmt = cache_->Get("SELECT count(*) FROM t");
    EXPECT_TRUE(stmt.ok());
    auto row = stmt->Step();
    EXPECT_TRUE(row.ok() && *row);
    return stmt->ColumnInt64(0);
  }

  std::string dir_;
  sqlite3* db_ = nullptr;
  std::unique_ptr<StatementCache> cache_;
};

TEST_F(SqlHelpersTest, CachedStatementIsReusedWithFreshBindings) {
  ASSERT_TRUE(Insert("a", 1).ok());
  ASSERT_TRUE(Insert("b", 2).ok());
  EXPECT_EQ(Count(), 2);
  EXPECT_EQ(Count(), 2);  // reset on scope exit: a second use starts from the first row
}

TEST_F(SqlHelpersTest, ConstraintErrorCarriesSqliteMessage) {
  ASSERT_TRUE(Insert("a", 1).ok());
  Status duplicate = Insert("a", 2);
  EXPECT_EQ(duplicate.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(duplicate.message().find("UNIQUE constraint failed"), std::string::npos) << duplicate.ToString();
  ASSERT_TRUE(Insert("b", 2).ok());  // the cached statement recovered
}

TEST_F(SqlHelpersTest, BindErrorIsReturnedByStep) {
  auto stmt = cache_->Get("SELECT v FROM t WHERE k = ?");
  ASSERT_TRUE(stmt.ok());
  stmt->BindText(1, "a").BindInt64(7, 1);  // no parameter 7
  auto row = stmt->Step();
  ASSERT_FALSE(row.ok());
  EXPECT_NE(row.status().message().find("parameter 7"), std::string::npos) << row.status().ToString();
}

TEST_F(SqlHelpersTest, BadSqlAndTrailingStatementsAreRefused) {
  EXPECT_FALSE(cache_->Get("SELEC nothing").ok());
  auto two = cache_->Get("SELECT 1; SELECT 2");
  ASSERT_FALSE(two.ok());
  EXPECT_NE(two.status().message().find("more than one statement"), std::string::npos);
}

TEST_F(SqlHelpersTest, StatementInUseIsNotHandedOutTwice) {
  auto first = cache_->Get("SELECT k FROM t");
  ASSERT_TRUE(first.ok());
  EXPECT_FALSE(cache_->Get("SELECT k FROM t").ok());
  EXPECT_TRUE(cache_->Get("SELECT v FROM t").ok());  // a different statement is free
}

TEST_F(SqlHelpersTest, TransactionRollsBackUnlessCommitted) {
  {
    Transaction transaction(db_);
    ASSERT_TRUE(transaction.Begin().ok());
    ASSERT_TRUE(Insert("a", 1).ok());
  }  // abandoned: rolled back
  EXPECT_EQ(Count(), 0);
  {
    Transaction transaction(db_);
    ASSERT_TRUE(transaction.Begin().ok());
    ASSERT_TRUE(Insert("a", 1).ok());
    ASSERT_TRUE(transaction.Commit().ok());
    EXPECT_FALSE(transaction.is_open());
  }
  EXPECT_EQ(Count(), 1);
  EXPECT_TRUE(sqlite3_get_autocommit(db_));
}

TEST_F(SqlHelpersTest, MigrationsEndAtTheLatestVersion) {
  ASSERT_EQ(sqlite3_exec(db_, "DROP TABLE t", nullptr, nullptr, nullptr), SQLITE_OK);
  auto version = ReadSchemaVersion(db_);
  ASSERT_TRUE(version.ok()) << version.status().ToString();
  EXPECT_EQ(*version, 0);
  ASSERT_TRUE(MigrateSchema(db_, 0, kLatestSchemaVersion).ok());
  version = ReadSchemaVersion(db_);
  ASSERT_TRUE(version.ok());
  EXPECT_EQ(*version, kLatestSchemaVersion);
  // Already at the latest version: nothing to run (re-running v1's CREATEs would fail).
  EXPECT_TRUE(MigrateSchema(db_, kLatestSchemaVersion, kLatestSchemaVersion).ok());
}

}  // namespace
}  // namespace scantune::db
