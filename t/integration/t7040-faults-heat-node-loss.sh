#!/usr/bin/env bash
# ctest-cost: 20
# heat with iCheck keeps running when a node of its job is lost: it runs again
# on the remaining nodes from its last checkpoint [John24 §7.4.4]. Local
# cluster of 4 compute nodes and 1 iCheck node (n5), node agents:
#  1. heat-malleable.sh on n[1-3] (one MPI rank per node, a commit every 20
#     iterations), n4 drained (no idle node to replace the lost one with:
#     t7110 has one): every rank carries its own node in MJ_NODE (mpiexec places
#     them through mj-node-exec); vcluster-fail n3 kills exactly n3's rank;
#     n3 is DOWN, mjsched begins a restart order away from n3 on the job's
#     behalf, the supervisor runs the script again on n[1-2], heat restores
#     the last checkpoint from the agents' memory (at most one checkpoint
#     interval of iterations recomputed) and commits the order; the job is
#     never requeued and ends with the fixed-size checksum.
# About 30 s.
. "${DYNRES_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/t/lib.sh"
t_begin 150
C=$T_TMP/c W=$T_TMP/w
mkdir -p "$W"
heat_fault_cluster "$C" 5
EVERY=20
ARGS=(--nx 96 --ny 90 --iters 300 --iter-seconds 0.05 --ckpt-every $EVERY --print-every 1)
ref=$("$DYNRES_BIN/heat" --nx 96 --ny 90 --iters 300 --no-icheck | sed -n 's/^heat: checksum=\([0-9a-f]*\).*/\1/p')
[[ -n $ref ]] || t_fatal "the reference run printed no checksum"
J=$(cd "$W" && HEAT=$DYNRES_BIN/heat mjsub --parsable -N 3 --min-nodes 1 --max-nodes 3 -o "$W/heat.out" \
  "$DYNRES_SRC/share/dynres/examples/heat/heat-malleable.sh" "${ARGS[@]}") || t_fatal "mjsub: $J"
wait_state 10 "$C" "$J" RUNNING || t_fatal "job $J did not start"
assert_eq "n[1-3]" "$(job_col "$C" "$J" nodelist)" "heat on n[1-3]"
t_run mjcontrol update node n4 state=drain reason="no replacement"
assert_eq 0 "$T_RC" "drain n4 ($T_ERR)"
out() { cat "$W/heat.out" 2>/dev/null; }
show_logs() { out | tail -n 30; tail -n 20 "$C/mjsched.log"; }
t_on_fail show_logs
committed() { out | grep -qE "^heat: commit iteration=$1 "; }
wait_for 40 "heat committed iteration 60" committed 60 || t_fatal "no commit of iteration 60"

# every rank carries its own node
rank_nodes() {  # "NODE:PID" of this cluster's heat ranks
  local p e
  for p in $(pgrep -x heat); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "MJ_SOCKET=$C/mjsched.sock" || continue
    e=$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | sed -n 's/^MJ_NODE=//p')
    echo "$e:$p"
  done | sort
}
ranks=$(rank_nodes)
assert_eq "n1 n2 n3 " "$(cut -d: -f1 <<<"$ranks" | tr '\n' ' ')" "each heat rank carries its own node"

# 1. n3 crashes
before=$(out | sed -n 's/^heat: iteration=\([0-9]*\).*/\1/p' | tail -n1)
t_run vcluster-fail n3
assert_eq 0 "$T_RC" "vcluster-fail n3 ($T_ERR)"
assert_match 'crash: [1-9]' "$T_OUT" "n3's processes were killed ($T_OUT)"
killed=" $(sed 's/.*: //' <<<"$T_OUT") "
assert_contains "$killed" " $(grep '^n3:' <<<"$ranks" | cut -d: -f2) " "n3's rank was killed"
for k in n1 n2; do assert_not_contains "$killed" " $(grep "^$k:" <<<"$ranks" | cut -d: -f2) " "$k's rank was not killed by the crash of n3"; done
down() { [[ $(sq "$C" "SELECT state FROM nodes WHERE name='n3'") == down ]]; }
wait_for 10 "n3 DOWN" down || t_fatal "n3 not DOWN"
resumed() { out | grep -q '^heat: resumed order=.* commit=ok'; }
wait_for 30 "heat resumed on the remaining nodes" resumed || t_fatal "heat did not resume"
assert_match '^heat-malleable: run 2 on 2 node\(s\) n\[1-2\]' "$(out | grep '^heat-malleable: run 2')" "run again on n[1-2]"
assert_eq "n[1-2]" "$(job_col "$C" "$J" nodelist)" "the job holds n[1-2]"
assert_eq "shrink:committed:1:n3" "$(sq "$C" "SELECT kind || ':' || state || ':' || restart || ':' || released FROM resize_orders WHERE job_id=$J ORDER BY id DESC LIMIT 1")" "a restart order away from n3, committed"
# the iterations recomputed: from the restored one to the last one reached before the failure
last=$(out | sed -n '/^heat-malleable: run 2/q; s/^heat: iteration=\([0-9]*\).*/\1/p' | tail -n1)
restored=$(out | sed -n 's/^heat: restart version=[0-9]* iteration=\([0-9]*\).*/\1/p' | tail -n1)
[[ -n $restored ]] || t_fatal "heat did not restore a checkpoint"
t_log "failure after iteration $last (seen $before at the kill), restored iteration $restored: $((last - restored)) recomputed"
assert_le "$((last - restored))" "$EVERY" "at most one checkpoint interval of work lost"
assert_eq "" "$(out | grep 'from_ranks=3 ranks=2' >/dev/null && echo)" "3 ranks restored on 2"
wait_state 60 "$C" "$J" COMPLETED || t_fatal "job $J: $(job_state "$C" "$J")"
assert_eq "$ref" "$(out | sed -n 's/^heat: checksum=\([0-9a-f]*\).*/\1/p')" "the fixed-size checksum"
assert_eq 0 "$(job_col "$C" "$J" restarts)" "never requeued"
check_allocations_disjoint "$C"
t_done
