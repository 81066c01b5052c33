#!/bin/bash
# ctest-cost: 40
# A small run of the scheduler's fault-injection campaign
# (bench/sched/fault_campaign.sh runs the full 200-job one): mjsched SIGKILLed
# and rebooted at random moments, supervisors SIGKILLed, jobs cancelled,
# failing and resized meanwhile. No job lost, none started twice, none
# misreported, no node held by a finished job, no process left.
. "${DYNRES_SRC:-$(dirname "$0")/../..}/t/lib.sh"
t_begin 300
t_run "$DYNRES_SRC/bench/sched/fault_campaign.sh" --jobs 50 --sched-kills 5 --stepd-kills 4 --seed 7 --dir "$T_TMP/camp"
echo "$T_OUT" | tail -5
assert_eq 0 "$T_RC" "the campaign met every target (stderr: $(tail -3 <<<"$T_ERR"))"
for k in lost twice never_recorded_start misreported held leftover; do
  assert_match "(^| )$k=0( |$)" "$(grep "^campaign: elapsed_s=" <<<"$T_OUT")" "$k = 0"
done
assert_match 'sched_kills=[1-9]' "$T_OUT" "mjsched was killed during the run"
assert_match 'stepd_kills=[1-9]' "$T_OUT" "supervisors were killed during the run"
assert_match 'cancels=[1-9]' "$T_OUT" "jobs were cancelled during the run"
# the same with the cluster directory on a tmpfs that fills up for 6 s (root)
if [[ $(id -u) == 0 ]]; then
  t_run "$DYNRES_SRC/bench/sched/fault_campaign.sh" --jobs 60 --sched-kills 2 --stepd-kills 2 --seed 3 --full-disk --dir "$T_TMP/full"
  if [[ $T_RC == 77 ]]; then
    t_log "full-disk part skipped: $T_ERR"
  else
    echo "$T_OUT" | tail -3
    assert_eq 0 "$T_RC" "the full-disk campaign met every target"
    assert_match 'refused submissions while the disk was full: [1-9][0-9]* \(first error: mjsub: error: state file .*database or disk is full' \
      "$T_OUT" "submissions on a full disk are refused with a clear error"
  fi
fi
t_done
