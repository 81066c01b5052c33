#!/usr/bin/env bash
# The iCheck controller and mjsched lend and give back a node live
# [John24 §7.3.1, Alg. 9-11]: 4 nodes, the last one iCheck's boot node, the
# controller restarted with icheck.yaml's scheduler: section (Status every
# 2 s, max_nodes 2).
#
#  1. The controller's Status reaches mjsched (icheck_link).
#  2. The controller is SIGKILLed; a HIGH request for 1 node (sent by the
#     test: the memory trigger needs checkpoint traffic) is granted while no
#     controller runs; the restarted controller finds NEW_NODES n1 in its
#     Status answer, starts a manager there and answers once it registered:
#     n1 is iCheck's (icheck_nodes up, icheck_lent held), in no job.
#  3. favour applications and a waiting 3-node job: n1 (no agents, all its
#     memory free) is reclaimed; the controller supersedes its manager (it
#     stops) and answers; the job runs on n1-n3.
# About 25 s.
. "${DYNRES_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/t/lib.sh"
t_begin 120
t_require python3 icheckd icagent

C=$T_TMP/cluster
W=$T_TMP/work
mkdir -p "$W"
cd "$W" || t_fatal "cd $W"
boot_cluster "$C" 4 --icheck-nodes 1 --tick 0.2 --kill-wait 1 --policy easy
show_logs() {
  echo "--- mjsched.log (tail)" >&2; tail -n 15 "$C/mjsched.log" >&2
  echo "--- controller (tail)" >&2; tail -n 15 "$C/icheck/controller-sched.log" >&2
}
t_on_fail show_logs

# ic MESSAGE-JSON — one request on mjsched's socket; prints the answer
icsched_helpers "$C"
CTL=
start_controller() {
  "$DYNRES_BIN/icheckd" --role controller --config "$C/icheck.yaml" >>"$C/icheck/controller-sched.log" 2>&1 &
  CTL=$!
  bg_register "$CTL"
  disown "$CTL" 2>/dev/null
  echo "controller-sched $CTL" >>"$C/icheck/pids"
}

# the controllers icheck-boot started know no scheduler: replace them
OLD=$(awk '$1 == "controller" || $1 == "standby" {print $2}' "$C/icheck/pids")
[[ -n $OLD ]] || t_fatal "no controller pids in $C/icheck/pids"
# shellcheck disable=SC2086
kill $OLD 2>/dev/null
# shellcheck disable=SC2086
wait_for 10 "icheck-boot's controllers stopped" pids_gone $OLD
printf 'scheduler:\n  socket: %s\n  scaler_interval: 2\n  max_nodes: 2\n  release_after: 0\n' "$C/mjsched.sock" >>"$C/icheck.yaml"
start_controller
wait_for 15 "the controller's Status reaches mjsched" eval \
  '[[ $(sq "$C" "SELECT status LIKE \"%\"\"name\"\":\"\"n4\"\"%\" FROM icheck_link") == 1 ]]'
assert_eq '1|2|1' "$(sq "$C" "SELECT min_nodes, max_nodes, fixed_nodes FROM icheck_link")" "bounds: 1 boot node, max 2"

# -- NEW_NODES granted while the controller is dead ---------------------------
kill -9 "$CTL"
wait_for 10 "controller killed" pids_gone "$CTL"
A=$(ic '{"op":"ic_request","urgency":"HIGH","nodes":1}')
assert_eq '{"ok":true}' "$A" "HIGH request for 1 node"
wait_for 10 "n1 granted" eval '[[ $(lent) == "n1:granting" ]]'
start_controller
wait_for 20 "the restarted controller took n1 (manager registered, Response sent)" eval '[[ $(lent) == "n1:held" ]]'
assert_eq up "$(icnode n1)" "n1's manager is up in iCheck's node table"
assert_eq 0 "$(sq "$C" "SELECT COUNT(*) FROM icheck_lent l JOIN nodes n ON n.id = l.node_id WHERE n.job_id IS NOT NULL")" \
  "n1 is in no job"
MPID=$(sq "$C" "SELECT pid FROM icheck_nodes WHERE node = 'n1'")
pid_alive "$MPID" && t_pass "n1's manager runs (pid $MPID)" || t_fail "n1's manager (pid $MPID) is not running"

# -- favour applications: n1 reclaimed for a 3-node job ------------------------
sched_restart_with "scheduler:" $'  icheck:\n    favour: applications' "favour applications"
write_script "$W/w3.sh" '#!/bin/bash' '#SBATCH -N 3' '#SBATCH -t 1' '#SBATCH -o w3.out' 'echo "ran on $MJ_JOB_NODELIST"'
t_run mjsub --parsable w3.sh
J=$T_OUT
wait_state 30 "$C" "$J" COMPLETED || echo "    lent: $(lent); log: $(tail -3 "$C/icheck/controller-sched.log")" >&2
assert_eq "ran on n[1-3]" "$(cat "$W/w3.out" 2>/dev/null)" "the job ran on the node iCheck gave back"
assert_eq "" "$(lent)" "nothing lent any more"
assert_eq removed "$(icnode n1)" "n1 left iCheck"
wait_for 10 "n1's manager stopped (superseded)" pids_gone "$MPID"
EV=$(sq "$C" "SELECT group_concat(kind, ' ') FROM (SELECT kind FROM events WHERE kind LIKE 'icheck%' ORDER BY id)")
assert_eq "icheck_request icheck_grant icheck_node_up icheck_reclaim icheck_node_returned" "$EV" "events in order"
assert_contains "$(cat "$C/icheck/controller-sched.log")" "REMOVE_NODES change" "the controller logged the removal"
t_done
