#!/bin/bash
#SBATCH --malleable
#SBATCH --min-nodes 1
#SBATCH --max-nodes 4
#SBATCH -N 1
#SBATCH -J heat-malleable
#SBATCH -t 30:00
#SBATCH -o heat-malleable-%j.out
# heat-malleable.sh — an MPI job that grows and shrinks by checkpoint-restart
# through iCheck ([John24 §7.4.4]; mj(3) MJ_ADAPT_RESTART, heat --malleable).
#
#   vcluster-boot --local 5 --icheck-nodes 1     # 4 compute nodes + 1 for iCheck
#   mjsub share/dynres/examples/heat/heat-malleable.sh [heat options...]
#   mjcontrol resize JOBID 4 --wait 60           # or let a malleable policy order it
#
# heat runs with one MPI rank per node of the job (HEAT_RANKS_PER_NODE, default
# 1). On the scheduler's order, heat's rank 0 begins a restart-based resize,
# every rank commits its rows with iCheck and exits 0; mjstepd then runs this
# script again on the new node list (MJ_RESUMED_ORDER, MJ_OLD_NUM_NODES,
# MJ_RESTART_COUNT set; MJ_JOB_NODELIST, MJ_JOB_NUM_NODES, MJ_NODEFILE
# updated), heat restores the grid redistributed over the new rank count and
# commits the order. The job's output collects every run.
#
# Environment: HEAT (the heat binary; default: heat on PATH, else the build
# tree's), ICHECK_CONFIG (iCheck client configuration; default
# $DYNRES_HOME/icheck.yaml, written by vcluster-boot --icheck-nodes),
# HEAT_RANKS_PER_NODE. Arguments are passed to heat after the defaults
# (--nx 1024 --ny 1024 --iters 4000 --ckpt-every 0), so they override them.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" 2>/dev/null && pwd)
heat=${HEAT:-$(command -v heat || echo "$here/../../../../build/bin/heat")}
[[ -x $heat ]] || { echo "heat-malleable.sh: no heat binary (set HEAT)" >&2; exit 2; }
config=${ICHECK_CONFIG:-${DYNRES_HOME:+$DYNRES_HOME/icheck.yaml}}
cfg=()
[[ -n $config && -f $config ]] && cfg=(--config "$config")
per=${HEAT_RANKS_PER_NODE:-1}
[[ $per =~ ^[1-9][0-9]*$ ]] || { echo "heat-malleable.sh: HEAT_RANKS_PER_NODE must be a positive integer, got '$per'" >&2; exit 2; }
nodes=${MJ_JOB_NUM_NODES:?not inside a dynres job (MJ_JOB_NUM_NODES unset)}
ranks=$((nodes * per))
echo "heat-malleable: run $((${MJ_RESTART_COUNT:-0} + 1)) on $nodes node(s) ${MJ_JOB_NODELIST:-}: $ranks rank(s)" \
  "${MJ_RESUMED_ORDER:+(resumed after order $MJ_RESUMED_ORDER, from $MJ_OLD_NUM_NODES node(s))}"
# --app names this job's checkpoint, so a relaunch finds it and nothing else
# does; --no-persist frees it when the run completes.
exec mpiexec -f "$MJ_NODEFILE" -n "$ranks" "$heat" --malleable --app "heat-${MJ_JOB_ID}" --no-persist "${cfg[@]}" \
  --nx 1024 --ny 1024 --iters 4000 --ckpt-every 0 "$@"
