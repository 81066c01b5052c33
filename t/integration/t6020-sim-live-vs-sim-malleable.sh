#!/usr/bin/env bash
# ctest-cost: 80
# Live vs simulated with malleable jobs: the first 20
# ESP jobs, all malleable, on 8 virtual nodes, time-scaled, run live through
# mjsched with perf and with fpsma (esp --malleable-fraction 1: esp-app
# registers through libmj, resizes in place on the scheduler's orders and
# pays the [Finnerty24] resize costs at this scale) and through mjsim with the
# same policy, jobs, seed and scale. The makespans must agree within 10 %, and
# the live malleable runs must beat the simulated rigid EASY run.
. "${DYNRES_SRC:-$(dirname "$0")/../..}/t/lib.sh"
t_begin 400
[[ -x $DYNRES_BIN/mjsim && -x $DYNRES_BIN/esp-app ]] || t_skip "mjsim or esp-app is not built"

SCALE=0.02 NODES=8 COUNT=20
t_run mjsim -w esp -N "$NODES" --jobs "$COUNT" --time-scale "$SCALE" -p easy --tick 0.1 --json -q
rigid=$(echo "$T_OUT" | json_get makespan_s)
for pol in perf fpsma; do
  C=$T_TMP/$pol
  boot_cluster "$C" "$NODES" --tick 0.1 --kill-wait 1 --policy "$pol" --time-scale "$SCALE"
  t_log "$pol: submitting the first $COUNT ESP jobs, all malleable, at scale $SCALE"
  t_run esp --nodes "$NODES" --scale "$SCALE" --count "$COUNT" --malleable-fraction 1
  assert_eq 0 "$T_RC" "esp submits $COUNT jobs"
  assert_eq "$COUNT" "$(count_jobs "$C" "kind='malleable'")" "$COUNT malleable jobs in the state file"
  wait_for 240 "every job finished" no_active_jobs "$C" || t_fatal "jobs did not finish"
  assert_eq "$COUNT" "$(count_jobs "$C" "state='COMPLETED'")" "every job COMPLETED"
  check_allocations_disjoint "$C"
  resized=$(sq "$C" "SELECT COUNT(*) FROM resize_orders WHERE state='committed'")
  assert_lt 0 "$resized" "$pol resized jobs live ($resized orders committed)"
  assert_eq 0 "$(sq "$C" "SELECT COUNT(*) FROM resize_orders WHERE state='rolled_back'")" "no order rolled back"
  t_run mjstat --metrics --json
  live=$(echo "$T_OUT" | json_get makespan_s)
  t_run mjsim -w esp -N "$NODES" --jobs "$COUNT" --time-scale "$SCALE" -p "$pol" -m 1 --tick 0.1 --json -q
  assert_eq 0 "$T_RC" "mjsim $pol"
  sim=$(echo "$T_OUT" | json_get makespan_s)
  t_log "$pol: makespan live ${live} s, simulated ${sim} s, simulated rigid easy ${rigid} s (scaled seconds)"
  if awk -v l="$live" -v s="$sim" 'BEGIN { d = l - s; if (d < 0) d = -d; exit !(s > 0 && d <= 0.10 * s) }'; then
    t_pass "$pol: live and simulated makespans within 10 %"
  else
    t_fail "$pol: live makespan $live s and simulated $sim s differ by more than 10 %"
  fi
  assert_lt "$live" "$rigid" "$pol live (all malleable) beats rigid easy"
  vcluster-down --dir "$C" >/dev/null 2>&1
done
t_done
