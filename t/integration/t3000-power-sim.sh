#!/usr/bin/env bash
# The power policy in mjsim [John24 §9.2], qualitatively:
#   §9.2.2 — the upper and the lower violation at the start are corrected by
#            the first pass that can resize the jobs (same instant), no
#            violation of positive duration, the hungry job shrinks;
#   §9.2.3 — after each corridor change the draw is back inside at once;
#   §9.2.4 — power-aware has no more violations than runtime-only and the
#            least watt-seconds outside the corridor; runtime-only less than
#            static backfill; the default JSON/CSV without a corridor are
#            unchanged; bad corridor files are refused naming the line.
# bench/power/experiments.sh runs the same experiments with a table and plots.
. "${DYNRES_SRC:-$(dirname "$0")/../..}/t/lib.sh"
t_begin 60
[[ -x $DYNRES_BIN/mjsim ]] || t_skip "mjsim is not built"

# pj FILE KEY — a number of the "power" object of mjsim --json
pj() { perl -MJSON::PP -0777 -ne 'my $d = decode_json($_); print $d->{power}{$ARGV_K}; BEGIN { $ARGV_K = shift @ARGV }' "$2" <"$1"; }
# outside FILE — watt-seconds above + below
outside() { awk -v a="$(pj "$1" above_ws)" -v b="$(pj "$1" below_ws)" 'BEGIN { print a + b }'; }

# §9.2.2 with the runtime (the dissertation's runtime system), upper then lower
for w in power-upper power-lower; do
  t_run mjsim -w "$w" -p power --power-mode runtime -q --json --power-csv "$T_TMP/$w.csv"
  assert_eq 0 "$T_RC" "mjsim $w"
  echo "$T_OUT" >"$T_TMP/$w.json"
  assert_eq 0 "$(pj "$T_TMP/$w.json" violations)" "$w: no violation of positive duration"
  # points at t = 0 with jobs running: the first is outside, the last inside
  first=$(awk -F, 'NR > 1 && $1 == 0 && $6 != "" { print $5; exit }' "$T_TMP/$w.csv")
  last=$(awk -F, 'NR > 1 && $1 == 0 && $6 != "" { s = $5; j = $6 } END { print s "|" j }' "$T_TMP/$w.csv")
  case $w in
    power-upper) assert_eq above "$first" "$w: the start breaks the upper bound"
                 assert_eq "in|1:3 2:24" "$last" "$w: corrected in the first pass (App 1 12 -> 3, App 2 2 -> 24)" ;;
    power-lower) assert_eq below "$first" "$w: the start breaks the lower bound"
                 assert_eq "in|1:3 2:16" "$last" "$w: corrected in the first pass (App 1 4 -> 3, App 2 4 -> 16)" ;;
  esac
done

# §9.2.3: at each corridor change the passes of that instant bring the draw back
t_run mjsim -w power-dynamic -p power --power-mode runtime -q --json --power-csv "$T_TMP/dyn.csv" --power-plot "$T_TMP/dyn.png"
assert_eq 0 "$T_RC" "mjsim power-dynamic"
echo "$T_OUT" >"$T_TMP/dyn.json"
assert_eq 0 "$(pj "$T_TMP/dyn.json" violations)" "power-dynamic: the draw follows every change"
states=$(awk -F, 'NR > 1 { if (($3 "-" $4) != c) { if (c != "") printf "%s=%s ", c, s; c = $3 "-" $4 } s = $5 ":" $2 } END { printf "%s=%s", c, s }' "$T_TMP/dyn.csv")
assert_contains "$states" "700.0-1200.0=in:1125.0" "power-dynamic: 700-1200 W holds with 9 nodes (1125 W)"
assert_contains "$states" "1300.0-1900.0=in:1875.0" "power-dynamic: 1300-1900 W holds with 15 nodes"
assert_eq "PNG" "$(head -c 4 "$T_TMP/dyn.png" | tail -c 3)" "--power-plot writes a PNG"

# §9.2.4: the three scenarios on the Table 9.2 workload
t_run mjsim -w power-mix -p backfill -m 0 -q --json
echo "$T_OUT" >"$T_TMP/static.json"
t_run mjsim -w power-mix -p power --power-mode runtime -q --json
echo "$T_OUT" >"$T_TMP/runtime.json"
t_run mjsim -w power-mix -p power -q --json
echo "$T_OUT" >"$T_TMP/aware.json"
for s in static runtime aware; do
  assert_eq 20 "$(json_get finished <"$T_TMP/$s.json")" "power-mix $s: every job finished"
done
assert_le "$(pj "$T_TMP/aware.json" violations)" "$(pj "$T_TMP/runtime.json" violations)" \
  "power-aware has no more violations than runtime-only"
assert_le "$(pj "$T_TMP/aware.json" violations)" "$(pj "$T_TMP/static.json" violations)" \
  "power-aware has no more violations than static backfill"
assert_lt "$(outside "$T_TMP/runtime.json")" "$(outside "$T_TMP/static.json")" \
  "runtime-only is less far outside the corridor (W s) than static backfill"
assert_lt "$(outside "$T_TMP/aware.json")" "$(outside "$T_TMP/runtime.json")" \
  "power-aware is less far outside the corridor (W s) than runtime-only"
assert_eq "aware" "$(perl -MJSON::PP -0777 -ne 'print decode_json($_)->{power}{mode}' <"$T_TMP/aware.json")" "JSON names the mode"

# without a corridor the JSON has no power object (existing outputs unchanged)
t_run mjsim -w batches -p power -m 1 -q --json
assert_eq 0 "$T_RC" "the power policy without a corridor runs"
assert_eq null "$(echo "$T_OUT" | json_get power)" "no power figures without a corridor"
assert_eq 25 "$(echo "$T_OUT" | json_get finished)" "power policy without corridor: every job finished"

# bad corridor files and options: a message naming the problem, exit 1
printf '0 100 600\n# comment\n\n60 700 1200\n' >"$T_TMP/ok.cor"
t_run mjsim -w power-dynamic -p power --corridor "$T_TMP/ok.cor" -q --json
assert_eq 0 "$T_RC" "a corridor file with a comment and a blank line is read"
printf '0 100 600\n60 1200 700\n' >"$T_TMP/inv.cor"
printf '0 100 600\n0 700 1200\n' >"$T_TMP/order.cor"
printf '0 100\n' >"$T_TMP/short.cor"
printf '0 ten 600\n' >"$T_TMP/nan.cor"
printf '# nothing\n' >"$T_TMP/empty.cor"
while IFS='|' read -r args msg; do
  # shellcheck disable=SC2086
  t_run mjsim $args
  assert_eq 1 "$T_RC" "mjsim $args fails"
  assert_contains "$T_ERR" "$msg" "mjsim $args names the problem"
done <<EOF
-w power-dynamic -p power --corridor $T_TMP/inv.cor|inv.cor:2: LOWER must be below UPPER
-w power-dynamic -p power --corridor $T_TMP/order.cor|order.cor:2: times must increase
-w power-dynamic -p power --corridor $T_TMP/short.cor|short.cor:1: expected TIME LOWER UPPER
-w power-dynamic -p power --corridor $T_TMP/nan.cor|nan.cor:1: LOWER 'ten' is not a number
-w power-dynamic -p power --corridor $T_TMP/empty.cor|no corridor change
-w power-dynamic -p power --corridor $T_TMP/none.cor|cannot read the corridor file
-w power-mix -p power --power-mode sometimes|--power-mode must be aware, runtime, proactive or reactive
-w esp -p easy --power-csv $T_TMP/x.csv|need a corridor
EOF
t_done
