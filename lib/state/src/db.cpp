#include "dynres/db.hpp"

#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cerrno>

#include <cstdlib>

namespace dynres {

Stmt::Stmt(Db& db, const std::string& sql) : db_(db), sql_(sql) {
  if (sqlite3_prepare_v2(db.handle(), sql.c_str(), -1, &st_, nullptr) != SQLITE_OK)
    throw DbError("state file " + db.path() + ": cannot prepare '" + sql + "': " + sqlite3_errmsg(db.handle()));
}
Stmt::~Stmt() { sqlite3_finalize(st_); }

static void check_bind(int rc, Db& db, const std::string& sql) {
  if (rc != SQLITE_OK) throw DbError("bind failed in '" + sql + "': " + sqlite3_errmsg(db.handle()));
}
Stmt& Stmt::bind(int i, int64_t v) {
  check_bind(sqlite3_bind_int64(st_, i, v), db_, sql_);
  return *this;
}
Stmt& Stmt::bind(int i, double v) {
  check_bind(sqlite3_bind_double(st_, i, v), db_, sql_);
  return *this;
}
Stmt& Stmt::bind(int i, const std::string& v) {
  check_bind(sqlite3_bind_text(st_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT), db_, sql_);
  return *this;
}
Stmt& Stmt::bind_null(int i) {
  check_bind(sqlite3_bind_null(st_, i), db_, sql_);
  return *this;
}
bool Stmt::step() {
  int rc = sqlite3_step(st_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  throw DbError("state file " + db_.path() + ": '" + sql_ + "': " + sqlite3_errmsg(db_.handle()));
}
void Stmt::run() {
  while (step()) {
  }
}
void Stmt::reset() {
  sqlite3_reset(st_);
  sqlite3_clear_bindings(st_);
}
bool Stmt::is_null(int c) const { return sqlite3_column_type(st_, c) == SQLITE_NULL; }
int64_t Stmt::i64(int c) const { return sqlite3_column_int64(st_, c); }
double Stmt::f64(int c) const { return sqlite3_column_double(st_, c); }
std::string Stmt::text(int c) const {
  auto p = sqlite3_column_text(st_, c);
  return p ? std::string(reinterpret_cast<const char*>(p), sqlite3_column_bytes(st_, c)) : std::string();
}
std::optional<int64_t> Stmt::opt_i64(int c) const {
  if (is_null(c)) return std::nullopt;
  return i64(c);
}
std::optional<double> Stmt::opt_f64(int c) const {
  if (is_null(c)) return std::nullopt;
  return f64(c);
}

Db::Db(const std::string& path, bool create, int busy_timeout_ms) : path_(path) {
  if (!create) {
    struct stat sb;
    if (::stat(path.c_str(), &sb) != 0) {
      if (errno == EACCES)
        throw DbError("cannot reach the state file " + path + ": permission denied (its directory is private to the cluster's owner)");
      throw DbError("no state file at " + path + " (is a virtual cluster booted there? see vcluster-boot(1))");
    }
    if (::access(path.c_str(), R_OK) != 0 && errno == EACCES)
      throw DbError("cannot read the state file " + path + ": permission denied (it belongs to uid " +
                    std::to_string(sb.st_uid) + "; only the cluster's owner and root read it)");
  }
  int flags = SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0) | SQLITE_OPEN_FULLMUTEX;
  if (sqlite3_open_v2(path.c_str(), &db_, flags, nullptr) != SQLITE_OK) {
    std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    db_ = nullptr;
    throw DbError("cannot open state file " + path + ": " + msg);
  }
  // DYNRES_DB_BUSY_TIMEOUT_MS overrides the wait for a locked state file
  // (tests use a short one to provoke "database is locked" quickly).
  if (const char* e = std::getenv("DYNRES_DB_BUSY_TIMEOUT_MS")) {
    char* end = nullptr;
    long v = std::strtol(e, &end, 10);
    if (end != e && *end == 0 && v >= 0 && v <= 3600000) busy_timeout_ms = static_cast<int>(v);
  }
  sqlite3_busy_timeout(db_, busy_timeout_ms);
  // Short-lived tools (mjsub, mjstat) must not checkpoint and delete the WAL
  // when they happen to be the last connection: that costs two fsyncs per
  // submission. Checkpoints still run automatically as the WAL grows.
  sqlite3_db_config(db_, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr);
  exec("PRAGMA foreign_keys=ON; PRAGMA synchronous=NORMAL;");
  if (create) exec("PRAGMA journal_mode=WAL;");
}

Db::~Db() { sqlite3_close(db_); }

void Db::exec(const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string m = err ? err : "unknown error";
    sqlite3_free(err);
    throw DbError("state file " + path_ + ": " + m + " (in: " + sql.substr(0, 120) + ")");
  }
}

int64_t Db::last_insert_id() { return sqlite3_last_insert_rowid(db_); }
int Db::changes() { return sqlite3_changes(db_); }

namespace {
/// Run fn inside a transaction opened with `begin`; roll back if it throws.
/// Within an open transaction: a savepoint, rolled back alone if fn throws.
void run_in_transaction(Db& db, sqlite3* h, const char* begin, const std::function<void()>& fn) {
  if (!sqlite3_get_autocommit(h)) {
    db.exec("SAVEPOINT dynres_nested");
    try {
      fn();
      db.exec("RELEASE dynres_nested");
    } catch (...) {
      if (!sqlite3_get_autocommit(h))  // SQLite may have rolled the whole transaction back already
        sqlite3_exec(h, "ROLLBACK TO dynres_nested; RELEASE dynres_nested", nullptr, nullptr, nullptr);
      throw;
    }
    return;
  }
  db.exec(begin);
  try {
    fn();
    db.exec("COMMIT");
  } catch (...) {
    sqlite3_exec(h, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}
}  // namespace

void Db::write_tx(const std::function<void()>& fn) { run_in_transaction(*this, db_, "BEGIN IMMEDIATE", fn); }

void Db::read_tx(const std::function<void()>& fn) { run_in_transaction(*this, db_, "BEGIN DEFERRED", fn); }

bool Db::in_transaction() { return !sqlite3_get_autocommit(db_); }

int Db::schema_version(const std::string& module) {
  Stmt t(*this, "SELECT 1 FROM sqlite_master WHERE type='table' AND name='schema_migrations'");
  if (!t.step()) return 0;
  Stmt s(*this, "SELECT version FROM schema_migrations WHERE module=?");
  s.bind(1, module);
  return s.step() ? static_cast<int>(s.i64(0)) : 0;
}

void Db::migrate(const std::string& module, const std::vector<std::string>& migrations) {
  if (schema_version(module) >= static_cast<int>(migrations.size())) return;  // fast path, no lock
  write_tx([&] {
    exec("CREATE TABLE IF NOT EXISTS schema_migrations(module TEXT PRIMARY KEY, version INTEGER NOT NULL)");
    int v = schema_version(module);  // re-read under the write lock
    if (v > static_cast<int>(migrations.size()))
      throw DbError("state file " + path_ + ": schema of '" + module + "' is version " + std::to_string(v) +
                    ", newer than this build knows (" + std::to_string(migrations.size()) + ")");
    for (size_t k = v; k < migrations.size(); ++k) exec(migrations[k]);
    Stmt up(*this, "INSERT INTO schema_migrations(module, version) VALUES(?, ?) "
                   "ON CONFLICT(module) DO UPDATE SET version=excluded.version");
    up.bind(1, module).bind(2, static_cast<int64_t>(migrations.size())).run();
  });
}

}  // namespace dynres
