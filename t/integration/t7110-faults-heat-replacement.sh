#!/usr/bin/env bash
# ctest-cost: 25
# heat with iCheck that loses a node while a node is idle keeps its size: it
# runs again on the remaining nodes from its last checkpoint [John24 §7.4.4],
# then expands onto the idle node kept for it meanwhile (the lost node's
# replacement). Local cluster of 4 compute nodes and 1 iCheck node (n5):
#  1. heat-malleable.sh on n[1-3] (a commit every 20 iterations), n4 idle;
#     vcluster-fail n3: n3 DOWN, a restart order away from n3 and a
#     'replace' event (lost=n3 with=n4) in the same pass;
#  2. mjsched is killed (-9) right then and started again while the job's
#     supervisor (mjstepd) is stopped, so that it has not relaunched the job
#     yet (on a loaded machine it is that slow: the new mjsched rolled the
#     restart back and the supervisor relaunched the job on the lost node,
#     "no expand onto n4"): the restart away from the down node is committed
#     on the job's behalf, the replacement is in the state file, the new
#     mjsched keeps n4 for the job and, once the supervisor (continued)
#     relaunched it, expands it onto n4 ('replace_expand');
#  3. the job ends COMPLETED on n[1-2,4] — 3 nodes, as it started — with the
#     fixed-size checksum, never requeued; allocations stay disjoint.
# About 25 s.
. "${DYNRES_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/t/lib.sh"
t_begin 150
C=$T_TMP/c W=$T_TMP/w
mkdir -p "$W"
heat_fault_cluster "$C" 5
ARGS=(--nx 96 --ny 90 --iters 320 --iter-seconds 0.05 --ckpt-every 20 --print-every 1)
ref=$("$DYNRES_BIN/heat" --nx 96 --ny 90 --iters 320 --no-icheck | sed -n 's/^heat: checksum=\([0-9a-f]*\).*/\1/p')
[[ -n $ref ]] || t_fatal "the reference run printed no checksum"
J=$(cd "$W" && HEAT=$DYNRES_BIN/heat mjsub --parsable -N 3 --min-nodes 1 --max-nodes 3 -o "$W/heat.out" \
  "$DYNRES_SRC/share/dynres/examples/heat/heat-malleable.sh" "${ARGS[@]}") || t_fatal "mjsub: $J"
wait_state 10 "$C" "$J" RUNNING || t_fatal "job $J did not start"
assert_eq "n[1-3]" "$(job_col "$C" "$J" nodelist)" "heat on n[1-3], n4 idle"
out() { cat "$W/heat.out" 2>/dev/null; }
show_logs() { out | tail -n 30; tail -n 25 "$C/mjsched.log"; }
t_on_fail show_logs
committed() { out | grep -qE "^heat: commit iteration=$1 "; }
wait_for 40 "heat committed iteration 40" committed 40 || t_fatal "no commit of iteration 40"
ev() { sq "$C" "SELECT COUNT(*) FROM events WHERE job_id=$J AND kind='$1'"; }

# 1. n3 crashes while n4 is idle. mjsched runs in slices of 0.1 s (SIGSTOP
# between them) until it recorded the replacement: stopped then, it cannot
# have taken the job's restart commit (the job's relaunch and restore take
# longer than a slice), so the kill below falls between the two orders
SP=$(sched_pid "$C")
SUP=$(job_col "$C" "$J" supervisor_pid)
[[ $SUP =~ ^[0-9]+$ ]] || t_fatal "job $J has no supervisor pid ($SUP)"
cont_sup() { kill -CONT "$SUP" 2>/dev/null; return 0; }
t_on_exit cont_sup
kill -STOP "$SUP"
t_run vcluster-fail n3
assert_eq 0 "$T_RC" "vcluster-fail n3 ($T_ERR)"
for _ in $(seq 150); do
  kill -STOP "$SP"
  [[ $(ev replace) -ge 1 ]] && break
  kill -CONT "$SP"
  sleep 0.1
done
assert_match '^lost=n3 with=n4 order=[0-9]+$' "$(sq "$C" "SELECT detail FROM events WHERE job_id=$J AND kind='replace'")" \
  "n4 takes n3's place"
assert_eq 0 "$(ev replace_expand)" "the expand onto n4 not yet ordered"

# 2. mjsched killed between the restart order and the expand onto n4
kill -9 "$SP"
wait_for 10 "mjsched gone" eval '[[ -z $(sched_pid "$C") ]]' || t_fatal "mjsched did not die"
assert_eq 1 "$(sq "$C" "SELECT COUNT(*) FROM expand_after WHERE job_id=$J AND node='n4' AND kind='replace'")" \
  "the replacement is in the state file"
rm -f "$C/mjsched.sock" "$C/mjsched.pid"
mjsched --home "$C" --daemon || t_fatal "mjsched did not start again: $(tail -3 "$C/mjsched.log")"
wait_for 10 "mjsched back" eval '[[ -S $C/mjsched.sock && -n $(sched_pid "$C") ]]' || t_fatal "no mjsched"
restart_order() { sq "$C" "SELECT state, relaunched FROM resize_orders WHERE job_id=$J AND restart=1 ORDER BY id DESC LIMIT 1" | tr '|' ' '; }
settled() { [[ $(restart_order) != "begun 0" ]]; }
wait_for 10 "the new mjsched settles the restart order" settled
assert_eq "committed 0" "$(restart_order)" \
  "the restart away from the down n3, not yet relaunched, is committed on the job's behalf"
kill -CONT "$SUP"
expanded() { [[ $(ev replace_expand) -ge 1 ]]; }
wait_for 60 "the expand onto n4" expanded || t_fatal "no expand onto n4; $(grep -E 'n4|replace' "$C/mjsched.log" | tail -5)"
assert_match '^node=n4 order=[0-9]+$' "$(sq "$C" "SELECT detail FROM events WHERE job_id=$J AND kind='replace_expand'")" \
  "expanded onto n4 by the restarted mjsched"
assert_match '^heat-malleable: run 2 on 2 node\(s\) n\[1-2\]' "$(out | grep '^heat-malleable: run 2')" "run 2 on n[1-2]"

# 3. the job ends on 3 nodes with the fixed-size checksum
wait_state 90 "$C" "$J" COMPLETED FAILED || t_fatal "job $J: $(job_state "$C" "$J")"
assert_eq COMPLETED "$(job_state "$C" "$J")" "the job completed ($(job_col "$C" "$J" reason))"
assert_match '^heat-malleable: run 3 on 3 node\(s\) n\[1-2,4\]' "$(out | grep '^heat-malleable: run 3')" "run 3 on n[1-2,4]: its size again"
assert_eq "n[1-2,4]" "$(sq "$C" "SELECT nodelist FROM allocations WHERE job_id=$J ORDER BY id DESC LIMIT 1")" \
  "its last allocation holds the replacement"
# (an in-place shrink ordered before the lost listener was seen is rolled back first)
assert_eq "shrink:committed:1:n3:3:2 expand:committed:1:n4:2:3" \
  "$(sq "$C" "SELECT group_concat(kind || ':' || state || ':' || restart || ':' || COALESCE(NULLIF(released, ''), nodes) || ':' || from_nodes || ':' || to_nodes, ' ') FROM (SELECT * FROM resize_orders WHERE job_id=$J AND state='committed' ORDER BY id)")" \
  "a restart away from n3 (3 -> 2), then an expand onto n4 (2 -> 3), both committed"
assert_eq 0 "$(sq "$C" "SELECT COUNT(*) FROM resize_orders WHERE job_id=$J AND state NOT IN ('committed','rolled_back')")" "no order left outstanding"
assert_eq "$ref" "$(out | sed -n 's/^heat: checksum=\([0-9a-f]*\).*/\1/p' | tail -n1)" "the fixed-size checksum"
assert_eq 0 "$(job_col "$C" "$J" restarts)" "never requeued"
assert_eq 0 "$(sq "$C" "SELECT COUNT(*) FROM expand_after")" "nothing left pending"
check_allocations_disjoint "$C"
t_done
