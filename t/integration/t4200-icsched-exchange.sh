#!/usr/bin/env bash
# The scheduler's side of the iCheck <-> scheduler protocol [John24 §7.3.1.1,
# Alg. 10, 11] on a live mjsched: a peer speaking the controller's messages
# (Status, Query, Resource request, Response) over mjsched's socket.
#
# 4 nodes, tick 0.2 s, policy easy, favour icheck. The controller reports 1
# boot node (min 1, max 3) and asks HIGH for 2 nodes: the next pass lends 2
# idle nodes (NEW_NODES in the Status answer, table icheck_lent), a 4-node
# job then waits. mjsched is SIGKILLed while the change is unanswered and
# restarted: the change is still there, no node is a job's and iCheck's.
# The Response makes them iCheck's. Bad input (a request for more nodes than
# exist, a Response for a node iCheck does not hold, memory out of range, a
# forged request from another user) is refused, logged, and leaves the state
# file as it was. Then favour applications: lent nodes with 95 % free memory
# are reclaimed (REMOVE_NODES) for the waiting job, which starts once the
# Response gives them back. About 15 s.
. "${DYNRES_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/t/lib.sh"
t_begin 90
t_require python3

C=$T_TMP/cluster
W=$T_TMP/work
mkdir -p "$W"
cd "$W" || t_fatal "cd $W"
boot_cluster "$C" 4 --tick 0.2 --kill-wait 1 --policy easy
show_log() { echo "--- mjsched.log (tail)" >&2; tail -n 20 "$C/mjsched.log" >&2; }
t_on_fail show_log

icsched_helpers "$C"
GiB=1073741824
status() {  # FREE-GIB-OF-LENT-NODES: a Status naming the boot node and the lent ones
  local nodes='{"name":"c1","total_mem":'$((10 * GiB))',"avail_mem":'$((5 * GiB))',"agents":1}' n
  for n in $(sq "$C" "SELECT n.name FROM icheck_lent l JOIN nodes n ON n.id = l.node_id WHERE l.state != 'granting'"); do
    nodes+=',{"name":"'$n'","total_mem":'$((10 * GiB))',"avail_mem":'$(($1 * GiB / 10))',"agents":0}'
  done
  ic '{"op":"ic_status","nodes":['"$nodes"'],"min_nodes":1,"max_nodes":3,"fixed_nodes":1}'
}
restart_sched() {
  t_run "$DYNRES_BUILD/bin/mjsched" --home "$C" --daemon
  assert_eq 0 "$T_RC" "mjsched --daemon restarts (stderr: $T_ERR)"
  wait_for 10 "mjsched back" eval '[[ -S $C/mjsched.sock && -n $(sched_pid "$C") ]]' || t_fatal "mjsched did not come back"
}
check_no_double() {  # WHAT: no node both a job's and iCheck's
  local both
  both=$(sq "$C" "SELECT COUNT(*) FROM icheck_lent l JOIN nodes n ON n.id = l.node_id WHERE n.job_id IS NOT NULL")
  assert_eq 0 "$both" "no node is both a job's and iCheck's ($1)"
}

# -- Status and Query -----------------------------------------------------
A=$(status 0)
assert_eq '{"changes":[],"lent":[],"ok":true}' "$A" "Status answered, no change pending"
A=$(ic '{"op":"ic_query"}')
assert_eq '{"idle_nodes":4,"ok":true}' "$A" "Query answered with the idle nodes"

# -- HIGH request: 2 idle nodes lent before a waiting job ------------------
write_script "$W/wide.sh" '#!/bin/bash' '#SBATCH -N 4' '#SBATCH -t 1' '#SBATCH -o wide.out' 'echo wide ran'
A=$(ic '{"op":"ic_request","urgency":"HIGH","nodes":2}')
assert_eq '{"ok":true}' "$A" "Resource request HIGH 2 accepted"
wait_for 10 "2 idle nodes lent (NEW_NODES)" eval '[[ $(lent) == "n1:granting n2:granting" ]]' || echo "    lent: $(lent)" >&2
t_run mjsub --parsable wide.sh
J=$T_OUT
sleep 1
assert_eq PENDING "$(job_state "$C" "$J")" "a 4-node job waits while 2 nodes are lent"
check_no_double "after the grant"
A=$(status 0)
assert_match '"kind":"NEW_NODES","nodes":\[\{"host":"[^"]*","name":"n1"\},\{"host":"[^"]*","name":"n2"\}\]' "$A" \
  "the Status answer carries NEW_NODES n1,n2"
CH=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["changes"][0]["change"])' "$A")

# -- kill mjsched with the change unanswered -------------------------------
P=$(sched_pid "$C")
kill -9 "$P"
wait_for 10 "mjsched killed" pids_gone "$P"
restart_sched
sleep 0.5
assert_eq "n1:granting n2:granting" "$(lent)" "the lent nodes survive the scheduler's SIGKILL"
A=$(status 0)
assert_contains "$A" '"change":'"$CH"',"kind":"NEW_NODES"' "the same NEW_NODES change is offered again"
check_no_double "after the restart"

# -- bad input: refused, logged, nothing changes ---------------------------
D0=$(state_digest "$C")
bad() {  # WHAT MESSAGE ERROR-RE
  local a
  a=$(ic "$2")
  assert_match "^\{\"error\":\"$3" "$a" "refused: $1"
}
bad "a request for more nodes than exist" '{"op":"ic_request","urgency":"HIGH","nodes":99}' 'ic_request: nodes must be an integer in \[1, 4\]'
bad "an unknown urgency" '{"op":"ic_request","urgency":"MEDIUM","nodes":1}' 'ic_request: urgency must be HIGH or LOW'
bad "a Response for a node iCheck does not hold" \
  '{"op":"ic_response","change":'"$CH"',"kind":"NEW_NODES","ok":true,"nodes":["n1","n4"]}' \
  'ic_response: node n4 is not in NEW_NODES change '"$CH"' \(iCheck does not hold it\)'
bad "REMOVE_NODES answered for a node being granted" \
  '{"op":"ic_response","change":'"$CH"',"kind":"REMOVE_NODES","ok":true,"nodes":["n1"]}' 'ic_response: node n1 is not in REMOVE_NODES'
bad "free memory above total" \
  '{"op":"ic_status","nodes":[{"name":"c1","total_mem":10,"avail_mem":11,"agents":0}],"min_nodes":1,"max_nodes":3,"fixed_nodes":1}' \
  'ic_status: node c1: need 0 <= avail_mem <= total_mem'
bad "a negative agent count" \
  '{"op":"ic_status","nodes":[{"name":"c1","total_mem":10,"avail_mem":1,"agents":-1}],"min_nodes":1,"max_nodes":3,"fixed_nodes":1}' \
  'ic_status: node c1: agents must be'
bad "a node name with a shell character" \
  '{"op":"ic_status","nodes":[{"name":"c1;rm","total_mem":10,"avail_mem":1,"agents":0}],"min_nodes":1,"max_nodes":3,"fixed_nodes":1}' \
  'ic_status: every node needs a name'
bad "max_nodes below min_nodes" '{"op":"ic_status","nodes":[],"min_nodes":3,"max_nodes":2,"fixed_nodes":0}' \
  'ic_status: need 1 <= min_nodes <= max_nodes'
bad "a change id of 0" '{"op":"ic_response","change":0,"kind":"NEW_NODES","ok":true,"nodes":["n1"]}' 'ic_response: change must be'
# another user, with the socket's permissions opened by mistake: the daemon
# still refuses (SO_PEERCRED), not only the file mode
if [[ -x /usr/bin/python3 ]] && id nobody >/dev/null 2>&1; then
  cp "$DYNRES_SRC/t/frame-request" "$T_TMP/ic.py"
  chmod 644 "$T_TMP/ic.py"
  chmod 755 "$T_TMP" "$C"
  chmod 666 "$C/mjsched.sock"
  A=$(runuser -u nobody -- /usr/bin/python3 "$T_TMP/ic.py" "$C/mjsched.sock" '{"op":"ic_request","urgency":"HIGH","nodes":1}' 2>&1)
  chmod 700 "$C"
  chmod 600 "$C/mjsched.sock"
  assert_match '^\{"error":"ic_request from uid [0-9]+: only the cluster owner' "$A" "refused: a forged request from another user"
else
  t_log "no /usr/bin/python3 or user nobody: the cross-user case is not run"
fi
assert_eq "$D0" "$(state_digest "$C")" "the refused messages changed nothing in the state file"
assert_contains "$(cat "$C/mjsched.log")" "iCheck: refused: ic_request: nodes must be" "a refusal is logged"

# -- the Response makes them iCheck's ---------------------------------------
A=$(ic '{"op":"ic_response","change":'"$CH"',"kind":"NEW_NODES","ok":true,"nodes":["n1","n2"]}')
assert_eq '{"ok":true}' "$A" "Response NEW_NODES accepted"
assert_eq "n1:held n2:held" "$(lent)" "n1, n2 are iCheck's"
assert_eq '{"changes":[],"lent":["n1","n2"],"ok":true}' "$(status 0)" "no change pending once answered; n1, n2 listed as held"
assert_eq 2 "$(sq "$C" "SELECT COUNT(*) FROM icheck_lent_history WHERE end_time IS NULL")" "two open lendings in the history"
t_run mjsub --test-only -N 3 -t 1 wide.sh
assert_contains "$T_OUT" "could not start" "--test-only counts the lent nodes as taken (2 of 4 idle)"

# -- favour applications: reclaim mostly free nodes for the waiting job -----
python3 - "$C/dynres.yaml" <<'EOF'
import sys
p = sys.argv[1]
s = open(p).read().replace("scheduler:\n", "scheduler:\n  icheck:\n    favour: applications\n", 1)
open(p, "w").write(s)
EOF
P=$(sched_pid "$C")
kill "$P"
wait_for 10 "mjsched stopped" pids_gone "$P"
restart_sched
status 95 >/dev/null  # 95 % free on n1, n2
wait_for 10 "n1, n2 reclaimed (REMOVE_NODES)" eval '[[ $(lent) == "n1:reclaiming n2:reclaiming" ]]' || echo "    lent: $(lent)" >&2
A=$(status 95)
assert_match '"kind":"REMOVE_NODES","nodes":\[\{"host":"[^"]*","name":"n1"\},\{"host":"[^"]*","name":"n2"\}\]' "$A" \
  "the Status answer carries REMOVE_NODES n1,n2"
CH=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["changes"][0]["change"])' "$A")
assert_eq PENDING "$(job_state "$C" "$J")" "the job waits until iCheck gives the nodes back"
A=$(ic '{"op":"ic_response","change":'"$CH"',"kind":"REMOVE_NODES","ok":true,"nodes":["n1","n2"]}')
assert_eq '{"ok":true}' "$A" "Response REMOVE_NODES accepted"
wait_state 20 "$C" "$J" COMPLETED || t_fail "the 4-node job did not run after the reclaim ($(job_state "$C" "$J"))"
assert_eq "" "$(lent)" "nothing is lent any more"
check_no_double "at the end"
EV=$(sq "$C" "SELECT group_concat(kind, ' ') FROM (SELECT kind FROM events WHERE kind LIKE 'icheck%' ORDER BY id)")
assert_eq "icheck_request icheck_grant icheck_node_up icheck_reclaim icheck_node_returned" "$EV" "events of the exchange in order"
assert_eq 0 "$(sq "$C" "SELECT COUNT(*) FROM icheck_lent_history WHERE end_time IS NULL")" "every lending closed in the history"
if command -v gnuplot >/dev/null; then
  t_run mjstat --gantt "$T_TMP/gantt.png"
  assert_eq 0 "$T_RC" "mjstat --gantt draws iCheck's lendings (stderr: $T_ERR)"
  [[ -s $T_TMP/gantt.png ]] && t_pass "Gantt PNG written" || t_fail "no Gantt PNG"
  [[ -n ${ICSCHED_KEEP_GANTT:-} ]] && cp "$T_TMP/gantt.png" "$ICSCHED_KEEP_GANTT"
fi
t_done
