#!/usr/bin/env bash
# iCheck with controller + managers [John24 §6.1.2, §6.5, §7.1]: register,
# agents placed by the controller, restart from agent memory, manager stops
# heartbeating -> node down -> new agents at the next probe, controller
# unreachable at init -> direct second-level writes, standby controller takes
# over with the metadata of the state file.
. "${DYNRES_SRC:-$(dirname "$0")/../..}/t/lib.sh"
t_begin 240
t_require icheckd ictest
SRC=$DYNRES_SRC
W=$T_TMP
export DYNRES_HOME=$W
unset ICHECK_CONFIG ICHECK_TRANSFER
STOPPED=()
stop_icheck() { for p in "${STOPPED[@]}"; do kill -CONT "$p" 2>/dev/null; done; "$SRC/share/dynres/icheck-down" --home "$W"; }
t_on_exit stop_icheck
show_logs() { for f in "$W"/icheck/*.log; do echo "== $f"; tail -5 "$f"; done; }
t_on_fail show_logs
T="timeout 60"
status() { icheckd --status --config "$W/icheck.yaml"; }
pid_of() { awk -v n="$1" '$1==n {print $2}' "$W/icheck/pids"; }
result() { grep '^RESULT' "$1" | awk '{print $2}'; }

# relaunch disabled: (b) checks a lost node goes down (relaunch: t4070-icheck-manager-relaunch.sh)
timeout 30 "$SRC/share/dynres/icheck-boot" --home "$W" --heartbeat 1 --misses 2 --no-relaunch n1 n2 >/dev/null || t_fatal "boot"
export ICHECK_CONFIG=$W/icheck.yaml

# (a) register, commit through agents, restart from agent memory
$T ictest svc 50000 20 5 --persist >"$W/a1" || t_fatal "first run"
grep -q "FINAL 4 rdma" "$W/a1" || t_fatal "not rdma: $(cat $W/a1)"
status | grep -q '"version": 4' || t_fatal "controller did not record version 4"
$T ictest svc 50000 40 5 --persist >"$W/a2" || t_fatal "restart run"
grep -q "RESTORED 20 4" "$W/a2" || t_fatal "restart: $(cat $W/a2)"
printf 'direct: true\npfs_dir: %s/ref\n' "$W" >"$W/direct.yaml"
$T ictest ref 50000 40 5 --config "$W/direct.yaml" >"$W/ref.out" || t_fatal "reference"
[ "$(result $W/a2)" = "$(result $W/ref.out)" ] || t_fatal "restarted result differs"
t_pass "register, restart from agent memory"

# (b) the manager of the node holding the agent stops heartbeating
NODE=$(status | python3 -c 'import json,sys; d=json.load(sys.stdin); print([a for a in d["apps"] if a["name"]=="svc"][0]["agents"][0]["node"])')
MPID=$(pid_of "manager-$NODE")
kill -STOP "$MPID"; STOPPED+=("$MPID")
for _ in $(seq 50); do status | python3 -c "import json,sys; d=json.load(sys.stdin); sys.exit(0 if [n for n in d['nodes'] if n['node']=='$NODE' and n['state']=='down'] else 1)" && break; sleep 0.2; done
status | grep -q '"needs_change": true' || t_fatal "node $NODE not marked down / app not flagged"
$T ictest svc 50000 50 5 --probe 45 --persist >"$W/b1" || t_fatal "probe run"
grep -q "PROBE 45 rdma 0" "$W/b1" || t_fatal "probe did not give new agents: $(cat $W/b1)"
NEW=$(status | python3 -c 'import json,sys; d=json.load(sys.stdin); print(" ".join(a["node"] for a in [x for x in d["apps"] if x["name"]=="svc"][0]["agents"]))')
case " $NEW " in *" $NODE "*) t_fatal "agents still on the down node ($NEW)";; esac
kill -CONT "$MPID"; STOPPED=()
t_pass "node down -> new agents on $NEW"

# (c) controller unreachable at init -> direct writes, app carries on
printf 'controller: unix:%s/nowhere.sock\nconnect_retries: 2\nconnect_timeout_ms: 200\npfs_dir: %s/pfs\n' "$W" "$W" >"$W/dead.yaml"
$T ictest lonely 20000 10 5 --config "$W/dead.yaml" >"$W/c1" || t_fatal "app failed without controller"
grep -q "FINAL 2 direct" "$W/c1" || t_fatal "no direct fallback: $(cat $W/c1)"
$T ictest lonely 20000 20 5 --config "$W/dead.yaml" >"$W/c2" || t_fatal "restart without controller"
grep -q "RESTORED 10 2" "$W/c2" || t_fatal "direct restart: $(cat $W/c2)"
t_pass "controller unreachable: direct writes"

# (d) primary controller stops; the standby takes over with the same metadata
kill -TERM "$(pid_of controller)"
for _ in $(seq 80); do grep -q READY "$W/icheck/controller-standby.log" && break; sleep 0.1; done
grep -q READY "$W/icheck/controller-standby.log" || t_fatal "standby did not take over"
sleep 1.5  # managers' next heartbeat reaches the standby
status | grep -q '"name": "svc"' || t_fatal "standby lost the metadata"
$T ictest after 20000 10 5 >"$W/d1" || t_fatal "app after takeover"
grep -q "FINAL 2 rdma" "$W/d1" || t_fatal "not rdma after takeover: $(cat $W/d1)"
t_pass "standby takeover"
t_done
