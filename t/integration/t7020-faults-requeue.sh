#!/usr/bin/env bash
# Jobs that cannot shrink away from a lost node get Slurm's behaviour
# (JobRequeue=1): 5-node local cluster with node agents.
#  1. a rigid job (default --requeue) on n[1-2] loses n2 (vcluster-fail):
#     its step is stopped, the attempt recorded NODE_FAIL (mjstat --history
#     shows it), the job is PENDING again and reruns on up nodes with
#     SLURM_RESTART_COUNT=1, then COMPLETED;
#  2. a --no-requeue job loses its first node (its supervisor dies with it):
#     it ends NODE_FAIL, not FAILED "supervisor lost";
#  3. a malleable job already at its minimum size loses a node: requeued.
# About 25 s.
. "${DYNRES_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/t/lib.sh"
t_begin 90
C=$T_TMP/c W=$T_TMP/w
mkdir -p "$W"
boot_cluster "$C" 5 --tick 0.2 --kill-wait 1
agents() { (($(grep -c 'connected' "$C/nodes/mjnoded.log" 2>/dev/null) >= 5)); }
wait_for 10 "5 node agents connected" agents || t_fatal "$(cat "$C/nodes/mjnoded.log")"
# the script logs each attempt, then runs until the marker file exists
write_script "$W/r.sh" '#!/bin/bash' 'echo "attempt ${SLURM_RESTART_COUNT:-0} on $SLURM_JOB_NODELIST" >>"attempts.$SLURM_JOB_ID"' \
  'while [[ ! -e go.$SLURM_JOB_ID ]]; do sleep 0.1; done'

# 1. rigid, requeued
r=$(cd "$W" && mjsub --parsable -N 2 -w 'n[1-2]' r.sh) || t_fatal "mjsub: $r"
wait_state 10 "$C" "$r" RUNNING || t_fatal "job $r did not start"
wait_for 5 "first attempt" test -s "$W/attempts.$r"
t_run vcluster-fail n2
assert_eq 0 "$T_RC" "vcluster-fail n2 ($T_ERR)"
requeued() { [[ $(job_col "$C" "$r" restarts) == 1 ]]; }
wait_for 15 "job $r requeued" requeued || t_fatal "job $r: $(job_state "$C" "$r"); $(tail -5 "$C/mjsched.log")"
assert_eq 1 "$(sq "$C" "SELECT COUNT(*) FROM job_attempts WHERE job_id=$r AND state='NODE_FAIL' AND nodelist='n[1-2]'")" \
  "the failed attempt is kept as NODE_FAIL on n[1-2]"
# -w n[1-2] cannot be met any more (n2 is down): like Slurm the requeued job waits; lift it
sq "$C" "UPDATE jobs SET req_nodelist='' WHERE id=$r"
wait_state 15 "$C" "$r" RUNNING || t_fatal "job $r did not run again: $(job_state "$C" "$r")"
wait_for 5 "second attempt" grep -q 'attempt 1' "$W/attempts.$r"
assert_not_contains "$(job_col "$C" "$r" nodelist)" "n2" "the rerun avoids the down node"
touch "$W/go.$r"
wait_state 10 "$C" "$r" COMPLETED || t_fatal "job $r: $(job_state "$C" "$r")"
t_run mjstat --history -j "$r,$r" -o jobid,state,nodelist,reason
assert_match "$r +NODE_FAIL +n\[1-2\] +NodeFail n2" "$T_OUT" "mjstat --history shows the failed attempt ($T_OUT)"
assert_match "$r +COMPLETED" "$T_OUT" "and the completed rerun"
assert_eq 2 "$(grep -c attempt "$W/attempts.$r")" "two attempts ran"

# 2. --no-requeue, first node lost
n=$(cd "$W" && mjsub --parsable --no-requeue -N 2 r.sh) || t_fatal "mjsub: $n"
wait_state 10 "$C" "$n" RUNNING || t_fatal "job $n did not start"
first=$(sq "$C" "SELECT name FROM nodes WHERE job_id=$n ORDER BY id LIMIT 1")
wait_for 5 "the job runs" test -s "$W/attempts.$n"
t_run vcluster-fail "$first"
wait_state 15 "$C" "$n" NODE_FAIL || t_fatal "job $n: $(job_state "$C" "$n") $(job_col "$C" "$n" reason)"
assert_eq "NodeFail $first" "$(job_col "$C" "$n" reason)" "the reason names the lost node"
assert_eq 0 "$(job_col "$C" "$n" restarts)" "not requeued"

# 3. a malleable job (registered, in place) already at its minimum: requeued
if [[ -x $DYNRES_BIN/nqueens ]]; then
  write_script "$W/nq.sh" '#!/bin/bash' '#SBATCH -o nq.out' "exec $DYNRES_BIN/nqueens -n 14 --task-sleep-ms 20 -v"
  m=$(cd "$W" && mjsub --parsable --malleable -N 2 --min-nodes 2 --max-nodes 2 nq.sh) || t_fatal "mjsub: $m"
  wait_state 10 "$C" "$m" RUNNING || t_fatal "job $m did not start"
  last=$(sq "$C" "SELECT name FROM nodes WHERE job_id=$m ORDER BY id DESC LIMIT 1")
  two() { (($(grep -c connected "$W/nq.out" 2>/dev/null) >= 2)); }
  wait_for 20 "two workers" two || t_fatal "$(cat "$W/nq.out")"
  t_run vcluster-fail "$last"
  requeued_m() { [[ $(job_col "$C" "$m" restarts) == 1 ]]; }
  wait_for 15 "job $m requeued" requeued_m || t_fatal "job $m: $(job_state "$C" "$m"); $(tail -5 "$C/mjsched.log")"
  assert_eq 0 "$(sq "$C" "SELECT COUNT(*) FROM resize_orders WHERE job_id=$m")" "no shrink below the minimum was ordered"
  mjcancel "$m"
fi
check_allocations_disjoint "$C"
t_done
