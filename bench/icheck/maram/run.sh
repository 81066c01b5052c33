#!/usr/bin/env bash
# MA-RA vs MA-MA: commit time of a job whose agents follow it [John24 §7.2,
# Alg. 7; the evaluation of Figs. 9.11-9.14, scaled to this machine].
#
# synth (share/dynres/examples/synth) runs under mpiexec on 1, 2, 4, 8, then
# 4, 2 "virtual nodes" (one process each: the MR strategy maps processes to
# agents, as [John24 §7.2] allows), one run per size, every run registering
# the same application again (restart=false: each run starts its data anew,
# so the per-process size may change between runs; the agents follow the
# application all the same). Each run commits 4 times (every 4 iterations).
#   growing   each process checkpoints --per-rank MiB: the checkpoint grows
#             with the node count (Fig. 9.11/9.12, "dynamic size")
#   fixed     --total MiB split over the processes (Fig. 9.13/9.14)
# Modes (icheck.yaml malleability:): MA-RA keeps its single agent; MA-MA
# starts with one (1:1) and follows the job 1 -> 8 -> 2. Same-run baselines
# of the same bytes at each size: a plain write+fsync by one process
# (synth --no-mpi cp_mpiio: pwrite + fsync) and MPI-IO (synth cp_mpiio:
# MPI_File_write_at_all + MPI_File_sync by the N processes), in the bench's
# scratch directory (set TMPDIR to move it).
#
#   bench/icheck/maram/run.sh [--reps R] [--per-rank MIB] [--total MIB]
#                             [--sizes 'N...'] [--out DIR]
# Defaults: 3 repetitions, 32 MiB per process, 128 MiB in all, 1 2 4 8 4 2.
# Prints a table (medians over repetitions and the commits of a run; the
# first commit after a resize — connections and registrations to new
# agents — apart) and writes DIR/commits.csv, DIR/maram.png (gnuplot).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../../.." && pwd)
B=${DYNRES_BUILD:-$src/build}
for t in synth icheckd icagent; do
  [ -x "$B/bin/$t" ] || { echo "maram: $B/bin/$t is not built (set DYNRES_BUILD)" >&2; exit 1; }
done
command -v mpiexec >/dev/null || { echo "maram: mpiexec (mpich) is not installed" >&2; exit 1; }
REPS=3 PER=32 TOTAL=128 SIZES="1 2 4 8 4 2" OUT=
while [ $# -gt 0 ]; do
  case "$1" in
    --reps) REPS=$2; shift 2 ;;
    --per-rank) PER=$2; shift 2 ;;
    --total) TOTAL=$2; shift 2 ;;
    --sizes) SIZES=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
    *) echo "maram: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
for v in "$REPS" "$PER" "$TOTAL"; do
  case $v in ''|*[!0-9]*|0) echo "maram: --reps, --per-rank and --total need positive integers" >&2; exit 2 ;; esac
done
W=$(mktemp -d "${TMPDIR:-/tmp}/maram.XXXXXX")
# private copies: a rebuild during the run must not swap the binaries
mkdir -p "$W/bin" "$W/lib"
cp "$B/bin/synth" "$B/bin/icheckd" "$B/bin/icagent" "$W/bin/"
cp -P "$B"/lib/libicheck.so* "$W/lib/" 2>/dev/null || true
export PATH=$W/bin:$PATH LD_LIBRARY_PATH=$W/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
OUT=${OUT:-$W/out}
mkdir -p "$OUT"
export DYNRES_HOME=$W
unset ICHECK_TRANSFER ICHECK_STRATEGY ICHECK_PFS_DIR
cleanup() { "$src/share/dynres/icheck-down" --home "$W" >/dev/null 2>&1 || true; rm -rf "$W/pfs" "$W"/*.mpiio "$W/bin" "$W/lib"; }
trap cleanup EXIT
"$src/share/dynres/icheck-boot" --home "$W" --no-standby --heartbeat 1 n1 n2 >/dev/null
export ICHECK_CONFIG=$W/icheck.yaml
old=$(awk '$1 == "controller" {print $2}' "$W/icheck/pids")
kill "$old"
while kill -0 "$old" 2>/dev/null; do sleep 0.1; done
printf 'malleability:\n  agents: ma-ra\n  applications:\n' >>"$W/icheck.yaml"
for r in $(seq "$REPS"); do
  printf '    mara-growing-%s: ma-ra\n    mama-growing-%s: ma-ma\n    mara-fixed-%s: ma-ra\n    mama-fixed-%s: ma-ma\n' \
    "$r" "$r" "$r" "$r" >>"$W/icheck.yaml"
done
sed -i 's/^init_agent_count:.*/init_agent_count: 1/; s/^is_dynamic_as:.*/is_dynamic_as: false/' "$W/icheck-dynamic.yaml"
icheckd --role controller --config "$W/icheck.yaml" >>"$W/icheck/controller.log" 2>&1 &
echo "controller $!" >>"$W/icheck/pids"
for _ in $(seq 100); do icheckd --status --config "$W/icheck.yaml" >/dev/null 2>&1 && break; sleep 0.1; done

agents_of() {
  icheckd --status --config "$W/icheck.yaml" |
    python3 -c 'import json,sys; a=[x for x in json.load(sys.stdin)["apps"] if x["name"]==sys.argv[1]]; print(len(a[0]["agents"]) if a else 0)' "$1"
}
CSV=$OUT/commits.csv
echo "rep,size,what,step,nodes,commit,seconds,bytes,agents" >"$CSV"
SYN=(-s cp_interval=4it -s cp_count=16 -s iter_passes=2 -s probe_interval=0 -s restart=false -s persist=true)
mib() { echo "$1" | awk '{printf "%gMiB", $1}'; }
for rep in $(seq "$REPS"); do
  for size in growing fixed; do
    step=0
    for n in $SIZES; do
      step=$((step + 1))
      if [ "$size" = growing ]; then per=$PER; else per=$(awk -v t="$TOTAL" -v n="$n" 'BEGIN{print t/n}'); fi
      bytes=$(awk -v p="$per" -v n="$n" 'BEGIN{printf "%d", p*n*1048576}')
      for mode in mara mama; do
        app=$mode-$size-$rep
        o=$W/$app-$step.out
        mpiexec -n "$n" synth "${SYN[@]}" -s app_name="$app" -s cp_size="$(mib "$per")" >"$o" 2>&1 ||
          { echo "maram: $app on $n processes failed:" >&2; tail -5 "$o" >&2; exit 1; }
        # under load a registration may time out: the library commits
        # directly until its next probe; only commits through agents count
        grep -q 'icheck_init mode=rdma' "$o" ||
          echo "maram: warning: $app on $n processes started in direct mode (its direct commits are left out)" >&2
        a=$(agents_of "$app")
        awk -v r="$rep" -v s="$size" -v w="$mode" -v st="$step" -v n="$n" -v b="$bytes" -v a="$a" '
          /^synth: commit /{ c++; if ($0 !~ /mode=rdma/) next
            for (i = 1; i <= NF; i++) if ($i ~ /^seconds=/) { split($i, x, "="); print r","s","w","st","n","c","x[2]","b","a } }' \
          "$o" >>"$CSV"
      done
      # baselines of the same bytes: MPI-IO by the n processes, write+fsync by one
      o=$W/mpiio-$size-$step.out
      mpiexec -n "$n" synth "${SYN[@]}" -s enable_ichk=false -s cp_mpiio=true -s mpiio_file="$W/ckpt.mpiio" \
        -s cp_size="$(mib "$per")" >"$o" 2>&1 || { echo "maram: MPI-IO baseline failed" >&2; tail -5 "$o" >&2; exit 1; }
      awk -v r="$rep" -v s="$size" -v st="$step" -v n="$n" -v b="$bytes" '
        /^synth: mpiio /{ for (i = 1; i <= NF; i++) if ($i ~ /^seconds=/) { split($i, x, "="); c++; print r","s",mpiio,"st","n","c","x[2]","b",0" } }' \
        "$o" >>"$CSV"
      o=$W/fsync-$size-$step.out
      synth --no-mpi "${SYN[@]}" -s enable_ichk=false -s cp_mpiio=true -s mpiio_file="$W/ckpt1.mpiio" \
        -s cp_size="$(mib "$(awk -v p="$per" -v n="$n" 'BEGIN{print p*n}')")" >"$o" 2>&1 ||
        { echo "maram: write+fsync baseline failed" >&2; tail -5 "$o" >&2; exit 1; }
      awk -v r="$rep" -v s="$size" -v st="$step" -v n="$n" -v b="$bytes" '
        /^synth: mpiio /{ for (i = 1; i <= NF; i++) if ($i ~ /^seconds=/) { split($i, x, "="); c++; print r","s",fsync,"st","n","c","x[2]","b",0" } }' \
        "$o" >>"$CSV"
      rm -f "$W"/*.mpiio
      echo "maram: rep $rep/$REPS $size step $step ($n nodes, $((bytes / 1048576)) MiB) done" >&2
    done
  done
done
python3 "$here/summary.py" "$CSV" "$OUT"
echo "maram: raw data $CSV; plot $OUT/maram.png"
