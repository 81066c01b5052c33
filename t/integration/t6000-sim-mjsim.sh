#!/usr/bin/env bash
# mjsim end to end: the SWF reference figures of an independent simulator
# (share/dynres/traces/lublin_256.swf.gz, 10,000 jobs on 256 nodes) within 0.5 %;
# outputs (--json, --csv, --gantt); every malleable policy on ESP and on a
# [Finnerty24] batch; bad input refused with a message and a non-zero exit.
. "${DYNRES_SRC:-$(dirname "$0")/../..}/t/lib.sh"
t_begin 240
[[ -x $DYNRES_BIN/mjsim ]] || t_skip "mjsim is not built"

TRACE=$DYNRES_SRC/share/dynres/traces/lublin_256.swf.gz
[[ -r $TRACE ]] || t_fatal "the reference trace $TRACE is missing (it ships with the repository)"

# within REF ACTUAL WHAT — |actual - ref| <= 0.5 % of ref
within() {
  if awk -v r="$1" -v a="$2" 'BEGIN { d = a - r; if (d < 0) d = -d; exit !(d <= 0.005 * (r < 0 ? -r : r)) }'; then
    t_pass "$3"
  else
    t_fail "$3: $2 is not within 0.5 % of the reference $1"
  fi
}

# policy makespan utilisation avg_wait [avg_bsld]
while read -r pol mk ut wt bs; do
  t_run mjsim --workload "$TRACE" --policy "$pol" --json -q
  assert_eq 0 "$T_RC" "mjsim $pol on the trace exits 0"
  echo "$T_OUT" >"$T_TMP/$pol.json"
  within "$mk" "$(json_get makespan_s <"$T_TMP/$pol.json")" "$pol makespan"
  within "$ut" "$(json_get utilisation <"$T_TMP/$pol.json")" "$pol utilisation"
  within "$wt" "$(json_get avg_wait_s <"$T_TMP/$pol.json")" "$pol average wait"
  [[ $bs != - ]] && within "$bs" "$(json_get avg_bounded_slowdown <"$T_TMP/$pol.json")" "$pol bounded slowdown"
  assert_eq 10000 "$(json_get finished <"$T_TMP/$pol.json")" "$pol: every job of the trace finished"
done <<'REF'
fcfs 12482549 0.6549 2388444 -
backfill 8966268 0.9117 63773 -
easy 8730698 0.9363 97156 590.05
REF

# Outputs: CSV rows, a PNG Gantt chart, text metrics with resize counts.
t_run mjsim -w esp -p perf -m 1 --csv "$T_TMP/jobs.csv" --gantt "$T_TMP/g.png" -q
assert_eq 0 "$T_RC" "mjsim perf on ESP with --csv and --gantt"
assert_eq 231 "$(wc -l <"$T_TMP/jobs.csv")" "CSV: a header and one row per ESP job"
assert_eq "id,name,kind,submit,start,end,wait,response,nodes_start,nodes_end,min,max,expands,shrinks" \
  "$(head -1 "$T_TMP/jobs.csv")" "CSV header"
assert_eq "PNG" "$(head -c 4 "$T_TMP/g.png" | tail -c 3)" "the Gantt chart is a PNG"
assert_match "resizes +[1-9][0-9]* expands, [1-9][0-9]* shrinks" "$T_OUT" "text output counts resizes"
sum=$(awk -F, 'NR > 1 { e += $13; s += $14 } END { print e "," s }' "$T_TMP/jobs.csv")
assert_match "[1-9][0-9]* expands, [1-9][0-9]* shrinks" "$T_OUT" "resizes happen at 100 % malleable"
assert_contains "$T_OUT" "${sum%,*} expands, ${sum#*,} shrinks" "CSV per-job resize counts add up to the totals"

# Every policy runs ESP and a batch to the end; malleable ones resize, rigid ones never.
for pol in fcfs backfill easy fpsma egs minagree perf; do
  for w in esp batches; do
    t_run mjsim -w "$w" -p "$pol" -m 1 --seed 2 --json -q
    assert_eq 0 "$T_RC" "mjsim $pol on $w"
    echo "$T_OUT" >"$T_TMP/r.json"
    n=$([[ $w == esp ]] && echo 230 || echo 25)
    assert_eq "$n" "$(json_get finished <"$T_TMP/r.json")" "$pol on $w: every job finished"
    r=$(( $(json_get expands <"$T_TMP/r.json") + $(json_get shrinks <"$T_TMP/r.json") ))
    case $pol in
      fcfs|backfill|easy) assert_eq 0 "$r" "$pol on $w never resizes" ;;
      *) assert_lt 0 "$r" "$pol on $w resizes malleable jobs" ;;
    esac
    lb=$(json_get makespan_lower_bound_s <"$T_TMP/r.json")
    assert_le "$lb" "$(json_get makespan_s <"$T_TMP/r.json")" "$pol on $w: makespan >= its lower bound"
  done
done

# Bad input: a message naming the problem, exit != 0.
printf 'scheduler:\n  malleable:\n    management: sometimes\n' >"$T_TMP/bad.yaml"
printf '1 0 -1 10 1 -1 -1 1 10 -1 1 -1 -1 -1 0 -1 -1 -1\n2 0 -1 ten 1 -1 -1 1 10 -1 1 -1 -1 -1 0 -1 -1 -1\n' >"$T_TMP/bad.swf"
while IFS='|' read -r args msg; do
  # shellcheck disable=SC2086
  t_run mjsim $args
  assert_ne 0 "$T_RC" "mjsim $args fails"
  assert_contains "$T_ERR" "$msg" "mjsim $args names the problem"
done <<EOF2
-w esp -p sjf|unknown policy 'sjf'
-w $T_TMP/none.swf|cannot read the trace
-w $T_TMP/bad.swf|bad.swf:2: field 4 is not a number
-w esp --config $T_TMP/bad.yaml|management must be prma or pwma
-w esp --config $T_TMP/missing.yaml|cannot read
-w esp --model gustafson|--model must be amdahl or downey
-w esp -m 1.5|--malleable-fraction
-w esp --nodes 0|--nodes
-w esp --nodes 2000000|--nodes
-w esp --tick 0.01|--tick must be 0 or at least 0.1
EOF2
t_done
