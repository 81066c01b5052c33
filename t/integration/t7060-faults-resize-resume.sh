#!/usr/bin/env bash
# ctest-cost: 45
# Fault matrix, the moments around a resize, on a local cluster of 5 compute
# nodes and one iCheck node (n6), node agents, policy fpsma (time-scaled):
#  1. failure during a checkpoint commit: heat commits after every iteration
#     on n[1-3]; n3 fails while commits stream: the job runs again on n[1-2]
#     from the last complete checkpoint version (then on an idle node in
#     n3's place) and ends with the fixed-size checksum;
#  2. failure during a resize (an order outstanding): heat is ordered from 2
#     nodes to 1 (a restart-based shrink); n2 fails before the order is
#     committed: the job never hangs, it ends without n2 (the policy may
#     grow it again onto an idle node) with the checksum;
#  3. RESUME: n3 and n2 come back (agent revived, state=resume) and a
#     malleable job may grow onto them again: nqueens started on n[1-2]
#     (max 4) is expanded by the policy onto the resumed nodes.
# About 40 s.
. "${DYNRES_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/t/lib.sh"
t_begin 180
t_require nqueens
C=$T_TMP/c W=$T_TMP/w
mkdir -p "$W"
heat_fault_cluster "$C" 6 --policy fpsma --time-scale 0.02
ns() { sq "$C" "SELECT state FROM nodes WHERE name='$1'"; }
out() { cat "$W/$1.out" 2>/dev/null; }
sum() { out "$1" | sed -n 's/^heat: checksum=\([0-9a-f]*\).*/\1/p'; }
show_logs() { for k in c r q; do echo "--- $k"; out $k | grep -v "^heat: iteration=" | tail -n 25; done; tail -n 30 "$C/mjsched.log"; }
t_on_fail show_logs

# 1. during a checkpoint commit
CA=(--nx 512 --ny 512 --iters 100 --ckpt-every 1 --iter-seconds 0.02)
ref1=$("$DYNRES_BIN/heat" --nx 512 --ny 512 --iters 100 --no-icheck | sed -n 's/^heat: checksum=\([0-9a-f]*\).*/\1/p')
J=$(cd "$W" && HEAT=$DYNRES_BIN/heat mjsub --parsable -N 3 --min-nodes 1 --max-nodes 3 -t 2 -o "$W/c.out" \
  "$DYNRES_SRC/share/dynres/examples/heat/heat-malleable.sh" "${CA[@]}") || t_fatal "mjsub: $J"
commits() { (($(out c | grep -c '^heat: commit iteration=') >= $1)); }
wait_for 40 "20 commits" commits 20 || t_fatal "heat made no 20 commits"
t_run vcluster-fail n3
assert_eq 0 "$T_RC" "vcluster-fail n3 ($T_ERR)"
resumed() { out "$1" | grep -q '^heat: resumed order=.* commit=ok'; }
wait_for 30 "heat resumed on n[1-2]" resumed c || t_fatal "heat did not resume"
# the first restore is the failure's (an idle node then takes n3's place:
# a later run restores the checkpoint of that expand)
restored=$(out c | sed -n 's/^heat: restart version=[0-9]* iteration=\([0-9]*\).*/\1/p' | head -n1)
assert_match "^heat: commit iteration=$restored " "$(out c | grep "^heat: commit iteration=$restored ")" \
  "the version restored (iteration $restored) was a complete commit"
wait_state 60 "$C" "$J" COMPLETED || t_fatal "job $J: $(job_state "$C" "$J")"
assert_eq "$ref1" "$(sum c)" "during a commit: the fixed-size checksum"

# 2. during a resize
RA=(--nx 96 --ny 90 --iters 300 --iter-seconds 0.05 --ckpt-every 20)
ref2=$("$DYNRES_BIN/heat" --nx 96 --ny 90 --iters 300 --no-icheck | sed -n 's/^heat: checksum=\([0-9a-f]*\).*/\1/p')
R=$(cd "$W" && HEAT=$DYNRES_BIN/heat mjsub --parsable -N 2 --min-nodes 1 --max-nodes 2 -t 2 -o "$W/r.out" \
  "$DYNRES_SRC/share/dynres/examples/heat/heat-malleable.sh" "${RA[@]}") || t_fatal "mjsub: $R"
registered() { [[ $(sq "$C" "SELECT phase FROM mj_jobs WHERE job_id=$R") == accepting ]] && out r | grep -q '^heat: commit iteration=20 '; }
wait_for 30 "heat registered" registered || t_fatal "heat did not register"
t_run mjcontrol resize "$R" 1
assert_eq 0 "$T_RC" "mjcontrol resize $R 1 ($T_ERR)"
t_run vcluster-fail n2
assert_eq 0 "$T_RC" "vcluster-fail n2 ($T_ERR)"
wait_state 60 "$C" "$R" COMPLETED || t_fatal "job $R: $(job_state "$C" "$R")"
assert_not_contains "$(job_col "$C" "$R" nodelist)" "2" "the job ended without the failed n2 ($(job_col "$C" "$R" nodelist))"
assert_eq "$ref2" "$(sum r)" "during a resize: the fixed-size checksum"
assert_eq 0 "$(job_col "$C" "$R" restarts)" "never requeued"

# 3. RESUME, and a malleable job grows onto the node again: n4 and n5 busy,
# nqueens on n[1-2] (n2 resumed first) stays at 2 while n3 is down, then
# grows onto n3 once it is resumed
for n in n2 n3; do t_run vcluster-fail --revive $n; done
t_run mjcontrol update node n2 state=resume
assert_eq 0 "$T_RC" "resume n2 ($T_ERR)"
write_script "$W/blk.sh" '#!/bin/bash' 'sleep 60'
K=$(cd "$W" && mjsub --parsable -N 2 -w 'n[4-5]' -o /dev/null blk.sh) || t_fatal "mjsub: $K"
write_script "$W/q.sh" '#!/bin/bash' "#SBATCH -o q.out" "exec $DYNRES_BIN/nqueens -n 14 --task-sleep-ms 40 -v"
Q=$(cd "$W" && mjsub --parsable -N 2 --min-nodes 1 --max-nodes 3 --malleable -t 1 q.sh) || t_fatal "mjsub: $Q"
wait_state 20 "$C" "$Q" RUNNING || t_fatal "nqueens did not start"
sleep 2
assert_eq "n[1-2]" "$(job_col "$C" "$Q" nodelist)" "no growth while n3 is down"
t_run mjcontrol update node n3 state=resume
assert_eq 0 "$T_RC" "resume n3 ($T_ERR)"
assert_eq up "$(ns n3)" "n3 up"
grown() { [[ $(job_col "$C" "$Q" nodelist) == "n[1-3]" ]]; }
wait_for 30 "nqueens grown onto the resumed n3" grown || t_fatal "job $Q holds $(job_col "$C" "$Q" nodelist)"
wait_state 60 "$C" "$Q" COMPLETED || t_fatal "job $Q: $(job_state "$C" "$Q")"
assert_eq 365596 "$(out q | grep -oE 'solutions=[0-9]+' | cut -d= -f2)" "nqueens: the fixed-size count"
mjcancel "$K" >/dev/null
check_allocations_disjoint "$C"
t_done
