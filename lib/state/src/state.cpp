#include "dynres/state.hpp"

#include <pwd.h>

#include <cctype>
#include <set>

#include "dynres/hostlist.hpp"

namespace dynres {

namespace {
// Schema of module "core". Append migrations; never edit a released one.
const std::vector<std::string> kCoreMigrations = {
    R"sql(
CREATE TABLE nodes(
  id     INTEGER PRIMARY KEY,
  name   TEXT NOT NULL UNIQUE,
  host   TEXT NOT NULL,
  state  TEXT NOT NULL DEFAULT 'up' CHECK(state IN ('up','down','drain')),
  job_id INTEGER REFERENCES jobs(id)
);
CREATE TABLE jobs(
  id          INTEGER PRIMARY KEY AUTOINCREMENT,
  name        TEXT NOT NULL,
  uid         INTEGER NOT NULL,
  state       TEXT NOT NULL CHECK(state IN ('PENDING','RUNNING','COMPLETED','FAILED','CANCELLED','TIMEOUT','NODE_FAIL')),
  kind        TEXT NOT NULL CHECK(kind IN ('rigid','moldable','malleable')),
  req_nodes   INTEGER NOT NULL CHECK(req_nodes >= 1),
  min_nodes   INTEGER NOT NULL CHECK(min_nodes >= 1),
  max_nodes   INTEGER NOT NULL,
  node_constraint TEXT NOT NULL,
  time_limit  INTEGER NOT NULL,
  min_power   REAL,
  max_power   REAL,
  script      TEXT NOT NULL,
  workdir     TEXT NOT NULL,
  stdout_path TEXT NOT NULL,
  stderr_path TEXT NOT NULL,
  submit_time REAL NOT NULL,
  start_time  REAL,
  end_time    REAL,
  num_nodes   INTEGER NOT NULL DEFAULT 0,
  nodelist    TEXT NOT NULL DEFAULT '',
  exit_code   INTEGER,
  reason      TEXT NOT NULL DEFAULT '',
  supervisor_pid INTEGER,
  cancel_requested INTEGER NOT NULL DEFAULT 0,
  CHECK(min_nodes <= max_nodes)
);
CREATE INDEX jobs_by_state ON jobs(state, submit_time, id);
CREATE TABLE allocations(
  id         INTEGER PRIMARY KEY,
  job_id     INTEGER NOT NULL REFERENCES jobs(id),
  nodelist   TEXT NOT NULL,
  num_nodes  INTEGER NOT NULL,
  start_time REAL NOT NULL,
  end_time   REAL
);
CREATE INDEX allocations_by_job ON allocations(job_id);
CREATE TABLE events(
  id     INTEGER PRIMARY KEY,
  time   REAL NOT NULL,
  job_id INTEGER,
  kind   TEXT NOT NULL,
  detail TEXT NOT NULL DEFAULT ''
);
)sql",
    // 2: where mjsub ran (MJ_SUBMIT_DIR), distinct from the job's working directory
    "ALTER TABLE jobs ADD COLUMN submit_dir TEXT NOT NULL DEFAULT ''",
    // 3: the submitter's environment (JSON object; '' = the daemon's), as sbatch --export=ALL
    "ALTER TABLE jobs ADD COLUMN env TEXT NOT NULL DEFAULT ''",
    // 4: process group of the job step, so a step can be stopped when its supervisor is gone
    "ALTER TABLE jobs ADD COLUMN step_pgid INTEGER",
    // 5: identity of the step's process group leader (start time in clock ticks
    // since boot, /proc/PID/stat field 22), checked before the group is killed
    "ALTER TABLE jobs ADD COLUMN step_start INTEGER",
    // 6: sbatch --hold (held until mjcontrol release) and --begin (not before this time)
    "ALTER TABLE jobs ADD COLUMN held INTEGER NOT NULL DEFAULT 0; ALTER TABLE jobs ADD COLUMN begin_time REAL",
    // 7: sbatch --dependency, normalized (e.g. "afterok:12:13,singleton"); '' = none
    "ALTER TABLE jobs ADD COLUMN dependency TEXT NOT NULL DEFAULT ''",
    // 8: CPUs per node, and the job's tasks (sbatch -n, --ntasks-per-node, -c); ntasks 0 = one per node
    "ALTER TABLE nodes ADD COLUMN cpus INTEGER NOT NULL DEFAULT 1 CHECK(cpus >= 1);"
    "ALTER TABLE jobs ADD COLUMN ntasks INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE jobs ADD COLUMN ntasks_per_node INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE jobs ADD COLUMN cpus_per_task INTEGER NOT NULL DEFAULT 1",
    // 9: arguments of the job script (mjsub SCRIPT ARGS...), a JSON array of strings; '' = none
    "ALTER TABLE jobs ADD COLUMN args TEXT NOT NULL DEFAULT ''",
    // 10: job arrays (sbatch --array): master id (the first task's id), task index, %max throttle
    "ALTER TABLE jobs ADD COLUMN array_job_id INTEGER; ALTER TABLE jobs ADD COLUMN array_task_id INTEGER;"
    "ALTER TABLE jobs ADD COLUMN array_max INTEGER NOT NULL DEFAULT 0;"
    "CREATE INDEX jobs_by_array ON jobs(array_job_id, array_task_id)",
    // 11: sbatch -w/--nodelist (nodes the job must get) and -x/--exclude (nodes it must not), node lists; '' = none
    "ALTER TABLE jobs ADD COLUMN req_nodelist TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE jobs ADD COLUMN exc_nodelist TEXT NOT NULL DEFAULT ''",
    // 12: memory and GPUs (sbatch --mem/--mem-per-cpu, --gres/--gpus*): the nodes' memory (MB, 0 = unknown)
    // and GPUs; the job's memory per node (MB, -1 = not given, 0 = all of a node), per CPU (MB, 0 = not
    // given) and GPUs per node
    "ALTER TABLE nodes ADD COLUMN mem_mb INTEGER NOT NULL DEFAULT 0 CHECK(mem_mb >= 0);"
    "ALTER TABLE nodes ADD COLUMN gpus INTEGER NOT NULL DEFAULT 0 CHECK(gpus >= 0);"
    "ALTER TABLE jobs ADD COLUMN mem_per_node INTEGER NOT NULL DEFAULT -1;"
    "ALTER TABLE jobs ADD COLUMN mem_per_cpu INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE jobs ADD COLUMN gpus_per_node INTEGER NOT NULL DEFAULT 0",
    // 13: the submitter's primary group (the job runs with it when mjsched runs as root; -1 = the
    // daemon's) and umask (job output files are created with it, as Slurm)
    "ALTER TABLE jobs ADD COLUMN gid INTEGER NOT NULL DEFAULT -1;"
    "ALTER TABLE jobs ADD COLUMN umask INTEGER NOT NULL DEFAULT 18 CHECK(umask BETWEEN 0 AND 511)",
};

// Schema of module "nodes": node health (reason, since, who) and what a job
// does when it loses a node (requeue, attempts). A module of its own so that
// its migrations never interleave with the core list. Append; never edit.
const std::vector<std::string> kNodeMigrations = {
    "ALTER TABLE nodes ADD COLUMN reason TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE nodes ADD COLUMN reason_time REAL;"
    "ALTER TABLE nodes ADD COLUMN reason_uid INTEGER;"
    // sbatch --requeue / --no-requeue (1 = requeued after a node failure, Slurm's JobRequeue=1)
    "ALTER TABLE jobs ADD COLUMN requeue INTEGER NOT NULL DEFAULT 1;"
    "ALTER TABLE jobs ADD COLUMN restarts INTEGER NOT NULL DEFAULT 0;"
    // nodes the running job lost (node list); '' = none. Set by mjsched; the
    // end of the step is then recorded as a node failure (requeue or NODE_FAIL)
    "ALTER TABLE jobs ADD COLUMN node_fail TEXT NOT NULL DEFAULT '';"
    // one row per ended attempt of a requeued job (sacct --duplicates)
    "CREATE TABLE job_attempts(id INTEGER PRIMARY KEY, job_id INTEGER NOT NULL REFERENCES jobs(id),"
    " state TEXT NOT NULL, start_time REAL, end_time REAL NOT NULL, num_nodes INTEGER NOT NULL,"
    " nodelist TEXT NOT NULL, reason TEXT NOT NULL);"
    "CREATE INDEX job_attempts_by_job ON job_attempts(job_id)",
};

std::string user_of(int64_t uid) {
  struct passwd pw, *res = nullptr;
  std::vector<char> buf(16384);
  if (::getpwuid_r(static_cast<uid_t>(uid), &pw, buf.data(), buf.size(), &res) == 0 && res) return res->pw_name;
  return std::to_string(uid);
}

// sbatch filename patterns known at submission: %j and %A (job id), %a
// (array index: 4294967294 outside an array, as Slurm), %x (name), %u
// (user), %% ; a width (%5j) zero-pads numbers. %N (first node) is left for
// the supervisor, which knows the nodes.
std::string expand_pattern(std::string p, int64_t id, const std::string& name, int64_t uid,
                           std::optional<int64_t> array_job = std::nullopt, std::optional<int> task = std::nullopt) {
  std::string out;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == '%' && i + 1 < p.size()) {
      size_t k = i + 1;
      int width = 0;
      while (k < p.size() && std::isdigit(static_cast<unsigned char>(p[k])) && width < 100) width = width * 10 + (p[k++] - '0');
      if (k < p.size()) {
        char c = p[k];
        auto num = [&](const std::string& v) {
          return static_cast<int>(v.size()) < width ? std::string(width - v.size(), '0') + v : v;
        };
        std::string rep;
        bool known = true;
        if (c == 'j') rep = num(std::to_string(id));
        else if (c == 'A') rep = num(std::to_string(array_job.value_or(id)));
        else if (c == 'a') rep = num(task ? std::to_string(*task) : "4294967294");
        else if (c == 'x') rep = name;
        else if (c == 'u') rep = user_of(uid);
        else if (c == '%' && width == 0) rep = "%";
        else known = false;
        if (known) {
          out += rep;
          i = k;
          continue;
        }
      }
    }
    out += p[i];
  }
  return out;
}
}  // namespace

const char* const kJobColumns =
    "id,name,uid,state,kind,req_nodes,min_nodes,max_nodes,node_constraint,time_limit,min_power,max_power,"
    "script,workdir,stdout_path,stderr_path,submit_time,start_time,end_time,num_nodes,nodelist,exit_code,"
    "reason,supervisor_pid,cancel_requested,submit_dir,env,step_pgid,step_start,held,begin_time,dependency,"
    "ntasks,ntasks_per_node,cpus_per_task,args,array_job_id,array_task_id,array_max,req_nodelist,exc_nodelist,"
    "requeue,restarts,node_fail,mem_per_node,mem_per_cpu,gpus_per_node,gid,umask";

JobRecord job_from_row(const Stmt& s) {
  JobRecord j;
  j.id = s.i64(0);
  j.name = s.text(1);
  j.uid = s.i64(2);
  j.state = s.text(3);
  j.kind = s.text(4);
  j.req_nodes = static_cast<int>(s.i64(5));
  j.min_nodes = static_cast<int>(s.i64(6));
  j.max_nodes = static_cast<int>(s.i64(7));
  j.constraint = s.text(8);
  j.time_limit = s.i64(9);
  j.min_power = s.opt_f64(10);
  j.max_power = s.opt_f64(11);
  j.script = s.text(12);
  j.workdir = s.text(13);
  j.stdout_path = s.text(14);
  j.stderr_path = s.text(15);
  j.submit_time = s.f64(16);
  j.start_time = s.opt_f64(17);
  j.end_time = s.opt_f64(18);
  j.num_nodes = static_cast<int>(s.i64(19));
  j.nodelist = s.text(20);
  if (!s.is_null(21)) j.exit_code = static_cast<int>(s.i64(21));
  j.reason = s.text(22);
  j.supervisor_pid = s.opt_i64(23);
  j.cancel_requested = s.i64(24) != 0;
  j.submit_dir = s.text(25);
  j.env = s.text(26);
  j.step_pgid = s.opt_i64(27);
  j.step_start = s.opt_i64(28);
  j.held = s.i64(29) != 0;
  j.begin_time = s.opt_f64(30);
  j.dependency = s.text(31);
  j.ntasks = static_cast<int>(s.i64(32));
  j.ntasks_per_node = static_cast<int>(s.i64(33));
  j.cpus_per_task = static_cast<int>(s.i64(34));
  j.args = s.text(35);
  j.array_job_id = s.opt_i64(36);
  if (!s.is_null(37)) j.array_task_id = static_cast<int>(s.i64(37));
  j.array_max = static_cast<int>(s.i64(38));
  j.req_nodelist = s.text(39);
  j.exc_nodelist = s.text(40);
  j.requeue = s.i64(41) != 0;
  j.restarts = static_cast<int>(s.i64(42));
  j.node_fail = s.text(43);
  j.mem_per_node = s.i64(44);
  j.mem_per_cpu = s.i64(45);
  j.gpus_per_node = static_cast<int>(s.i64(46));
  j.gid = s.i64(47);
  j.umask = static_cast<int>(s.i64(48));
  return j;
}

std::string display_id(const JobRecord& j) {
  if (j.array_job_id && j.array_task_id) return std::to_string(*j.array_job_id) + "_" + std::to_string(*j.array_task_id);
  return std::to_string(j.id);
}

bool is_final_state(const std::string& s) {
  return s == kCompleted || s == kFailed || s == kCancelled || s == kTimeout || s == kNodeFail;
}

State::State(const std::string& path, bool create) : db_(path, create) {
  db_.migrate("core", kCoreMigrations);
  db_.migrate("nodes", kNodeMigrations);
}

void State::register_nodes(const std::vector<std::pair<std::string, std::string>>& name_host) {
  db_.write_tx([&] {
    Stmt ins(db_, "INSERT INTO nodes(name, host) VALUES(?, ?) ON CONFLICT(name) DO UPDATE SET host=excluded.host");
    for (auto& [n, h] : name_host) {
      ins.bind(1, n).bind(2, h).run();
      ins.reset();
    }
  });
}

std::vector<NodeRecord> State::nodes() {
  std::vector<NodeRecord> out;
  Stmt s(db_, "SELECT id, name, host, state, COALESCE(job_id, 0), cpus, reason, reason_time, reason_uid, mem_mb, gpus "
              "FROM nodes ORDER BY id");
  while (s.step())
    out.push_back({s.i64(0), s.text(1), s.text(2), s.text(3), s.i64(4), static_cast<int>(s.i64(5)), s.text(6),
                   s.opt_f64(7), s.opt_i64(8), s.i64(9), static_cast<int>(s.i64(10))});
  return out;
}

int State::usable_node_count() {
  Stmt s(db_, "SELECT COUNT(*) FROM nodes WHERE state != 'down'");
  s.step();
  return static_cast<int>(s.i64(0));
}

int State::node_cpus() {
  Stmt s(db_, "SELECT COALESCE(MIN(cpus), 1) FROM nodes WHERE state != 'down'");
  s.step();
  return static_cast<int>(s.i64(0));
}

int64_t State::node_mem_mb() {
  Stmt s(db_, "SELECT COALESCE(MIN(mem_mb), 0) FROM nodes WHERE state != 'down'");
  s.step();
  return s.i64(0);
}

int State::node_gpus() {
  Stmt s(db_, "SELECT COALESCE(MIN(gpus), 0) FROM nodes WHERE state != 'down'");
  s.step();
  return static_cast<int>(s.i64(0));
}

int State::set_node_resource(const std::vector<std::string>& names, const std::string& column, int64_t value) {
  if (column != "cpus" && column != "mem_mb" && column != "gpus") throw DbError("unknown node resource '" + column + "'");
  if (value < 0) throw DbError(column + " must not be negative, got " + std::to_string(value));
  int n = 0;
  db_.write_tx([&] {
    Stmt up(db_, names.empty() ? "UPDATE nodes SET " + column + "=?" : "UPDATE nodes SET " + column + "=? WHERE name=?");
    if (names.empty()) {
      up.bind(1, value).run();
      n = db_.changes();
      return;
    }
    for (auto& name : names) {
      up.bind(1, value).bind(2, name).run();
      if (db_.changes() == 0) throw DbError("no node named '" + name + "'");
      ++n;
      up.reset();
    }
  });
  return n;
}

int State::set_node_cpus(const std::vector<std::string>& names, int cpus) {
  if (cpus < 1) throw DbError("CPUs per node must be at least 1, got " + std::to_string(cpus));
  return set_node_resource(names, "cpus", cpus);
}

int64_t State::submit(JobRecord j) {
  int64_t id = 0;
  db_.write_tx([&] { id = insert_job(j, std::nullopt, std::nullopt); });
  return id;
}

std::vector<int64_t> State::submit_array(JobRecord j, const std::vector<int>& tasks, int max_running) {
  if (tasks.empty()) throw DbError("an array needs at least one task");
  std::vector<int64_t> ids;
  db_.write_tx([&] {
    j.array_max = max_running;
    int64_t master = insert_job(j, std::nullopt, tasks[0]);
    ids.push_back(master);
    for (size_t k = 1; k < tasks.size(); ++k) ids.push_back(insert_job(j, master, tasks[k]));
  });
  return ids;
}

std::vector<int64_t> State::array_task_ids(int64_t array_id, std::optional<int> task) {
  Stmt s(db_, task ? "SELECT id FROM jobs WHERE array_job_id=? AND array_task_id=? ORDER BY array_task_id"
                   : "SELECT id FROM jobs WHERE array_job_id=? ORDER BY array_task_id");
  s.bind(1, array_id);
  if (task) s.bind(2, static_cast<int64_t>(*task));
  std::vector<int64_t> out;
  while (s.step()) out.push_back(s.i64(0));
  return out;
}

int64_t State::insert_job(const JobRecord& j, std::optional<int64_t> array_job, std::optional<int> task) {
  int64_t id = 0;
  {
    Stmt s(db_,
           "INSERT INTO jobs(name,uid,state,kind,req_nodes,min_nodes,max_nodes,node_constraint,time_limit,"
           "min_power,max_power,script,workdir,stdout_path,stderr_path,submit_time,reason,submit_dir,env,held,"
           "begin_time,dependency,ntasks,ntasks_per_node,cpus_per_task,args,req_nodelist,exc_nodelist,requeue,"
           "mem_per_node,mem_per_cpu,gpus_per_node,gid,umask) "
           "VALUES(?,?,'PENDING',?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
    s.bind(1, j.name).bind(2, j.uid).bind(3, j.kind).bind(4, j.req_nodes).bind(5, j.min_nodes);
    s.bind(6, j.max_nodes).bind(7, j.constraint).bind(8, j.time_limit).bind(9, j.min_power);
    s.bind(10, j.max_power).bind(11, j.script).bind(12, j.workdir).bind(13, j.stdout_path);
    std::string reason = j.held                                            ? "JobHeldUser"
                         : !j.dependency.empty()                           ? "Dependency"
                         : j.begin_time && *j.begin_time > j.submit_time ? "BeginTime"
                                                                           : "None";
    s.bind(14, j.stderr_path).bind(15, j.submit_time).bind(16, reason).bind(17, j.submit_dir).bind(18, j.env);
    s.bind(19, static_cast<int64_t>(j.held ? 1 : 0)).bind(20, j.begin_time).bind(21, j.dependency);
    s.bind(22, j.ntasks).bind(23, j.ntasks_per_node).bind(24, j.cpus_per_task).bind(25, j.args);
    s.bind(26, j.req_nodelist).bind(27, j.exc_nodelist).bind(28, static_cast<int64_t>(j.requeue ? 1 : 0));
    s.bind(29, j.mem_per_node).bind(30, j.mem_per_cpu).bind(31, j.gpus_per_node);
    s.bind(32, j.gid).bind(33, static_cast<int64_t>(j.umask & 0777));
    s.run();
    id = db_.last_insert_id();
    int64_t master = task ? array_job.value_or(id) : 0;
    Stmt u(db_, "UPDATE jobs SET stdout_path=?, stderr_path=?, array_job_id=?, array_task_id=?, array_max=? WHERE id=?");
    std::optional<int64_t> aj = task ? std::optional<int64_t>(master) : std::nullopt;
    std::optional<int64_t> at = task ? std::optional<int64_t>(*task) : std::nullopt;
    u.bind(1, expand_pattern(j.stdout_path, id, j.name, j.uid, aj, task))
        .bind(2, expand_pattern(j.stderr_path, id, j.name, j.uid, aj, task));
    u.bind(3, aj).bind(4, at).bind(5, j.array_max).bind(6, id).run();
    event(j.submit_time, id, "submit", task ? "array " + std::to_string(master) + "_" + std::to_string(*task) : "");
  }
  return id;
}

std::optional<JobRecord> State::job(int64_t id) {
  Stmt s(db_, std::string("SELECT ") + kJobColumns + " FROM jobs WHERE id=?");
  s.bind(1, id);
  if (!s.step()) return std::nullopt;
  return job_from_row(s);
}

std::vector<JobRecord> State::jobs(const std::vector<std::string>& states) {
  std::string sql = std::string("SELECT ") + kJobColumns + " FROM jobs";
  if (!states.empty()) {
    sql += " WHERE state IN (";
    for (size_t i = 0; i < states.size(); ++i) sql += i ? ",?" : "?";
    sql += ")";
  }
  sql += " ORDER BY submit_time, id";
  Stmt s(db_, sql);
  for (size_t i = 0; i < states.size(); ++i) s.bind(static_cast<int>(i + 1), states[i]);
  std::vector<JobRecord> out;
  while (s.step()) out.push_back(job_from_row(s));
  return out;
}

bool State::start_job(int64_t id, const std::vector<int64_t>& node_ids, int64_t supervisor_pid, double now,
                      const std::function<void()>& also) {
  bool ok = false;
  struct NotIdle {};  // rolls the transaction back; start_job then returns false
  try {
  db_.write_tx([&] {
    Stmt st(db_, "SELECT state FROM jobs WHERE id=?");
    st.bind(1, id);
    if (!st.step() || st.text(0) != kPending) return;
    std::vector<std::string> names;
    Stmt take(db_, "UPDATE nodes SET job_id=? WHERE id=? AND job_id IS NULL AND state='up' RETURNING name");
    for (auto n : node_ids) {
      take.bind(1, id).bind(2, n);
      if (!take.step()) throw NotIdle{};  // node busy, down or unknown: roll back
      names.push_back(take.text(0));
      take.reset();
    }
    std::string nl = compress_hostlist(names);
    Stmt up(db_, "UPDATE jobs SET state='RUNNING', start_time=?, num_nodes=?, nodelist=?, supervisor_pid=?, "
                 "reason='None' WHERE id=?");
    up.bind(1, now).bind(2, static_cast<int64_t>(names.size())).bind(3, nl).bind(4, supervisor_pid).bind(5, id).run();
    Stmt al(db_, "INSERT INTO allocations(job_id,nodelist,num_nodes,start_time) VALUES(?,?,?,?)");
    al.bind(1, id).bind(2, nl).bind(3, static_cast<int64_t>(names.size())).bind(4, now).run();
    event(now, id, "start", nl);
    if (also) also();
    ok = true;
  });
  } catch (const NotIdle&) {
    return false;
  }
  return ok;
}

bool State::finish_job(int64_t id, const std::string& final_state, std::optional<int> exit_code,
                       const std::string& reason, double now) {
  bool ok = false;
  db_.write_tx([&] {
    {  // a job that lost a node (and was not cancelled meanwhile) ends as a node failure
      Stmt nf(db_, "SELECT node_fail, requeue, cancel_requested FROM jobs WHERE id=? AND state='RUNNING'");
      nf.bind(1, id);
      if (nf.step() && !nf.text(0).empty() && nf.i64(2) == 0) {
        ok = end_node_fail(id, nf.text(0), nf.i64(1) != 0, now);
        return;
      }
    }
    Stmt up(db_, "UPDATE jobs SET state=?, exit_code=?, reason=?, end_time=? WHERE id=? AND state='RUNNING'");
    up.bind(1, final_state).bind(2, exit_code ? std::optional<int64_t>(*exit_code) : std::nullopt);
    up.bind(3, reason).bind(4, now).bind(5, id).run();
    if (db_.changes() == 0) return;
    Stmt al(db_, "UPDATE allocations SET end_time=? WHERE job_id=? AND end_time IS NULL");
    al.bind(1, now).bind(2, id).run();
    Stmt fr(db_, "UPDATE nodes SET job_id=NULL WHERE job_id=?");
    fr.bind(1, id).run();
    event(now, id, "end", final_state + (exit_code ? " exit=" + std::to_string(*exit_code) : std::string()) +
                              (reason.empty() ? "" : " " + reason));
    ok = true;
  });
  return ok;
}

bool State::end_node_fail(int64_t id, const std::string& lost, bool requeue, double now) {
  std::string nl;
  int64_t n = 0;
  std::optional<double> start;
  {
    Stmt j(db_, "SELECT nodelist, num_nodes, start_time FROM jobs WHERE id=?");
    j.bind(1, id);
    if (!j.step()) return false;
    nl = j.text(0), n = j.i64(1), start = j.opt_f64(2);
  }
  const std::string why = "NodeFail " + lost;
  Stmt al(db_, "UPDATE allocations SET end_time=? WHERE job_id=? AND end_time IS NULL");
  al.bind(1, now).bind(2, id).run();
  Stmt fr(db_, "UPDATE nodes SET job_id=NULL WHERE job_id=?");
  fr.bind(1, id).run();
  if (requeue) {
    Stmt at(db_, "INSERT INTO job_attempts(job_id,state,start_time,end_time,num_nodes,nodelist,reason) "
                 "VALUES(?,'NODE_FAIL',?,?,?,?,?)");
    at.bind(1, id).bind(2, start).bind(3, now).bind(4, n).bind(5, nl).bind(6, why).run();
    Stmt up(db_, "UPDATE jobs SET state='PENDING', start_time=NULL, end_time=NULL, num_nodes=0, nodelist='', "
                 "exit_code=NULL, reason='None', supervisor_pid=NULL, step_pgid=NULL, step_start=NULL, node_fail='', "
                 "restarts=restarts+1 WHERE id=? AND state='RUNNING'");
    up.bind(1, id).run();
    event(now, id, "end", std::string(kNodeFail) + " " + why);
    event(now, id, "requeue", lost);
  } else {
    Stmt up(db_, "UPDATE jobs SET state='NODE_FAIL', exit_code=NULL, reason=?, end_time=? WHERE id=? AND state='RUNNING'");
    up.bind(1, why).bind(2, now).bind(3, id).run();
    event(now, id, "end", std::string(kNodeFail) + " " + why);
  }
  return true;
}

bool State::mark_node_fail(int64_t id, const std::string& lost, double now) {
  bool ok = false;
  db_.write_tx([&] {
    Stmt up(db_, "UPDATE jobs SET node_fail=? WHERE id=? AND state='RUNNING' AND node_fail=''");
    up.bind(1, lost).bind(2, id).run();
    if (db_.changes() == 0) return;
    event(now, id, "node_fail", lost);
    ok = true;
  });
  return ok;
}

std::vector<AttemptRecord> State::attempts() {
  std::vector<AttemptRecord> out;
  Stmt s(db_, "SELECT job_id, state, start_time, end_time, num_nodes, nodelist, reason FROM job_attempts ORDER BY id");
  while (s.step())
    out.push_back({s.i64(0), s.text(1), s.opt_f64(2), s.f64(3), static_cast<int>(s.i64(4)), s.text(5), s.text(6)});
  return out;
}

std::vector<NodeUpdate> State::update_nodes(const std::vector<std::string>& names, const std::string& to,
                                            const std::string& reason, int64_t uid, double now) {
  if (to != "down" && to != "drain" && to != "resume")
    throw DbError("invalid node state '" + to + "' (down, drain or resume)");
  if (to != "resume" && reason.empty())
    throw DbError("state=" + to + " needs a reason (reason=\"...\")");
  std::vector<NodeUpdate> out;
  db_.write_tx([&] {
    Stmt get(db_, "SELECT state FROM nodes WHERE name=?");
    Stmt up(db_, "UPDATE nodes SET state=?, reason=?, reason_time=?, reason_uid=? WHERE name=?");
    for (auto& name : names) {
      get.bind(1, name);
      if (!get.step()) throw DbError("no node named '" + name + "'");
      std::string from = get.text(0);
      get.reset();
      std::string next = to == "resume" ? "up" : to;
      if (to == "resume" && from == "up") throw DbError("node " + name + " is neither drained nor down: nothing to resume");
      // DOWN is not weakened to DRAIN (a lost node stays down until resumed)
      if (to == "drain" && from == "down") throw DbError("node " + name + " is down: resume it first");
      up.bind(1, next).bind(2, to == "resume" ? std::string() : reason).bind(3, now);
      if (to == "resume") up.bind_null(4);
      else up.bind(4, uid);
      up.bind(5, name).run();
      up.reset();
      event(now, 0, "node", name + " " + from + "->" + next + (reason.empty() ? "" : " " + reason));
      out.push_back({name, from, next});
    }
  });
  return out;
}

bool State::cancel_pending(int64_t id, double now) {
  bool ok = false;
  db_.write_tx([&] {
    Stmt up(db_, "UPDATE jobs SET state='CANCELLED', end_time=?, reason='Cancelled' WHERE id=? AND state='PENDING'");
    up.bind(1, now).bind(2, id).run();
    if (db_.changes() == 0) return;
    event(now, id, "cancel", "pending");
    ok = true;
  });
  return ok;
}

void State::request_cancel(int64_t id) {
  Stmt up(db_, "UPDATE jobs SET cancel_requested=1 WHERE id=?");
  up.bind(1, id).run();
}

bool State::set_step_pgid(int64_t id, int64_t pgid, int64_t leader_start) {
  Stmt up(db_, "UPDATE jobs SET step_pgid=?, step_start=? WHERE id=? AND state='RUNNING'");
  up.bind(1, pgid).bind(2, leader_start).bind(3, id).run();
  return db_.changes() > 0;
}

bool State::set_held(int64_t id, bool held, double now) {
  bool ok = false;
  db_.write_tx([&] {
    Stmt up(db_, "UPDATE jobs SET held=?, reason=? WHERE id=? AND state='PENDING'");
    up.bind(1, static_cast<int64_t>(held ? 1 : 0)).bind(2, std::string(held ? "JobHeldUser" : "None")).bind(3, id).run();
    if (db_.changes() == 0) return;
    event(now, id, held ? "hold" : "release", "");
    ok = true;
  });
  return ok;
}

void State::set_reason(int64_t id, const std::string& reason) {
  Stmt up(db_, "UPDATE jobs SET reason=? WHERE id=? AND reason != ?");
  up.bind(1, reason).bind(2, id).bind(3, reason).run();
}

void State::event(double time, int64_t job_id, const std::string& kind, const std::string& detail) {
  Stmt s(db_, "INSERT INTO events(time, job_id, kind, detail) VALUES(?,?,?,?)");
  s.bind(1, time).bind(2, job_id).bind(3, kind).bind(4, detail).run();
}

std::vector<AllocationRecord> State::allocations() {
  std::vector<AllocationRecord> out;
  Stmt s(db_, "SELECT job_id, nodelist, num_nodes, start_time, end_time FROM allocations ORDER BY start_time, id");
  while (s.step()) out.push_back({s.i64(0), s.text(1), static_cast<int>(s.i64(2)), s.f64(3), s.opt_f64(4)});
  return out;
}

}  // namespace dynres
