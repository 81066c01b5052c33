#!/usr/bin/env bash
# APP_INFO [John24 §7.3.1.1, Alg. 9 lines 40-42]: before mjsched orders a job
# registered with iCheck to resize, it tells the controller, which prepares
# the job's new agent layout (MA-MA) before the job asks.
#   heat --malleable (one rank per node, 4 nodes, MA-MA with 4 agents) on a
#   local virtual cluster of 4 compute nodes and 1 iCheck node; the
#   controller speaks to mjsched (Status every 0.5 s, with the applications
#   by batch job).
#   1. mjsched learns that the job is iCheck's (icheck_link.apps).
#   2. Shrink 4 -> 2: an APP_INFO (event icheck_app_info) goes out before
#      the order and is answered (icheck_app_info_done); the job then holds
#      2 agents.
#   3. Grow 2 -> 3 with the job's processes stopped: the controller prepares
#      the third agent from the APP_INFO alone; the job, resumed, takes it at
#      its registration; it ends with the fixed-size checksum.
#   4. Bad input: an APP_INFO for an unknown job (refused, logged, nothing
#      of iCheck changes), fields out of range, an answer to no APP_INFO, a
#      Status with a bad application entry: each refused with its reason.
# About 35 s.
. "${DYNRES_SRC:-$(dirname "$0")/../..}/t/lib.sh"
t_begin 180
command -v mpiexec >/dev/null || t_skip "mpiexec (Debian package mpich) is not installed"
for t in heat icheckd icagent mjcontrol; do [[ -x $DYNRES_BIN/$t ]] || t_skip "$DYNRES_BIN/$t is not built"; done
[[ $(ldd "$DYNRES_BIN/heat") == *libmj* ]] || t_skip "heat is built without libmj"

C=$T_TMP/c
W=$T_TMP/work
mkdir -p "$W"
cd "$W" || t_fatal "cd $W"
boot_cluster "$C" 5 --tick 0.2 --kill-wait 1 --icheck-nodes 1 --resize-timeout 30
show_logs() {
  echo "--- mjsched.log (tail)" >&2; tail -n 15 "$C/mjsched.log" >&2
  echo "--- controller (tail)" >&2; tail -n 25 "$C/icheck/controller-sched.log" >&2
}
t_on_fail show_logs
icsched_helpers "$C"
ctl() { "$DYNRES_SRC/t/frame-request" "$C/icheck/controller.sock" "$1"; }
heat_agents() { sq "$C" "SELECT COUNT(*) FROM icheck_agents g JOIN icheck_apps p ON p.id = g.app_id WHERE p.name = 'heat-$J' AND g.state = '${1:-up}'"; }
icheck_digest() { sq "$C" "SELECT id, app_id, node, state FROM icheck_agents ORDER BY id; SELECT id, num_agents, prepared, needs_change FROM icheck_apps ORDER BY id" | md5sum; }

# the controllers icheck-boot started know no scheduler: replace them
OLD=$(awk '$1 == "controller" || $1 == "standby" {print $2}' "$C/icheck/pids")
[[ -n $OLD ]] || t_fatal "no controller pids in $C/icheck/pids"
# shellcheck disable=SC2086
kill $OLD 2>/dev/null
# shellcheck disable=SC2086
wait_for 10 "icheck-boot's controllers stopped" pids_gone $OLD
sed -i 's/^status_interval:.*/status_interval: 0.5/' "$C/icheck.yaml"
printf 'scheduler:\n  socket: %s\n  scaler_interval: 5\nmalleability:\n  applications:\n    "heat-*": ma-ma\n' "$C/mjsched.sock" >>"$C/icheck.yaml"
sed -i 's/^init_agent_count:.*/init_agent_count: 4/; s/^is_dynamic_as:.*/is_dynamic_as: false/' "$C/icheck-dynamic.yaml"
"$DYNRES_BIN/icheckd" --role controller --config "$C/icheck.yaml" >>"$C/icheck/controller-sched.log" 2>&1 &
CTL=$!
bg_register "$CTL"
echo "controller-sched $CTL" >>"$C/icheck/pids"
wait_for 15 "the controller's Status reaches mjsched" eval '[[ $(sq "$C" "SELECT status_time IS NOT NULL FROM icheck_link") == 1 ]]'

out() { cat "$W/heat-$1.out" 2>/dev/null; }
registered_times() { [[ $(out "$1" | grep -c '^heat: malleable job=') -ge $2 && $(sq "$C" "SELECT phase FROM mj_jobs WHERE job_id=$1") == accepting ]]; }
ck() { sed -n 's/^heat: checksum=\([0-9a-f]*\).*/\1/p' | tail -1; }
ARGS=(--nx 96 --ny 90 --iters 240 --iter-seconds 0.05 --print-every 40 --ckpt-every 20)
ref=$("$DYNRES_BIN/heat" --nx 96 --ny 90 --iters 240 --no-icheck | ck)
J=$(HEAT=$DYNRES_BIN/heat mjsub --parsable -o "$W/heat-%j.out" \
  "$DYNRES_SRC/share/dynres/examples/heat/heat-malleable.sh" "${ARGS[@]}") || t_fatal "mjsub failed"
wait_state 15 "$C" "$J" RUNNING
wait_for 30 "heat registered as malleable" registered_times "$J" 1
assert_eq 4 "$(heat_agents)" "MA-MA 1:1: heat's 4 processes have 4 agents"

# ---- 1. mjsched knows the job is iCheck's --------------------------------------
wait_for 10 "mjsched learned the job's application" eval \
  '[[ $(sq "$C" "SELECT apps FROM icheck_link") == *"\"job\":$J"* ]]'

# ---- 2. shrink 4 -> 2: APP_INFO first -------------------------------------------
t_run mjcontrol resize "$J" 2 --wait 40
assert_eq 0 "$T_RC" "shrink 4 -> 2 committed ($T_OUT $T_ERR)"
EV=$(sq "$C" "SELECT group_concat(kind, ' ') FROM (SELECT kind FROM events WHERE job_id = $J AND kind IN ('icheck_app_info','resize_order') ORDER BY id)")
assert_eq "icheck_app_info resize_order" "$EV" "the APP_INFO was queued before the order"
wait_for 10 "the controller answered the APP_INFO" eval \
  '[[ $(sq "$C" "SELECT state FROM icheck_app_info WHERE job_id = $J ORDER BY change_id LIMIT 1") == done ]]'
wait_for 30 "heat registered again after the shrink" registered_times "$J" 2
assert_eq 2 "$(heat_agents)" "2 processes, 2 agents"

# ---- 3. grow 2 -> 3: the controller prepares the agent before heat asks -------
wait_for 30 "the retired agents stopped" eval '[[ $(heat_agents retiring) == 0 ]]'
PIDS=$(for p in $(procs_of_cluster "$C" "$DYNRES_BIN/heat"); do [[ $(cat "/proc/$p/comm" 2>/dev/null) == heat ]] && echo "$p"; done)
[[ -n $PIDS ]] || t_fatal "no heat process found"
# shellcheck disable=SC2086
kill -STOP $PIDS
mjcontrol resize "$J" 3 --wait 60 >"$W/resize3.log" 2>&1 &
RZ=$!
bg_register "$RZ"
wait_for 20 "the controller prepared an agent from the APP_INFO alone" eval \
  'grep -qE "APP_INFO job $J \(application [0-9]+, ma-ma\): 2 -> 3 nodes, agents 2 -> 3, 1 prepared" "$C/icheck/controller-sched.log"'
assert_eq 1 "$(heat_agents prepared)" "one agent waits for heat (prepared)"
# shellcheck disable=SC2086
kill -CONT $PIDS
wait "$RZ"
assert_eq 0 "$?" "grow 2 -> 3 committed ($(cat "$W/resize3.log"))"
wait_for 30 "heat registered again after the growth" registered_times "$J" 3
assert_contains "$(cat "$C/icheck/controller-sched.log")" "1 agent(s) prepared by APP_INFO taken" "heat took the prepared agent"
assert_eq 3 "$(heat_agents)" "3 processes, 3 agents"
wait_state 60 "$C" "$J" COMPLETED FAILED
assert_eq COMPLETED "$(job_state "$C" "$J")" "the job completed"
assert_eq "$ref" "$(out "$J" | ck)" "shrunk and grown with its agents following, heat ends with the fixed-size checksum"

# ---- 4. bad input -------------------------------------------------------------
before=$(icheck_digest)
A=$(ctl '{"op":"app_info","job":987654,"from":2,"to":4}')
assert_contains "$A" "noent: app_info: no application of job 987654 is registered" "APP_INFO for an unknown job refused"
assert_contains "$(cat "$C/icheck/controller-sched.log")" "APP_INFO refused: no application of job 987654" "and logged"
for bad in '{"op":"app_info","job":0,"from":2,"to":4}' '{"op":"app_info","job":1,"from":2,"to":-1}' \
  '{"op":"app_info","job":1,"from":2,"to":70000}' '{"op":"app_info","job":"1","from":2,"to":4}' '{"op":"app_info","job":1}'; do
  assert_contains "$(ctl "$bad")" '"error":"invalid: app_info' "refused: $bad"
done
assert_eq "$before" "$(icheck_digest)" "nothing of iCheck changed"
A=$(ic '{"op":"ic_response","change":4242,"kind":"APP_INFO","ok":true}')
assert_contains "$A" "no pending APP_INFO change 4242" "an answer to no APP_INFO is refused"
A=$(ic '{"op":"ic_status","nodes":[],"min_nodes":1,"max_nodes":1,"fixed_nodes":1,"apps":[{"job":1,"agents":2,"mode":"rigid"}]}')
assert_contains "$A" "mode must be ma-ra or ma-ma" "a Status with a bad application entry is refused"
A=$(ic '{"op":"ic_status","nodes":[],"min_nodes":1,"max_nodes":1,"fixed_nodes":1,"apps":[{"job":-3,"agents":2,"mode":"ma-ma"}]}')
assert_contains "$A" "job id in [1, 2^62]" "a Status with a bad job id is refused"
t_done
