#!/usr/bin/env bash
# SIGKILL the scheduler daemon in the middle of a workload.
#
# 4 nodes, tick 0.2 s. Two 2-node jobs (A, B) fill the cluster and wait for a
# flag file; three more jobs wait. Then `kill -9 mjsched`. While it is down:
# A and B keep running (their processes stay alive), mjsub still succeeds
# (the job stays PENDING), and A, released, ends COMPLETED with an end time
# recorded by its own supervisor. mjsched is restarted; B keeps running,
# then everything completes. Finally: no job lost, every job started exactly
# once, node allocations never overlap, output files as expected. About 10 s.
. "${DYNRES_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/t/lib.sh"
t_begin 90

C=$T_TMP/cluster
W=$T_TMP/work
mkdir -p "$W"
cd "$W" || t_fatal "cd $W"
boot_cluster "$C" 4 --tick 0.2 --kill-wait 1 --policy easy

# long job: waits (at most 40 s) for its flag file NAME.go in the submit directory
write_script "$W/long.sh" '#!/bin/bash' '#SBATCH -N 2' '#SBATCH -o %x-%j.out' \
  'echo "start $MJ_JOB_NAME on $MJ_JOB_NUM_NODES nodes"' \
  'for i in $(seq 400); do [[ -e $MJ_SUBMIT_DIR/$MJ_JOB_NAME.go ]] && break; sleep 0.1; done' \
  'echo "end $MJ_JOB_NAME"'
write_script "$W/short.sh" '#!/bin/bash' '#SBATCH -o %x-%j.out' '#SBATCH -t 1' \
  'echo "short $MJ_JOB_NAME $MJ_JOB_ID nodes=$MJ_JOB_NUM_NODES"'

submit() {  # NAME ARGS... -> prints the id
  local name=$1
  shift
  t_run mjsub --parsable -J "$name" "$@"
  if [[ $T_RC == 0 && $T_OUT =~ ^[0-9]+$ ]]; then echo "$T_OUT"; return 0; fi
  echo "mjsub -J $name $* failed: rc=$T_RC out=$T_OUT err=$T_ERR" >&2
  return 1
}
A=$(submit A long.sh) || t_fatal "cannot submit A"
B=$(submit B long.sh) || t_fatal "cannot submit B"
wait_state 20 "$C" "$A" RUNNING || t_fatal "A did not start"
wait_state 20 "$C" "$B" RUNNING || t_fatal "B did not start"
P1=$(submit P1 -N 1 short.sh) || t_fatal "cannot submit P1"
P2=$(submit P2 -N 2 short.sh) || t_fatal "cannot submit P2"
sleep 0.6  # three ticks: they must stay pending, the cluster is full
assert_eq PENDING "$(job_state "$C" "$P1")" "P1 pending on a full cluster"
assert_eq PENDING "$(job_state "$C" "$P2")" "P2 pending on a full cluster"

APIDS=$(procs_matching "$C/spool/job$A.sh")
BPIDS=$(procs_matching "$C/spool/job$B.sh")
ASUP=$(job_col "$C" "$A" supervisor_pid)
BSUP=$(job_col "$C" "$B" supervisor_pid)
[[ -n $APIDS && -n $BPIDS ]] || t_fatal "cannot find the processes of jobs A ($APIDS) and B ($BPIDS)"
t_log "A=$A (sup $ASUP, procs $(echo $APIDS)) B=$B (sup $BSUP, procs $(echo $BPIDS)) P1=$P1 P2=$P2"

# ---- kill -9 the daemon
SPID=$(sched_pid "$C")
[[ -n $SPID ]] || t_fatal "mjsched is not running"
kill -KILL "$SPID"
wait_for 5 "mjsched $SPID gone" pids_gone "$SPID"
t_log "killed mjsched $SPID"

# running jobs keep running
sleep 0.5
# shellcheck disable=SC2086
pids_alive $APIDS $BPIDS "$ASUP" "$BSUP" && t_pass "jobs alive" ||
  t_fail "job processes or supervisors died with the daemon"
assert_eq RUNNING "$(job_state "$C" "$A")" "A still RUNNING with the daemon dead"
assert_eq RUNNING "$(job_state "$C" "$B")" "B still RUNNING with the daemon dead"

# a submission still succeeds and waits
t0=$(date +%s.%N)
P3=$(submit P3 -N 1 short.sh) || t_fatal "cannot submit P3"
t1=$(date +%s.%N)
assert_le "$(awk -v a="$t0" -v b="$t1" 'BEGIN{print b-a}')" 3 "mjsub with the daemon dead returns at once"
assert_eq PENDING "$(job_state "$C" "$P3")" "job submitted while the daemon is dead is PENDING"
assert_eq 5 "$(count_jobs "$C")" "five jobs recorded"

# A ends: its supervisor records the end although the daemon is dead
touch "$W/A.go"
wait_state 20 "$C" "$A" COMPLETED
assert_ne "" "$(job_col "$C" "$A" end_time)" "A has an end time"
assert_eq 0 "$(job_col "$C" "$A" exit_code)" "A exit code"
assert_eq 0 "$(sq "$C" "SELECT COUNT(*) FROM nodes WHERE job_id=$A")" "A's nodes freed by its supervisor"
assert_ne "" "$(sq "$C" "SELECT end_time FROM allocations WHERE job_id=$A")" "A's allocation closed"
sleep 0.6
for id in "$P1" "$P2" "$P3"; do
  assert_eq PENDING "$(job_state "$C" "$id")" "job $id waits while the daemon is dead"
done
# shellcheck disable=SC2086
pids_alive $BPIDS "$BSUP" && t_pass "B alive" || t_fail "B's processes died"

# ---- restart
t_run "$DYNRES_BUILD/bin/mjsched" --home "$C" --daemon
assert_eq 0 "$T_RC" "mjsched --daemon restarts (stderr: $T_ERR)"
wait_for 10 "mjsched socket back" test -S "$C/mjsched.sock"
wait_for 10 "new mjsched pid" eval '[[ -n $(sched_pid "$C") && $(sched_pid "$C") != "$SPID" ]]'
t_log "mjsched restarted as $(sched_pid "$C")"
wait_state 20 "$C" "$P1" RUNNING COMPLETED
wait_state 20 "$C" "$P3" RUNNING COMPLETED
assert_eq RUNNING "$(job_state "$C" "$B")" "B still RUNNING after the restart (its supervisor lives)"
assert_eq "$BSUP" "$(job_col "$C" "$B" supervisor_pid)" "B keeps its supervisor"

touch "$W/B.go"
wait_for 30 "all jobs ended" no_active_jobs "$C"

# ---- the record
assert_eq 5 "$(count_jobs "$C")" "no job lost"
assert_eq "$A $B $P1 $P2 $P3" "$(sq "$C" "SELECT id FROM jobs ORDER BY id" | tr '\n' ' ' | sed 's/ $//')" \
  "the job ids are the ones mjsub printed"
for id in "$A" "$B" "$P1" "$P2" "$P3"; do
  assert_eq COMPLETED "$(job_state "$C" "$id")" "job $id COMPLETED ($(job_col "$C" "$id" reason))"
done
check_started_once "$C"
check_allocations_disjoint "$C"
assert_eq 0 "$(sq "$C" "SELECT COUNT(*) FROM allocations WHERE end_time IS NULL")" "no open allocation"
assert_eq 0 "$(sq "$C" "SELECT COUNT(*) FROM nodes WHERE job_id IS NOT NULL")" "all nodes idle"
assert_le "$(job_col "$C" "$A" end_time)" "$(job_col "$C" "$P1" start_time)" "P1 started after A ended"
assert_file_content "$W/A-$A.out" "start A on 2 nodes
end A" "A's output"
assert_file_content "$W/B-$B.out" "start B on 2 nodes
end B" "B's output"
assert_file_content "$W/P1-$P1.out" "short P1 $P1 nodes=1" "P1's output"
assert_file_content "$W/P2-$P2.out" "short P2 $P2 nodes=2" "P2's output"
assert_file_content "$W/P3-$P3.out" "short P3 $P3 nodes=1" "P3's output"
assert_not_contains "$(cat "$C/mjsched.log")" "supervisor lost" "no supervisor reported lost"
t_done
