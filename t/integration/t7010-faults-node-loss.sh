#!/usr/bin/env bash
# ctest-cost: 30
# A malleable job keeps running when one of its nodes is lost, and moves off
# a drained node (drain by evacuation). 6-node local cluster with node agents:
#  1. nqueens (N = 14, a coordinator and one worker per node, in place) on
#     n[1-3]; vcluster-fail n2 kills n2's agent and worker as a crash would:
#     n2 is DOWN ("Not responding") within 5 s, the job is ordered to shrink
#     away from n2 and commits (3 -> 2 nodes, n2 given back), and it ends
#     COMPLETED with the fixed-size count 365596, never requeued; a second
#     failure in a row (n3) shrinks it again, to n1 alone;
#  2. meanwhile a second nqueens on n[4-6] has n6 drained: it shrinks away
#     from n6 (DRAINING -> DRAINED), the count is again 365596;
#  3. RESUME: n2's agent started again (vcluster-fail --revive) and the node
#     resumed: it is idle and takes a job again.
# About 30 s.
. "${DYNRES_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/t/lib.sh"
t_begin 120
[[ -x $DYNRES_BIN/nqueens ]] || t_skip "nqueens is not built (needs libmj)"
C=$T_TMP/c W=$T_TMP/w
mkdir -p "$W"
boot_cluster "$C" 6 --tick 0.2 --kill-wait 1
ns() { sq "$C" "SELECT state FROM nodes WHERE name='$1'"; }
agents() { (($(grep -c 'connected' "$C/nodes/mjnoded.log" 2>/dev/null) >= 6)); }
wait_for 10 "6 node agents connected" agents || t_fatal "$(cat "$C/nodes/mjnoded.log")"
for k in a b; do
  write_script "$W/nq$k.sh" '#!/bin/bash' "#SBATCH -o nq$k.out" "exec $DYNRES_BIN/nqueens -n 14 --task-sleep-ms 20 -v"
done
a=$(cd "$W" && mjsub --parsable -J nqa -N 3 --min-nodes 1 --max-nodes 3 --malleable nqa.sh) || t_fatal "mjsub: $a"
wait_state 10 "$C" "$a" RUNNING || t_fatal "job $a did not start"
b=$(cd "$W" && mjsub --parsable -J nqb -N 3 --min-nodes 1 --max-nodes 3 --malleable nqb.sh) || t_fatal "mjsub: $b"
wait_state 10 "$C" "$b" RUNNING || t_fatal "job $b did not start"
assert_eq "n[1-3]" "$(job_col "$C" "$a" nodelist)" "job $a on n[1-3]"
assert_eq "n[4-6]" "$(job_col "$C" "$b" nodelist)" "job $b on n[4-6]"
out() { cat "$W/nq$1.out" 2>/dev/null; }
connected() { (($(out "$1" | grep -c 'connected') >= $2)); }
wait_for 20 "job $a: 3 workers" connected a 3 || t_fatal "$(out a)"
wait_for 20 "job $b: 3 workers" connected b 3 || t_fatal "$(out b)"

# 1. n2 crashes
t0=$(date +%s.%N)
t_run vcluster-fail n2
assert_eq 0 "$T_RC" "vcluster-fail n2 ($T_ERR)"
assert_match 'crash: [1-9]' "$T_OUT" "processes on n2 were killed ($T_OUT)"
down() { [[ $(ns n2) == down ]]; }
wait_for 10 "n2 DOWN" down || t_fatal "n2 is $(ns n2); $(tail -5 "$C/mjsched.log")"
t1=$(date +%s.%N)
det=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
t_log "detection took $det s"
assert_le "$det" 5 "kill -> DOWN within 5 s"
assert_eq "Not responding" "$(sq "$C" "SELECT reason FROM nodes WHERE name='n2'")" "reason as Slurm's"
has() { out "$1" | grep -qE "$2"; }
wait_for 20 "job $a shrinks 3->2" has a '^resize shrink 3->2 latency_s=' || t_fatal "$(out a | tail; tail "$C/mjsched.log")"
assert_eq "n2" "$(sq "$C" "SELECT released FROM resize_orders WHERE job_id=$a ORDER BY id DESC LIMIT 1")" "the lost node is the one given back"
assert_eq "n[1,3]" "$(job_col "$C" "$a" nodelist)" "job $a keeps running on n[1,3]"
assert_eq RUNNING "$(job_state "$C" "$a")" "not requeued, not failed"
# a second failure in a row: n3 as well, the job goes on alone on n1
t_run vcluster-fail n3
wait_for 20 "job $a shrinks 2->1" has a '^resize shrink 2->1 latency_s=' || t_fatal "$(out a | tail; tail "$C/mjsched.log")"
assert_eq "n1" "$(job_col "$C" "$a" nodelist)" "job $a keeps running on n1 alone"

# 2. drain n6 under job b: evacuated
t_run mjcontrol update node n6 state=drain reason=evacuate
assert_eq 0 "$T_RC" "drain n6 ($T_ERR)"
wait_for 20 "job $b shrinks away from n6" has b '^resize shrink 3->2 latency_s=' || t_fatal "$(out b | tail; tail "$C/mjsched.log")"
assert_eq "n[4-5]" "$(job_col "$C" "$b" nodelist)" "job $b left n6"
draining_gone() { [[ $(mjstat -N --json | grep -c '"drained"') == 1 ]]; }
wait_for 5 "n6 DRAINED" draining_gone || t_fail "n6 is not shown drained: $(mjstat -N)"

for k in a b; do
  id=${!k}
  wait_state 60 "$C" "$id" COMPLETED || t_fatal "job $id: $(job_state "$C" "$id"); $(out $k | tail -n 5)"
  assert_eq 365596 "$(out $k | grep -oE 'solutions=[0-9]+' | cut -d= -f2)" "job $id: the fixed-size count"
  assert_eq 0 "$(job_col "$C" "$id" restarts)" "job $id never requeued"
done
check_allocations_disjoint "$C"

# 3. RESUME: the node comes back and takes work again
t_run vcluster-fail --revive n2
assert_eq 0 "$T_RC" "revive n2's agent ($T_ERR)"
t_run mjcontrol update node n2 state=resume
assert_eq 0 "$T_RC" "resume n2 ($T_ERR)"
assert_eq up "$(ns n2)" "n2 up"
write_script "$W/s.sh" '#!/bin/bash' 'true'
j=$(cd "$W" && mjsub --parsable -w n2 s.sh) || t_fatal "mjsub: $j"
wait_state 10 "$C" "$j" COMPLETED || t_fatal "a job on the resumed n2: $(job_state "$C" "$j")"
sleep 1.5  # beyond two heartbeats: the revived agent keeps n2 up
assert_eq up "$(ns n2)" "n2 stays up with its agent back"
t_done
