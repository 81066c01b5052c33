#!/bin/bash
# evaluate.sh — the simulator evaluations of the malleable policies
# (speed-up, resize cost, job batches), run with mjsim. Prints the tables and writes
# PNG plots (gnuplot) next to the data:
#
#   1. ESP [John24 Table 9.1] on 34 nodes, malleable share 0/10/50/100 %
#      x easy, backfill, fpsma, egs, perf, minagree: makespan, utilisation,
#      average wait, response, bounded slowdown, resizes; the makespan lower
#      bound; perf and minagree at 100 % against easy on the same jobs rigid
#      ([John24 Fig. 9.1]: perf -19.3 % makespan against static backfilling).
#   2. [Finnerty24]: 10 batches x 6 shares (0..100 %) x fcfs, backfill, easy,
#      minagree = 240 runs: average makespan and utilisation per cell
#      ([Finnerty24 Fig. 9/10]: minagree 1168 s -> 1006 s, utilisation 74.8 % ->
#      90.5 %).
#
#   bench/sim/evaluate.sh [--out DIR] [--seed S]   (default DIR: bench/sim)
# Needs a build (share/dynres/setup). Takes about a minute.
set -euo pipefail
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN=${DYNRES_BIN:-${DYNRES_BUILD:-$SRC/build}/bin}
OUT=$SRC/bench/sim SEED=1
while (($#)); do
  case $1 in
    --out) OUT=$2; shift 2 ;;
    --seed) SEED=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "evaluate.sh: unknown option '$1'" >&2; exit 1 ;;
  esac
done
[[ -x $BIN/mjsim ]] || { echo "evaluate.sh: $BIN/mjsim is not built (run share/dynres/setup)" >&2; exit 1; }
mkdir -p "$OUT"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# field FILE KEY — a top-level number of mjsim's --json output
field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }

echo "== 1. ESP, 34 nodes, seed $SEED =="
ESP=$OUT/esp.dat
printf '# share policy makespan_s utilisation avg_wait_s avg_response_s avg_bsld expands shrinks lower_bound_s\n' >"$ESP"
for share in 0 0.1 0.5 1; do
  for pol in easy backfill fpsma egs perf minagree; do
    "$BIN/mjsim" -w esp -p "$pol" -m "$share" --seed "$SEED" --json -q >"$TMP/r.json"
    printf '%s %s %s %s %s %s %s %s %s %s\n' "$share" "$pol" \
      "$(field "$TMP/r.json" makespan_s)" "$(field "$TMP/r.json" utilisation)" "$(field "$TMP/r.json" avg_wait_s)" \
      "$(field "$TMP/r.json" avg_response_s)" "$(field "$TMP/r.json" avg_bounded_slowdown)" \
      "$(field "$TMP/r.json" expands)" "$(field "$TMP/r.json" shrinks)" \
      "$(field "$TMP/r.json" makespan_lower_bound_s)" >>"$ESP"
  done
done
python3 - "$ESP" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1]) if not l.startswith('#')]
print(f"{'share':>5} {'policy':9} {'makespan':>9} {'util':>6} {'wait':>7} {'resp':>7} {'bsld':>6} {'exp':>4} {'shr':>4} {'bound':>7}")
for r in rows:
    print(f"{float(r[0])*100:4.0f}% {r[1]:9} {float(r[2]):9.0f} {float(r[3])*100:5.1f}% {float(r[4]):7.0f} {float(r[5]):7.0f} {float(r[6]):6.2f} {r[7]:>4} {r[8]:>4} {float(r[9]):7.0f}")
get = {(r[0], r[1]): r for r in rows}
rigid = get[('0', 'easy')]
ch = lambda new, old: f"{100 * (float(new) / float(old) - 1):+.1f} %"
for pol in ('perf', 'minagree', 'egs', 'fpsma'):
    m = get[('1', pol)]
    print(f"{pol} at 100 % vs easy on the same jobs rigid: makespan {ch(m[2], rigid[2])}, wait {ch(m[4], rigid[4])}, "
          f"response {ch(m[5], rigid[5])}; vs backfill rigid: makespan {ch(m[2], get[('0', 'backfill')][2])}")
print(f"makespan lower bound at 100 % malleable: {float(get[('1', 'perf')][9]):.0f} s "
      f"({ch(get[('1', 'perf')][9], rigid[2])} vs easy rigid)")
PY

echo "== 2. [Finnerty24] batches: 10 batches x 6 shares x 4 policies =="
BAT=$OUT/batches.dat
printf '# share policy avg_makespan_s avg_utilisation runs\n' >"$BAT"
for share in 0 0.2 0.4 0.6 0.8 1; do
  for pol in fcfs backfill easy minagree; do
    : >"$TMP/cell"
    for b in 1 2 3 4 5 6 7 8 9 10; do
      "$BIN/mjsim" -w batches -p "$pol" -m "$share" --seed "$b" --json -q >"$TMP/r.json"
      echo "$(field "$TMP/r.json" makespan_s) $(field "$TMP/r.json" utilisation)" >>"$TMP/cell"
    done
    awk -v s="$share" -v p="$pol" '{ m += $1; u += $2; n++ } END { printf "%s %s %.2f %.4f %d\n", s, p, m / n, u / n, n }' \
      "$TMP/cell" >>"$BAT"
  done
done
python3 - "$BAT" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1]) if not l.startswith('#')]
pols = ['fcfs', 'backfill', 'easy', 'minagree']
get = {(r[0], r[1]): r for r in rows}
print('share  ' + '  '.join(f'{p:>18}' for p in pols) + '   (average makespan s / utilisation)')
for s in ('0', '0.2', '0.4', '0.6', '0.8', '1'):
    print(f"{float(s)*100:4.0f}%  " + '  '.join(f"{float(get[(s,p)][2]):9.1f} / {float(get[(s,p)][3])*100:5.1f}%" for p in pols))
a, b = get[('0', 'minagree')], get[('1', 'minagree')]
print(f"minagree 0 % -> 100 %: makespan {float(a[2]):.0f} s -> {float(b[2]):.0f} s ({100*(float(b[2])/float(a[2])-1):+.1f} %), "
      f"utilisation {float(a[3])*100:.1f} % -> {float(b[3])*100:.1f} %")
PY

if command -v gnuplot >/dev/null; then
  q() { local s=${1//\'/\'\'}; printf "'%s'" "$s"; }   # a gnuplot string literal
  plot() {  # DATA COLUMN YLABEL PNG POLICIES... (one line per policy)
    local dat=$1 col=$2 ylabel=$3 png=$4
    shift 4
    local p plots=""
    for p in "$@"; do
      awk -v p="$p" '!/^#/ && $2 == p' "$dat" >"$TMP/$p.dat"   # one file per line of the plot
      plots+="${plots:+, }$(q "$TMP/$p.dat") using (\$1*100):$col with linespoints lw 2 title $(q "$p")"
    done
    gnuplot -e "set terminal pngcairo size 900,600 noenhanced; set output $(q "$png"); set xlabel 'malleable jobs [%]'; set ylabel $(q "$ylabel"); set key outside right; set grid; plot $plots"
  }
  plot "$ESP" 3 'makespan [s]' "$OUT/esp-makespan.png" easy backfill fpsma egs perf minagree
  plot "$ESP" 5 'average wait [s]' "$OUT/esp-wait.png" easy backfill fpsma egs perf minagree
  plot "$ESP" 4 'utilisation' "$OUT/esp-utilisation.png" easy backfill fpsma egs perf minagree
  plot "$BAT" 3 'average makespan [s]' "$OUT/batches-makespan.png" fcfs backfill easy minagree
  plot "$BAT" 4 'average utilisation' "$OUT/batches-utilisation.png" fcfs backfill easy minagree
  echo "plots: $OUT/esp-{makespan,wait,utilisation}.png $OUT/batches-{makespan,utilisation}.png"
fi
