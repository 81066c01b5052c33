#!/usr/bin/env bash
# nqueens resized in place while it runs: on an 8-node
# local virtual cluster a malleable nqueens job (N = 14, a coordinator and one
# worker per node, tasks slowed to 25 ms so it runs long enough) starts on 2
# nodes, is ordered by hand (mjcontrol resize) to grow to 8 and then to shrink
# to 3, then to 2 by count (the job chooses the node, [Finnerty24] preShrink). Checks: both resizes are committed (the coordinator prints them with
# their latency, the state file records the new node sets, allocations stay
# disjoint), workers really ran on the added nodes and the released ones'
# workers are gone, and the solution count is the fixed-size 365596.
. "${DYNRES_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/t/lib.sh"
t_begin 90
[[ -x $DYNRES_BIN/nqueens ]] || t_skip "nqueens is not built (needs libmj)"
C=$T_TMP/c W=$T_TMP/w
mkdir -p "$W"
boot_cluster "$C" 8 --tick 0.1 --kill-wait 1
write_script "$W/nq.sh" '#!/bin/bash' '#SBATCH -o nq.out' \
  "exec $DYNRES_BIN/nqueens -n 14 --task-sleep-ms 25 -v"
# a rigid job holds 6 nodes so that the malleable one starts on 2
write_script "$W/block.sh" '#!/bin/bash' 'sleep 300'
blk=$(cd "$W" && mjsub --parsable -J block -N 6 --rigid block.sh) || t_fatal "mjsub failed: $blk"
wait_state 20 "$C" "$blk" RUNNING || t_fatal "the blocker did not start"
id=$(cd "$W" && mjsub --parsable -J nq -N 2 --min-nodes 2 --max-nodes 8 --malleable nq.sh) || t_fatal "mjsub failed: $id"
wait_state 20 "$C" "$id" RUNNING || t_fatal "the job did not start"
assert_eq 2 "$(job_col "$C" "$id" num_nodes)" "the malleable job starts on 2 nodes"
mjcancel "$blk"
wait_state 10 "$C" "$blk" CANCELLED || t_fatal "the blocker was not cancelled"
out() { cat "$W/nq.out" 2>/dev/null; }
connected() { (($(out | grep -c 'connected') >= $1)); }
wait_for 20 "two workers connected" connected 2 || t_fatal "$(out)"

t_run mjcontrol resize "$id" 8
assert_eq 0 "$T_RC" "mjcontrol resize $id 8 ($T_ERR)"
has() { out | grep -qE "$1"; }
wait_for 20 "expand 2->8 committed" has '^resize expand 2->8 latency_s=' || t_fatal "$(out)"
assert_eq 8 "$(job_col "$C" "$id" num_nodes)" "the state file gives the job 8 nodes"
assert_eq 8 "$(out | grep -c 'connected')" "8 workers connected, one per node"

t_run mjcontrol resize "$id" 3
assert_eq 0 "$T_RC" "mjcontrol resize $id 3 ($T_ERR)"
wait_for 20 "shrink 8->3 committed" has '^resize shrink 8->3 latency_s=' || t_fatal "$(out)"
assert_eq 3 "$(job_col "$C" "$id" num_nodes)" "the state file gives the job 3 nodes"
assert_eq 3 "$(procs_of_cluster "$C" "nqueens --taskbag-worker" | wc -l)" "3 worker processes left"

# Finnerty et al.'s preShrink: the order names a count, the job chooses its nodes
t_run mjcontrol resize "$id" 2 --job-chooses --wait 20
assert_eq 0 "$T_RC" "a shrink by count is committed ($T_OUT $T_ERR)"
assert_match 'Resize order=[0-9]+ shrink 3->2 count=1 committed' "$(mjstat -j "$id")" "mjstat shows the count order"
rel=$(sq "$C" "SELECT released FROM resize_orders WHERE job_id=$id ORDER BY id DESC LIMIT 1")
assert_match '^n[0-9]+$' "$rel" "the job named the node it released ($rel)"
assert_ne "$(sq "$C" "SELECT name FROM nodes WHERE job_id=$id ORDER BY id LIMIT 1")" "$rel" "not its first node"
assert_eq 2 "$(job_col "$C" "$id" num_nodes)" "the state file gives the job 2 nodes"

wait_state 60 "$C" "$id" COMPLETED || t_fatal "$(out | tail -n 20)"
assert_eq 365596 "$(out | grep -oE 'solutions=[0-9]+' | cut -d= -f2)" "the same count as a fixed-size run"
assert_match 'expands=1 shrinks=2 rollbacks=0' "$(out | grep '^taskbag ')" "one expand, two shrinks, no rollback"
check_allocations_disjoint "$C"
t_run nqueens -n 14 --workers 3
assert_eq 365596 "$(grep -oE 'solutions=[0-9]+' <<<"$T_OUT" | cut -d= -f2)" "fixed-size run with 3 workers"
t_done
