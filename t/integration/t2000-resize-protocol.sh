#!/bin/bash
# The live resize protocol between mjsched and running malleable jobs
# (mjsched(8) RESIZE PROTOCOL, mj(3)), with real processes on a
# local virtual cluster, driven by `mjcontrol resize`:
#   - shrink and expand committed; node states, allocations, events, metrics
#   - expand with processes started on the added nodes (mj_launch)
#   - an order never answered is rolled back after the timeout; back-off;
#     the processes started on the added nodes are killed
#   - a job SIGKILLed mid-resize; mjsched SIGKILLed mid-resize and restarted
#   - bad input: malformed / oversized / non-object frames, half a frame,
#     a wrong secret, another job's id, outside a job, an acknowledgement
#     for an order never sent, re-registration after deregistration
#   - restart-based resize: the supervisor runs the script again on the new
#     node list, the job resumes (MJ_RESUMED) and commits; mjsched killed
#     after the relaunch and before that commit commits it for the job
# After every case: no node held by a job that is not running, each job's
# node count equals the nodes it holds, allocations disjoint.
. "${DYNRES_SRC:-$(dirname "$0")/../..}/t/lib.sh"
t_begin 170

C=$T_TMP/c
boot_cluster "$C" 6 --tick 0.2 --resize-timeout 1.5 --resize-backoff 2

held() { job_col "$C" "$1" num_nodes; }
out_of() { cat "$C/out-$1.txt" 2>/dev/null; }
order_state() { sq "$C" "SELECT state FROM resize_orders WHERE id=$1"; }
kill_restart_sched() {  # SIGKILL mjsched, start a new one
  local pid
  pid=$(sched_pid "$C")
  kill -9 "$pid"
  wait_for 5 "mjsched gone" pids_gone "$pid"
  t_run mjsched --home "$C" --daemon
  assert_eq 0 "$T_RC" "mjsched restarts"
}
registered() { grep -q '^registered' "$C/out-$1.txt" 2>/dev/null; }
submit() {  # SCRIPT-BODY [mjsub options...]: the job id
  local body=$1
  shift
  write_script "$T_TMP/job$RANDOM.sh" '#!/bin/bash' "$body"
  mjsub --parsable --malleable -o "$C/out-%j.txt" "$@" "$(ls -t "$T_TMP"/job*.sh | head -1)"
}

# ---- 1. shrink, expand with launched processes, committed -----------------
A=$(submit 'MJT_LAUNCH=1 mjtest serve 150' -N 4 --min-nodes 2 --max-nodes 6)
wait_state 10 "$C" "$A" RUNNING
wait_for 10 "job $A registered" registered "$A"
t_run mjcontrol resize "$A" 2 --wait 5
assert_eq 0 "$T_RC" "shrink to 2 committed ($T_OUT $T_ERR)"
assert_match 'shrink order [0-9]+ sent .* -> 2 nodes' "$T_OUT" "mjcontrol names the order"
assert_eq 2 "$(held "$A")" "job $A holds 2 nodes after the shrink"
check_nodes_consistent "$C" "after shrink"
t_run mjcontrol resize "$A" 5 --wait 5
assert_eq 0 "$T_RC" "expand to 5 committed ($T_OUT $T_ERR)"
assert_eq 5 "$(held "$A")" "job $A holds 5 nodes after the expand"
wait_for 5 "three processes launched on the added nodes" eval "[[ \$(out_of $A | grep -c '^launched') == 3 ]]"
assert_eq 3 "$(sq "$C" "SELECT COUNT(*) FROM allocations WHERE job_id=$A")" "a new allocation per resize (gantt height changes)"
assert_eq "2" "$(sq "$C" "SELECT COUNT(*) FROM events WHERE job_id=$A AND kind IN ('expand','shrink') AND detail LIKE 'from=% to=% order=% duration=%'")" \
  "expand/shrink events with order and duration"
assert_eq 2 "$(sq "$C" "SELECT COUNT(*) FROM events WHERE job_id=$A AND kind='adapt_begin'")" "adapt-begin logged"
assert_eq 1 "$(sq "$C" "SELECT COUNT(*) FROM events WHERE job_id=$A AND kind='mj_register'")" "registration logged"
t_run mjstat --metrics
assert_match 'resizes +1 expands, 1 shrinks' "$T_OUT" "mjstat --metrics counts the resizes"
check_nodes_consistent "$C" "after expand"
t_run mjstat -j "$A"
assert_contains "$T_OUT" "Malleable=accepting" "mjstat -j shows the protocol phase"
assert_match 'Resize order=[0-9]+ shrink [0-9]->2 n[^ ]+ committed after 0\.[0-9]+ s' "$T_OUT" "mjstat -j lists the shrink"
assert_match 'Resize order=[0-9]+ expand 2->5 n[^ ]+ committed after' "$T_OUT" "mjstat -j lists the expand"
t_run mjstat -j "$A" --json
assert_eq accepting "$(printf '%s' "$T_OUT" | perl -MJSON::PP -0777 -ne 'print decode_json($_)->{malleable}{phase}')" "--json carries the phase"
assert_eq "committed committed" "$(printf '%s' "$T_OUT" | perl -MJSON::PP -0777 -ne 'print join " ", map { $_->{state} } @{decode_json($_)->{malleable}{orders}}')" \
  "--json lists the orders"
t_run mjstat --gantt "$T_TMP/gantt.png"
[[ -s $T_TMP/gantt.png ]] && t_pass "gantt drawn" || t_fail "mjstat --gantt wrote nothing ($T_ERR)"
# refused orders change nothing
t_run mjcontrol resize "$A" 7
assert_ne 0 "$T_RC" "resize beyond --max-nodes refused"
assert_contains "$T_ERR" "2 to 6 nodes" "the refusal names the range"
t_run mjcontrol resize "$A" 1
assert_ne 0 "$T_RC" "resize below --min-nodes refused"
assert_contains "$T_ERR" "2 to 6 nodes" "... naming the range"
assert_eq 5 "$(held "$A")" "refused orders leave the job's nodes alone"
t_run mjcontrol resize "$A" 5
assert_ne 0 "$T_RC" "resize to the current size refused"
t_run mjcontrol resize 9999 2
assert_contains "$T_ERR" "not running" "resize of an unknown job refused"

# ---- 2. bad input on the job socket: the scheduler keeps serving ----------
B=$(submit 'for m in garbage oversized notobject half flood; do mjtest raw $m; done
MJ_SECRET=wrong mjtest hello
MJ_JOB_ID='"$A"' mjtest hello
env -u MJ_JOB_ID -u MJ_SECRET mjtest hello
mjtest commit-bogus
mjtest perf 1 3
mjtest perf -1 3
mjtest badargs
mjtest register-twice' -N 1 --min-nodes 1 --max-nodes 1)
wait_state 20 "$C" "$B" COMPLETED FAILED
BO=$(out_of "$B")
for m in garbage oversized notobject flood; do
  assert_contains "$BO" "raw $m: closed by the scheduler" "a $m frame closes that connection"
done
assert_match 'error init -3 .*wrong secret' "$BO" "a wrong secret is refused (MJ_ERR_AUTH)"
assert_match "error init -3 .*wrong secret for job $A" "$BO" "another job's id with this job's secret is refused"
assert_match 'error init -1 ' "$BO" "outside a job: MJ_ERR_ENV"
assert_match 'commit-bogus -4 order 999999 is not outstanding' "$BO" "an acknowledgement for an order never sent is refused"
assert_match 're-register -5 ' "$BO" "re-registration after deregistration is refused (MJ_ERR_STATE)"
assert_match 'error perf -8 ' "$BO" "a negative time in a performance report is refused (MJ_ERR_ARG)"
# libmj refuses bad arguments itself, with MJ_ERR_ARG (-8), before asking
# the scheduler; an order that is not pending is MJ_ERR_STATE (-5)
for c in probe-null wait-huge-timeout wait-nan-timeout begin-null begin-id-0 begin-unknown-flag commit-id-0 \
  commit-negative-released commit-released-null-list commit-released-null-name progress-above-1 \
  progress-negative perf-zero-sum perf-infinite launch-no-node launch-no-argv; do
  assert_match "^badargs $c -8\$" "$(grep "^badargs $c " <<<"$BO")" "libmj: $c is refused as a bad argument"
done
assert_match "^badargs begin-not-pending -5\$" "$(grep '^badargs begin-not-pending ' <<<"$BO")" "libmj: adapt-begin of an order never sent is out of order"
assert_contains "$(mjstat -j "$B")" "MTCT=0.333" "the reported MTCT (1 s MPI / 3 s compute) reaches the state file"
assert_contains "$(cat "$C/mjsched.log")" "refused a job connection: wrong secret" "refusals are logged"
[[ -n $(sched_pid "$C") ]] && t_pass "mjsched survived the bad input" || t_fail "mjsched died on bad input"
t_run mjcontrol resize "$A" 3 --wait 5
assert_eq 0 "$T_RC" "job $A still resizes after the bad input ($T_OUT)"
check_nodes_consistent "$C" "after bad input"

# ---- 3. an order never answered is rolled back; back-off ------------------
# (under easy a malleable job starts on as many nodes as are idle, up to
# --max-nodes: 2 here)
I=$(submit 'MJT_IGNORE=1 mjtest serve 60' -N 1 --min-nodes 1 --max-nodes 2)
wait_state 10 "$C" "$I" RUNNING
wait_for 10 "job $I registered" registered "$I"
IN=$(held "$I")
t_run mjcontrol resize "$I" 1 --wait 6
assert_eq 1 "$T_RC" "an unanswered order is rolled back ($T_OUT)"
assert_contains "$T_OUT" "rolled back: not committed within its deadline" "mjcontrol says why"
assert_eq "$IN" "$(held "$I")" "job $I keeps its nodes"
assert_match 'order=[0-9]+ after=1\.[5-9][0-9]*s' "$(sq "$C" "SELECT detail FROM events WHERE job_id=$I AND kind='resize_rollback'")" \
  "the rollback is logged with its duration"
t_run mjcontrol resize "$I" 1
assert_contains "$T_ERR" "back-off" "no new order during the back-off"
check_nodes_consistent "$C" "after timeout"
mjcancel "$I" >/dev/null

# ---- 4. rollback kills the processes started on the added nodes -----------
L=$(submit 'MJT_LAUNCH=1 MJT_SLOW_EXPAND=3 mjtest serve 10' -N 1 --min-nodes 1 --max-nodes 2)
wait_state 10 "$C" "$L" RUNNING
wait_for 10 "job $L registered" registered "$L"
[[ $(held "$L") == 2 ]] && mjcontrol resize "$L" 1 --wait 5 >/dev/null
assert_eq 1 "$(held "$L")" "job $L on one node before the expand"
t_run mjcontrol resize "$L" 2 --wait 6
assert_eq 1 "$T_RC" "the slow expand is rolled back"
wait_state 15 "$C" "$L" COMPLETED
LO=$(out_of "$L")
assert_match 'launched n[0-9]+ [0-9]+' "$LO" "a process was started on the added node"
assert_match 'rolled_back [0-9]+' "$LO" "the job learns of the rollback (commit: MJ_ERR_ROLLED_BACK)"
assert_match 'reaped [0-9]+ killed' "$LO" "libmj killed the process on the added node"
check_nodes_consistent "$C" "after rollback with launched processes"

# ---- 5. a job SIGKILLed mid-resize ----------------------------------------
K=$(submit 'MJT_CRASH=1 mjtest serve 60' -N 2 --min-nodes 1 --max-nodes 2)
wait_state 10 "$C" "$K" RUNNING
wait_for 10 "job $K registered" registered "$K"
t_run mjcontrol resize "$K" 1 --wait 5
assert_eq 1 "$T_RC" "the order of a job killed mid-resize is rolled back"
wait_state 10 "$C" "$K" FAILED
assert_eq rolled_back "$(sq "$C" "SELECT state FROM resize_orders WHERE job_id=$K")" "its order is settled"
check_nodes_consistent "$C" "after a job killed mid-resize"

# ---- 6. mjsched SIGKILLed mid-resize --------------------------------------
S=$(submit 'MJT_DELAY=1 mjtest serve 20' -N 2 --min-nodes 1 --max-nodes 2)
wait_state 10 "$C" "$S" RUNNING
wait_for 10 "job $S registered" registered "$S"
SN=$(held "$S")
t_run mjcontrol resize "$S" 1
SO=$(sq "$C" "SELECT MAX(id) FROM resize_orders WHERE job_id=$S")
wait_for 5 "order $SO begun" eval "[[ \$(order_state $SO) == begun ]]"
kill_restart_sched
wait_for 10 "order $SO settled" eval "[[ \$(order_state $SO) == rolled_back ]]"
assert_contains "$(sq "$C" "SELECT reason FROM resize_orders WHERE id=$SO")" "scheduler restarted" "the restart rolled it back"
wait_for 15 "job $S told of the rollback" eval "out_of $S | grep -q '^rolled_back $SO'"
assert_eq "$SN" "$(held "$S")" "job $S keeps its nodes"
check_nodes_consistent "$C" "after mjsched was killed mid-resize"
assert_eq RUNNING "$(job_state "$C" "$A")" "other jobs unaffected by all of this"

# ---- 7. restart-based resize ----------------------------------------------
mjcancel "$S" >/dev/null
wait_state 10 "$C" "$S" CANCELLED
mjcancel "$A" >/dev/null   # its --min-nodes 2 keeps it from giving back more
wait_state 10 "$C" "$A" CANCELLED
R=$(submit 'mjtest restart 30' -N 2 --min-nodes 1 --max-nodes 3)
wait_state 10 "$C" "$R" RUNNING
wait_for 10 "job $R registered" registered "$R"
RN=$(held "$R")
t_run mjcontrol resize "$R" 1 --wait 10
assert_eq 0 "$T_RC" "restart-based shrink committed ($T_OUT)"
RO=$(out_of "$R")
assert_contains "$RO" "restarting" "the job exits for the restart"
assert_match "status RESUMED job=[0-9]+ nodes=1 old=$RN nodelist=n[^ ]+ restart=1" "$RO" "the script runs again on 1 node (MJ_RESUMED)"
assert_match "committed [0-9]+ resumed $RN->1" "$RO" "the resumed job commits the order"
assert_eq 1 "$(held "$R")" "job $R holds 1 node"
wait_for 5 "job $R registered again" eval "[[ \$(out_of $R | grep -c '^registered') == 2 ]]"
t_run mjcontrol resize "$R" 3 --wait 10
assert_eq 0 "$T_RC" "restart-based expand committed ($T_OUT $T_ERR)"
assert_match 'status RESUMED job=[0-9]+ nodes=3 old=1 .* restart=2' "$(out_of "$R")" "the script ran again on 3 nodes"
assert_eq 3 "$(held "$R")" "job $R holds 3 nodes"
assert_eq 2 "$(sq "$C" "SELECT restart_count FROM mj_jobs WHERE job_id=$R")" "restart count recorded"
check_nodes_consistent "$C" "after restart-based resizes"

# ---- 7b. mjsched restarted after the relaunch, before the resumed commit --
# The supervisor already runs the script on the new node list: rolling the
# order back would leave the state file giving the job a node it left (or,
# for an expand, the job's processes on a node it gives to nobody). The order is committed on the job's behalf; the job's own
# commit afterwards is acknowledged.
L=$(submit 'MJT_RESUME_DELAY=4 mjtest restart 30' -N 2 --min-nodes 1 --max-nodes 2)
wait_state 10 "$C" "$L" RUNNING
wait_for 10 "job $L registered" registered "$L"
t_run mjcontrol resize "$L" 1
assert_eq 0 "$T_RC" "restart-based shrink of job $L ordered ($T_ERR)"
LO=$(sq "$C" "SELECT MAX(id) FROM resize_orders WHERE job_id=$L")
wait_for 10 "job $L relaunched on 1 node" eval "out_of $L | grep -q 'status RESUMED .*nodes=1 old=2'"
assert_eq 1 "$(sq "$C" "SELECT relaunched FROM resize_orders WHERE id=$LO")" "order $LO marked relaunched"
kill_restart_sched
wait_for 10 "order $LO settled" eval "[[ \$(order_state $LO) != begun && \$(order_state $LO) != sent ]]"
assert_eq committed "$(order_state "$LO")" "the relaunched order is committed, not rolled back"
assert_eq 1 "$(held "$L")" "job $L holds the 1 node it runs on"
wait_for 15 "job $L's resumed commit acknowledged" eval "out_of $L | grep -q '^committed $LO resumed 2->1'"
check_nodes_consistent "$C" "after mjsched restarted mid-relaunch"

for j in $R $L; do mjcancel "$j" >/dev/null 2>&1; done
wait_for 15 "all jobs ended" no_active_jobs "$C"
check_nodes_consistent "$C" "at the end"
check_allocations_disjoint "$C"
check_started_once "$C"
t_done
