#!/usr/bin/env bash
# What a job inherits and what its end leaves behind (signals,
# descriptors, spool files, exit status), on a real local cluster.
#
# 1. SIGPIPE: mjsched ignores SIGPIPE; a job must not inherit that:
#    `while :; do echo x; done | head -1` ends at once (it never ended before).
# 2. Descriptors: neither the job nor its supervisor holds any descriptor on
#    /dev/null but standard input (the supervisor's /dev/null leaked before),
#    and the job has nothing open beyond 0, 1, 2 and bash's script fd 255.
# 3. Spool: spool/jobN.sh and .hosts are removed once the record is final.
# 4. Exit status with a busy state file: with a 50 ms busy timeout
#    (DYNRES_DB_BUSY_TIMEOUT_MS) and the state file write-locked for 9 s
#    across a job's end, the end is still recorded with its exit code (the
#    supervisor gave up after 20 attempts before: FAILED "supervisor lost").
#    A second job's supervisor is SIGKILLed while it retries: the daemon
#    records the end from the hand-off file spool/jobN.end, exit code kept.
# 5. DYNRES_HOME=X vcluster-boot --local 1; vcluster-down stops that cluster.
# About 30 s.
. "${DYNRES_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/t/lib.sh"
t_begin 150

C=$T_TMP/cluster
W=$T_TMP/work
mkdir -p "$W"
cd "$W" || t_fatal "cd $W"
export DYNRES_DB_BUSY_TIMEOUT_MS=50   # inherited by mjsched and its supervisors
boot_cluster "$C" 2 --tick 0.2 --kill-wait 1

# ---- 1-3: signals, descriptors, spool
write_script "$W/pipe.sh" '#!/bin/bash' '#SBATCH -t 1' \
  'while :; do echo x; done 2>/dev/null | head -1 >/dev/null' 'echo piped-ok' \
  'ls /proc/$$/fd | tr "\n" " "; echo' \
  'for f in /proc/$$/fd/*; do n=${f##*/}; [[ $n != 0 && $(readlink "$f") == /dev/null ]] && echo "devnull-fd $n"; done' \
  'sup=$(awk "{print \$4}" /proc/$PPID/stat)' \
  'for f in /proc/$PPID/fd/*; do n=${f##*/}; [[ $n != 0 && $(readlink "$f") == /dev/null ]] && echo "supervisor-devnull-fd $n"; done' \
  'true'
P=$(mjsub --parsable -o pipe.out pipe.sh) || t_fatal "mjsub pipe.sh"
wait_state 20 "$C" "$P" COMPLETED FAILED TIMEOUT CANCELLED
assert_eq COMPLETED "$(job_state "$C" "$P")" "a job with 'while :; do echo x; done | head -1' completes (SIGPIPE not ignored)"
mjcancel -Q "$P" 2>/dev/null   # (only when the pipeline hangs)
out=$(cat "$W/pipe.out")
assert_contains "$out" "piped-ok" "the pipeline ended"
assert_contains "$out" "0 1 2 255 " "the job has only descriptors 0, 1, 2 and bash's 255 open"
assert_not_contains "$out" "devnull-fd" "no extra /dev/null descriptor in the job"
assert_not_contains "$out" "supervisor-devnull-fd" "no extra /dev/null descriptor in the supervisor"
wait_for 5 "spool files of job $P removed" bash -c "! ls '$C/spool/job$P.'* >/dev/null 2>&1"

# ---- 4: the end of a job while the state file is locked
# lock_state SECONDS: hold the state file's write lock (returns once held)
lock_state() {
  rm -f "$T_TMP/locked"
  { echo '.timeout 5000'; echo 'BEGIN EXCLUSIVE;'; echo ".shell touch $T_TMP/locked"; sleep "$1"; echo 'COMMIT;'; } |
    sqlite3 "$C/state.db" &
  bg_register $!
  LOCKER=$!
  wait_for 10 "state file locked" test -e "$T_TMP/locked"
}
write_script "$W/exit3.sh" '#!/bin/bash' 'while [[ ! -e $MJ_SUBMIT_DIR/$MJ_JOB_NAME.go ]]; do sleep 0.05; done' 'exit 3'
E=$(mjsub --parsable -J e1 exit3.sh) || t_fatal "mjsub exit3.sh"
K=$(mjsub --parsable -J e2 exit3.sh) || t_fatal "mjsub exit3.sh"
wait_state 20 "$C" "$E" RUNNING || t_fatal "job $E did not start"
wait_state 20 "$C" "$K" RUNNING || t_fatal "job $K did not start"
KSUP=$(job_col "$C" "$K" supervisor_pid)
lock_state 9
touch "$W/e1.go" "$W/e2.go"
wait_for 5 "job $K's supervisor left its hand-off file" test -s "$C/spool/job$K.end"
kill -KILL "$KSUP"
wait "$LOCKER" 2>/dev/null
wait_state 20 "$C" "$E" FAILED COMPLETED CANCELLED
assert_eq "FAILED 3 NonZeroExitCode" "$(sq "$C" "SELECT state, exit_code, reason FROM jobs WHERE id=$E" | tr '|' ' ')" \
  "job $E: exit code recorded although the state file stayed busy for 9 s"
wait_state 20 "$C" "$K" FAILED COMPLETED CANCELLED
assert_eq "FAILED 3 NonZeroExitCode" "$(sq "$C" "SELECT state, exit_code, reason FROM jobs WHERE id=$K" | tr '|' ' ')" \
  "job $K: end recorded from the hand-off of its killed supervisor"
wait_for 5 "spool files of job $K removed" bash -c "! ls '$C/spool/job$K.'* >/dev/null 2>&1"
check_started_once "$C"
check_allocations_disjoint "$C"
assert_eq 0 "$(sq "$C" "SELECT COUNT(*) FROM nodes WHERE job_id IS NOT NULL")" "all nodes idle"

# ---- 5: vcluster-boot and vcluster-down agree on $DYNRES_HOME
H=$T_TMP/home-by-env
T_CLUSTERS+=("$H")
mkdir -p "$T_TMP/tmpdir"
# (a wrong default would land under this TMPDIR, inside $T_TMP, and be cleaned up)
t_run env TMPDIR="$T_TMP/tmpdir" DYNRES_HOME="$H" vcluster-boot --local 1
assert_eq 0 "$T_RC" "DYNRES_HOME=X vcluster-boot --local 1 ($T_ERR)"
assert_contains "$T_OUT" "dynres cluster in $H" "vcluster-boot uses \$DYNRES_HOME"
wait_for 10 "mjsched of $H up" test -S "$H/mjsched.sock"
HPID=$(sched_pid "$H")
t_run env DYNRES_HOME="$H" vcluster-down
assert_eq 0 "$T_RC" "DYNRES_HOME=X vcluster-down"
wait_for 10 "the cluster started by vcluster-boot is stopped by vcluster-down" eval '[[ -z $(sched_pid "$H") ]]'
[[ -n $HPID ]] && wait_for 5 "mjsched $HPID gone" pids_gone "$HPID"
assert_eq "" "$(procs_matching "$T_TMP/tmpdir")" "nothing runs in the wrong default directory"
t_done
