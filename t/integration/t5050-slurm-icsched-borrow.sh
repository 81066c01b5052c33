#!/usr/bin/env bash
# iCheck borrows a node of the allocation and gives it back, inside a real
# outer Slurm [John24 §7.3] (t/fixtures/outer-slurm, 4 nodes on this machine,
# MUNGE):
#   1. `salloc -N4` runs this script again (--inside); there vcluster-boot
#      --icheck-nodes 1 --icheck-max-nodes 2 makes n1-n3 the batch nodes and
#      n4 iCheck's boot node (its manager a job step on n4), the controller
#      linked to mjsched;
#   2. a HIGH Resource request (sent by the test: the memory trigger needs
#      checkpoint traffic) is served with n1: the controller starts n1's
#      manager with its manager_launch, `srun --overlap -w n1 -J
#      icheck-mgr-n1`: squeue -s shows that step on n1, the manager process
#      carries SLURMD_NODENAME=n1 and the step's id; mjstat -N shows n1
#      "icheck" and n4 iCheck's boot node;
#   3. a 3-node job waits; with no request pending and iCheck's memory free,
#      n1 is reclaimed: the controller supersedes its manager (the step
#      ends), the job runs on n[1-3] through srun, mjstat --history lists the
#      request, grant, node_up, reclaim and node_returned events.
# About 30 s. Root only (it runs a real Slurm cluster); exit 77 otherwise.
SELF=$(readlink -f "$0")
. "${DYNRES_SRC:-$(dirname "$SELF")/../..}/t/lib.sh"

inside() {
  local D=$1 C=$1/c W=$1/w
  echo "$SLURM_JOB_ID" >"$D/alloc.jobid"
  unset ICHECK_CONFIG DYNRES_HOME
  mkdir -p "$W"
  cd "$W" || return
  T_CLUSTERS+=("$C")
  if ! vcluster-boot --dir "$C" --tick 0.2 --kill-wait 1 --icheck-nodes 1 --icheck-max-nodes 2 --icheck-release-after 0 \
    >"$D/boot.out" 2>&1; then
    t_fail "vcluster-boot inside the allocation: $(cat "$D/boot.out")"
    echo "$T_FAILS" >"$D/inside.fails"
    return
  fi
  export DYNRES_HOME=$C
  local lent ic steps sid pid env
  lent() { sq "$C" "SELECT group_concat(n.name || ':' || l.state, ' ') FROM icheck_lent l JOIN nodes n ON n.id = l.node_id"; }
  assert_eq "n1 n2 n3" "$(sq "$C" "SELECT group_concat(name, ' ') FROM nodes")" "batch nodes n1-n3 (n4 is iCheck's)"
  steps=$(squeue -s -h -j "$SLURM_JOB_ID" -o '%i %j %N')
  [[ $(awk '$2 == "icheck-mgr-n4" {print $3}' <<<"$steps") == n4 ]] && t_pass "the boot node's manager is a step on n4" ||
    t_fail "no manager step on n4: $steps"
  wait_for 20 "the controller's Status reaches mjsched" eval '[[ -n $(sq "$C" "SELECT status_time FROM icheck_link") ]]'

  # -- NEW_NODES: n1's manager becomes a job step on n1
  A=$("$DYNRES_SRC/t/frame-request" "$C/mjsched.sock" '{"op":"ic_request","urgency":"HIGH","nodes":1}')
  assert_eq '{"ok":true}' "$A" "HIGH request for one node"
  wait_for 30 "n1 lent and its manager registered" eval '[[ $(lent) == "n1:held" ]]' ||
    { t_log "controller: $(tail -5 "$C/icheck/controller.log")"; }
  steps=$(squeue -s -h -j "$SLURM_JOB_ID" -o '%i %j %N')
  sid=$(awk '$2 == "icheck-mgr-n1" {print $1}' <<<"$steps")
  [[ -n $sid && $(awk '$2 == "icheck-mgr-n1" {print $3}' <<<"$steps") == n1 ]] &&
    t_pass "squeue: step $sid (icheck-mgr-n1) runs on n1" || t_fail "no manager step on n1: $steps"
  pid=$(pgrep -f "^[^ ]*icheckd --role manager --node n1 --config $C/" | head -1)
  if [[ -n $pid ]]; then
    env=$(tr '\0' '\n' <"/proc/$pid/environ")
    grep -qx "SLURMD_NODENAME=n1" <<<"$env" && grep -qx "SLURM_STEP_ID=${sid#*.}" <<<"$env" &&
      t_pass "n1's manager (pid $pid) runs in step $sid on n1" ||
      t_fail "n1's manager: $(grep -E '^SLURM(D_NODENAME|_STEP_ID)=' <<<"$env" | tr '\n' ' ')"
  else
    t_fail "no manager process for n1"
  fi
  t_run mjstat -N
  assert_match 'n1 +icheck +[0-9]+ +- .*checkpoint node \(iCheck\), 0 agents' "$T_OUT" "mjstat -N: n1 is iCheck's"
  assert_match 'n4 +icheck +- +- .*checkpoint node \(iCheck\)' "$T_OUT" "mjstat -N: n4 is iCheck's boot node"

  # -- REMOVE_NODES: n1 goes back for a waiting 3-node job
  write_script "$W/w3.sh" '#!/bin/bash' '#SBATCH -N 3' '#SBATCH -t 1' '#SBATCH -o w3.out' \
    'echo "ran on $MJ_JOB_NODELIST"; srun hostname | sort | tr "\n" " "'
  J=$(mjsub --parsable w3.sh)
  wait_state 40 "$C" "$J" COMPLETED || t_log "lent: $(lent); controller: $(tail -3 "$C/icheck/controller.log")"
  assert_match '^ran on n\[1-3\]' "$(head -1 "$W/w3.out" 2>/dev/null)" "the 3-node job ran on the node iCheck gave back"
  assert_eq "" "$(lent)" "nothing lent any more"
  for _ in $(seq 20); do
    [[ -z $(squeue -s -h -j "$SLURM_JOB_ID" -o '%j' | grep -x icheck-mgr-n1) ]] && break
    sleep 0.5
  done
  [[ -z $(squeue -s -h -j "$SLURM_JOB_ID" -o '%j' | grep -x icheck-mgr-n1) ]] && t_pass "n1's manager step ended" ||
    t_fail "n1's manager step is still there: $(squeue -s -h -j "$SLURM_JOB_ID" -o '%i %j %N')"
  t_run mjstat --history
  ev=$(awk '/^ICHECK_TIME/ {on = 1; next} on {printf "%s ", $2}' <<<"$T_OUT")
  assert_eq "request grant node_up reclaim node_returned " "$ev" "mjstat --history lists iCheck's events"
  echo "$T_FAILS" >"$D/inside.fails"
}

if [[ ${1:-} == --inside ]]; then
  inside "$2"
  exit 0
fi

((EUID == 0)) || t_skip "needs root (it runs a real Slurm cluster)"
t_require icheckd icagent python3
t_begin 180
unset "${!SLURM_@}" DYNRES_HOME
D=$T_TMP
chmod 755 "$D"
outer_slurm_start 4
stop_cluster() { [[ -f $D/c/state.db ]] && vcluster-down --dir "$D/c" >/dev/null 2>&1; return 0; }
t_on_exit stop_cluster
outer_slurm_inside 120 4 icsched-sis "$SELF"
[[ -f $D/inside.fails ]] || t_fatal "the inside part did not finish"
inside_fails=$(cat "$D/inside.fails")
((inside_fails == 0)) || t_fail "$inside_fails check(s) of the part inside the allocation FAILED (above)"
t_done
