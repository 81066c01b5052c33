#!/usr/bin/env bash
# ctest-cost: 20
# SIGKILL in the middle of the iCheck <-> scheduler exchange [John24 §7.3.1]:
# 5 local nodes, n5 iCheck's boot node (max_nodes 2: one borrowed node at a
# time), favour icheck, a synth application committing versions to an agent
# on n5 all along.
#
# Each cycle lends a node (a HIGH request from the test: the memory trigger
# needs checkpoint traffic) and takes it back for a waiting 4-node job (no
# request pending, iCheck's memory mostly free). Kills rotate through
#   controller during NEW_NODES, mjsched during REMOVE_NODES,
#   the new node's manager during NEW_NODES, controller during REMOVE_NODES,
#   mjsched during NEW_NODES, the node's manager during REMOVE_NODES
# (ICSCHED_KILLS kills, default 3; bench/icsched/kill_campaign.sh runs 20).
# The killed daemon is restarted (the manager by the controller's relaunch).
# After each recovery: no node is both a job's and iCheck's, every node the
# scheduler lends is one iCheck runs a manager on and no other, and the
# exchange settles (no change left unanswered). At the end the application
# is SIGKILLed and rerun: it restarts from its last committed version (none
# lost). Prints "kills N lost_versions V double_owned D unowned U" for the
# campaign. About 30 s for 3 kills.
. "${DYNRES_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/t/lib.sh"
KILLS=${ICSCHED_KILLS:-3}
t_begin $((60 + 25 * KILLS))
t_require icheckd icagent synth stdbuf

C=$T_TMP/cluster
W=$T_TMP/work
mkdir -p "$W"
cd "$W" || t_fatal "cd $W"
boot_cluster "$C" 5 --tick 0.2 --kill-wait 1 --policy easy --icheck-nodes 1 --icheck-max-nodes 2 --icheck-scaler-interval 1 \
  --icheck-release-after 0  # nodes go back through REMOVE_NODES only
show_logs() {
  echo "--- mjsched.log (tail)" >&2; tail -n 15 "$C/mjsched.log" >&2
  echo "--- controller (tail)" >&2; tail -n 25 "$C/icheck/controller"*.log >&2
  echo "--- lent: $(lent); icheck_nodes: $(sq "$C" "SELECT group_concat(node || ':' || state, ' ') FROM icheck_nodes")" >&2
}
t_on_fail show_logs
icsched_helpers "$C"

# one controller, restarted by the test (the standby would take over only after the lease)
CFG=$C/icheck.yaml
STANDBY=$(awk '$1 == "standby" {print $2}' "$C/icheck/pids")
[[ -n $STANDBY ]] && kill "$STANDBY" 2>/dev/null
ctl_pid() { awk '$1 ~ /^controller/ {p = $2} END {print p}' "$C/icheck/pids"; }
start_controller() {
  "$DYNRES_BIN/icheckd" --role controller --config "$CFG" >>"$C/icheck/controller-t.log" 2>&1 &
  echo "controller-t $!" >>"$C/icheck/pids"
  disown $! 2>/dev/null
}
restart_sched() {
  "$DYNRES_BUILD/bin/mjsched" --home "$C" --daemon >/dev/null 2>&1 || t_fail "mjsched --daemon did not restart"
  wait_for 10 "mjsched back" eval '[[ -S $C/mjsched.sock && -n $(sched_pid "$C") ]]'
}
manager_of() { procs_matching "--role manager --node $1 --config $CFG"; }

# the application: 1 MiB versions, one every few iterations, output unbuffered
APP_OUT=$W/app.out
stdbuf -oL "$DYNRES_BIN/synth" -s cp_size=1MiB -s cp_type=binary -s cp_interval=4it -s cp_count=100000000 \
  -s probe_interval=0 -s persist=true -s app_name=kill-app -s icheck_config="$CFG" -s mpiio_file="$W/m" \
  >"$APP_OUT" 2>&1 &
APP=$!
bg_register "$APP"
wait_for 20 "the application commits to iCheck" eval 'grep -q "^synth: commit .*mode=rdma" "$APP_OUT"' ||
  t_fatal "no commit: $(tail -3 "$APP_OUT")"
wait_for 10 "the controller's Status reaches mjsched" eval '[[ -n $(sq "$C" "SELECT status_time FROM icheck_link") ]]'

write_script "$W/wide.sh" '#!/bin/bash' '#SBATCH -N 4' '#SBATCH -t 1' 'sleep 0.3'
double_owned=0 unowned=0
# settled: no change in flight, every lent node is iCheck's (manager up) and in no job, every
# batch node iCheck's controller runs a manager on is lent to it
settled() {
  [[ -z $(sq "$C" "SELECT 1 FROM icheck_lent WHERE state != 'held'") ]] || return 1
  [[ -z $(sq "$C" "SELECT 1 FROM icheck_lent l JOIN nodes n ON n.id = l.node_id
                   LEFT JOIN icheck_nodes i ON i.node = n.name WHERE IFNULL(i.state, '') != 'up'") ]] || return 1
  [[ -z $(sq "$C" "SELECT 1 FROM icheck_nodes i JOIN nodes n ON n.name = i.node
                   WHERE i.state IN ('up', 'relaunching') AND n.id NOT IN (SELECT node_id FROM icheck_lent)") ]]
}
check_owners() {  # WHAT
  local both nobody
  both=$(sq "$C" "SELECT COUNT(*) FROM icheck_lent l JOIN nodes n ON n.id = l.node_id WHERE n.job_id IS NOT NULL")
  assert_eq 0 "$both" "no node both a job's and iCheck's ($1)"
  double_owned=$((double_owned + both))
  if wait_for 30 "the exchange settles ($1)" settled; then :; else
    nobody=$(sq "$C" "SELECT COUNT(*) FROM icheck_lent WHERE state != 'held'")
    unowned=$((unowned + ${nobody:-1}))
  fi
}

kill_in() {  # WHO PHASE: SIGKILL WHO while the exchange of PHASE (granting|reclaiming) is open
  local who=$1 phase=$2 node p
  node=$(sq "$C" "SELECT n.name FROM icheck_lent l JOIN nodes n ON n.id = l.node_id WHERE l.state = '$phase'")
  [[ -n $node ]] || { t_log "the $phase exchange ended before $who could be killed"; return; }
  case $who in
    controller)
      p=$(ctl_pid)
      kill -9 "$p" 2>/dev/null
      wait_for 10 "controller $p killed" pids_gone "$p"
      start_controller ;;
    mjsched)
      p=$(sched_pid "$C")
      kill -9 "$p"
      wait_for 10 "mjsched $p killed" pids_gone "$p"
      restart_sched ;;
    manager)
      # NEW_NODES: the manager the controller starts on the node (killed as soon as it runs)
      wait_for 15 "a manager runs on $node" eval '[[ -n $(manager_of "$node") ]]' || return
      p=$(manager_of "$node")
      [[ $(lent) == *:$phase* ]] || { t_log "the exchange ended before $node's manager could be killed"; return; }
      # shellcheck disable=SC2086
      kill -9 $p
      ;;
  esac
  KILLED=$((KILLED + 1))
  t_log "kill $KILLED: $who ($p) with $node $phase"
}

kinds=("controller granting" "mjsched reclaiming" "manager granting" "controller reclaiming" "mjsched granting" "manager reclaiming")
KILLED=0
# a cycle whose exchange ends before the kill point (the window is up to a
# status_interval) kills nothing; the next cycle tries the same pair again
for ((k = 0; KILLED < KILLS && k < 3 * KILLS; k++)); do
  read -r who phase <<<"${kinds[KILLED % ${#kinds[@]}]}"
  # -- NEW_NODES
  A=$(ic '{"op":"ic_request","urgency":"HIGH","nodes":1}')
  assert_eq '{"ok":true}' "$A" "HIGH request (cycle $k)"
  wait_for 10 "a node lent (cycle $k)" eval '[[ $(lent) == *:granting* || $(lent) == *:held* ]]'
  if [[ $phase == granting ]]; then
    if [[ $(lent) == *:granting* ]]; then kill_in "$who" granting
    else t_log "cycle $k: NEW_NODES answered before the kill point"; fi
  fi
  check_owners "cycle $k after NEW_NODES"
  # -- REMOVE_NODES: a waiting 4-node job, no request pending
  J=$(mjsub --parsable wide.sh) || t_fatal "mjsub failed"
  wait_for 10 "the lent node reclaimed (cycle $k)" eval '[[ $(lent) == *:reclaiming* || -z $(lent) ]]'
  if [[ $phase == reclaiming ]]; then
    if [[ $(lent) == *:reclaiming* ]]; then kill_in "$who" reclaiming
    else t_log "cycle $k: REMOVE_NODES answered before the kill point"; fi
  fi
  wait_state 30 "$C" "$J" COMPLETED || t_fail "the 4-node job $J did not run after the reclaim (cycle $k)"
  check_owners "cycle $k after REMOVE_NODES"
done
assert_eq "$KILLS" "$KILLED" "daemons killed in the middle of an exchange"

# -- no committed version lost: the application killed and rerun restarts from its last one
LAST=$(sed -n 's/^synth: commit .* version=\([0-9]*\) .*/\1/p' "$APP_OUT" | tail -1)
{ kill -9 "$APP"; wait "$APP"; } 2>/dev/null
wait_for 5 "application killed" pids_gone "$APP"
t_run "$DYNRES_BIN/synth" -s cp_size=1MiB -s cp_type=binary -s cp_interval=4it -s cp_count=1 \
  -s probe_interval=0 -s persist=false -s app_name=kill-app -s icheck_config="$CFG" -s mpiio_file="$W/m"
R=$(sed -n 's/^synth: restart version=\([0-9]*\) .*/\1/p' <<<"$T_OUT")
lost=0
if [[ -z $R || -z $LAST ]] || ((R < LAST)); then
  lost=$((LAST - ${R:-0}))
  t_fail "restart version '$R' is older than the last committed version $LAST: $T_OUT $T_ERR"
else
  t_pass "restart from version $R >= last committed $LAST"
fi
check_allocations_disjoint "$C"
t_log "kills $KILLED lost_versions $lost double_owned $double_owned unowned $unowned"
t_done
