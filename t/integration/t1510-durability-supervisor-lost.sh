#!/usr/bin/env bash
# A job step must not outlive its supervisor, and a refused second scheduler
# must not touch the cluster.
#
# 1. Start mjsched a second time on a live cluster with extra --nodes: it
#    exits non-zero naming the running daemon, and the node table is unchanged.
# 2. SIGKILL the supervisor (mjstepd) of a running job: the scheduler records
#    the job FAILED ("supervisor lost"), kills the step's process group (the
#    job's processes are gone), and gives its nodes to the next job.
# About 5 s.
. "${DYNRES_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/t/lib.sh"
t_begin 60

C=$T_TMP/cluster
W=$T_TMP/work
mkdir -p "$W"
cd "$W" || t_fatal "cd $W"
boot_cluster "$C" 2 --tick 0.2 --kill-wait 1

before=$(state_digest "$C")
t_run "$DYNRES_BIN/mjsched" --home "$C" --nodes 'x[1-50]'
assert_ne 0 "$T_RC" "a second mjsched on a live cluster fails"
assert_contains "$T_ERR" "already running" "the second mjsched names the running one"
assert_eq "$before" "$(state_digest "$C")" "the refused mjsched left the state file unchanged"

MARK="dynres-lost-$$-$RANDOM"
write_script "$W/long.sh" '#!/bin/bash' '#SBATCH -N 2' "exec -a $MARK sleep 60"
write_script "$W/next.sh" '#!/bin/bash' '#SBATCH -N 2' 'echo next ran'
LONG=$(mjsub --parsable long.sh) || t_fatal "mjsub long.sh"
wait_state 20 "$C" "$LONG" RUNNING || t_fatal "long job did not start"
wait_for 10 "the job's process runs" pgrep -f "^$MARK" >/dev/null || t_fatal "no process $MARK"
NEXT=$(mjsub --parsable next.sh) || t_fatal "mjsub next.sh"
sup=$(job_col "$C" "$LONG" supervisor_pid)
kill -KILL "$sup"
wait_state 20 "$C" "$LONG" FAILED || t_fatal "lost supervisor not noticed"
assert_eq "supervisor lost" "$(job_col "$C" "$LONG" reason)" "reason of the job whose supervisor died"
wait_for 10 "the orphaned step is killed" bash -c "! pgrep -f '^$MARK' >/dev/null" ||
  t_fail "the job's processes outlived their supervisor"
wait_state 20 "$C" "$NEXT" COMPLETED || t_fail "the freed nodes were not reused"
check_started_once "$C"
check_allocations_disjoint "$C"
t_done
