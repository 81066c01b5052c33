#!/usr/bin/env bash
# A manager's heartbeats never wait for its agents [John24 §6.5.3]: three
# agents on n1 stall (SIGSTOP: a stats request to each times out after 2 s)
# while the controller's window is 2 s (heartbeat 1 s, 2 misses). For 8 s
# the node's heartbeat stays fresh, the node and the agents stay up, and
# nothing is declared lost; once the agents resume, an application commits
# through them. Before, every heartbeat first asked each agent for its
# statistics, one after the other, and the node was declared lost with all
# its agents. About 20 s.
. "${DYNRES_SRC:-$(dirname "$0")/../..}/t/lib.sh"
t_begin 90
t_require icheckd icagent ictest sqlite3
W=$T_TMP/home
icheck_service "$W" --heartbeat 1 --misses 2 --no-relaunch --no-standby n1
sqw() { icsql "$1"; }

for a in s1 s2 s3; do
  t_run timeout 60 ictest "$a" 20000 5 5 --persist
  assert_contains "$T_OUT" "FINAL 1 rdma" "$a committed through its agent (stderr: $T_ERR)"
done
mapfile -t PIDS < <(sqw "SELECT a.pid FROM icheck_agents a JOIN icheck_apps p ON p.id = a.app_id
                         WHERE p.name IN ('s1','s2','s3') AND a.state = 'up'")
assert_eq 3 "${#PIDS[@]}" "three agents up"
pids_alive "${PIDS[@]}" || t_fatal "agent processes ${PIDS[*]} not all alive"

kill -STOP "${PIDS[@]}"
T_ICHECK_STOPPED=("${PIDS[@]}")
worst=0
for _ in $(seq 16); do
  sleep 0.5
  age=$(sqw "SELECT printf('%.2f', (julianday('now') - 2440587.5) * 86400 - last_heartbeat) FROM icheck_nodes WHERE node = 'n1'")
  awk -v a="$age" -v w="$worst" 'BEGIN { exit !(a > w) }' && worst=$age
done
assert_le "$worst" 2.0 "n1's heartbeat stayed within the 2 s window while its agents stalled (oldest seen ${worst} s)"
assert_eq up "$(sqw "SELECT state FROM icheck_nodes WHERE node = 'n1'")" "n1 is up"
assert_eq 3 "$(sqw "SELECT COUNT(*) FROM icheck_agents WHERE state = 'up'")" "the stalled agents are still counted on"
assert_not_contains "$(cat "$W/icheck/controller.log")" "manager lost" "no manager was declared lost"
kill -CONT "${PIDS[@]}"
T_ICHECK_STOPPED=()

t_run timeout 60 ictest s1 20000 10 5 --persist
assert_contains "$T_OUT" "STATUS restart" "s1 restarts (stderr: $T_ERR)"
assert_contains "$T_OUT" "FINAL 2 rdma" "and commits through the same agent once it resumed"
t_done
