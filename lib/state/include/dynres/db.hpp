// Thin RAII layer over SQLite for the shared state file.
//
// Every tool of a virtual cluster opens the same file concurrently: WAL
// journal, busy_timeout, foreign keys on, and every multi-row change inside
// one write transaction (BEGIN IMMEDIATE) so readers never see half a change.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

struct sqlite3;
struct sqlite3_stmt;

namespace dynres {

/// Any SQLite failure; what() names the statement or file and SQLite's message.
class DbError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Db;

/// A prepared statement. Bind indices start at 1 (SQLite convention).
class Stmt {
 public:
  Stmt(Db& db, const std::string& sql);
  ~Stmt();
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Stmt& bind(int i, int64_t v);
  Stmt& bind(int i, int v) { return bind(i, static_cast<int64_t>(v)); }
  Stmt& bind(int i, double v);
  Stmt& bind(int i, const std::string& v);
  Stmt& bind(int i, const char* v) { return bind(i, std::string(v)); }
  Stmt& bind_null(int i);
  template <class T>
  Stmt& bind(int i, const std::optional<T>& v) {
    return v ? bind(i, *v) : bind_null(i);
  }

  /// Step once; true while a row is available.
  bool step();
  /// Step to completion (for INSERT/UPDATE/DELETE).
  void run();
  void reset();

  bool is_null(int col) const;
  int64_t i64(int col) const;
  double f64(int col) const;
  std::string text(int col) const;
  std::optional<int64_t> opt_i64(int col) const;
  std::optional<double> opt_f64(int col) const;

 private:
  Db& db_;
  sqlite3_stmt* st_ = nullptr;
  std::string sql_;
};

class Db {
 public:
  /// Open (create=true: create if missing) the state file at `path`.
  /// Sets WAL, busy_timeout (ms; the environment variable
  /// DYNRES_DB_BUSY_TIMEOUT_MS overrides it), foreign_keys, synchronous=NORMAL.
  /// Throws DbError naming the path when the file is missing (create=false)
  /// or unreadable.
  explicit Db(const std::string& path, bool create = false, int busy_timeout_ms = 30000);
  ~Db();
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  sqlite3* handle() { return db_; }
  const std::string& path() const { return path_; }

  /// Execute one or more statements without results.
  void exec(const std::string& sql);
  int64_t last_insert_id();
  int changes();

  /// Run fn inside BEGIN IMMEDIATE ... COMMIT; ROLLBACK and rethrow on
  /// any exception, so a failed change leaves the file untouched.
  /// Inside a transaction already open on this connection (a group commit,
  /// see mjsched(8)), fn runs in a SAVEPOINT instead: its changes are undone
  /// alone when it throws, and become durable with the enclosing COMMIT.
  void write_tx(const std::function<void()>& fn);

  /// Run fn inside BEGIN (deferred) ... COMMIT: every statement of fn reads
  /// the same snapshot of the file (no change committed meanwhile is seen).
  /// Nested in an open transaction, as write_tx.
  void read_tx(const std::function<void()>& fn);

  /// True while a transaction is open on this connection (SQLite may end
  /// one on its own after some errors: a group commit checks this).
  bool in_transaction();

  /// Apply a module's migrations in order (module = "core", "icheck", ...).
  /// migrations[k] brings the module from version k to k+1. Runs in one
  /// write transaction per call; concurrent callers are safe.
  void migrate(const std::string& module, const std::vector<std::string>& migrations);

  /// Current schema version of a module (0 when never migrated).
  int schema_version(const std::string& module);

 private:
  sqlite3* db_ = nullptr;
  std::string path_;
};

}  // namespace dynres
