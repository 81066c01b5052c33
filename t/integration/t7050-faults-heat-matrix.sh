#!/usr/bin/env bash
# ctest-cost: 25
# Fault matrix with heat + iCheck on a local cluster of 6 compute nodes and
# one iCheck node (n7), node agents; two heat jobs A on n[1-2] and B on
# n[3-4], a commit every 20 iterations:
#  1. the iCheck node fails (vcluster-fail n7: its manager and the agents of
#     both jobs, two jobs on the failed node): both jobs keep running;
#  2. B loses n4 after its agents went with n7: it runs again on n3 alone,
#     restored from the second level;
#  3. the node holding A's first rank fails (n1): A cannot shrink (its batch
#     script ran there), it is requeued (the attempt NODE_FAIL in mjstat
#     --history), runs again on two up nodes and restores its last
#     checkpoint instead of starting over;
# both end with the fixed-size checksum.
# About 40 s.
. "${DYNRES_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/t/lib.sh"
t_begin 180
C=$T_TMP/c W=$T_TMP/w
mkdir -p "$W"
heat_fault_cluster "$C" 7
EVERY=20
ARGS=(--nx 96 --ny 90 --iters 400 --iter-seconds 0.05 --ckpt-every $EVERY --print-every 1)
ref=$("$DYNRES_BIN/heat" --nx 96 --ny 90 --iters 400 --no-icheck | sed -n 's/^heat: checksum=\([0-9a-f]*\).*/\1/p')
[[ -n $ref ]] || t_fatal "the reference run printed no checksum"
sub() {
  (cd "$W" && HEAT=$DYNRES_BIN/heat mjsub --parsable -N 2 --min-nodes 1 --max-nodes 2 -o "$W/$1.out" \
    "$DYNRES_SRC/share/dynres/examples/heat/heat-malleable.sh" "${ARGS[@]}")
}
A=$(sub a) || t_fatal "mjsub: $A"
wait_state 10 "$C" "$A" RUNNING || t_fatal "A did not start"
B=$(sub b) || t_fatal "mjsub: $B"
wait_state 10 "$C" "$B" RUNNING || t_fatal "B did not start"
assert_eq "n[1-2] n[3-4]" "$(job_col "$C" "$A" nodelist) $(job_col "$C" "$B" nodelist)" "A on n[1-2], B on n[3-4]"
out() { cat "$W/$1.out" 2>/dev/null; }
show_logs() { for k in a b; do echo "--- $k"; out $k | grep -v "^heat: iteration=" | tail -n 25; done; tail -n 30 "$C/mjsched.log"; }
t_on_fail show_logs
committed() { out "$1" | grep -qE "^heat: commit iteration=$2 "; }
wait_for 40 "A committed iteration 40" committed a 40 || t_fatal "A: no commit of iteration 40"
wait_for 20 "B committed iteration 40" committed b 40 || t_fatal "B: no commit of iteration 40"

# 1. the iCheck node, holding both jobs' agents
t_run vcluster-fail n7
assert_eq 0 "$T_RC" "vcluster-fail n7 ($T_ERR)"
assert_match 'crash: [1-9]' "$T_OUT" "n7's manager and agents killed ($T_OUT)"
last_commit() { out "$1" | sed -n 's/^heat: commit iteration=\([0-9]*\).*/\1/p' | tail -n1; }
ca=$(last_commit a) cb=$(last_commit b)
later() { (($(last_commit "$1") > $2)); }
wait_for 20 "A commits again" later a "$ca" || t_fatal "A made no commit after the iCheck node failed"
wait_for 20 "B commits again" later b "$cb" || t_fatal "B made no commit after the iCheck node failed"
assert_eq RUNNING/RUNNING "$(job_state "$C" "$A")/$(job_state "$C" "$B")" "both jobs run on"

# 2. B loses n4; its agents went with n7
t_run vcluster-fail n4
resumed() { out b | grep -q '^heat: resumed order=.* commit=ok'; }
wait_for 30 "B resumed on n3" resumed || t_fatal "B did not resume"
assert_eq "n3" "$(job_col "$C" "$B" nodelist)" "B holds n3 alone"

# 3. A's first rank
t_run vcluster-fail n1
assert_eq 0 "$T_RC" "vcluster-fail n1 ($T_ERR)"
requeued() { [[ $(job_col "$C" "$A" restarts) == 1 ]]; }
wait_for 15 "A requeued" requeued || t_fatal "A was not requeued: $(job_state "$C" "$A")"
t_run mjstat --history -j "$A,$A" -o jobid,state,nodelist,reason
assert_match "$A +NODE_FAIL +n\[1-2\] +NodeFail n1" "$T_OUT" "mjstat --history shows the failed attempt ($T_OUT)"
wait_for 20 "A runs again" state_is "$C" "$A" RUNNING || t_fatal "A did not run again"
assert_not_contains "$(job_col "$C" "$A" nodelist)" "n1" "A runs again on up nodes"

for k in a b; do
  id=$([[ $k == a ]] && echo "$A" || echo "$B")
  wait_state 60 "$C" "$id" COMPLETED || t_fatal "job $id: $(job_state "$C" "$id")"
  assert_eq "$ref" "$(out $k | sed -n 's/^heat: checksum=\([0-9a-f]*\).*/\1/p')" "job $k: the fixed-size checksum"
  restored=$(out $k | sed -n 's/^heat: restart version=[0-9]* iteration=\([0-9]*\).*/\1/p' | tail -n1)
  t_log "job $k restored iteration $restored"
  assert_lt 0 "${restored:-0}" "job $k restored a checkpoint instead of starting over"
done
check_allocations_disjoint "$C"
t_done
