#!/usr/bin/env bash
# pinned_stall.sh [RUNS] [HOGS] — the iCheck MPI commit/restore sequence of
# t/integration/t4010-icheck-app-api.sh (2 ranks, 2 agents, pull transfers) run RUNS
# times (default 8) pinned to one core (taskset -c 0) beside HOGS busy loops
# (default 3, not pinned: they load both cores). Prints each run's step times and, at the end,
# how many runs had a step over 8 s ("stalled") and how many failed (a step
# hit its 60 s bound or the restore was wrong).
# Measured on this 2-core machine (session 5): with sched_yield in the
# busy-poll loops of lib/ictransport/src/fabric.cpp, 4 of 4 runs stalled and 3
# failed (the run was cut at 420 s); with the ~50 us sleep that replaced it,
# 3 of 8 stalled and failed. 2026-11-27, after reads stopped waiting for the
# target's progress (no FI_DELIVERY_COMPLETE on reads, fabric.cpp) and with
# load average 30-35 from other work: 20 runs, 0 failed (no step reached its
# 60 s bound), but 12 had a "first" step of 8.1-11.9 s (6.2-7.5 s in the
# others). That time is before icheck_init returns, not in a transfer: in a
# timed run the four commits took 0.2-0.3 s each after STATUS came at 9.9 s;
# libfabric's start-up (its providers' initialisation and libinfinipath's
# clock calibration, 125 us sleeps) takes 3.8-4.7 s for `fi_info -l` pinned
# beside 3 busy loops (0.13-0.19 s for /bin/true; FI_PROVIDER does not
# shorten it), paid by each of the 2 ranks and 2 agents on the one core.
set -u
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN=${DYNRES_BUILD:-$SRC/build}/bin
export PATH=$BIN:$PATH
RUNS=${1:-8} HOGS=${2:-3}
command -v ictest_mpi >/dev/null || { echo "pinned_stall: build first (share/dynres/setup)" >&2; exit 2; }
W=$(mktemp -d "${TMPDIR:-/tmp}/pinned-stall-XXXXXX")
HOG_PIDS=() AGENTS=()
cleanup() {
  for p in "${HOG_PIDS[@]}" "${AGENTS[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null; rm -rf "$W"
}
trap cleanup EXIT
for _ in $(seq "$HOGS"); do bash -c 'while :; do :; done' & HOG_PIDS+=($!); done
stalled=0 failed=0
for r in $(seq "$RUNS"); do
  D=$W/run$r; mkdir -p "$D"; AGENTS=()
  for a in m0 m1; do
    taskset -c 0 icagent --listen "unix:$D/$a.sock" --app mpiapp --pfs-dir "$D/pfs" >"$D/$a.log" 2>&1 &
    AGENTS+=($!)
  done
  for a in m0 m1; do for _ in $(seq 100); do [ -S "$D/$a.sock" ] && break; sleep 0.1; done; done
  printf 'direct: true\npfs_dir: %s/pfs\n' "$D" >"$D/direct.yaml"
  printf 'agents: [ "unix:%s/m0.sock", "unix:%s/m1.sock" ]\npfs_dir: %s/pfs\n' "$D" "$D" "$D" >"$D/two.yaml"
  line="run $r:" ok=1 slow=0
  step() {  # NAME ARGS...: one mpiexec, timed
    local n=$1 t0 t1 rc; shift
    t0=$(date +%s.%N)
    timeout 60 taskset -c 0 mpiexec -n 2 ictest_mpi "$@" >"$D/$n.out" 2>"$D/$n.err"; rc=$?
    t1=$(date +%s.%N)
    local s; s=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
    line+=" $n ${s}s"
    awk -v s="$s" 'BEGIN { exit !(s > 8) }' && slow=1
    return $rc
  }
  step ref mpiref 50000 40 5 --config "$D/direct.yaml" &&
    step first mpiapp 50000 20 5 --config "$D/two.yaml" --persist &&
    step second mpiapp 50000 40 5 --config "$D/two.yaml" --async &&
    grep -q "RESTORED 20 4" "$D/second.out" || ok=0
  ((slow)) && stalled=$((stalled + 1))
  ((ok)) || failed=$((failed + 1))
  echo "$line$( ((ok)) || echo ' FAILED')"
  for p in "${AGENTS[@]}"; do kill "$p" 2>/dev/null; done; wait "${AGENTS[@]}" 2>/dev/null
done
echo "pinned to one core with $HOGS hogs: $stalled of $RUNS runs stalled (a step > 8 s), $failed failed"
