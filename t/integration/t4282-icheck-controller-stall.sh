#!/usr/bin/env bash
# A controller that got no CPU for a while does not declare its managers
# lost [John24 §6.5.2]: the controller is stopped (SIGSTOP) for 3 s, longer
# than its 2 s window (heartbeat 1 s, 2 misses), while the managers of n1
# and n2 keep heartbeating (their heartbeats wait in its accept queue). Once
# it resumes, its first monitor round ran late and judges no node, and the
# waiting heartbeats are served before the next: both nodes stay up with
# their agents. Twice. Before, the monitor woke first, saw only the
# heartbeats recorded before the stop and declared the nodes lost with all
# their agents. About 20 s.
. "${DYNRES_SRC:-$(dirname "$0")/../..}/t/lib.sh"
t_begin 90
t_require icheckd icagent ictest sqlite3
W=$T_TMP/home
icheck_service "$W" --heartbeat 1 --misses 2 --no-relaunch --no-standby n1 n2
sqw() { icsql "$1"; }
CPID=$(awk '$1 == "controller" {print $2}' "$W/icheck/pids" | tail -1)
pid_alive "$CPID" || t_fatal "no controller pid"
T_ICHECK_STOPPED=("$CPID")  # resumed at exit

t_run timeout 60 ictest st 20000 5 5 --persist
assert_contains "$T_OUT" "FINAL 1 rdma" "st committed through its agent (stderr: $T_ERR)"
for round in 1 2; do
  kill -STOP "$CPID"
  sleep 3
  kill -CONT "$CPID"
  sleep 3
  assert_eq "n1 up|n2 up" "$(sqw "SELECT group_concat(node || ' ' || state, '|') FROM (SELECT node, state FROM icheck_nodes ORDER BY node)")" \
    "round $round: both nodes up after the controller's 3 s stall"
done
assert_not_contains "$(cat "$W/icheck/controller.log")" "manager lost" "no manager was declared lost"
assert_eq 1 "$(sqw "SELECT COUNT(*) FROM icheck_agents WHERE state = 'up'")" "st's agent is still counted on"
t_run timeout 60 ictest st 20000 10 5 --persist
assert_contains "$T_OUT" "FINAL 2 rdma" "st restarts and commits through it (stderr: $T_ERR)"
t_done
