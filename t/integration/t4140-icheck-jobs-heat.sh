#!/usr/bin/env bash
# heat (MPI, 2D Jacobi, [John24 §2.2.2.2]) as a dynres batch job with iCheck.
#
# A local cluster of 4 nodes, the last one reserved for checkpointing
# (vcluster-boot --icheck-nodes 1 starts icheckd controller, standby and a
# manager there). A job submitted with mjsub runs `mpiexec -f $MJ_NODEFILE`
# over its 2 nodes (4 ranks) with checkpoints every 20 iterations and a fault
# injected (SIGKILL) after iteration 50; the job script reruns heat, which
# restarts from the last committed version. Its final checksum must equal an
# uninterrupted run without iCheck. About 15 s.
. "${DYNRES_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/t/lib.sh"
t_begin 120
command -v mpiexec >/dev/null || t_skip "mpiexec (Debian package mpich) is not installed"
for t in heat icheckd icagent; do [[ -x $DYNRES_BIN/$t ]] || t_skip "$DYNRES_BIN/$t is not built"; done

C=$T_TMP/cluster
W=$T_TMP/work
mkdir -p "$W"
cd "$W" || t_fatal "cd $W"
boot_cluster "$C" 4 --tick 0.2 --kill-wait 1 --icheck-nodes 1
assert_eq 3 "$(sq "$C" "SELECT COUNT(*) FROM nodes")" "compute nodes registered (one reserved for iCheck)"
[[ -f $C/icheck.yaml ]] || t_fail "no $C/icheck.yaml written by vcluster-boot"

ARGS="--nx 96 --ny 96 --iters 120"
ref=$("$DYNRES_BIN/heat" $ARGS --no-icheck | sed -n 's/^heat: checksum=\([0-9a-f]*\).*/\1/p')
[[ -n $ref ]] || t_fatal "reference heat run printed no checksum"

write_script "$W/heat.sh" '#!/bin/bash' '#SBATCH -N 2' '#SBATCH -J heatjob' '#SBATCH -t 2:00' '#SBATCH -o heat-%j.out' \
  'set -u' \
  'echo "nodefile:"; cat "$MJ_NODEFILE"' \
  "run() { mpiexec -f \"\$MJ_NODEFILE\" -n 4 $DYNRES_BIN/heat $ARGS --ckpt-every 20 --app heat-\$MJ_JOB_ID --config $C/icheck.yaml --no-persist \"\$@\"; }" \
  'run --fault-at 50 && { echo "fault was not injected"; exit 3; }' \
  'echo "first run ended with $? (killed as planned); restarting"' \
  'run'
id=$(mjsub --parsable "$W/heat.sh") || t_fatal "mjsub failed"
wait_state 90 "$C" "$id" COMPLETED FAILED || t_fatal "heat job did not end"
assert_eq COMPLETED "$(job_state "$C" "$id")" "heat job state"
out=$(cat "$W/heat-$id.out")
assert_contains "$out" $'nodefile:\nn1\nn2\n' "MJ_NODEFILE names the job's nodes for mpiexec (reached through mj-node-exec)"
assert_contains "$out" "restarting" "the first run was killed by the injected fault"
assert_match 'heat: restart version=[1-9][0-9]* iteration=(40|50)' "$out" "second run restored the last committed version (iteration 40 or 50)"
got=$(sed -n 's/^heat: checksum=\([0-9a-f]*\).*/\1/p' <<<"$out" | tail -1)
assert_eq "$ref" "$got" "checksum after kill + restart from iCheck equals the uninterrupted run"
assert_eq 2 "$(job_col "$C" "$id" num_nodes)" "job ran on 2 nodes"
t_done
