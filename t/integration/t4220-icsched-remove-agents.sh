#!/usr/bin/env bash
# REMOVE_NODES of a node that holds agents [John24 Alg. 9 lines 1-16]: the
# controller fences the agents there, has the whole set write its newest
# version to the second level, starts replacements on the other node, stops
# the fenced agents and only then gives the node back. An application keeps
# committing through it all.
#   4 nodes (n4 iCheck's boot node); a HIGH request lends n1 to iCheck; synth
#   (2 processes, 2 agents: one on n1, one on n4) commits every iteration;
#   favour applications and a waiting 3-node job make mjsched reclaim n1.
#   1. n1 goes back to the pool only after the agent moved: the controller
#      logs the version it made durable, no agent of the application is up
#      on n1, the 3-node job runs on n1-n3.
#   2. synth never sees a failed commit (it would stop), its versions are
#      consecutive, and it reconnects to the replacement agents; then it is
#      killed (SIGKILL).
#   3. Every version on the second level (the newest 20) passes icredist verify; a restart
#      on 3 processes finds the newest committed version (or a newer one)
#      and ends with the checksum of an uninterrupted run.
# About 35 s.
. "${DYNRES_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/t/lib.sh"
t_begin 240
t_require python3 mpiexec synth icheckd icagent icredist

C=$T_TMP/cluster
W=$T_TMP/work
mkdir -p "$W"
cd "$W" || t_fatal "cd $W"
boot_cluster "$C" 4 --icheck-nodes 1 --tick 0.2 --kill-wait 1 --policy easy
show_logs() {
  echo "--- mjsched.log (tail)" >&2; tail -n 15 "$C/mjsched.log" >&2
  echo "--- controller (tail)" >&2; tail -n 25 "$C/icheck/controller-sched.log" >&2
  echo "--- synth (tail)" >&2; tail -n 15 "$W/synth.out" >&2
}
t_on_fail show_logs
icsched_helpers "$C"
app_agents_on() { sq "$C" "SELECT COUNT(*) FROM icheck_agents g JOIN icheck_apps p ON p.id = g.app_id WHERE p.name = 'mover4220' AND g.node = '$1' AND g.state = 'up'"; }

# the controllers icheck-boot started know no scheduler: replace them
OLD=$(awk '$1 == "controller" || $1 == "standby" {print $2}' "$C/icheck/pids")
[[ -n $OLD ]] || t_fatal "no controller pids in $C/icheck/pids"
# shellcheck disable=SC2086
kill $OLD 2>/dev/null
# shellcheck disable=SC2086
wait_for 10 "icheck-boot's controllers stopped" pids_gone $OLD
printf 'scheduler:\n  socket: %s\n  scaler_interval: 2\n  max_nodes: 2\n  release_after: 0\n' "$C/mjsched.sock" >>"$C/icheck.yaml"
sed -i 's/^init_agent_count:.*/init_agent_count: 2/; s/^is_dynamic_as:.*/is_dynamic_as: false/;
        s/^keep_versions:.*/keep_versions: 20/' "$C/icheck-dynamic.yaml"
"$DYNRES_BIN/icheckd" --role controller --config "$C/icheck.yaml" >>"$C/icheck/controller-sched.log" 2>&1 &
CTL=$!
bg_register "$CTL"
echo "controller-sched $CTL" >>"$C/icheck/pids"
wait_for 15 "the controller's Status reaches mjsched" eval '[[ $(sq "$C" "SELECT status_time IS NOT NULL FROM icheck_link") == 1 ]]'
assert_eq '{"ok":true}' "$(ic '{"op":"ic_request","urgency":"HIGH","nodes":1}')" "HIGH request for 1 node"
wait_for 20 "n1 lent to iCheck, its manager up" eval '[[ $(lent) == "n1:held" && $(icnode n1) == up ]]'

# ---- the application commits, one agent on n1 -------------------------------
export ICHECK_CONFIG=$C/icheck.yaml
S=(-s cp_global=65536 -s cp_interval=1it -s iter_passes=10 -s probe_interval=1 -s app_name=mover4220 -s persist=true)
commits() { grep -c '^synth: commit' "$W/synth.out"; }
mpiexec -n 2 synth "${S[@]}" -s cp_count=1000000 >"$W/synth.out" 2>&1 &
SYN=$!
bg_register "$SYN"
wait_for 30 "synth's agents on n1 and n4" eval '[[ $(app_agents_on n1) == 1 && $(app_agents_on n4) == 1 ]]'
wait_for 20 "a few commits" eval '[[ $(grep -c "^synth: commit" "$W/synth.out") -ge 3 ]]'

# ---- favour applications: n1 reclaimed for a 3-node job ----------------------
sched_restart_with "scheduler:" $'  icheck:\n    favour: applications' "favour applications"
write_script "$W/w3.sh" '#!/bin/bash' '#SBATCH -N 3' '#SBATCH -t 1' '#SBATCH -o w3.out' 'echo "ran on $MJ_JOB_NODELIST"'
t_run mjsub --parsable w3.sh
J=$T_OUT
wait_state 40 "$C" "$J" COMPLETED
assert_eq "ran on n[1-3]" "$(cat "$W/w3.out" 2>/dev/null)" "the job ran on the node iCheck gave back"
assert_eq removed "$(icnode n1)" "n1 left iCheck"
LOG=$(cat "$C/icheck/controller-sched.log")
assert_match "application [0-9]+: version [0-9]+ durable; moving 1 agent\(s\) off n1" "$LOG" "the newest version was durable before the agent moved"
assert_eq 0 "$(app_agents_on n1)" "no agent of the application is up on n1"
assert_eq 2 "$(app_agents_on n4)" "the replacement agent runs on n4"
assert_contains "$(sq "$C" "SELECT group_concat(kind, ' ') FROM events WHERE kind LIKE 'icheck%'")" \
  "icheck_reclaim icheck_node_returned" "the scheduler recorded the node's return"

# ---- the application never saw a failed commit -------------------------------
n0=$(commits)
wait_for 60 "3 more commits, the last through the new agents" eval \
  '[[ $(commits) -ge $((n0 + 3)) && $(grep "^synth: commit" "$W/synth.out" | tail -1) == *mode=rdma* ]]'
pid_alive "$SYN" || t_fatal "synth stopped: $(tail -5 "$W/synth.out")"
# stop it hard: what it committed must all be there
for p in $(procs_matching "app_name=mover4220"); do [[ $(cat "/proc/$p/comm" 2>/dev/null) == synth ]] && kill -9 "$p"; done
wait "$SYN"
O=$(cat "$W/synth.out")
assert_not_contains "$O" "icheck_commit failed" "no commit failed"
V=$(sed -n 's/^synth: commit iteration=[0-9]* version=\([0-9]*\).*/\1/p' "$W/synth.out" | tail -1)
vs=$(sed -n 's/^synth: commit iteration=[0-9]* version=\([0-9]*\).*/\1/p' "$W/synth.out" | tr '\n' ' ')
assert_eq "$(seq -s ' ' 1 "$V") " "$vs" "versions 1..$V committed in order (none lost or repeated)"

# ---- every version on the second level verifies; restart from the newest -----
PFS=$(sed -n 's/^pfs_dir: *//p' "$C/icheck.yaml")
t_run icredist --pfs-dir "$PFS" verify mover4220
assert_eq 0 "$T_RC" "icredist verify: every second-level version of mover is intact ($T_OUT $T_ERR)"
I=$(sed -n 's/^synth: commit iteration=\([0-9]*\).*/\1/p' "$W/synth.out" | tail -1)
N=$((I + 10))
timeout 60 mpiexec -n 3 synth "${S[@]}" -s cp_count=$N -s probe_interval=0 >"$W/restart.out" 2>&1 ||
  t_fatal "restart: $(tail -5 "$W/restart.out")"
R=$(sed -n 's/^synth: restart version=\([0-9]*\).*from_ranks=2 ranks=3.*/\1/p' "$W/restart.out")
[[ -n $R ]] || t_fatal "3 processes did not restart from 2 processes' version: $(cat "$W/restart.out")"
assert_le "$V" "$R" "the restart found version $R, the newest committed ($V) or newer"
ref=$(synth -s cp_global=65536 -s cp_count=$N -s iter_passes=10 -s enable_ichk=false -q | sed -n 's/^synth: checksum=\([0-9a-f]*\).*/\1/p')
assert_eq "$ref" "$(sed -n 's/^synth: checksum=\([0-9a-f]*\).*/\1/p' "$W/restart.out")" "the restart ends with the uninterrupted checksum"
t_done
