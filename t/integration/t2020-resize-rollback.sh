#!/usr/bin/env bash
# An in-place expand that is not committed in time is rolled back:
# mjsched with resize.timeout 1 s orders a malleable nqueens job (2 nodes,
# coordinator told to commit no earlier than 3 s after an order) to grow to
# 6; the scheduler rolls the order back, the coordinator stops the workers it
# started on the added nodes, the job keeps its 2 nodes in the state file and
# still ends with the fixed-size count. About 20 s.
. "${DYNRES_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/t/lib.sh"
t_begin 60
[[ -x $DYNRES_BIN/nqueens ]] || t_skip "nqueens is not built (needs libmj)"
C=$T_TMP/c W=$T_TMP/w
mkdir -p "$W"
boot_cluster "$C" 6 --tick 0.1 --kill-wait 1 --resize-timeout 1 --resize-backoff 1
write_script "$W/nq.sh" '#!/bin/bash' '#SBATCH -o nq.out' \
  "exec $DYNRES_BIN/nqueens -n 13 --task-sleep-ms 15 --commit-delay-ms 3000 -v"
# a rigid job holds the other nodes so that the malleable one starts on 2
write_script "$W/block.sh" '#!/bin/bash' 'sleep 300'
blk=$(cd "$W" && mjsub --parsable -J block -N 4 --rigid block.sh) || t_fatal "mjsub failed: $blk"
wait_state 20 "$C" "$blk" RUNNING || t_fatal "the blocker did not start"
id=$(cd "$W" && mjsub --parsable -J nq -N 2 --min-nodes 2 --max-nodes 6 --malleable nq.sh) || t_fatal "mjsub failed: $id"
wait_state 20 "$C" "$id" RUNNING || t_fatal "the job did not start"
mjcancel "$blk"
wait_state 10 "$C" "$blk" CANCELLED || t_fatal "the blocker was not cancelled"
out() { cat "$W/nq.out" 2>/dev/null; }
has() { out | grep -qE "$1"; }
wait_for 20 "two workers connected" has 'connected' || t_fatal "$(out)"
sleep 0.5
t_run mjcontrol resize "$id" 6
assert_eq 0 "$T_RC" "mjcontrol resize $id 6 ($T_ERR)"
wait_for 15 "the coordinator undoes the rolled-back expand" has 'rolled back' || t_fatal "$(out | tail -n 20)"
wait_for 10 "the workers of the added nodes are gone" eval '(($(procs_of_cluster "$C" "nqueens --taskbag-worker" | wc -l) == 2))'
assert_eq 2 "$(job_col "$C" "$id" num_nodes)" "the job keeps its 2 nodes in the state file"
wait_state 50 "$C" "$id" COMPLETED || t_fatal "$(out | tail -n 20)"
assert_eq 73712 "$(out | grep -oE 'solutions=[0-9]+' | cut -d= -f2)" "the fixed-size count after a rollback"
assert_match 'expands=0 shrinks=0 rollbacks=1' "$(out | grep '^taskbag ')" "no resize, one rollback"
check_allocations_disjoint "$C"
t_done
