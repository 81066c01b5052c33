# shellcheck shell=bash disable=SC2034
# t/lib.sh — shared helpers for the dynres integration tests (bash).
#
#   . "${DYNRES_SRC:-$(dirname "$0")/../..}/t/lib.sh"
#   t_begin 90                      # whole-test bound in seconds (watchdog)
#   boot_cluster "$T_TMP/c" 4 --tick 0.2
#   ...checks...
#   t_done                          # prints the summary, exits 0/1
#
# Provides: a private temporary directory $T_TMP; cluster boot with teardown
# (vcluster-down) and removal of the directory in an EXIT trap, even when the
# test is interrupted or the watchdog fires; wait_for with a timeout;
# assertions that print what differed and keep going (the test fails at the
# end); state-file queries and invariant checks (allocations disjoint per
# node, every job started at most once).
#
# Environment: DYNRES_BUILD (build tree; tools in $DYNRES_BUILD/bin),
# DYNRES_SRC (source tree). DYNRES_KEEP_TMP=1 keeps $T_TMP for inspection.
# Exit 77 means "skipped" to ctest.

set -uo pipefail

: "${DYNRES_SRC:=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
: "${DYNRES_BUILD:=$DYNRES_SRC/build}"
export DYNRES_SRC DYNRES_BUILD
export DYNRES_BIN=$DYNRES_BUILD/bin
export PATH=$DYNRES_BIN:$DYNRES_SRC/share/dynres:$PATH
unset DYNRES_HOME

T_NAME=$(basename "${0%.sh}")
T_FAILS=0
T_CHECKS=0
T_CLUSTERS=()
T_PIDS=()
T_WATCHDOG=""
T_T0=$(date +%s.%N)
T_TMP=""
T_EXIT_FUNCS=()
T_FAIL_FUNCS=()

t_log() { printf '[%s %5.1fs] %s\n' "$T_NAME" "$(awk -v a="$T_T0" -v b="$(date +%s.%N)" 'BEGIN{print b-a}')" "$*"; }

# t_skip REASON — exit 77 (ctest: skipped).
t_skip() { echo "[$T_NAME] SKIP: $*"; exit 77; }

# t_fail MESSAGE — record a failed check and go on.
t_fail() {
  T_FAILS=$((T_FAILS + 1))
  T_CHECKS=$((T_CHECKS + 1))
  printf '[%s] FAIL: %s\n' "$T_NAME" "$*" >&2
}
t_pass() {
  T_CHECKS=$((T_CHECKS + 1))
  [[ -n ${T_VERBOSE:-} ]] && printf '[%s] ok: %s\n' "$T_NAME" "$*"
  return 0
}
# t_fatal MESSAGE — record a failure and stop the test (cleanup still runs).
# Inside $(...) it only ends the subshell: there, print and return 1 instead.
t_fatal() {
  t_fail "$*"
  echo "[$T_NAME] stopping after a fatal failure" >&2
  exit 1
}

_t_kill_tree() {  # pid: the process and its descendants
  # Parent first (its children listed before), so a parent never runs its
  # next command after a child was killed (the watchdog's `kill $$`).
  local p=$1 c kids
  kids=$(pgrep -P "$p" 2>/dev/null)
  kill -KILL "$p" 2>/dev/null || true
  for c in $kids; do _t_kill_tree "$c"; done
}

_t_cleanup() {
  local rc=$?
  set +e   # a test may run with set -e: the cleanup must run to its end
  trap - EXIT INT TERM HUP
  # the watchdog's sleep too: it holds our stdout, which ctest waits on
  [[ -n $T_WATCHDOG ]] && _t_kill_tree "$T_WATCHDOG"
  # a t_run command the watchdog (or a signal) interrupted
  # (reaped quietly: no "Killed" job notice from bash)
  [[ -n $T_FG_PID ]] && { _t_kill_tree "$T_FG_PID"; wait "$T_FG_PID"; } 2>/dev/null
  local p d f
  if ((rc != 0 || T_FAILS != 0)); then
    for f in "${T_FAIL_FUNCS[@]}"; do "$f" >&2 || true; done
  fi
  for f in "${T_EXIT_FUNCS[@]}"; do "$f" || true; done
  for p in "${T_PIDS[@]}"; do _t_kill_tree "$p"; done
  if ((rc != 0 || T_FAILS != 0)); then
    for d in "${T_CLUSTERS[@]}"; do
      [[ -f $d/mjsched.log ]] && { echo "--- last lines of $d/mjsched.log:" >&2; tail -n 15 "$d/mjsched.log" >&2; }
    done
  fi
  for d in "${T_CLUSTERS[@]}"; do
    timeout 40 vcluster-down --dir "$d" >/dev/null 2>&1 || echo "[$T_NAME] warning: vcluster-down --dir $d failed" >&2
  done
  # anything still running from our directory (job scripts, supervisors, daemons)
  if [[ -n $T_TMP ]]; then
    for p in $(procs_matching "$T_TMP"); do kill -KILL "$p" 2>/dev/null || true; done
    if [[ -n ${DYNRES_KEEP_TMP:-} ]]; then
      echo "[$T_NAME] kept $T_TMP" >&2
    else
      rm -rf -- "$T_TMP"
    fi
  fi
  exit "$rc"
}

# t_begin SECONDS — temp dir, traps, and a watchdog that ends the test (and
# so its cleanup) after SECONDS. Skips when the tools or sqlite3 are missing.
t_begin() {
  local bound=${1:-120}
  command -v sqlite3 >/dev/null || t_skip "sqlite3 (Debian package sqlite3) is not installed"
  command -v perl >/dev/null || t_skip "perl is not installed"
  local t
  for t in mjsub mjstat mjcancel mjsched mjstepd; do
    [[ -x $DYNRES_BIN/$t ]] || t_skip "$DYNRES_BIN/$t is not built"
  done
  # short: Unix socket paths below it must stay within 107 bytes
  T_TMP=$(mktemp -d "${TMPDIR:-/tmp}/dr-${T_NAME%%-*}-XXXXXX") || t_fatal "mktemp failed"
  chmod 700 "$T_TMP"
  trap _t_cleanup EXIT
  trap 'echo "[$T_NAME] interrupted" >&2; exit 1' INT HUP
  trap 'echo "[$T_NAME] FAIL: time bound of '"$bound"' s exceeded" >&2; T_FAILS=$((T_FAILS + 1)); exit 1' TERM
  # The TERM trap runs at once while the test waits in t_run/t_run_stdin
  # (_t_wait_fg) or between commands; a trap is deferred while any other
  # foreground command runs, so when the test has not ended 5 s after the
  # TERM, the watchdog kills the test shell's other children (that command,
  # anything not yet reaped) and the trap and cleanup run. The cleanup kills
  # the watchdog first, so it never touches the cleanup's own commands.
  (
    sleep "$bound" && kill -TERM $$ 2>/dev/null || exit 0
    sleep 5
    pid_alive $$ || exit 0
    echo "[$T_NAME] watchdog: a foreground command holds the time-bound trap back; killing the test's child processes" >&2
    for c in $(pgrep -P $$ 2>/dev/null); do [[ $c != "$BASHPID" ]] && _t_kill_tree "$c"; done
  ) &
  T_WATCHDOG=$!
  disown "$T_WATCHDOG"
  t_log "temporary directory $T_TMP"
}

# t_done — summary; exit 1 when any check failed.
t_done() {
  if ((T_FAILS)); then
    t_log "$T_FAILS of $T_CHECKS checks FAILED"
    exit 1
  fi
  t_log "all $T_CHECKS checks passed"
  exit 0
}

# bg_register PID — kill this process (and its children) at cleanup.
bg_register() { T_PIDS+=("$1"); }
# t_on_exit FUNCTION — run FUNCTION at cleanup (before the registered
# processes are killed and $T_TMP is removed), e.g. to stop a service the
# test booted; last registered runs first.
t_on_exit() { T_EXIT_FUNCS=("$1" "${T_EXIT_FUNCS[@]}"); }
# t_on_fail FUNCTION — run FUNCTION at cleanup when the test failed, e.g. to
# print the tail of a daemon's log.
t_on_fail() { T_FAIL_FUNCS+=("$1"); }
# t_require COMMAND... — skip (exit 77) naming the first command not on PATH.
t_require() {
  local c
  for c in "$@"; do command -v "$c" >/dev/null || t_skip "$c is not built or not installed"; done
}

# ---------------------------------------------------------------- outer Slurm

# outer_slurm_start NODES [--poll] [START OPTIONS] — a real Slurm cluster of NODES nodes
# (t/fixtures/outer-slurm) in $T_TMP/outer, its client environment exported
# (SLURM_CONF ...). At exit the allocation whose id the test wrote to
# $T_TMP/alloc.jobid is cancelled and the cluster stopped (after the test's
# own t_on_exit functions registered later); when the test failed, the steps
# the slurmd logs record are printed. --poll also records `squeue -s`
# snapshots ("time stepid name nodes", every 0.2 s) in $T_TMP/squeue-steps.log.
# START OPTIONS go to the fixture's start (e.g. --slurmd-timeout 6).
T_OUTER_POLLER=""
outer_slurm_start() {
  local n=$1 fixture=$DYNRES_SRC/t/fixtures/outer-slurm poll=0
  shift
  [[ ${1:-} == --poll ]] && { poll=1; shift; }
  t_on_exit _t_outer_stop
  t_on_fail _t_outer_steps
  t_log "starting an outer Slurm of $n nodes in $T_TMP/outer"
  "$fixture" start "$T_TMP/outer" --nodes "$n" --timeout 30 "$@" >"$T_TMP/outer-start.log" 2>&1 ||
    { cat "$T_TMP/outer-start.log" >&2; t_fatal "the outer Slurm did not start"; }
  eval "$("$fixture" env "$T_TMP/outer")"
  if ((poll)); then
    (
      while :; do
        squeue -s -h -o '%i %j %N' 2>/dev/null | sed "s/^/$(date +%T.%N | cut -c1-12) /"
        sleep 0.2
      done
    ) >"$T_TMP/squeue-steps.log" 2>&1 &
    T_OUTER_POLLER=$!
    bg_register "$T_OUTER_POLLER"
  fi
}
_t_outer_stop() {
  [[ -n $T_OUTER_POLLER ]] && { kill "$T_OUTER_POLLER"; wait "$T_OUTER_POLLER"; } 2>/dev/null
  [[ -f $T_TMP/outer/slurm.conf ]] || return 0
  [[ -f $T_TMP/alloc.jobid ]] && SLURM_CONF=$T_TMP/outer/slurm.conf scancel "$(cat "$T_TMP/alloc.jobid")" 2>/dev/null
  "$DYNRES_SRC/t/fixtures/outer-slurm" stop "$T_TMP/outer"
}
_t_outer_steps() {
  [[ -f $T_TMP/outer/slurm.conf ]] || return 0
  echo "---- outer steps (slurmd logs)"
  "$DYNRES_SRC/t/fixtures/outer-slurm" steps "$T_TMP/outer"
  [[ -f $T_TMP/squeue-steps.log ]] && { echo "---- squeue -s snapshots (last 20)"; tail -n 20 "$T_TMP/squeue-steps.log"; }
}
# outer_slurm_inside SECONDS NODES NAME SCRIPT [SALLOC OPTIONS] — run `bash
# SCRIPT --inside $T_TMP` in an allocation of NODES nodes (salloc -J NAME),
# bounded by SECONDS; a test's part inside the allocation writes
# $SLURM_JOB_ID to $T_TMP/alloc.jobid. Fails the test when it times out or
# exits non-zero. SALLOC OPTIONS, e.g. --no-kill (the allocation outlives a
# failed node).
outer_slurm_inside() {
  local rc=0
  (cd "$T_TMP" && timeout "$1" salloc -N"$2" -J "$3" -t 5 "${@:5}" bash "$4" --inside "$T_TMP") || rc=$?
  ((rc != 124)) || t_fatal "the part inside the allocation did not finish within $1 s"
  ((rc == 0)) || t_fatal "the part inside the allocation failed (exit $rc)"
}

# ---------------------------------------------------------------- clusters

# boot_cluster DIR N [vcluster-boot options] — local N-node cluster in DIR,
# torn down at exit; sets DYNRES_HOME=DIR.
boot_cluster() {
  local dir=$1 n=$2
  shift 2
  T_CLUSTERS+=("$dir")
  if ! vcluster-boot --local "$n" --dir "$dir" "$@" >"$T_TMP/boot.log" 2>&1; then
    cat "$T_TMP/boot.log" >&2
    t_fatal "vcluster-boot --local $n --dir $dir $* failed"
  fi
  export DYNRES_HOME=$dir
}

# sched_pid DIR — pid of the cluster's mjsched (empty when not running).
sched_pid() {
  local p
  p=$(cat "$1/mjsched.pid" 2>/dev/null) || return 0
  pid_alive "$p" && echo "$p"  # not kill -0: an exited daemon may linger as a zombie
  return 0
}

# sched_queued DIR N — at least N connections wait in the accept queue of
# DIR/mjsched.sock (ss from iproute2): clients queued while mjsched is stopped.
sched_queued() {
  local q
  q=$(ss -xlnH 2>/dev/null | awk -v p="$1/mjsched.sock" '$5 == p {print $3}')
  [[ -n $q && $q -ge $2 ]]
}

# sq DIR SQL — query the state file (waits for locks up to 10 s).
sq() { sqlite3 -batch -cmd '.timeout 10000' "$1/state.db" "$2"; }

job_state() { sq "$1" "SELECT state FROM jobs WHERE id=$2"; }
job_col() { sq "$1" "SELECT $3 FROM jobs WHERE id=$2"; }
# count_jobs DIR [WHERE-clause]
count_jobs() { sq "$1" "SELECT COUNT(*) FROM jobs ${2:+WHERE $2}"; }

# sched_restart DIR SIGNAL — stop DIR's mjsched with SIGNAL (TERM, or KILL:
# a crash) and start it again (it reads DIR/dynres.yaml anew); t_fatal when it
# does not stop or come back.
sched_restart() {
  local dir=$1
  kill "-$2" "$(sched_pid "$dir")"
  wait_for 10 "mjsched stopped" eval "[[ -z \$(sched_pid '$dir') ]]" || t_fatal "mjsched did not stop"
  rm -f "$dir/mjsched.sock" "$dir/mjsched.pid"  # what a killed one leaves
  mjsched --home "$dir" --daemon || t_fatal "mjsched did not start again: $(tail -3 "$dir/mjsched.log")"
  wait_for 10 "mjsched back" eval "[[ -S '$dir/mjsched.sock' && -n \$(sched_pid '$dir') ]]" || t_fatal "no mjsched"
}

# heat_fault_cluster DIR N [BOOT-OPTIONS...] — for the node-loss tests with
# heat and iCheck: skips without mpiexec, heat (with libmj), icheckd or
# icagent; boots DIR with N nodes, the last one iCheck's, with node agents
# (tick 0.2 s, kill_wait 1 s, resize timeout 30 s) and waits for the N-1
# agents.
heat_fault_cluster() {
  local dir=$1 n=$(($2 - 1))
  t_require mpiexec heat mjsub icheckd icagent
  [[ $(ldd "$DYNRES_BIN/heat") == *libmj* ]] || t_skip "heat is built without libmj"
  boot_cluster "$dir" "$2" --tick 0.2 --kill-wait 1 --icheck-nodes 1 --resize-timeout 30 "${@:3}"
  _t_agents() { (($(grep -c 'connected' "$dir/nodes/mjnoded.log" 2>/dev/null) >= n)); }
  wait_for 10 "$n node agents connected" _t_agents || t_fatal "$(cat "$dir/nodes/mjnoded.log")"
}

# slow_node_cluster DIR COOLDOWN ARGS... — for the slow-node tests [HoG14
# §5.5]: skips without mpiexec, heat (with libmj), libmjprof, a cgroup cpu
# controller or root; boots DIR (4 compute nodes and iCheck's n5) with
# scheduler.slow_nodes windows of 2 s, 3 windows, factor 1.5, COOLDOWN s,
# restart_cost 2 s; releases every node's throttle at exit. Sets THR
# (vcluster-throttle) and writes $T_TMP/w/job.sh: heat --malleable with heat
# ARGS, then the script's arguments (one MPI rank per node, its own MJ_NODE,
# libmjprof every 0.3 s, at most 3 nodes). The current directory becomes $T_TMP/w.
slow_node_cluster() {
  local dir=$1 cooldown=$2 t
  shift 2
  command -v mpiexec >/dev/null || t_skip "mpiexec (Debian package mpich) is not installed"
  for t in heat icheckd icagent mjcontrol; do [[ -x $DYNRES_BIN/$t ]] || t_skip "$DYNRES_BIN/$t is not built"; done
  [[ $(ldd "$DYNRES_BIN/heat") == *libmj* ]] || t_skip "heat is built without libmj"
  local lib=$DYNRES_BUILD/lib/libmjprof.so
  [[ -f $lib ]] || t_skip "libmjprof.so is not built"
  [[ -f /sys/fs/cgroup/cpu/cpu.cfs_quota_us || -f /sys/fs/cgroup/cgroup.controllers ]] || t_skip "no cgroup cpu controller"
  [[ $(id -u) == 0 ]] || t_skip "vcluster-throttle needs root for the cgroup tree"
  THR=$DYNRES_SRC/share/dynres/vcluster-throttle
  mkdir -p "$T_TMP/w"
  cd "$T_TMP/w" || t_fatal "cd $T_TMP/w"
  boot_cluster "$dir" 5 --tick 0.2 --kill-wait 1 --icheck-nodes 1 --resize-timeout 30
  sed -i "s/^scheduler:\$/scheduler:\n  slow_nodes:\n    window: 2\n    windows: 3\n    factor: 1.5\n    cooldown: $cooldown\n    restart_cost: 2/" \
    "$dir/dynres.yaml"
  sched_restart "$dir" TERM  # with these settings
  T_SLOW_DIR=$dir
  _t_release_throttles() { for t in n1 n2 n3 n4; do "$THR" --dir "$T_SLOW_DIR" --release "$t" >/dev/null 2>&1; done; return 0; }
  t_on_exit _t_release_throttles
  write_script "$T_TMP/w/job.sh" '#!/bin/bash' '#SBATCH --malleable' '#SBATCH --min-nodes 1' '#SBATCH --max-nodes 3' \
    "exec mpiexec -f \"\$MJ_NODEFILE\" -n \"\$MJ_JOB_NUM_NODES\" env LD_PRELOAD=$lib MJPROF_INTERVAL=0.3 \\" \
    "  $DYNRES_BIN/heat --malleable --app heat-\$MJ_JOB_ID --no-persist --config $dir/icheck.yaml $* \"\$@\""
}

# rank_cpu_shares DIR — for a failed slow-node test: per heat rank of the
# cluster DIR, "NODE pid PID cpu=C% wait=W%": the share of the last second it
# ran and waited runnable (/proc/PID/schedstat), what the detector compares.
rank_cpu_shares() {
  local p n a b
  declare -A t0
  for p in $(pgrep -x heat); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "MJ_SOCKET=$1/mjsched.sock" || continue
    t0[$p]=$(cut -d' ' -f1-2 "/proc/$p/schedstat" 2>/dev/null)
  done
  sleep 1
  for p in "${!t0[@]}"; do
    n=$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | sed -n 's/^MJ_NODE=//p')
    read -r a b <<<"$(cut -d' ' -f1-2 "/proc/$p/schedstat" 2>/dev/null)"
    [[ -n $a ]] || continue
    awk -v n="$n" -v p="$p" -v s="${t0[$p]}" -v a="$a" -v b="$b" \
      'BEGIN { split(s, o, " "); printf "%s pid %s cpu=%.1f%% wait=%.1f%%\n", n, p, (a - o[1]) / 1e7, (b - o[2]) / 1e7 }'
  done | sort
}

# icsched_helpers DIR — for the iCheck-aware scheduling tests, defines on the
# cluster DIR: `ic JSON` (one raw request to mjsched.sock, as iCheck's
# controller sends them; prints the reply), `lent` (the nodes lent to iCheck,
# "name:state ..." in node order), `icnode NODE` (iCheck's own state of NODE)
# and `sched_restart_with AFTER LINES WHAT` (dynres.yaml edited, mjsched restarted).
icsched_helpers() {
  T_ICS_DIR=$1
  ic() { "$DYNRES_SRC/t/frame-request" "$T_ICS_DIR/mjsched.sock" "$1"; }
  lent() { sq "$T_ICS_DIR" "SELECT group_concat(name || ':' || state, ' ') FROM (SELECT n.name, l.state FROM icheck_lent l JOIN nodes n ON n.id = l.node_id ORDER BY n.id)"; }
  icnode() { sq "$T_ICS_DIR" "SELECT state FROM icheck_nodes WHERE node = '$1'"; }
  # sched_restart_with AFTER LINES WHAT — insert LINES (YAML) after the first
  # line AFTER of the cluster's dynres.yaml, restart mjsched on it (checked).
  sched_restart_with() {
    python3 - "$T_ICS_DIR/dynres.yaml" "$1" "$2" <<'PY'
import sys
p, after, add = sys.argv[1:4]
s = open(p).read().replace(after + "\n", after + "\n" + add + "\n", 1)
open(p, "w").write(s)
PY
    local p
    p=$(sched_pid "$T_ICS_DIR")
    kill "$p"
    wait_for 10 "mjsched stopped" pids_gone "$p"
    t_run "$DYNRES_BUILD/bin/mjsched" --home "$T_ICS_DIR" --daemon
    assert_eq 0 "$T_RC" "mjsched restarts with $3 (stderr: $T_ERR)"
  }
}

# icheck_service HOME ARGS... — a private iCheck service (icheck-boot --home
# HOME ARGS) for this test, stopped at exit, after the processes listed in
# T_ICHECK_STOPPED (SIGSTOPped by the test) are resumed; its controller and
# manager logs are shown on failure. Exports ICHECK_CONFIG and defines
# `icsql SQL` (a query of the service's state file).
T_ICHECK_STOPPED=()
icheck_service() {
  T_ICHECK_HOME=$1
  shift
  mkdir -p "$T_ICHECK_HOME" && chmod 700 "$T_ICHECK_HOME"
  unset ICHECK_CONFIG ICHECK_TRANSFER ICHECK_TCP_AUTH
  t_on_exit _t_icheck_down
  t_on_fail _t_icheck_logs
  timeout 30 "$DYNRES_SRC/share/dynres/icheck-boot" --home "$T_ICHECK_HOME" "$@" >/dev/null ||
    t_fatal "icheck-boot $* failed"
  export ICHECK_CONFIG=$T_ICHECK_HOME/icheck.yaml
  icsql() { sqlite3 -batch -cmd '.timeout 5000' "$T_ICHECK_HOME/state.db" "$1"; }
}
_t_icheck_down() {
  local p
  for p in "${T_ICHECK_STOPPED[@]}"; do kill -CONT "$p" 2>/dev/null; done
  "$DYNRES_SRC/share/dynres/icheck-down" --home "$T_ICHECK_HOME" >/dev/null 2>&1
}
_t_icheck_logs() {
  local f
  for f in "$T_ICHECK_HOME"/icheck/controller.log "$T_ICHECK_HOME"/icheck/manager-*.log; do
    [[ -f $f ]] && { echo "== $f"; tail -8 "$f"; }
  done >&2
}

# state_digest DIR — checksum of the whole logical content of the state file.
state_digest() { sqlite3 -batch -cmd '.timeout 10000' "$1/state.db" .dump | md5sum | cut -d' ' -f1; }

# ---------------------------------------------------------------- waiting

# wait_for SECONDS DESCRIPTION CMD... — poll CMD every 0.1 s until it
# succeeds; on timeout record a failure naming DESCRIPTION and return 1.
wait_for() {
  local secs=$1 what=$2
  shift 2
  local end
  end=$(awk -v t="$(date +%s.%N)" -v s="$secs" 'BEGIN{printf "%.3f", t+s}')
  while :; do
    if "$@"; then t_pass "$what"; return 0; fi
    if awk -v n="$(date +%s.%N)" -v e="$end" 'BEGIN{exit !(n>e)}'; then
      t_fail "timed out after ${secs}s waiting for: $what"
      return 1
    fi
    sleep 0.1
  done
}

# state_is DIR ID STATE... — true when job ID is in one of the states.
state_is() {
  local dir=$1 id=$2 s
  shift 2
  s=$(job_state "$dir" "$id")
  for x in "$@"; do [[ $s == "$x" ]] && return 0; done
  return 1
}
# wait_state SECONDS DIR ID STATE... — wait_for a job state, saying which it had.
wait_state() {
  local secs=$1 dir=$2 id=$3
  shift 3
  wait_for "$secs" "job $id in state $*" state_is "$dir" "$id" "$@" ||
    { echo "    job $id is $(job_state "$dir" "$id") ($(job_col "$dir" "$id" reason))" >&2; return 1; }
}
# no_active_jobs DIR — no PENDING or RUNNING job left.
no_active_jobs() { [[ $(count_jobs "$1" "state IN ('PENDING','RUNNING')") == 0 ]]; }

# ---------------------------------------------------------------- assertions

assert_eq() {  # EXPECTED ACTUAL WHAT
  if [[ $1 == "$2" ]]; then t_pass "$3"; else t_fail "$3: expected '$1', got '$2'"; fi
}
assert_ne() {  # UNEXPECTED ACTUAL WHAT
  if [[ $1 != "$2" ]]; then t_pass "$3"; else t_fail "$3: got '$2', which it must not be"; fi
}
assert_match() {  # ERE ACTUAL WHAT
  if [[ $2 =~ $1 ]]; then t_pass "$3"; else t_fail "$3: '$2' does not match /$1/"; fi
}
assert_contains() {  # TEXT NEEDLE WHAT — TEXT contains NEEDLE literally
  if [[ $1 == *"$2"* ]]; then t_pass "$3"; else t_fail "$3: '$2' not found in: $(printf '%s' "$1" | head -c 600)"; fi
}
assert_not_contains() {  # TEXT NEEDLE WHAT
  if [[ $1 != *"$2"* ]]; then t_pass "$3"; else t_fail "$3: '$2' must not appear in: $(printf '%s' "$1" | head -c 600)"; fi
}
assert_le() {  # A B WHAT — numerically A <= B (floats)
  if awk -v a="$1" -v b="$2" 'BEGIN{exit !(a<=b)}'; then t_pass "$3"; else t_fail "$3: expected $1 <= $2"; fi
}
assert_lt() {  # A B WHAT — numerically A < B
  if awk -v a="$1" -v b="$2" 'BEGIN{exit !(a<b)}'; then t_pass "$3"; else t_fail "$3: expected $1 < $2"; fi
}
assert_file_content() {  # FILE EXPECTED WHAT
  if [[ ! -f $1 ]]; then t_fail "$3: file $1 does not exist"; return; fi
  assert_eq "$2" "$(cat "$1")" "$3"
}

# _t_wait_fg IN OUT ERR CMD... — run CMD with stdin, stdout and stderr
# from/to those files like a foreground command, but as a child the shell
# `wait`s for: bash defers a trap while a foreground command runs, and `wait`
# is interrupted by it, so the watchdog's TERM ends the test at its bound
# instead of when CMD ends. SIGINT/SIGQUIT are reset to what the shell
# inherited (bash ignores them in `&` children); CMD may be a function (it
# runs in a subshell: variables it sets do not reach the caller). Only CMD is
# redirected, not the traps that interrupt it. Returns CMD's exit code;
# cleanup kills CMD's process tree if the test ends first.
T_FG_PID=""
_t_wait_fg() {
  local in=$1 out=$2 err=$3
  shift 3
  ( trap - INT QUIT; "$@" ) <"$in" >"$out" 2>"$err" &
  T_FG_PID=$!
  wait "$T_FG_PID"
  local rc=$?
  T_FG_PID=""
  return "$rc"
}

# t_run CMD... — run CMD, keeping its exit code in T_RC, its stdout in T_OUT
# and its stderr in T_ERR (never fails itself). Interruptible by the watchdog.
T_RC=0 T_OUT="" T_ERR=""
t_run() {
  _t_wait_fg /dev/null "$T_TMP/.out" "$T_TMP/.err" "$@"
  T_RC=$?
  T_OUT=$(cat "$T_TMP/.out")
  T_ERR=$(cat "$T_TMP/.err")
}
# t_run_stdin FILE CMD... — like t_run with FILE on standard input.
t_run_stdin() {
  local in=$1
  shift
  _t_wait_fg "$in" "$T_TMP/.out" "$T_TMP/.err" "$@"
  T_RC=$?
  T_OUT=$(cat "$T_TMP/.out")
  T_ERR=$(cat "$T_TMP/.err")
}

# json_get FIELD — a top-level field of the JSON object on stdin ("null" for null).
json_get() {
  perl -MJSON::PP -0777 -ne 'my $d = decode_json($_); my $v = $d->{$ARGV_FIELD};
    print defined $v ? (ref $v ? encode_json($v) : $v) : "null"; BEGIN { $ARGV_FIELD = shift @ARGV }' "$1"
}

# write_script FILE LINES... — a job script, one argument per line, executable.
write_script() {
  local f=$1
  shift
  printf '%s\n' "$@" >"$f"
  chmod +x "$f"
}

# ---------------------------------------------------------------- invariants

# check_started_once DIR — every job has exactly one "start" event if it ever
# had a start time, none otherwise. Prints offenders; returns 1 on any.
check_started_once() {
  local bad
  bad=$(sq "$1" "SELECT j.id || ' state=' || j.state || ' starts=' || COUNT(e.id) FROM jobs j
                 LEFT JOIN events e ON e.job_id = j.id AND e.kind = 'start'
                 GROUP BY j.id
                 HAVING COUNT(e.id) != (CASE WHEN j.start_time IS NULL THEN 0 ELSE 1 END)")
  if [[ -n $bad ]]; then t_fail "jobs not started exactly once: $(echo $bad)"; return 1; fi
  t_pass "every job started at most once"
}

# check_allocations_disjoint DIR — for each node, the allocation intervals
# that hold it never overlap (open allocations last until now) and only
# running jobs hold an open allocation. Returns 1 on any overlap.
check_allocations_disjoint() {
  local out
  out=$(sq "$1" "SELECT a.job_id, a.nodelist, a.start_time, IFNULL(a.end_time, ''), j.state
                 FROM allocations a JOIN jobs j ON j.id = a.job_id ORDER BY a.start_time" |
    perl -e '
      sub expand {  # Slurm node list: n[1-3,7],gpu01
        my ($s) = @_; my @out;
        while (length $s) {
          $s =~ s/^([^,\[]+)(\[([^\]]*)\])?,?// or die "bad nodelist $s\n";
          my ($p, $r) = ($1, $3);
          if (!defined $r) { push @out, $p; next }
          for my $part (split /,/, $r) {
            my ($lo, $hi) = split /-/, $part; $hi //= $lo;
            push @out, sprintf("%s%0*d", $p, length $lo, $_) for $lo .. $hi;
          }
        }
        @out;
      }
      my (%iv, $bad); my $now = time;
      while (<STDIN>) {
        chomp; my ($job, $nl, $s, $e, $st) = split /\|/;
        if ($e eq "") { $e = $now + 1e6; print "job $job ($st) has an open allocation\n" if $st ne "RUNNING"; }
        push @{ $iv{$_} }, [$s, $e, $job] for expand($nl);
      }
      for my $n (sort keys %iv) {
        my @a = sort { $a->[0] <=> $b->[0] } @{ $iv{$n} };
        for my $i (1 .. $#a) {
          printf "node %s: job %d [%.3f, %.3f] overlaps job %d [%.3f, ...]\n", $n, $a[$i-1][2], $a[$i-1][0],
            $a[$i-1][1], $a[$i][2], $a[$i][0] if $a[$i][0] < $a[$i-1][1] - 1e-6;
        }
      }')
  if [[ -n $out ]]; then t_fail "allocations overlap: $out"; return 1; fi
  t_pass "node allocations disjoint"
}

# check_nodes_consistent DIR WHAT — the state file's node ownership matches
# the jobs: no node held by a job that is not RUNNING, and each running job's
# num_nodes equals the nodes it holds (no node lost, none in two jobs).
check_nodes_consistent() {
  local bad
  bad=$(sq "$1" "SELECT 'node ' || n.name || ' held by job ' || n.job_id || ' (' || IFNULL(j.state,'none') || ')'
                 FROM nodes n LEFT JOIN jobs j ON j.id = n.job_id
                 WHERE n.job_id IS NOT NULL AND IFNULL(j.state,'') != 'RUNNING'
                 UNION ALL
                 SELECT 'job ' || j.id || ' num_nodes=' || j.num_nodes || ' holds ' || COUNT(n.id)
                 FROM jobs j LEFT JOIN nodes n ON n.job_id = j.id WHERE j.state = 'RUNNING'
                 GROUP BY j.id HAVING COUNT(n.id) != j.num_nodes")
  if [[ -n $bad ]]; then t_fail "node states inconsistent ($2): $(echo $bad)"; return 1; fi
  t_pass "node states consistent ($2)"
}

# pids_alive PID... — true when every pid exists (and is not a zombie).
pid_alive() {
  local s
  s=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
  [[ -n $s && $s != Z && $s != X ]]
}
pids_alive() { local p; for p in "$@"; do pid_alive "$p" || return 1; done; }
pids_gone() { local p; for p in "$@"; do pid_alive "$p" && return 1; done; return 0; }

# procs_matching STRING — pids of live processes (not zombies) whose command
# line contains STRING literally (this shell and its children excluded).
procs_matching() {
  perl -e '
    my ($needle, @skip) = @ARGV; my %skip = map { $_ => 1 } @skip;
    for my $d (glob "/proc/[0-9]*") {
      my ($pid) = $d =~ m{(\d+)$}; next if $skip{$pid} || $pid == $$;
      open(my $f, "<", "$d/cmdline") or next; local $/; my $c = <$f>; close $f;
      next unless defined $c && length $c; $c =~ tr/\0/ /;
      next if index($c, $needle) < 0;
      open(my $s, "<", "$d/stat") or next; my $st = <$s>; close $s;
      next if $st =~ /\)\s+[ZX]\s/;
      print "$pid\n";
    }' -- "$1" "$$" "$BASHPID"
}
# procs_of_cluster DIR NEEDLE — like procs_matching, but only processes of
# the cluster in DIR (DYNRES_HOME=DIR in their environment): tests run side
# by side, and another test's job may run the same program.
procs_of_cluster() {
  local p
  for p in $(procs_matching "$2"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qxF "DYNRES_HOME=$1" && echo "$p"
  done
  return 0
}
no_procs_matching() { [[ -z $(procs_matching "$1") ]]; }
