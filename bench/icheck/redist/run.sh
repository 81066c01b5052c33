#!/usr/bin/env bash
# Driver of bench_icheck_redist (see the header of redist.cpp): N -> M
# redistribution of a BLOCK and a CYCLIC double array with icheck_redistribute
# (agents warm, and cold = commit included) against MPI_Gatherv +
# MPI_Scatterv and MPI_Alltoallv, MPICH, provider shm, same run.
#   bench/icheck/redist/run.sh --quick    # 64 MiB, (1,4) (4,2) (3,5), 3 reps   (~1 min)
#   bench/icheck/redist/run.sh            # 256 MiB and 1 GiB, (1,4) (4,1) (4,2) (2,4) (3,5),
#                                         # BLOCK and CYCLIC, 5 reps (several minutes;
#                                         # peak memory ~5x the array at 1 GiB)
# Options: --sizes "MiB ..." --pairs "N,M ..." --dists "block cyclic" --reps R
#          --agents N|M|K (agents per run: one per old rank (default), per new
#          rank, or K)
# Agents run with --no-multi-level (no second-level writes competing on a
# small machine) and one per old rank, slot r on agent r % A ([John24 §6.2.1]).
# Prints every row and, last, the rows against the targets of the issue:
# warm >= 2x gs, warm >= 1x a2a, warm bandwidth >= 0.5 memcpy.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
B=${DYNRES_BUILD:-}
for c in "$B" "$PWD" "$here/../../../build"; do
  [ -n "$c" ] && [ -x "$c/bench/bench_icheck_redist" ] && { B=$c; break; }
done
[ -x "$B/bench/bench_icheck_redist" ] || { echo "bench_icheck_redist not built (set DYNRES_BUILD)" >&2; exit 1; }
sizes="256 1024"; pairs="1,4 4,1 4,2 2,4 3,5"; dists="block cyclic"; reps=5; agents=N
while [ $# -gt 0 ]; do
  case $1 in
    --quick) sizes=64; pairs="1,4 4,2 3,5"; reps=3 ;;
    --sizes) sizes=$2; shift ;;
    --pairs) pairs=$2; shift ;;
    --dists) dists=$2; shift ;;
    --reps) reps=$2; shift ;;
    --agents) agents=$2; shift ;;
    *) echo "run.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
W=$(mktemp -d /tmp/icredist-bench.XXXXXX)
pids=()
stop_agents() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done; pids=(); }
trap 'stop_agents; rm -rf "$W"' EXIT
out=$W/rows
: >"$out"
echo "# bench_icheck_redist: $(nproc) cores, $(free -g | awk '/Mem:/{print $2" GiB, "$7" GiB available"}'), load $(cut -d' ' -f1-3 /proc/loadavg)"
for s in $sizes; do
  for d in $dists; do
    for p in $pairs; do
      n=${p%,*}; m=${p#*,}
      case $agents in N) a=$n ;; M) a=$m ;; *) a=$agents ;; esac
      list=""
      for i in $(seq 0 $((a - 1))); do
        rm -f "$W/a$i.sock"
        "$B/bin/icagent" --listen "unix:$W/a$i.sock" --app rbench --id "a$i" --provider shm --fabric-node 127.0.0.1 \
          --no-multi-level --exit-with-parent >/dev/null 2>"$W/a$i.log" &
        pids+=($!)
        list="$list${list:+, }\"unix:$W/a$i.sock\""
      done
      for i in $(seq 0 $((a - 1))); do for _ in $(seq 100); do [ -S "$W/a$i.sock" ] && break; sleep 0.05; done; done
      printf 'agents: [%s]\npfs_dir: %s/pfs\ntransport: {provider: "shm", node: 127.0.0.1}\n' "$list" "$W" >"$W/rb.yaml"
      echo "## $s MiB $d N=$n M=$m agents=$a: mpiexec -n $((n > m ? n : m)) bench_icheck_redist --n $n --m $m --mib $s --dist $d --reps $reps"
      mpiexec -n $((n > m ? n : m)) "$B/bench/bench_icheck_redist" --config "$W/rb.yaml" --n "$n" --m "$m" --mib "$s" \
        --dist "$d" --reps "$reps" | tee -a "$out"
      stop_agents
    done
  done
done
echo "# targets: warm >= 2x gs (vs_gs), warm >= 1x a2a (vs_a2a), warm xmemcpy >= 0.5"
awk '$1 == "row" && $3 == "warm" {
  split($0, f, "vs_gs"); split(f[2], g, " "); gs = g[1]
  split($0, h, "vs_a2a"); split(h[2], k, " "); a2a = k[1]
  split($0, x, "xmemcpy"); split(x[2], y, " "); mc = y[1]
  printf "%-70s %s %s %s\n", $0, (gs >= 2 ? "gs:met" : "gs:MISSED"), (a2a >= 1 ? "a2a:met" : "a2a:MISSED"), (mc >= 0.5 ? "bw:met" : "bw:MISSED")
}' "$out"
