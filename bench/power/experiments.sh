#!/bin/bash
# experiments.sh — the three power-corridor experiments of [John24 §9.2],
# run in simulation with mjsim and the power policy. Prints a table per
# experiment and writes power-vs-corridor plots (PNG, gnuplot) and the power
# series (CSV) to the output directory:
#
#   1. §9.2.2 upper and lower enforcement (power-upper: 12 + 2 nodes,
#      3000-4000 W; power-lower: 4 + 4 nodes, 1500-2500 W) with the runtime
#      (mode runtime, as the dissertation's runtime system did) and Algorithm 4 (mode
#      aware): the sizes after the first correction and when it happened.
#   2. §9.2.3 dynamic corridor (power-dynamic: one malleable Pi job; 100-600
#      -> 700-1200 -> 1300-1900 -> 100-600 W): the draw after each change.
#   3. §9.2.4 / Table 9.2 (power-mix: 20 jobs on 14 nodes, 1700-2500 ->
#      1000-1700 -> 2500-3500 W): static backfill (rigid jobs) vs runtime-only
#      vs power-aware: violations, watt-seconds outside the corridor, makespan
#      ([John24]: 6 / 2 / 0 violations, 13.75 / 14.25 / 14.00 min).
#
#   bench/power/experiments.sh [--out DIR] [--seed S]   (default DIR: a temporary one, kept)
# Needs a build (share/dynres/setup). Takes a few seconds.
set -euo pipefail
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN=${DYNRES_BIN:-${DYNRES_BUILD:-$SRC/build}/bin}
OUT="" SEED=1
while (($#)); do
  case $1 in
    --out) OUT=$2; shift 2 ;;
    --seed) SEED=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "experiments.sh: unknown option '$1'" >&2; exit 1 ;;
  esac
done
[[ $SEED =~ ^[0-9]+$ ]] || { echo "experiments.sh: --seed must be a whole number" >&2; exit 1; }
[[ -x $BIN/mjsim ]] || { echo "experiments.sh: $BIN/mjsim is not built (run share/dynres/setup)" >&2; exit 1; }
[[ -n $OUT ]] || OUT=$(mktemp -d /tmp/dynres-power-XXXXXX)
mkdir -p "$OUT"
PLOT=1
command -v gnuplot >/dev/null || { PLOT=0; echo "experiments.sh: gnuplot not found, no plots" >&2; }

# run NAME ARGS... — mjsim --json into $OUT/NAME.json, series into NAME.csv, plot NAME.png
run() {
  local name=$1
  shift
  local plot=()
  ((PLOT)) && plot=(--power-plot "$OUT/$name.png")
  "$BIN/mjsim" "$@" -q --json --power-csv "$OUT/$name.csv" --csv "$OUT/$name.jobs.csv" "${plot[@]}" >"$OUT/$name.json"
}
# get NAME PATH — a number of NAME.json (PATH like power.violations)
get() { python3 -c 'import json,sys
v = json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."): v = v[k]
print(v)' "$OUT/$1.json" "$2"; }

echo "== 1. §9.2.2 upper and lower corridor enforcement =="
printf '%-12s %-8s %10s %-34s %s\n' workload mode violations "first break -> corrected" "job:nodes before -> after"
for w in power-upper power-lower; do
  for mode in runtime aware; do
    run "$w-$mode" -w "$w" -p power --power-mode "$mode"
    # the first break while jobs run, and the first point back in the corridor
    line=$(awk -F, 'NR > 1 && $6 != "" && $5 != "in" && !b { b = $2 + 0 " W at " $1 + 0 " s"; bj = $6 }
                    NR > 1 && b && $5 == "in" { printf "%s -> %s W at %s s|%s -> %s", b, $2 + 0, $1 + 0, bj, $6; exit }' \
           "$OUT/$w-$mode.csv")
    [[ -n $line ]] || line="no break while jobs ran|started within the corridor: $(awk -F, 'NR > 1 && $6 != "" { print $6; exit }' "$OUT/$w-$mode.csv")"
    printf '%-12s %-8s %10s %-34s %s\n' "$w" "$mode" "$(get "$w-$mode" power.violations)" "${line%%|*}" "${line#*|}"
  done
done

echo
echo "== 2. §9.2.3 dynamic corridor (one malleable Pi job, 125 W/node) =="
run dynamic -w power-dynamic -p power --power-mode runtime
printf '%8s %14s %10s %s\n' time corridor_W draw_W state
# at each corridor change: the draw the passes of that instant left
python3 - "$OUT/dynamic.csv" <<'EOF'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
changes = [r["t"] for i, r in enumerate(rows)
           if i == 0 or (r["lower_w"], r["upper_w"]) != (rows[i - 1]["lower_w"], rows[i - 1]["upper_w"])]
for t in changes:
    last = [r for r in rows if r["t"] == t][-1]
    print("%8.0f %14s %10.0f %s" % (float(t), "%.0f-%.0f" % (float(last["lower_w"]), float(last["upper_w"])),
                                   float(last["draw_w"]), last["state"]))
EOF
echo "violations $(get dynamic power.violations), breaks corrected at once $(get dynamic power.breaks)"

echo
echo "== 3. §9.2.4 / Table 9.2: 20 jobs, 14 nodes, seed $SEED =="
printf '%-22s %10s %12s %12s %12s %10s %8s\n' scenario violations above_Ws below_Ws makespan_s min seed
run mix-static -w power-mix -p backfill -m 0 --seed "$SEED"
run mix-runtime -w power-mix -p power --power-mode runtime --seed "$SEED"
run mix-aware -w power-mix -p power --power-mode aware --seed "$SEED"
while read -r name label seedfig; do
  mk=$(get "$name" makespan_s)
  printf '%-22s %10s %12.0f %12.0f %12.1f %10.2f %8s\n' "$label" "$(get "$name" power.violations)" \
    "$(get "$name" power.above_ws)" "$(get "$name" power.below_ws)" "$mk" "$(awk -v m="$mk" 'BEGIN { print m / 60 }')" "$seedfig"
done <<'EOF'
mix-static 1:static-backfill 6/13.75
mix-runtime 2:runtime-only 2/14.25
mix-aware 3:power-aware 0/14.00
EOF
echo
echo "violations = episodes with the modelled draw outside the corridor for a positive time (mjsim(1));"
echo "output (plots, CSV, JSON): $OUT"
