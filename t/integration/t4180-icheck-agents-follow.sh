#!/usr/bin/env bash
# Agents that follow a resized job [John24 §7.2, Alg. 7]: synth (one global
# array, BLOCK over the ranks, cp_global) is run again and again with another
# process count, each run restarting from the last one's version in agent
# memory; icheck.yaml's malleability: section selects the mode per
# application. The second level is off (enable_multi_level: false), so every
# restore comes from agent memory or not at all.
#   1. MA-MA (1:1): 1 -> 4 -> 8 -> 2 processes; the application's agents
#      number 1, 4, 8, 2; the 8 -> 2 restore reads the old ranks' pieces from
#      the 6 agents the shrink retired (readers); they stop once a newer
#      version is committed.
#   2. MA-RA (init_agent_count 2): 4 -> 8 -> 2 processes, always 2 agents.
#   3. Every run ends with the checksum of an uninterrupted run of as many
#      iterations (versions intact across every resize).
#   4. The N:M rule: MA-MA with 2 initial agents for 3 processes is refused
#      at icheck_init with the reason, and nothing is registered.
# About 30 s.
. "${DYNRES_SRC:-$(dirname "$0")/../..}/t/lib.sh"
t_begin 180
t_require mpiexec synth icheckd icagent
W=$T_TMP
export DYNRES_HOME=$W
unset ICHECK_TRANSFER ICHECK_STRATEGY
stop_icheck() { "$DYNRES_SRC/share/dynres/icheck-down" --home "$W" >/dev/null 2>&1; }
t_on_exit stop_icheck
show_logs() { for f in "$W"/icheck/*.log; do echo "== $f"; tail -8 "$f"; done >&2; }
t_on_fail show_logs
timeout 30 "$DYNRES_SRC/share/dynres/icheck-boot" --home "$W" --no-standby --heartbeat 1 n1 n2 >/dev/null ||
  t_fatal "icheck-boot failed"
export ICHECK_CONFIG=$W/icheck.yaml

# The controller icheck-boot started read icheck.yaml before the malleability
# section existed: replace it.
OLD=$(awk '$1 == "controller" {print $2}' "$W/icheck/pids")
[[ -n $OLD ]] || t_fatal "no controller pid in $W/icheck/pids"
kill "$OLD"
wait_for 10 "icheck-boot's controller stopped" pids_gone "$OLD"
printf 'malleability:\n  agents: ma-ra\n  applications:\n    grow: ma-ma\n    nm: ma-ma\n' >>"$W/icheck.yaml"
sed -i 's/^init_agent_count:.*/init_agent_count: 2/; s/^is_dynamic_as:.*/is_dynamic_as: false/;
        s/^enable_multi_level:.*/enable_multi_level: false/' "$W/icheck-dynamic.yaml"
icheckd --role controller --config "$W/icheck.yaml" >>"$W/icheck/controller.log" 2>&1 &
CTL=$!
bg_register "$CTL"
echo "controller $CTL" >>"$W/icheck/pids"
wait_for 15 "the new controller answers" eval 'icheckd --status --config "$W/icheck.yaml" >/dev/null 2>&1'

S=(-s cp_global=262144 -s cp_interval=5it -s probe_interval=0 -s persist=true)
agents() {  # APP [STATE]: agents of APP in STATE (default up) in the state file
  sq "$W" "SELECT COUNT(*) FROM icheck_agents g JOIN icheck_apps p ON p.id = g.app_id WHERE p.name = '$1' AND g.state = '${2:-up}'"
}
ck() { sed -n 's/^synth: checksum=\([0-9a-f]*\).*/\1/p' "$1"; }
declare -A REF
for it in 10 20 30 40; do
  synth -s cp_global=262144 -s cp_count=$it -s enable_ichk=false -q >"$W/ref$it" || t_fatal "reference run"
  REF[$it]=$(ck "$W/ref$it")
done
# run APP NPROCS ITERATIONS FROM_RANKS AGENTS
run() {
  local out=$W/$1-$2-$3
  timeout 60 mpiexec -n "$2" synth "${S[@]}" -s app_name="$1" -s cp_count="$3" >"$out" 2>&1 ||
    t_fatal "$1 on $2 processes failed: $(tail -5 "$out")"
  grep -q 'icheck_init mode=rdma' "$out" || t_fatal "$1 on $2: not through agents: $(cat "$out")"
  [[ $4 == 0 ]] || assert_match "restart version=[0-9]+ iteration=$(($3 - 10)) seconds=[0-9.]+ from_ranks=$4 ranks=$2" \
    "$(cat "$out")" "$1: $2 processes restored the $4 processes' version from agent memory"
  assert_eq "${REF[$3]}" "$(ck "$out")" "$1 on $2 processes: the checksum of an uninterrupted $3-iteration run"
  assert_eq "$5" "$(agents "$1")" "$1 on $2 processes: $5 agent(s)"
}

# ---- 1. MA-MA: the agents follow the job 1 -> 4 -> 8 -> 2 -------------------
run grow 1 10 0 1
run grow 4 20 1 4
run grow 8 30 4 8
run grow 2 40 8 2
assert_contains "$(cat "$W/icheck/controller.log")" "(MA-MA): 8 -> 2 processes, agents 8 -> 2" "the controller logged the MA-MA shrink"
# the 6 retired agents served the restore (no second level), then stopped
# once version 8 was committed
wait_for 15 "the retired agents stopped" eval '[[ $(agents grow retiring) == 0 ]]'
assert_eq 6 "$(agents grow stopped)" "the shrink retired 6 agents, stopped after the newer version"

# ---- 2. MA-RA: the agent count stays ----------------------------------------
run rigid 4 10 0 2
run rigid 8 20 4 2
run rigid 2 30 8 2
assert_contains "$(cat "$W/icheck/controller.log")" "(MA-RA): 8 -> 2 processes, agents 2 -> 2" "the controller logged MA-RA"

# ---- 4. the N:M rule of MA-MA -------------------------------------------------
if timeout 60 mpiexec -n 3 synth "${S[@]}" -s app_name=nm -s cp_count=10 >"$W/nm.out" 2>&1; then
  t_fail "MA-MA with 2 agents for 3 processes was accepted: $(cat "$W/nm.out")"
fi
assert_contains "$(cat "$W/nm.out")" "not a multiple of 2 agents" "icheck_init names the N:M problem"
assert_eq 0 "$(sq "$W" "SELECT COUNT(*) FROM icheck_apps WHERE name = 'nm'")" "the refused application was not registered"
t_done
