#!/bin/bash
# evaluate.sh — what malleability buys, simulated with mjsim(1): every policy
# (fcfs backfill easy fpsma egs perf minagree) at 0/25/50/100 % malleable jobs
# on three workloads:
#
#   lublin  the SWF trace lublin_256 (10,000 jobs, 256 nodes; Lublin and
#           Feitelson's model) with mjsim's SWF shares (--malleable-fraction,
#           default range [ceil(s/2), min(2s, N)], serial fraction
#           log-uniform in [0.005, 0.1], --seed SEED)
#   esp     ESP [John24 Table 9.1] on 34 nodes, --seed SEED
#   batches the job batches of [Finnerty24 Table 2] on 32 nodes: batches
#           1-10, averaged
#
# Per row: makespan, utilisation, average wait, response and bounded
# slowdown, resizes, the makespan lower bound of that share (mjsim's
# "makespan lower bound"), and the share of the headroom each policy takes:
# (easy rigid - policy) / (easy rigid - lower bound), the headroom being what
# a perfect schedule of the same jobs could gain over EASY on them rigid.
# Then, for perf and minagree at 100 %, where the rest of the headroom goes:
# idle nodes (1 - utilisation) and extra node-seconds over the lower bound's
# work (jobs run wider than their smallest size, Amdahl), of which resize
# pauses (the same run with --grow-cost 0 --shrink-cost 0).
#
#   bench/sim/evaluate.sh [--out DIR] [--seed S] [--trace FILE]
#     default DIR: bench/sim; FILE: share/dynres/traces/lublin_256.swf.gz
# Writes DIR/{lublin,esp,batches}.dat, DIR/headroom.txt and one PNG per metric
# (DIR/shares-{makespan,utilisation,wait,bsld,headroom}.png, a panel per
# workload). Needs a build (share/dynres/setup). About 15 minutes on 2 cores.
set -euo pipefail
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN=${DYNRES_BIN:-${DYNRES_BUILD:-$SRC/build}/bin}
OUT=$SRC/bench/sim SEED=1 TRACE=$SRC/share/dynres/traces/lublin_256.swf.gz
while (($#)); do
  case $1 in
    --out) OUT=$2; shift 2 ;;
    --seed) SEED=$2; shift 2 ;;
    --trace) TRACE=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "evaluate.sh: unknown option '$1'" >&2; exit 1 ;;
  esac
done
[[ -x $BIN/mjsim ]] || { echo "evaluate.sh: $BIN/mjsim is not built (run share/dynres/setup)" >&2; exit 1; }
[[ -r $TRACE ]] || { echo "evaluate.sh: cannot read the trace $TRACE (--trace FILE)" >&2; exit 1; }
mkdir -p "$OUT"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
SHARES=(0 0.25 0.5 1)
POLICIES=(fcfs backfill easy fpsma egs perf minagree)

# row JSON... — the mean of the runs' figures, one line:
# makespan util wait response bsld expands shrinks lower_bound node_seconds work_bound
row() {
  python3 - "$@" <<'PY'
import json, sys
rs = [json.load(open(f)) for f in sys.argv[1:]]
keys = ['makespan_s', 'utilisation', 'avg_wait_s', 'avg_response_s', 'avg_bounded_slowdown', 'expands', 'shrinks',
        'makespan_lower_bound_s', 'node_seconds', 'makespan_lower_bound_work_s']
print(' '.join(f"{sum(float(r[k]) for r in rs) / len(rs):.6g}" for k in keys))
PY
}

# run FILE WORKLOAD-ARGS... — mjsim --json into FILE
run() { local f=$1; shift; "$BIN/mjsim" "$@" --json -q >"$f"; }

evaluate() {  # NAME then the mjsim workload arguments, one run per seed in SEEDS
  local name=$1 dat=$OUT/$1.dat share pol s files
  shift
  printf '# share policy makespan_s utilisation avg_wait_s avg_response_s avg_bsld expands shrinks lower_bound_s node_seconds work_bound_s\n' >"$dat"
  for share in "${SHARES[@]}"; do
    for pol in "${POLICIES[@]}"; do
      files=()
      for s in "${SEEDS[@]}"; do
        files+=("$TMP/$name-$share-$pol-$s.json")
        run "${files[-1]}" "$@" --seed "$s" -p "$pol" -m "$share"
      done
      echo "$share $pol $(row "${files[@]}")" >>"$dat"
      printf '\r%s: %s %s done   ' "$name" "$share" "$pol" >&2
    done
  done
  echo >&2
}

SEEDS=("$SEED"); evaluate lublin -w "$TRACE"
SEEDS=("$SEED"); evaluate esp -w esp
SEEDS=(1 2 3 4 5 6 7 8 9 10); evaluate batches -w batches

# where the rest of the headroom goes: perf and minagree at 100 % with free resizes
: >"$TMP/free"
for w in lublin esp batches; do
  for pol in perf minagree; do
    case $w in
      lublin) SEEDS=("$SEED"); args=(-w "$TRACE") ;;
      esp) SEEDS=("$SEED"); args=(-w esp) ;;
      batches) SEEDS=(1 2 3 4 5 6 7 8 9 10); args=(-w batches) ;;
    esac
    files=()
    for s in "${SEEDS[@]}"; do
      files+=("$TMP/free-$w-$pol-$s.json")
      run "${files[-1]}" "${args[@]}" --seed "$s" -p "$pol" -m 1 --grow-cost 0 --shrink-cost 0
    done
    echo "$w $pol $(row "${files[@]}")" >>"$TMP/free"
  done
done

python3 - "$OUT" "$TMP/free" <<'PY' | tee "$OUT/headroom.txt"
import sys
out, free = sys.argv[1], sys.argv[2]
nodes = {'lublin': 256, 'esp': 34, 'batches': 32}
fr = {(l.split()[0], l.split()[1]): [float(x) for x in l.split()[2:]] for l in open(free)}
for w in ('lublin', 'esp', 'batches'):
    rows = [l.split() for l in open(f'{out}/{w}.dat') if not l.startswith('#')]
    get = {(r[0], r[1]): [float(x) for x in r[2:]] for r in rows}
    base = get[('0', 'easy')][0]
    print(f"\n== {w}: easy rigid makespan {base:.0f} s; headroom = easy rigid - lower bound of the share ==")
    print(f"{'share':>5} {'policy':9} {'makespan':>10} {'util':>6} {'wait':>9} {'resp':>9} {'bsld':>7} {'exp':>6} {'shr':>6} "
          f"{'bound':>10} {'vs easy':>8} {'headroom':>8}")
    for r in rows:
        m, u, wt, rs, bs, e, s, lb, ns, wb = (float(x) for x in r[2:])
        room = base - lb
        took = (base - m) / room * 100 if room > 0 else float('nan')
        print(f"{float(r[0])*100:4.0f}% {r[1]:9} {m:10.0f} {u*100:5.1f}% {wt:9.0f} {rs:9.0f} {bs:7.2f} {e:6.0f} {s:6.0f} "
              f"{lb:10.0f} {100*(m/base-1):+7.1f}% {took:7.0f}%")
    lb = get[('1', 'perf')][7]
    for pol in ('perf', 'minagree'):
        m, u, _, _, _, e, s, _, ns, wb = get[('1', pol)]
        fm = fr[(w, pol)][0]
        n = nodes[w]
        gap = m - lb
        idle = m * (1 - u)                 # idle node-seconds / n
        extra = ns / n - wb                # held node-seconds / n beyond the work at the smallest sizes
        print(f"{pol} at 100 %: {100*(m/base-1):+.1f} % of a possible {100*(lb/base-1):+.1f} % "
              f"({(base-m)/(base-lb)*100:.0f} % of the headroom); the rest, {gap:.0f} s "
              f"(bound: {'work' if wb >= lb - 1e-6 else 'last arrival + shortest run'}, work bound {wb:.0f} s): "
              f"makespan = work bound {wb:.0f} + extra held node-seconds / {n} {extra:.0f} (jobs wider than their "
              f"smallest size, resize pauses) + idle node-seconds / {n} {idle:.0f} ({(1-u)*100:.1f} % idle); "
              f"free resizes: makespan {fm:.0f} s ({m - fm:+.0f} s from the pauses); {e:.0f} expands, {s:.0f} shrinks")
PY

if command -v gnuplot >/dev/null; then
  q() { local s=${1//\'/\'\'}; printf "'%s'" "$s"; }   # a gnuplot string literal
  # headroom column (13) = (easy rigid - makespan) / (easy rigid - bound) x 100
  for w in lublin esp batches; do
    base=$(awk '$1 == "0" && $2 == "easy" { print $3 }' "$OUT/$w.dat")
    awk -v b="$base" '!/^#/ { print $0, (b - $3) / (b - $10) * 100 }' "$OUT/$w.dat" >"$TMP/$w.h"
    for p in "${POLICIES[@]}"; do awk -v p="$p" '$2 == p' "$TMP/$w.h" >"$TMP/$w.$p"; done
    awk '$2 == "easy" { print $1, $10 }' "$TMP/$w.h" >"$TMP/$w.bound"
  done
  plot() {  # COLUMN YLABEL PNG [BOUND]
    local col=$1 ylabel=$2 png=$3 bound=${4:-} w p cmd
    cmd="set terminal pngcairo size 1500,500 noenhanced; set output $(q "$png"); set multiplot layout 1,3; set grid; set xlabel 'malleable jobs [%]'; set ylabel $(q "$ylabel"); set key top right font ',8';"
    for w in lublin esp batches; do
      local plots=""
      for p in "${POLICIES[@]}"; do plots+="${plots:+, }$(q "$TMP/$w.$p") using (\$1*100):$col with linespoints lw 2 title $(q "$p")"; done
      [[ -n $bound ]] && plots+=", $(q "$TMP/$w.bound") using (\$1*100):2 with lines lw 2 dt 2 lc rgb 'black' title 'lower bound'"
      cmd+=" set title $(q "$w"); plot $plots;"
    done
    gnuplot -e "$cmd unset multiplot"
  }
  plot 3 'makespan [s]' "$OUT/shares-makespan.png" bound
  plot 4 'utilisation' "$OUT/shares-utilisation.png"
  plot 5 'average wait [s]' "$OUT/shares-wait.png"
  plot 7 'average bounded slowdown' "$OUT/shares-bsld.png"
  plot 13 'share of the headroom taken [%]' "$OUT/shares-headroom.png"
  echo "plots: $OUT/shares-{makespan,utilisation,wait,bsld,headroom}.png"
fi
