#!/usr/bin/env bash
# mjsched backs off while iCheck's controller refuses to give a node back
# (REMOVE_NODES refused: its agents' newest version cannot be made durable),
# instead of asking again at every Status [John24 Alg. 9 lines 1-16].
#   4 nodes, n4 iCheck's boot node, max_nodes 2, favour applications, Status
#   every 0.5 s, release_after 0 (iCheck gives nothing back on its own);
#   dynres.yaml scheduler.icheck.reclaim_backoff 0.5, reclaim_backoff_max 30.
#  1. n1 is lent; synth (2 agents, one on n1) commits; its second-level
#     directory is made unusable (a file in its place), it commits two more
#     versions (to its agents' memory only) and is SIGKILLed: its newest
#     version cannot be made durable, so n1 cannot be given back.
#  2. A waiting 3-node job makes mjsched reclaim n1; the controller refuses:
#     over 10 s after the first refusal at most 6 REMOVE_NODES go out (at
#     every Status it would be ~14), at least 2; mjsched and the controller
#     log the refusal once, not at every retry; n1 stays iCheck's.
#  3. The job is cancelled: the back-off ends with it (logged), and a new
#     3-node job makes mjsched ask at once, not when the old back-off ends.
# About 35 s.
. "${DYNRES_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/t/lib.sh"
t_begin 150
t_require python3 mpiexec synth icheckd icagent

C=$T_TMP/cluster
W=$T_TMP/work
mkdir -p "$W"
cd "$W" || t_fatal "cd $W"
boot_cluster "$C" 4 --icheck-nodes 1 --icheck-max-nodes 2 --icheck-favour applications --icheck-release-after 0 \
  --tick 0.2 --kill-wait 1 --policy easy
show_logs() {
  echo "--- mjsched.log (tail)" >&2; tail -n 15 "$C/mjsched.log" >&2
  echo "--- controller (tail)" >&2; tail -n 25 "$C/icheck/controller-sched.log" >&2
}
t_on_fail show_logs
icsched_helpers "$C"
app_agents_on() { sq "$C" "SELECT COUNT(*) FROM icheck_agents g JOIN icheck_apps p ON p.id = g.app_id WHERE p.name = 'back4271' AND g.node = '$1' AND g.state = 'up'"; }
reclaims() { sq "$C" "SELECT COUNT(*) FROM events WHERE kind = 'icheck_reclaim' $1"; }

# the Status every 0.5 s (the retry rate without back-off); scheduler back-off 0.5 s .. 30 s
OLD=$(awk '$1 == "controller" || $1 == "standby" {print $2}' "$C/icheck/pids")
[[ -n $OLD ]] || t_fatal "no controller pids in $C/icheck/pids"
# shellcheck disable=SC2086
kill $OLD 2>/dev/null
# shellcheck disable=SC2086
wait_for 10 "icheck-boot's controllers stopped" pids_gone $OLD
sed -i 's/^status_interval:.*/status_interval: 0.5/' "$C/icheck.yaml"
sed -i 's/^init_agent_count:.*/init_agent_count: 2/; s/^is_dynamic_as:.*/is_dynamic_as: false/' "$C/icheck-dynamic.yaml"
"$DYNRES_BIN/icheckd" --role controller --config "$C/icheck.yaml" >>"$C/icheck/controller-sched.log" 2>&1 &
CTL=$!
bg_register "$CTL"
echo "controller-sched $CTL" >>"$C/icheck/pids"
sched_restart_with "  icheck:" $'    reclaim_backoff: 0.5\n    reclaim_backoff_max: 30' "the back-off settings"
wait_for 15 "the controller's Status reaches mjsched" eval '[[ $(sq "$C" "SELECT status_time IS NOT NULL FROM icheck_link") == 1 ]]'
assert_eq '{"ok":true}' "$(ic '{"op":"ic_request","urgency":"HIGH","nodes":1}')" "HIGH request for 1 node"
wait_for 20 "n1 lent to iCheck, its manager up" eval '[[ $(lent) == "n1:held" && $(icnode n1) == up ]]'

# ---- an application's agent on n1, its second level broken ------------------------
export ICHECK_CONFIG=$C/icheck.yaml
mpiexec -n 2 synth -s cp_global=65536 -s cp_interval=1it -s iter_passes=10 -s probe_interval=1 -s app_name=back4271 \
  -s persist=true -s cp_count=1000000 >"$W/synth.out" 2>&1 &
SYN=$!
bg_register "$SYN"
wait_for 30 "synth's agents on n1 and n4" eval '[[ $(app_agents_on n1) == 1 && $(app_agents_on n4) == 1 ]]'
commits() { grep -c "^synth: commit .*mode=rdma" "$W/synth.out"; }
wait_for 20 "a few commits" eval '[[ $(commits) -ge 3 ]]'
PFS=$(sed -n 's/^pfs_dir: *//p' "$C/icheck.yaml")
A=$PFS/$(id -u)/back4271
for i in $(seq 50); do  # the agents' writer may be creating it meanwhile
  [[ -e $A ]] && mv -T "$A" "$A.saved$i" 2>/dev/null
  : >"$T_TMP/pfs-file" && mv -T "$T_TMP/pfs-file" "$A" 2>/dev/null
  [[ -f $A ]] && break
  sleep 0.1
done
[[ -f $A ]] || t_fatal "cannot replace $A by a file"
n0=$(commits)
wait_for 20 "two more versions in the agents' memory only" eval '[[ $(commits) -ge $((n0 + 2)) ]]'
for p in $(procs_matching "app_name=back4271"); do [[ $(cat "/proc/$p/comm" 2>/dev/null) == synth ]] && kill -9 "$p"; done
wait "$SYN" 2>/dev/null

# ---- the reclaim is refused: mjsched backs off ---------------------------------------
write_script "$W/w3.sh" '#!/bin/bash' '#SBATCH -N 3' '#SBATCH -t 1' '#SBATCH -o w3.out' 'echo "ran on $MJ_JOB_NODELIST"'
t_run mjsub --parsable w3.sh
J=$T_OUT
wait_for 20 "the first refusal" eval '[[ $(sq "$C" "SELECT COUNT(*) FROM events WHERE kind = '"'icheck_reclaim_refused'"'") -ge 1 ]]'
T0=$(sq "$C" "SELECT MIN(time) FROM events WHERE kind = 'icheck_reclaim_refused'")
sleep 10.5
N=$(reclaims "AND time >= $T0 AND time < $T0 + 10")
t_log "$N REMOVE_NODES in the 10 s after the first refusal"
assert_le "$N" 6 "REMOVE_NODES are spaced out while the controller refuses (at most 6 in 10 s)"
assert_le 2 "$N" "REMOVE_NODES is asked again"
assert_match "^n1:(held|reclaiming)$" "$(lent)" "n1 stays iCheck's"
assert_eq PENDING "$(job_state "$C" "$J")" "the job waits"
assert_eq 1 "$(grep -c 'REMOVE_NODES n1 refused by the controller (newest version not durable)' "$C/mjsched.log")" \
  "mjsched logged the refusal once"
assert_eq 1 "$(grep -c 'REMOVE_NODES: keeping n1' "$C/icheck/controller-sched.log")" "the controller logged it once"

# ---- the job goes away, and so does the back-off: the next job is served at once ----
t_run mjcancel "$J"
wait_for 10 "the back-off ends with the job" grep -q "REMOVE_NODES back-off of n1 ends: job $J no longer waits" "$C/mjsched.log"
# when the old back-off would have let mjsched ask next: the last refusal + 0.5 s x 2^(refusals - 1)
NEXT=$(sq "$C" "SELECT MAX(time) + MIN(30, 0.5 * (1 << (COUNT(*) - 1))) FROM events WHERE kind = 'icheck_reclaim_refused'")
t_run mjsub --parsable w3.sh
J2=$T_OUT
S2=$(sq "$C" "SELECT submit_time FROM jobs WHERE id = $J2")
wait_for 10 "a REMOVE_NODES for the new job" eval '[[ $(reclaims "AND time >= $S2") -ge 1 ]]'
R2=$(sq "$C" "SELECT MIN(time) FROM events WHERE kind = 'icheck_reclaim' AND time >= $S2")
t_log "asked $(awk -v a="$S2" -v b="$R2" 'BEGIN{printf "%.1f", b-a}') s after the new job's submission; the old back-off would have waited until $(awk -v a="$S2" -v b="$NEXT" 'BEGIN{printf "%+.1f", b-a}') s"
assert_le "$R2" "$(awk -v a="$S2" 'BEGIN{printf "%.3f", a + 2}')" "mjsched asked within 2 s of the new job's submission"
assert_match "^n1:(held|reclaiming)$" "$(lent)" "n1 still iCheck's (its version still not durable)"
t_done
