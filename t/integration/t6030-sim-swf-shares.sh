#!/usr/bin/env bash
# mjsim on an SWF trace with malleable and moldable shares (mjsim(1)
# "Malleable and moldable shares of a trace"): 0 % reproduces the rigid run
# bit for bit under every policy; a range of [s, s] reproduces it too (a job
# at its recorded size runs exactly its recorded time, its estimate is the
# recorded one); the chosen jobs, their ranges and the nesting of the shares;
# the malleable policies resize them; bad share options are refused.
. "${DYNRES_SRC:-$(dirname "$0")/../..}/t/lib.sh"
t_begin 120
[[ -x $DYNRES_BIN/mjsim ]] || t_skip "mjsim is not built"

# a synthetic trace: 400 jobs on 64 nodes, sizes 1-48, run times 60-7200 s,
# estimates 1-3x, arrivals every 0-600 s (deterministic: awk's srand(7))
TRACE=$T_TMP/t.swf
awk 'BEGIN { srand(7); print "; MaxNodes: 64"; t = 0
  for (i = 1; i <= 400; i++) { t += int(rand() * 600); n = 1 + int(rand() * 48); r = 60 + int(rand() * 7140)
    printf "%d %d -1 %d %d -1 -1 %d %d -1 1 -1 -1 -1 0 -1 -1 -1\n", i, t, r, n, n, int(r * (1 + 2 * rand())) } }' >"$TRACE"

# metrics MJSIM-JSON — the run's figures without the share/seed echo
metrics() { perl -MJSON::PP -0777 -ne 'my $d = decode_json($_); delete @$d{qw(seed malleable_fraction moldable_fraction note)};
  print JSON::PP->new->canonical->encode($d)' "$1"; }

for pol in fcfs easy minagree perf; do
  t_run mjsim -w "$TRACE" -p "$pol" --json -q
  assert_eq 0 "$T_RC" "mjsim $pol on the trace (rigid)"
  echo "$T_OUT" >"$T_TMP/rigid-$pol.json"
  t_run mjsim -w "$TRACE" -p "$pol" -m 0 --moldable-fraction 0 --seed 5 --json -q
  assert_eq 0 "$T_RC" "mjsim $pol with 0 % shares"
  echo "$T_OUT" >"$T_TMP/zero-$pol.json"
  assert_eq "$(metrics "$T_TMP/rigid-$pol.json")" "$(metrics "$T_TMP/zero-$pol.json")" \
    "$pol: 0 % malleable and moldable reproduces the rigid run bit for bit"
  # every job malleable, but over [s, s]: anchored at the recorded size, the same run
  t_run mjsim -w "$TRACE" -p "$pol" -m 1 --malleable-range 1:1 --serial-fraction 0.3 --json -q
  echo "$T_OUT" >"$T_TMP/fixed-$pol.json"
  assert_eq "$(metrics "$T_TMP/rigid-$pol.json" | sed 's/"malleable"/"rigid"/g')" "$(metrics "$T_TMP/fixed-$pol.json")" \
    "$pol: 100 % malleable over [s, s] runs every job its recorded time with its recorded estimate"
done
assert_contains "$(cat "$T_TMP/fixed-easy.json")" "malleable: 400, moldable: 0" "the note counts the malleable jobs"

# 50 % malleable + 25 % moldable: which jobs, their ranges (default 0.5:2, capped at 64)
t_run mjsim -w "$TRACE" -p minagree -m 0.5 --moldable-fraction 0.25 --seed 3 --csv "$T_TMP/half.csv" --json -q
assert_eq 0 "$T_RC" "minagree with 50 % malleable, 25 % moldable"
echo "$T_OUT" >"$T_TMP/half.json"
assert_contains "$T_OUT" "malleable: 200, moldable: 100" "round(400 x 0.5) malleable, round(400 x 0.25) moldable"
assert_eq 400 "$(json_get finished <"$T_TMP/half.json")" "every job finished"
assert_lt 0 "$(json_get expands <"$T_TMP/half.json")" "minagree grows malleable jobs of the trace"
assert_le "$(json_get makespan_lower_bound_s <"$T_TMP/half.json")" "$(json_get makespan_s <"$T_TMP/half.json")" \
  "makespan >= its lower bound"
bad=$(awk 'NR == FNR { if ($0 !~ /^;/) size[$1] = $5; next } FNR > 1 {
  split($0, f, ","); s = size[f[1]]
  if (f[3] == "rigid") { if (f[11] != s || f[12] != s) print "rigid " f[1]; next }
  lo = int((s + 1) / 2); hi = 2 * s; if (hi > 64) hi = 64
  if (f[11] != lo || f[12] != hi) print f[3] " " f[1] " range " f[11] "-" f[12] " for size " s }' "$TRACE" "$T_TMP/half.csv")
assert_eq "" "$bad" "every chosen job ranges over [ceil(s/2), min(2s, 64)], the others stay rigid at s"
assert_eq "200 100 100" "$(awk -F, 'NR > 1 { n[$3]++ } END { print n["malleable"] + 0, n["moldable"] + 0, n["rigid"] + 0 }' "$T_TMP/half.csv")" \
  "kinds in the CSV"
# nested: the 25 % malleable jobs (same seed) are among the 50 % ones
mjsim -w "$TRACE" -p easy -m 0.25 --seed 3 --csv "$T_TMP/q.csv" -q >/dev/null
notin=$(awk -F, 'NR == FNR { if ($3 == "malleable") m[$1] = 1; next } FNR > 1 && $3 == "malleable" && !m[$1]' "$T_TMP/half.csv" "$T_TMP/q.csv")
assert_eq "" "$notin" "the 25 % malleable jobs are a subset of the 50 % ones (same seed)"
mjsim -w "$TRACE" -p easy -m 0.25 --seed 4 --csv "$T_TMP/q4.csv" -q >/dev/null
assert_ne "$(awk -F, '$3 == "malleable" { print $1 }' "$T_TMP/q.csv")" "$(awk -F, '$3 == "malleable" { print $1 }' "$T_TMP/q4.csv")" \
  "another --seed chooses other jobs"

# bad share options: a message naming the problem, exit != 0
while IFS='|' read -r args msg; do
  # shellcheck disable=SC2086
  t_run mjsim $args
  assert_ne 0 "$T_RC" "mjsim $args fails"
  assert_contains "$T_ERR" "$msg" "mjsim $args names the problem"
done <<EOF2
-w $TRACE -m 0.7 --moldable-fraction 0.5|must not exceed 1
-w $TRACE -m 0.5 --malleable-range 2:3|LO must lie in (0, 1]
-w $TRACE -m 0.5 --malleable-range half|expected LO:HI
-w $TRACE -m 0.5 --serial-fraction 1.5|--serial-fraction
-w $TRACE -m 0.5 --serial-fraction 0.2:0.1|--serial-fraction
-w esp --moldable-fraction 0.5|apply to SWF traces only
-w batches --malleable-range 0.5:2|apply to SWF traces only
EOF2
t_done
