#!/usr/bin/env bash
# iCheck gives a borrowed node back on its own once its work ends [John24
# §7.3.1.2, Alg. 8's scale-down side]: no waiting job asks for it.
#   4 nodes, n4 iCheck's boot node (60 MB of checkpoint memory), max_nodes 2,
#   scaler every second, release_after 10 s (vcluster-boot
#   --icheck-release-after); favour icheck, so mjsched reclaims nothing.
#  1. A HIGH request lends n1; the controller is SIGKILLed and the standby
#     takes over; synth (2 processes, 2 agents, placed by free
#     memory: n1 gets at least one) commits there; while its agents hold
#     checkpoint memory on n1, n1 stays iCheck's, also past release_after.
#  2. synth ends (icheck_finalize(0) stops its agents): within release_after +
#     a few scaler passes the (new) controller gives n1 back (ic_release): mjstat -N
#     shows n1 idle, mjstat --history the release, n1's manager stops, and
#     iCheck's node table says removed. n4, the boot node, stays.
#  3. ic_release of a node iCheck does not hold (n2), of its boot node (n4),
#     or without nodes, is refused and changes nothing.
# About 30 s.
. "${DYNRES_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/t/lib.sh"
t_begin 120
t_require mpiexec synth icheckd icagent

C=$T_TMP/cluster
W=$T_TMP/work
mkdir -p "$W"
cd "$W" || t_fatal "cd $W"
boot_cluster "$C" 4 --tick 0.2 --kill-wait 1 --icheck-nodes 1 --icheck-max-nodes 2 --icheck-mem-gb 0.06 \
  --icheck-scaler-interval 1 --icheck-release-after 10
show_logs() {
  echo "--- mjsched.log (tail)" >&2; tail -n 15 "$C/mjsched.log" >&2
  echo "--- controller (tail)" >&2; tail -n 25 "$C/icheck/controller.log" >&2
  echo "--- synth (tail)" >&2; tail -n 10 "$W/synth.out" >&2
}
t_on_fail show_logs
icsched_helpers "$C"
app_agents_on() { sq "$C" "SELECT COUNT(*) FROM icheck_agents g JOIN icheck_apps p ON p.id = g.app_id WHERE p.name = 'idle4270' AND g.node = '$1' AND g.state = 'up'"; }
sed -i 's/^init_agent_count:.*/init_agent_count: 2/; s/^is_dynamic_as:.*/is_dynamic_as: false/' "$C/icheck-dynamic.yaml"

wait_for 15 "the controller's Status reaches mjsched" eval '[[ $(sq "$C" "SELECT status_time IS NOT NULL FROM icheck_link") == 1 ]]'
assert_eq '{"ok":true}' "$(ic '{"op":"ic_request","urgency":"HIGH","nodes":1}')" "HIGH request for 1 node"
wait_for 20 "n1 lent to iCheck, its manager up" eval '[[ $(lent) == "n1:held" && $(icnode n1) == up ]]'
# agents are placed by free memory: wait for n1's first metrics
wait_for 10 "n1's checkpoint memory reported" eval \
  '[[ $(sq "$C" "SELECT json_extract(metrics, '"'"'\$.avail_mem'"'"') > 0 FROM icheck_nodes WHERE node = '"'"'n1'"'"'") == 1 ]]'
MPID=$(sq "$C" "SELECT pid FROM icheck_nodes WHERE node = 'n1'")
# the controller fails over while n1 is lent (before the application starts:
# an application that ends while no controller answers leaves its agents
# recorded): the standby that takes over counts iCheck's boot nodes from
# icheck.yaml (n4), not from the nodes it finds (n4 and n1: then it would
# keep n1 as one of its minimum and never give it back)
kill -9 "$(awk '$1 == "controller" {print $2}' "$C/icheck/pids")"
wait_for 20 "the standby takes over" eval 'grep -q "^READY" "$C/icheck/controller-standby.log"' || t_fatal "no takeover"
wait_for 10 "n1's manager heartbeats reach it" eval \
  '[[ $(sq "$C" "SELECT state FROM icheck_nodes WHERE node = '"'"'n1'"'"' AND last_heartbeat > strftime('"'"'%s'"'"','"'"'now'"'"') - 3") == up ]]'

# ---- an application's agent on n1 keeps it -------------------------------------
export ICHECK_CONFIG=$C/icheck.yaml
mpiexec -n 2 synth -s cp_global=3000000 -s cp_interval=2it -s iter_passes=20 -s cp_count=70 -s probe_interval=1 \
  -s app_name=idle4270 -s persist=false >"$W/synth.out" 2>&1 &
SYN=$!
bg_register "$SYN"
wait_for 20 "synth has an agent on n1" eval '(( $(app_agents_on n1) >= 1 ))'
wait_for 20 "synth commits through its agents" eval 'grep -q "^synth: commit .*mode=rdma" "$W/synth.out"'
sleep 11  # past release_after, its agent still there
if pid_alive "$SYN"; then
  assert_eq "n1:held" "$(lent)" "n1 stays iCheck's while an agent holds checkpoint memory there"
else
  t_log "synth ended before release_after passed: the check while it runs is skipped"
fi

# ---- the application ends: n1 goes back by itself --------------------------------
wait "$SYN"
assert_eq 0 "$?" "synth ended normally ($(tail -1 "$W/synth.out"))"
T0=$(date +%s.%N)
wait_for 30 "n1 back in the batch pool" eval '[[ -z $(lent) ]]'
T1=$(date +%s.%N)
t_log "n1 given back $(awk -v a="$T0" -v b="$T1" 'BEGIN{printf "%.1f", b-a}') s after synth ended (release_after 10 s)"
assert_eq 0 "$(count_jobs "$C")" "no job asked for it"
t_run mjstat -N
assert_match 'n1 +idle ' "$T_OUT" "mjstat -N: n1 is idle"
assert_match 'n4 +icheck +- +- ' "$T_OUT" "mjstat -N: n4, iCheck's boot node, stays"
t_run mjstat --history
assert_match 'node_released +n1' "$T_OUT" "mjstat --history: the release"
EV=$(sq "$C" "SELECT group_concat(kind, ' ') FROM (SELECT kind FROM events WHERE kind LIKE 'icheck%' ORDER BY id)")
assert_eq "icheck_request icheck_grant icheck_node_up icheck_node_released" "$EV" "events in order: no reclaim"
assert_eq removed "$(icnode n1)" "iCheck's node table: n1 removed"
assert_eq up "$(icnode n4)" "iCheck's node table: n4 up"
assert_contains "$(cat "$C/icheck/controller-standby.log")" "giving back idle node n1" "the controller that took over logged why"
wait_for 10 "n1's manager stopped (superseded)" pids_gone "$MPID"
assert_eq 1 "$(sq "$C" "SELECT COUNT(*) FROM icheck_lent_history WHERE node = 'n1' AND end_time IS NOT NULL")" \
  "the lending ends in the Gantt history"

# ---- bad input --------------------------------------------------------------------
E=$(sq "$C" "SELECT COUNT(*) FROM events")
assert_contains "$(ic '{"op":"ic_release","nodes":["n2"]}')" "node n2 is not lent to iCheck" "ic_release of a node not lent: refused"
assert_contains "$(ic '{"op":"ic_release","nodes":["n4"]}')" "node n4 is not lent to iCheck" "ic_release of the boot node: refused"
assert_contains "$(ic '{"op":"ic_release","nodes":[]}')" "nodes must be a non-empty array" "ic_release without nodes: refused"
assert_contains "$(ic '{"op":"ic_release","nodes":["../x"]}')" "a node name must be" "ic_release of a bad name: refused"
assert_eq "$E" "$(sq "$C" "SELECT COUNT(*) FROM events")" "the refusals recorded nothing"
assert_eq "" "$(lent)" "the refusals lent nothing"
t_done
