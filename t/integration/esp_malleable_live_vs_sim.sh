#!/usr/bin/env bash
# Live malleable ESP vs mjsim (issue 8 evaluation 3, small): the first 12 ESP
# jobs on 8 virtual nodes, all malleable, time scale 0.02, under the
# performance-aware policy `perf`: share/dynres/esp submits them with
# mjsub --malleable and each runs esp-app --malleable --esp-job SEQ, which
# resizes in place on mjsched's orders following mjsim's runtime model, MTCT
# profile and (scaled) resize costs. mjsim runs the same jobs, policy and
# scale. The makespans must agree within 10 %; jobs are really resized, none
# rolled back, allocations stay disjoint.
. "${DYNRES_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/t/lib.sh"
t_begin 60
for b in mjsim mjworkload esp-app; do [[ -x $DYNRES_BIN/$b ]] || t_skip "$b is not built"; done
SCALE=0.02 NODES=8 COUNT=12 POL=perf
C=$T_TMP/c
boot_cluster "$C" "$NODES" --tick 0.1 --kill-wait 1 --time-scale "$SCALE"
# vcluster-boot starts the rigid policies only: switch the scheduler to perf
sed -i "s/^\( *policy:\) *[a-z]*/\1 $POL/" "$C/dynres.yaml"
grep -q "policy: $POL" "$C/dynres.yaml" || t_fatal "no policy line in $C/dynres.yaml"
pid=$(sched_pid "$C")
kill "$pid"
wait_for 10 "the easy scheduler stopped" pids_gone "$pid" || t_fatal "mjsched did not stop"
t_run mjsched --home "$C" --daemon
assert_eq 0 "$T_RC" "mjsched --policy $POL starts ($T_ERR)"
wait_for 10 "mjsched ($POL) serving" test -S "$C/mjsched.sock" || t_fatal "mjsched did not come back"
t_run esp --nodes "$NODES" --scale "$SCALE" --count "$COUNT" --malleable-fraction 1
assert_eq 0 "$T_RC" "esp submits $COUNT malleable jobs ($T_ERR)"
wait_for 50 "every job finished" no_active_jobs "$C" || t_fatal "jobs did not finish"
assert_eq "$COUNT" "$(count_jobs "$C" "state='COMPLETED'")" "every job COMPLETED"
resizes=$(sq "$C" "SELECT COUNT(*) FROM events WHERE kind IN ('expand','shrink')")
assert_lt 0 "$resizes" "jobs were resized live ($resizes resizes)"
assert_eq 0 "$(sq "$C" "SELECT COUNT(*) FROM events WHERE kind='resize_rollback'")" "no order rolled back"
check_allocations_disjoint "$C"
t_run mjstat --metrics --json
live=$(echo "$T_OUT" | json_get makespan_s)
t_run mjsim -w esp -N "$NODES" --jobs "$COUNT" --time-scale "$SCALE" -p "$POL" -m 1 --json -q
assert_eq 0 "$T_RC" "mjsim $POL"
sim=$(echo "$T_OUT" | json_get makespan_s)
t_log "$POL, 100 % malleable: makespan live $live s, simulated $sim s (scaled seconds), $resizes live resizes"
if awk -v l="$live" -v s="$sim" 'BEGIN { d = l - s; if (d < 0) d = -d; exit !(s > 0 && d <= 0.10 * s) }'; then
  t_pass "live and simulated makespans within 10 %"
else
  t_fail "live makespan $live s and simulated $sim s differ by more than 10 %"
fi
t_done
