#!/usr/bin/env bash
# ctest-cost: 35
# iCheck manager failure [John24 §6.5.2-6.5.3]: "The controller tries to
# relaunch the manager, and if it fails, it indicates that the node is down."
#   (a) manager SIGKILLed while an application commits -> the controller
#       relaunches it (new pid, epoch 2, node up), the application gets new
#       agents under the new manager at its next probe, commits through them
#       and restarts from them with the uninterrupted run's result; the
#       attempt count resets after manager_relaunch_reset s up;
#   (c) manager SIGSTOPped until it is relaunched, then SIGCONTed -> the old
#       one is told it is superseded and exits with its agents; one manager
#       serves the node, on the socket the new one took over;
#   (d) the primary controller dies: the standby continues with the node
#       states and epochs of the state file and relaunches the next failure;
#   (b) relaunch fails (launch command exits non-zero on n1, hangs on n2) ->
#       after manager_relaunch_attempts the nodes are down, the hung launcher
#       is killed, and a running application finishes on direct writes.
# (b) runs last, on its own service. Real daemons and processes; heartbeat
# 1 s, 2 misses. About 35 s.
. "${DYNRES_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/t/lib.sh"
for t in icheckd icagent ictest; do [[ -x $DYNRES_BIN/$t ]] || t_skip "$t is not built (libfabric missing?)"; done
command -v python3 >/dev/null || t_skip "python3 is not installed"
t_begin 150
unset ICHECK_CONFIG ICHECK_TRANSFER ICHECK_STRATEGY ICHECK_PROVIDER ICHECK_PFS_DIR ICHECK_ZERO_COPY
T="timeout 60"

# node FIELD NODE [HOME] — a field of a node in the controller's status ("" if absent)
node() {
  icheckd --status --config "${3:-$W}/icheck.yaml" 2>/dev/null | python3 -c '
import json, sys
f, n = sys.argv[1], sys.argv[2]
for x in json.load(sys.stdin)["nodes"]:
    if x["node"] == n: print(x.get(f, ""))' "$1" "$2"
}
node_is() { [[ $(node state "$1" "${3:-$W}") == "$2" ]]; }
result() { grep '^RESULT' "$1" | awk '{print $2}'; }
managers_of() { procs_matching "icheckd --role manager --node $1 --config $2/icheck.yaml"; }
agent_pids() { procs_matching "icagent --listen unix:$1/icheck/agent-"; }
ppid_of() { awk '{print $4}' "/proc/$1/stat" 2>/dev/null; }
reference() { # app n iters every -> RESULT of an uninterrupted run with direct writes
  printf 'direct: true\npfs_dir: %s/ref\n' "$T_TMP" >"$T_TMP/direct.yaml"
  $T ictest "$@" --config "$T_TMP/direct.yaml" >"$T_TMP/ref.out" 2>&1 || t_fatal "reference run $*: $(cat "$T_TMP/ref.out")"
  result "$T_TMP/ref.out"
}
boot() { # home boot-options... nodes...
  local h=$1; shift
  mkdir -p "$h"
  timeout 30 icheck-boot --home "$h" --heartbeat 1 --misses 2 "$@" >"$T_TMP/boot.log" 2>&1 ||
    t_fatal "icheck-boot $*: $(cat "$T_TMP/boot.log"; tail -5 "$h"/icheck/*.log)"
}
dump_logs() { local f; for f in "$1"/icheck/controller.log "$1"/icheck/manager-*.log; do echo "== $f" >&2; tail -n 8 "$f" >&2; done; }

# ---------------------------------------------------------------- (a) SIGKILL
W=$T_TMP/a
boot "$W" --relaunch-attempts 3 --relaunch-reset 5 n1
export DYNRES_HOME=$W ICHECK_CONFIG=$W/icheck.yaml
grep -q "^manager_launch: '.*icheckd --role manager --node {node} --config {config}'" "$W/icheck.yaml" &&
  t_pass "icheck-boot writes manager_launch" || t_fail "no manager_launch in $W/icheck.yaml: $(cat "$W/icheck.yaml")"
assert_eq 1 "$(node epoch n1)" "first manager of n1 registered with epoch 1"
OLD=$(node manager_pid n1)
assert_eq "$(awk '$1 == "manager-n1" {print $2}' "$W/icheck/pids")" "$OLD" "status reports the manager's pid"

R=$(reference rl 50000 100 5)
$T ictest rl 50000 80 5 --sleep-ms 100 --probe 10 --persist >"$W/a.out" 2>"$W/a.err" &
APP=$!; bg_register "$APP"
wait_for 15 "application commits through agents before the kill" grep -q "^COMMIT 10 2 rdma 0" "$W/a.out" ||
  t_fatal "$(cat "$W/a.out" "$W/a.err")"
OLD_AGENTS=$(agent_pids "$W")
kill -KILL "$OLD"
wait_for 15 "n1 served by a relaunched manager (new pid, epoch 2, up)" \
  eval '[[ $(node state n1) == up && $(node epoch n1) == 2 && $(node manager_pid n1) != "$OLD" ]]' || dump_logs "$W"
NEW=$(node manager_pid n1)
# from the controller's record (the status field returns to 0 after
# manager_relaunch_reset s up, which the wait above may already have passed)
assert_eq "1 0" "$(grep -c 'node n1: relaunching its manager (attempt 1 of 3' "$W/icheck/controller.log") $(grep -c 'node n1: relaunching its manager (attempt 2 of 3' "$W/icheck/controller.log")" \
  "one relaunch attempt counted"
assert_contains "$(cat "$W/icheck/controller.log")" "node n1: relaunching its manager (attempt 1 of 3" "controller log names the relaunch"
pid_alive "$NEW" && t_pass "relaunched manager $NEW alive" || t_fail "relaunched manager $NEW is not running"
assert_eq "$NEW" "$(managers_of n1 "$W")" "exactly one manager process serves n1"
assert_contains "$(cat "$W/icheck/pids")" "manager-n1 $NEW" "relaunched manager recorded in pids for icheck-down"
[[ -n $OLD_AGENTS ]] || t_fail "no agent ran before the kill"
for p in $OLD_AGENTS; do wait_for 5 "agent $p exits with its killed manager" pids_gone "$p"; done
wait "$APP"; rc=$?
assert_eq 0 "$rc" "application survived the manager failure ($(tail -2 "$W/a.err"))"
grep -Eq "^PROBE (50|60|70) rdma 0" "$W/a.out" && t_pass "a probe gave new agents" ||
  t_fail "no probe returned to RDMA: $(grep PROBE "$W/a.out" | tr '\n' ' ')"
assert_contains "$(cat "$W/a.out")" "COMMIT 80 16 rdma 0" "last commit through the new agents"
AG=$(agent_pids "$W")
[[ -n $AG ]] && assert_eq "$NEW" "$(ppid_of "${AG%%$'\n'*}")" "the application's agent runs under the relaunched manager" ||
  t_fail "no agent left for the persisted application"
$T ictest rl 50000 100 5 --persist >"$W/a2.out" 2>&1 || t_fail "restart after relaunch: $(cat "$W/a2.out")"
assert_contains "$(cat "$W/a2.out")" "RESTORED 80 16" "restart restores version 16 through the new agents"
assert_eq "$R" "$(result "$W/a2.out")" "restarted result equals the uninterrupted run"
wait_for 10 "n1 gets its relaunch attempts back after 5 s up" eval '[[ $(node relaunches n1) == 0 ]]'

# ---------------------------------------------------------------- (c) SIGSTOP, then SIGCONT
OLD=$NEW
OLD_AGENTS=$(agent_pids "$W")
[[ -n $OLD_AGENTS ]] || t_fail "the persisted application has no agent before the stop"
kill -STOP "$OLD"
wait_for 15 "stopped manager replaced (epoch 3)" \
  eval '[[ $(node state n1) == up && $(node epoch n1) == 3 && $(node manager_pid n1) != "$OLD" ]]' || dump_logs "$W"
NEW=$(node manager_pid n1)
# the controller's own record of this relaunch (the status field would race
# the reset to 0 after manager_relaunch_reset s up, which a loaded machine
# can reach before the wait above sees epoch 3)
assert_eq "2 0" "$(grep -c 'node n1: relaunching its manager (attempt 1 of 3' "$W/icheck/controller.log") $(grep -c 'node n1: relaunching its manager (attempt 2 of 3' "$W/icheck/controller.log")" \
  "counting starts again at 1"
assert_contains "$(cat "$W/icheck/manager-n1.log")" "nobody answers on $W/icheck/manager-n1.sock" "new manager took the unanswered socket over"
kill -CONT "$OLD"
wait_for 10 "resumed old manager $OLD exits" pids_gone "$OLD" || dump_logs "$W"
assert_contains "$(cat "$W/icheck/manager-n1.log")" "superseded: node n1 is served by a newer manager (epoch 3, this one has epoch 2)" \
  "old manager told it is superseded"
for p in $OLD_AGENTS; do
  wait_for 5 "agent $p of the superseded manager exits" pids_gone "$p"
done
sleep 1.5  # more heartbeats: the old epoch must not have come back
assert_eq "up 3 $NEW" "$(node state n1) $(node epoch n1) $(node manager_pid n1)" "n1 still served by the new manager"
assert_eq "$NEW" "$(managers_of n1 "$W")" "exactly one manager process serves n1"
[[ -S $W/icheck/manager-n1.sock ]] && t_pass "socket kept" || t_fail "the superseded manager removed its successor's socket"
$T ictest after 20000 10 5 >"$W/c.out" 2>&1 || t_fail "application after the takeover: $(cat "$W/c.out")"
assert_contains "$(cat "$W/c.out")" "FINAL 2 rdma" "agents started through the new manager's socket"

# ---------------------------------------------------------------- (d) the standby continues
# The standby controller takes over with the node states and epochs of the
# state file: its relaunch gives epoch 4, not a fresh count.
kill -KILL "$(awk '$1 == "controller" {print $2}' "$W/icheck/pids")"
wait_for 10 "standby controller takes over" grep -q '^READY' "$W/icheck/controller-standby.log"
assert_eq "up 3" "$(node state n1) $(node epoch n1)" "standby serves n1's state and epoch"
OLD=$NEW
kill -KILL "$OLD"
wait_for 15 "standby relaunches n1 (epoch 4)" \
  eval '[[ $(node state n1) == up && $(node epoch n1) == 4 && $(node manager_pid n1) != "$OLD" ]]' || dump_logs "$W"
assert_contains "$(cat "$W/icheck/controller-standby.log")" "node n1: relaunching its manager (attempt" "standby log names the relaunch"
NEW=$(node manager_pid n1)
assert_eq "$NEW" "$(managers_of n1 "$W")" "exactly one manager process serves n1"
icheck-down --home "$W"
wait_for 10 "icheck-down stops the relaunched manager and its agents" eval '[[ -z $(managers_of n1 "$W") && -z $(agent_pids "$W") ]]'

# ---------------------------------------------------------------- (b) relaunch fails
W=$T_TMP/b
mkdir -p "$W"
cat >"$W/launch" <<'EOF'
#!/bin/sh
# test launcher: the first call per node starts its manager (icheck-boot); later
# calls (relaunches) fail: n1 at once (exit 1), n2 by hanging without a manager.
node=$1 cfg=$2 mark=$(dirname "$0")/launched-$1
if [ ! -e "$mark" ]; then : >"$mark"; exec icheckd --role manager --node "$node" --config "$cfg"; fi
echo "launch: no manager for $node" >&2
case $node in n1) exit 1 ;; *) while :; do sleep 0.2; done ;; esac
EOF
chmod 700 "$W/launch"
boot "$W" --no-standby --manager-launch "$W/launch {node} {config}" n1 n2
export DYNRES_HOME=$W ICHECK_CONFIG=$W/icheck.yaml
R=$(reference fb 20000 60 5)
$T ictest fb 20000 60 5 --sleep-ms 100 --probe 10 >"$W/b.out" 2>"$W/b.err" &
APP=$!; bg_register "$APP"
wait_for 15 "application commits through agents" grep -q "^COMMIT 5 1 rdma 0" "$W/b.out" || t_fatal "$(cat "$W/b.out" "$W/b.err")"
kill -KILL "$(node manager_pid n1)" "$(node manager_pid n2)"
wait_for 8 "n1 down after 2 failed relaunches" node_is n1 down || dump_logs "$W"
wait_for 12 "n2 down after 2 timed-out relaunches" node_is n2 down || dump_logs "$W"
assert_eq "2 2" "$(node relaunches n1) $(node relaunches n2)" "both nodes used their 2 attempts"
CL=$(cat "$W/icheck/controller.log")
assert_contains "$CL" "node n1: relaunch failed: the launch command" "n1: failure by exit status reported"
assert_contains "$CL" "ended with exit status 1" "n1: exit status named"
assert_contains "$CL" "node n2: relaunch failed: no heartbeat from the new manager within 2 s" "n2: timeout reported"
assert_contains "$CL" "node n1: down (after 2 relaunch attempt(s))" "n1: marked down"
wait_for 5 "hung launchers of n2 killed" no_procs_matching "$W/launch n2"
wait "$APP"; rc=$?
assert_eq 0 "$rc" "application survived with every checkpoint node down ($(tail -2 "$W/b.err"))"
assert_contains "$(cat "$W/b.out")" "FINAL 12 direct" "application fell back to direct writes"
assert_eq "$R" "$(result "$W/b.out")" "result equals the uninterrupted run"
icheck-down --home "$W"
t_done
