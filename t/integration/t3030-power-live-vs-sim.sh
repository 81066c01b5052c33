#!/usr/bin/env bash
# ctest-cost: 20
# Power live vs simulated: a reduced §9.2.3 experiment -- one
# malleable Pi job (125 W/node, 1-16 nodes), the corridor changed at run time
# by `pcorridor set` from a script standing for cron (100-600 -> 700-1200 ->
# 1300-1900 W, then 2100-2600 W, which 16 nodes x 125 W cannot reach, then
# 100-600 W) -- run live on 16 virtual nodes through mjsched's power policy
# and in mjsim with the same jobs, corridor and time scale
# (bench/power/live.sh --run). Both count violations with the one function of
# lib/power (violations.hpp) over the same window with the same grace: the
# counts must agree (1: the unreachable corridor), and the makespans within
# 10 %.
. "${DYNRES_SRC:-$(dirname "$0")/../..}/t/lib.sh"
t_begin 120
[[ -x $DYNRES_BIN/mjsim ]] || t_skip "mjsim is not built"
cat >"$T_TMP/corridor" <<'EOT'
# scaled seconds (0.02 x the 240 s steps of [John24 §9.2.3])
0     100   600
4.8   700   1200
9.6   1300  1900
14.4  2100  2600
19.2  100   600
EOT
t_run "$DYNRES_SRC/bench/power/live.sh" --run dyn power-dynamic power aware 0.02 --corridor "$T_TMP/corridor" \
  --grace 1 --out "$T_TMP/out"
assert_eq 0 "$T_RC" "live.sh --run ($T_ERR)"
t_log "$T_OUT"
J=$T_TMP/out/dyn.json
[[ -f $J ]] || t_fatal "no result $J"
get() { perl -MJSON::PP -0777 -ne "print decode_json(\$_)->$1" "$J"; }
assert_eq 1 "$(get '{completed}')" "the job completed"
assert_eq 1 "$(get '{sim}{violations}')" "mjsim: one violation (the unreachable corridor)"
assert_eq "$(get '{sim}{violations}')" "$(get '{live}{violations}')" "live and simulated violation counts agree"
live=$(get '{live}{makespan_s}') sim=$(get '{sim}{makespan_s}')
if awk -v l="$live" -v s="$sim" 'BEGIN { d = l - s; if (d < 0) d = -d; exit !(s > 0 && d <= 0.10 * s) }'; then
  t_pass "makespans within 10 % (live $live s, simulated $sim s)"
else
  t_fail "live makespan $live s and simulated $sim s differ by more than 10 %"
fi
# the live series is event-driven: a sample at every resize commit
assert_lt 3 "$(sqlite3 "$T_TMP/out/dyn/state.db" "SELECT COUNT(DISTINCT time) FROM power_samples" 2>/dev/null || echo 0)" \
  "samples recorded"
t_done
