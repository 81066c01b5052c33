#!/usr/bin/env bash
# ctest-cost: 60
# A node of the outer Slurm fails under a malleable MPI job of a dynres
# cluster inside an allocation: the job continues shrunk, and the outer
# Slurm runs its new steps on the surviving nodes.
#
#  1. A 5-node outer Slurm (SlurmdTimeout 6 s); `salloc -N5 --no-kill` (the
#     allocation outlives a failed node, as Slurm's --no-kill) runs this
#     script again (--inside); there vcluster-boot --icheck-nodes 1 makes a
#     dynres cluster of n1-n4 (srun launcher; every node agent mjnoded is an
#     outer step on its node) with the iCheck service on n5.
#  2. heat-malleable.sh runs on n[1-3]; `outer-slurm crash n3` kills n3's
#     slurmd, its slurmstepds and their tasks (n3's agent, heat's MPI proxy):
#     dynres sets n3 DOWN from its own heartbeat (the agent's connection
#     closed) within 5 s, runs heat again on n[1-2] from its last
#     checkpoint, and heat ends with the fixed-size checksum. The outer Slurm
#     shows the job's steps launched after the crash (the script's step and
#     the MPI step) on n1 and n2 only, and itself reports n3 not responding.
#  3. Only n4's slurmd is killed (its agent, a step, lives on): the outer
#     Slurm marks n4 not responding and the agent reports it; dynres sets n4
#     DOWN from the outer Slurm's node state.
# Exit 77 (skip) when not root (the outer Slurm needs it) or without mpiexec.
# About 40 s.
SELF=$(readlink -f "${BASH_SOURCE[0]}")
. "${DYNRES_SRC:-$(dirname "$SELF")/../..}/t/lib.sh"
FIXTURE=$DYNRES_SRC/t/fixtures/outer-slurm
BOOT=$DYNRES_SRC/share/dynres/vcluster-boot
DOWN=$DYNRES_SRC/share/dynres/vcluster-down

inside() {
  D=$1
  CL=$D/cluster
  local fix=$D/outer W=$D/work
  mkdir -p "$W"
  cd "$W"
  echo "$SLURM_JOB_ID" >"$D/alloc.jobid"
  timeout 60 "$BOOT" --dir "$CL" --tick 0.2 --kill-wait 1 --icheck-nodes 1 --resize-timeout 30 --node-timeout 10 >"$D/boot.log" 2>&1 ||
    { sed 's/^/  boot| /' "$D/boot.log" >&2; t_fatal "vcluster-boot failed"; }
  # shellcheck disable=SC1091
  source "$CL/env"
  agents() { (($(grep -c 'connected' "$CL/nodes/mjnoded.log" 2>/dev/null) >= 4)); }
  wait_for 30 "4 node agents connected" agents || t_fatal "$(cat "$CL/nodes/mjnoded.log")"
  local ARGS=(--nx 96 --ny 90 --iters 300 --iter-seconds 0.05 --ckpt-every 20 --print-every 1) ref J
  ref=$("$DYNRES_BIN/heat" --nx 96 --ny 90 --iters 300 --no-icheck | sed -n 's/^heat: checksum=\([0-9a-f]*\).*/\1/p')
  [[ -n $ref ]] || t_fatal "the reference run printed no checksum"
  J=$(HEAT=$DYNRES_BIN/heat mjsub --parsable -N 3 --min-nodes 1 --max-nodes 3 -o "$W/heat.out" \
    "$DYNRES_SRC/share/dynres/examples/heat/heat-malleable.sh" "${ARGS[@]}") || t_fatal "mjsub of heat failed"
  out() { cat "$W/heat.out" 2>/dev/null; }
  show_logs() { out | grep -v "^heat: iteration=" | tail -n 30; tail -n 30 "$CL/mjsched.log"; cat "$CL/nodes/mjnoded.log"; }
t_on_fail show_logs
  committed() { out | grep -qE "^heat: commit iteration=$1 "; }
  wait_for 60 "heat committed iteration 40" committed 40 || t_fatal "no commit of iteration 40"

  # 2. n3 crashes (n4 drained meanwhile: no idle node takes n3's place, so
  # that the job runs on, shrunk; t7110 covers the replacement)
  mjcontrol update node n4 state=drain reason="shrink, no replacement" || t_fatal "cannot drain n4"
  local t0 t1 det ns
  t0=$(date +%s.%N)
  local crash_at
  crash_at=$(date +%Y-%m-%dT%H:%M:%S)
  "$FIXTURE" crash "$fix" n3 || t_fatal "outer-slurm crash n3 failed"
  ns() { sq "$CL" "SELECT state FROM nodes WHERE name='$1'"; }
  down3() { [[ $(ns n3) == down ]]; }
  wait_for 10 "n3 DOWN" down3 || t_fatal "n3 is $(ns n3)"
  t1=$(date +%s.%N)
  det=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
  t_log "slurmd crash -> DOWN (dynres heartbeat) in $det s"
  assert_le "$det" 5 "detected within 5 s"
  resumed() { out | grep -q '^heat: resumed order=.* commit=ok'; }
  wait_for 40 "heat resumed on n[1-2]" resumed || t_fatal "heat did not resume"
  assert_eq "n[1-2]" "$(job_col "$CL" "$J" nodelist)" "heat holds n[1-2]"
  mjcontrol update node n4 state=resume || t_fatal "cannot resume n4"
  outer3() { [[ $(sinfo -h -N -n n3 -o %t) == *'*' || $(sinfo -h -N -n n3 -o %t) == down* ]]; }
  wait_for 20 "the outer Slurm reports n3 not responding" outer3 || t_fail "outer Slurm: n3 is $(sinfo -h -N -n n3 -o %t)"

  # 3. only n4's slurmd dies: detected from the outer Slurm's node state
  kill -KILL "$(cat "$fix/run/slurmd-n4.pid")" || t_fatal "cannot kill n4's slurmd"
  down4() { [[ $(ns n4) == down ]]; }
  wait_for 30 "n4 DOWN from the outer Slurm's state" down4 || t_fatal "n4 is $(ns n4); outer: $(sinfo -h -N -n n4 -o %t)"
  assert_match 'node n4 is DOWN: .*outer Slurm reports it' "$(grep 'node n4 is DOWN' "$CL/mjsched.log")" "the cause is the outer Slurm's state"

  wait_for 60 "heat job ended" eval "state_is \"\$CL\" $J COMPLETED || state_is \"\$CL\" $J FAILED"
  state_is "$CL" "$J" COMPLETED || t_fatal "heat ended $(job_state "$CL" "$J")"
  assert_eq "$ref" "$(out | sed -n 's/^heat: checksum=\([0-9a-f]*\).*/\1/p')" "heat: the fixed-size checksum"
  assert_eq 0 "$(job_col "$CL" "$J" restarts)" "never requeued"

  # the outer Slurm's record: steps launched after the crash ran on n1 and n2 only
  local after
  after=$("$FIXTURE" steps "$fix" "$SLURM_JOB_ID" | awk -v t="$crash_at" '$3 > t {print $1, $2}')
  t_log "outer steps launched after the crash: $(tr '\n' ',' <<<"$after")"
  local script_step mpi_nodes
  script_step=$(awk -v id="$SLURM_JOB_ID" -v name="mj$J" '$3 == name && index($2, id ".") == 1 {print $2}' "$D/squeue-steps.log" | sort -u |
    while read -r s; do grep -q "^$s " <<<"$after" && echo "$s"; done | head -n1)
  [[ -n $script_step ]] || t_fatal "no step mj$J of the relaunched script after the crash"
  assert_eq "n1" "$(awk -v s="$script_step" '$1 == s {print $2}' <<<"$after")" "the relaunched script's step on n1"
  mpi_nodes=$(awk -v s="$script_step" '{split($1, a, "."); split(s, b, ".")} a[2] ~ /^[0-9]+$/ && a[2] + 0 > b[2] + 0 {print $2}' <<<"$after" | sort -u | tr '\n' ' ')
  assert_contains "$mpi_nodes" "n1 n2" "MPI steps after the relaunch on n1 and n2"
  assert_not_contains "$(awk '{print $2}' <<<"$after" | sort -u | tr '\n' ' ')" "n3" "no step on the crashed n3"
  timeout 30 "$DOWN" --dir "$CL" >/dev/null || t_fatal "vcluster-down failed"
  t_log "inside: all checks passed"
}

if [[ ${1:-} == --inside ]]; then
  inside "$2"
  exit 0
fi

((EUID == 0)) || t_skip "needs root (it runs a real Slurm cluster)"
t_require mpiexec heat mjsub mjstat mjsched mjcontrol icheckd icagent
[[ $(ldd "$DYNRES_BIN/heat") == *libmj* ]] || t_skip "heat is built without libmj"
t_begin 240
unset "${!SLURM_@}" "${!MJ_@}" DYNRES_HOME
D=$T_TMP
outer_slurm_start 5 --poll --slurmd-timeout 6
stop_cluster() { [[ -f $D/cluster/mjsched.pid ]] && timeout 30 "$DOWN" --dir "$D/cluster" >/dev/null 2>&1; }
t_on_exit stop_cluster
outer_slurm_inside 180 5 dynres-nodefail "$SELF" --no-kill
t_done
