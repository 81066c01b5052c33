// iCheck controller: the schema of its metadata in the state file (module "icheck").
#include "controller_impl.hpp"

namespace dynres::icheck::ctl {

const std::vector<std::string> kMigrations = {
    R"(CREATE TABLE icheck_apps(
         id INTEGER PRIMARY KEY, name TEXT NOT NULL, uid INTEGER NOT NULL,
         nodes INTEGER, procs INTEGER, strategy TEXT, num_agents INTEGER,
         old_tsync REAL, last_change INTEGER DEFAULT 0, frozen INTEGER DEFAULT 0,
         is_active INTEGER DEFAULT 1, needs_change INTEGER DEFAULT 0,
         version INTEGER DEFAULT 0, bytes INTEGER DEFAULT 0, updated REAL,
         UNIQUE(name, uid));
       CREATE TABLE icheck_agents(
         id TEXT PRIMARY KEY, app_id INTEGER NOT NULL REFERENCES icheck_apps(id),
         node TEXT, address TEXT, host TEXT, pid INTEGER, state TEXT, started REAL);
       CREATE TABLE icheck_versions(
         app_id INTEGER NOT NULL, version INTEGER NOT NULL, bytes INTEGER,
         tsync REAL, mode TEXT, time REAL, PRIMARY KEY(app_id, version));
       CREATE TABLE icheck_nodes(
         node TEXT PRIMARY KEY, address TEXT, state TEXT, last_heartbeat REAL, metrics TEXT);
       CREATE TABLE icheck_controller(
         id INTEGER PRIMARY KEY CHECK(id = 1), address TEXT, pid INTEGER, heartbeat REAL);)",
    // 2: manager relaunch (§6.5.2-6.5.3). epoch = incarnation of the manager
    // serving the node (heartbeats of an older one are refused: superseded);
    // pid/host of that manager; up_since = when it last came up; relaunches =
    // attempts since the node was last healthy; relaunch_at / relaunch_pid =
    // the attempt in flight (state 'relaunching').
    R"(ALTER TABLE icheck_nodes ADD COLUMN epoch INTEGER NOT NULL DEFAULT 0;
       ALTER TABLE icheck_nodes ADD COLUMN pid INTEGER;
       ALTER TABLE icheck_nodes ADD COLUMN host TEXT;
       ALTER TABLE icheck_nodes ADD COLUMN up_since REAL;
       ALTER TABLE icheck_nodes ADD COLUMN relaunches INTEGER NOT NULL DEFAULT 0;
       ALTER TABLE icheck_nodes ADD COLUMN relaunch_at REAL;
       ALTER TABLE icheck_nodes ADD COLUMN relaunch_pid INTEGER;)",
    // 3: controller epoch (fencing a controller that lost its lease): every controller that becomes
    // active takes the next epoch; the lease is renewed only while the row
    // still holds this controller's epoch, so a primary that was stalled
    // past its lease finds itself fenced instead of acting beside the
    // standby that took over.
    R"(ALTER TABLE icheck_controller ADD COLUMN epoch INTEGER NOT NULL DEFAULT 0;)",
    // 4: application token (ids are guessable, the token is not): 128 random bits handed out at
    // registration; every later message about the application must carry
    // it (app ids are small sequential integers, easy to guess).
    R"(ALTER TABLE icheck_apps ADD COLUMN token TEXT;)",
    // 5: agents that follow a resized job [John24 §7.2, §7.3.1]. job_id: the
    // batch job the application runs in (MJ_JOB_ID at registration; APP_INFO
    // names it); retire_after: version after which the agents a shrink
    // retired (state 'retiring': read by the restore, never committed to)
    // are stopped; prepared: the layout an APP_INFO prepared (JSON, agents in
    // state 'prepared'); icheck_nodes.draining: a REMOVE_NODES moves the
    // node's agents away (no agent is placed there meanwhile).
    R"(ALTER TABLE icheck_apps ADD COLUMN job_id INTEGER;
       ALTER TABLE icheck_apps ADD COLUMN retire_after INTEGER;
       ALTER TABLE icheck_apps ADD COLUMN prepared TEXT;
       ALTER TABLE icheck_nodes ADD COLUMN draining INTEGER NOT NULL DEFAULT 0;)"};

}  // namespace dynres::icheck::ctl
