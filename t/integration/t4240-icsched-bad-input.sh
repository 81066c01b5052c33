#!/usr/bin/env bash
# Bad input to the iCheck <-> scheduler exchange [John24 §7.3.1] on a live
# cluster with a running controller (4 nodes, n4 iCheck's boot node,
# max_nodes 2) and one node lent to it:
#  - a forged Resource request from a real second user (created here and
#    removed after), with the socket's and directories' permissions opened
#    on purpose: mjsched refuses it by the peer's kernel identity;
#  - a request for more nodes than the cluster has;
#  - a REMOVE_NODES Response for a node iCheck does not hold, and one for the
#    node it does hold but that is not being reclaimed;
#  - a NEW_NODES Response naming iCheck's boot node, which is not the
#    scheduler's to lend.
# Each is refused with a message naming the problem, logged by mjsched, and
# neither the scheduler's tables nor the controller's node table change; the
# lent node stays iCheck's and the queue still runs a job. (APP_INFO for an
# unknown job belongs to the agent-migration tests.) About 15 s. Needs root.
. "${DYNRES_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/t/lib.sh"
((EUID == 0)) || t_skip "needs root (creates a throw-away user)"
for c in useradd userdel setpriv python3; do command -v $c >/dev/null || t_skip "$c is not installed"; done
t_begin 90
t_require icheckd icagent

UX=dyic$$
del_user() { userdel "$UX" >/dev/null 2>&1; return 0; }
trap 'rc=$?; ( (exit $rc); _t_cleanup ); rc=$?; del_user; exit $rc' EXIT
useradd -M -U -d /nonexistent -s /bin/sh "$UX" || t_fatal "useradd $UX failed"
X_UID=$(id -u "$UX")

C=$T_TMP/cluster
W=$T_TMP/work
mkdir -p "$W"
cd "$W" || t_fatal "cd $W"
boot_cluster "$C" 4 --tick 0.2 --kill-wait 1 --icheck-nodes 1 --icheck-max-nodes 2
t_on_fail show_log
show_log() { echo "--- mjsched.log (tail)" >&2; tail -n 20 "$C/mjsched.log" >&2; }
icsched_helpers "$C"
tables() {  # what must not change: the scheduler's iCheck tables and the controller's node table
  sq "$C" "SELECT 'lent', node_id, state, change_id, since FROM icheck_lent;
           SELECT 'link', min_nodes, max_nodes, fixed_nodes, request_nodes, urgency, next_change FROM icheck_link;
           SELECT 'hist', node, start_time, end_time FROM icheck_lent_history;
           SELECT 'ev', id, kind, detail FROM events;
           SELECT 'node', id, name, state, job_id FROM nodes;
           SELECT 'ic', node, state, epoch FROM icheck_nodes;"
}

# one node lent and taken by the controller
wait_for 15 "the controller's Status reaches mjsched" eval '[[ -n $(sq "$C" "SELECT status_time FROM icheck_link") ]]'
assert_eq '{"ok":true}' "$(ic '{"op":"ic_request","urgency":"HIGH","nodes":1}')" "a HIGH request for one node"
wait_for 20 "n1 lent and held" eval '[[ $(lent) == "n1:held" ]]' || t_fatal "lent: $(lent)"
CH=$(sq "$C" "SELECT change_id FROM icheck_lent")
sleep 0.5
T0=$(tables)
L0=$(wc -l <"$C/mjsched.log")

refused() {  # WHAT ANSWER ERROR-RE
  assert_match "^\{\"error\":\"$3" "$2" "refused: $1"
  assert_eq "$T0" "$(tables)" "nothing changed after: $1"
}

# -- a forged request from another user (the socket opened to everyone on purpose)
cp "$DYNRES_SRC/t/frame-request" "$T_TMP/fr.py"
chmod 755 "$T_TMP/fr.py"
chmod 711 "$T_TMP" "$C"
chmod 666 "$C/mjsched.sock"
A=$(setpriv --reuid="$X_UID" --regid="$X_UID" --init-groups env HOME=/nonexistent \
  /usr/bin/python3 "$T_TMP/fr.py" "$C/mjsched.sock" '{"op":"ic_request","urgency":"HIGH","nodes":1}' 2>&1)
B=$(setpriv --reuid="$X_UID" --regid="$X_UID" --init-groups env HOME=/nonexistent \
  /usr/bin/python3 "$T_TMP/fr.py" "$C/mjsched.sock" \
  '{"op":"ic_response","change":'"$CH"',"kind":"NEW_NODES","ok":false,"nodes":["n1"]}' 2>&1)
chmod 700 "$C" "$T_TMP"
chmod 600 "$C/mjsched.sock"
refused "a Resource request from user $UX" "$A" "ic_request from uid $X_UID: only the cluster owner"
refused "a Response from user $UX" "$B" "ic_response from uid $X_UID: only the cluster owner"

# -- more nodes than exist
refused "a request for more nodes than the cluster has" "$(ic '{"op":"ic_request","urgency":"HIGH","nodes":4}')" \
  'ic_request: nodes must be an integer in \[1, 3\]'
refused "a request for 2^40 nodes" "$(ic '{"op":"ic_request","urgency":"LOW","nodes":1099511627776}')" \
  'ic_request: nodes must be an integer in \[1, 3\]'

# -- REMOVE_NODES for a node iCheck does not hold, or does not give back
refused "REMOVE_NODES for n2, which iCheck does not hold" \
  "$(ic '{"op":"ic_response","change":'"$CH"',"kind":"REMOVE_NODES","ok":true,"nodes":["n2"]}')" \
  "ic_response: node n2 is not in REMOVE_NODES change $CH \\(iCheck does not hold it\\)"
refused "REMOVE_NODES for n1, held but not being reclaimed" \
  "$(ic '{"op":"ic_response","change":'"$CH"',"kind":"REMOVE_NODES","ok":true,"nodes":["n1"]}')" \
  "ic_response: node n1 is not in REMOVE_NODES change $CH \\(it is held\\)"
refused "REMOVE_NODES for n1 and an unknown node (nothing of it applied)" \
  "$(ic '{"op":"ic_response","change":'"$CH"',"kind":"REMOVE_NODES","ok":true,"nodes":["n1","n9"]}')" \
  "ic_response: node n1 is not in REMOVE_NODES"
refused "NEW_NODES naming iCheck's boot node n4" \
  "$(ic '{"op":"ic_response","change":'"$CH"',"kind":"NEW_NODES","ok":true,"nodes":["n4"]}')" \
  "ic_response: node n4 is not in NEW_NODES change $CH \\(iCheck does not hold it\\)"

LOG=$(tail -n +"$((L0 + 1))" "$C/mjsched.log")
assert_eq 8 "$(grep -c 'iCheck: refused: ' <<<"$LOG")" "each refusal logged once by mjsched"
assert_contains "$LOG" "ic_request from uid $X_UID: only the cluster owner" "the other user's uid is in the log"

# -- still working: n1 is iCheck's, a job runs on the other nodes
assert_eq "n1:held" "$(lent)" "n1 stays iCheck's"
assert_eq up "$(sq "$C" "SELECT state FROM icheck_nodes WHERE node = 'n1'")" "n1's manager is up"
write_script "$W/two.sh" '#!/bin/bash' '#SBATCH -N 2' '#SBATCH -o two.out' 'echo "ran on $MJ_JOB_NODELIST"'
J=$(mjsub --parsable two.sh) || t_fatal "mjsub failed"
wait_state 20 "$C" "$J" COMPLETED
assert_eq "ran on n[2-3]" "$(cat two.out 2>/dev/null)" "the job ran beside iCheck's node"
t_done
