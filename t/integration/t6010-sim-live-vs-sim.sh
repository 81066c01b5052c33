#!/usr/bin/env bash
# ctest-cost: 60
# Live vs simulated: the first 20 ESP jobs on 8 virtual nodes, time-scaled,
# run live through mjsched (share/dynres/esp submits them with mjsub, each
# runs esp-app) and through mjsim with the same policy, order and scale. The
# makespans must agree within 10 %. The
# simulator runs the same sched::decide(); the live run adds process start
# and scheduler-tick latencies.
. "${DYNRES_SRC:-$(dirname "$0")/../..}/t/lib.sh"
t_begin 300
[[ -x $DYNRES_BIN/mjsim ]] || t_skip "mjsim is not built"

SCALE=0.02 NODES=8 COUNT=20
for pol in easy; do
  C=$T_TMP/$pol
  boot_cluster "$C" "$NODES" --tick 0.1 --kill-wait 1 --policy "$pol"
  t_log "$pol: submitting the first $COUNT ESP jobs at scale $SCALE"
  t_run esp --nodes "$NODES" --scale "$SCALE" --count "$COUNT"
  assert_eq 0 "$T_RC" "esp submits $COUNT jobs"
  assert_eq "$COUNT" "$(count_jobs "$C")" "$COUNT jobs in the state file"
  wait_for 240 "every job finished" no_active_jobs "$C" || t_fatal "jobs did not finish"
  assert_eq "$COUNT" "$(count_jobs "$C" "state='COMPLETED'")" "every job COMPLETED"
  check_allocations_disjoint "$C"
  t_run mjstat --metrics --json
  live=$(echo "$T_OUT" | json_get makespan_s)
  t_run mjsim -w esp -N "$NODES" --jobs "$COUNT" --time-scale "$SCALE" -p "$pol" --json -q
  assert_eq 0 "$T_RC" "mjsim $pol"
  sim=$(echo "$T_OUT" | json_get makespan_s)
  t_log "$pol: makespan live ${live} s, simulated ${sim} s (scaled seconds)"
  if awk -v l="$live" -v s="$sim" 'BEGIN { d = l - s; if (d < 0) d = -d; exit !(s > 0 && d <= 0.10 * s) }'; then
    t_pass "$pol: live and simulated makespans within 10 %"
  else
    t_fail "$pol: live makespan $live s and simulated $sim s differ by more than 10 %"
  fi
  vcluster-down --dir "$C" >/dev/null 2>&1
done
t_done
