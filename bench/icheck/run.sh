#!/usr/bin/env bash
# Driver of bench_icheck_commit over process counts (see the header of
# bench/icheck/commit.cpp and bench/icheck/README for what is measured).
#   bench/icheck/run.sh --quick   64 MiB; 1 and 2 processes; 1 and 2 agents   (< 1 min)
#   bench/icheck/run.sh           64 MiB, 512 MiB, 2 GiB; 1, 2, 4 processes; 1, 2, 4 agents
#                                 (several minutes; peak memory ~4.5x the checkpoint)
# Extra arguments are passed to bench_icheck_commit (e.g. --providers shm).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
B=${DYNRES_BUILD:-}
for c in "$B" "$PWD" "$here/../../build" "$here/../../build-icheck2"; do
  [ -n "$c" ] && [ -x "$c/bench/bench_icheck_commit" ] && { B=$c; break; }
done
[ -x "$B/bench/bench_icheck_commit" ] || { echo "bench_icheck_commit not built (set DYNRES_BUILD)" >&2; exit 1; }
procs="1 2 4"; args=()
if [ "${1:-}" = "--quick" ]; then procs="1 2"; args=(--quick); shift; fi
for p in $procs; do
  echo "## mpiexec -n $p $B/bench/bench_icheck_commit ${args[*]} $*"
  ICAGENT="$B/bin/icagent" mpiexec -n "$p" "$B/bench/bench_icheck_commit" "${args[@]}" "$@"
done
