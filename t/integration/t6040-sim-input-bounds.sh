#!/usr/bin/env bash
# mjsim refuses input it cannot simulate, with a message and a non-zero exit,
# at once: an SWF time beyond what a double represents to the simulator's
# 1 us (a submit time of 1e20 s once made it loop forever), and NaN or
# infinite numbers in options (NaN passed every range check).
. "${DYNRES_SRC:-$(dirname "$0")/../..}/t/lib.sh"
t_begin 60
[[ -x $DYNRES_BIN/mjsim ]] || t_skip "mjsim is not built"

swf() {  # FILE SUBMIT RUN REQUESTED — a two-job trace whose second job has these times
  printf '; MaxNodes: 4\n1 0 -1 100 1 -1 -1 1 200 -1 1 -1 -1 -1 0 -1 -1 -1\n2 %s -1 %s 2 -1 -1 2 %s -1 1 -1 -1 -1 0 -1 -1 -1\n' \
    "$2" "$3" "$4" >"$1"
}

# A time far beyond 2^31 s: refused in well under the watchdog's time
for case in "100000000000000000000 10 20" "10 100000000000000000000 20" "10 10 1e300"; do
  read -r sub run req <<<"$case"
  swf "$T_TMP/big.swf" "$sub" "$run" "$req"
  t0=$(date +%s.%N)
  t_run timeout 20 mjsim -w "$T_TMP/big.swf" -p fcfs -q
  dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{print b-a}')
  assert_eq 1 "$T_RC" "submit $sub, run $run, requested $req: mjsim exits 1 (124 = it hung)"
  assert_contains "$T_ERR" "big.swf:3" "the message names the file and line"
  assert_contains "$T_ERR" "beyond what the simulator can represent" "the message says why"
  assert_le "$dt" 10 "refused at once"
done

# The largest time the simulator represents still runs to the end
swf "$T_TMP/edge.swf" 2147483648 3600 7200
t_run timeout 30 mjsim -w "$T_TMP/edge.swf" -p fcfs --json -q
assert_eq 0 "$T_RC" "submit time 2^31 s is simulated: $T_ERR"
assert_eq 2 "$(json_get finished <<<"$T_OUT")" "both jobs finish"

# NaN and infinities in number options
for opt in "--malleable-fraction nan" "--malleable-fraction inf" "--tick nan" "--tau -inf" "--grace nan" \
           "--idle-watts nan" "--grow-cost inf" "--time-scale nan"; do
  read -r name value <<<"$opt"
  t_run timeout 20 mjsim -w esp -p easy -q "$name" "$value"
  assert_ne 0 "$T_RC" "mjsim $name $value is refused"
  assert_contains "$T_ERR" "$name" "the message names $name"
  # (infinities fail the range check, with its own message; NaN fails no comparison)
  [[ $value == nan ]] && assert_contains "$T_ERR" "not a finite number" "the message says why ($name $value)"
done
t_run timeout 60 mjsim -w esp -p easy -q --malleable-fraction 0.5 --json
assert_eq 0 "$T_RC" "a finite --malleable-fraction still works"

t_done
