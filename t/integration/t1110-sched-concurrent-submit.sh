#!/usr/bin/env bash
# Concurrent submission: 8 background loops of mjsub, 25 jobs each (200 in
# total), as fast as possible, into one 8-node cluster with the scheduler
# running and starting the (trivial, 1-node) jobs meanwhile. Every mjsub
# must exit 0, no stderr may mention a locked database, the job table must
# hold exactly the 200 ids that were printed, and all 200 jobs must end
# COMPLETED, each started once, allocations disjoint. About 20-40 s.
. "${DYNRES_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/t/lib.sh"
t_begin 150

LOOPS=${LOOPS:-8}
PER_LOOP=${PER_LOOP:-25}
TOTAL=$((LOOPS * PER_LOOP))
C=$T_TMP/cluster
W=$T_TMP/work
mkdir -p "$W"
cd "$W" || t_fatal "cd $W"
boot_cluster "$C" 8 --tick 0.2 --kill-wait 1
write_script "$W/true.sh" '#!/bin/sh' '#SBATCH -N 1' '#SBATCH -o /dev/null' 'true'

t_log "submitting $TOTAL jobs from $LOOPS concurrent loops"
t0=$(date +%s.%N)
pids=()
for k in $(seq "$LOOPS"); do
  (
    for _ in $(seq "$PER_LOOP"); do
      mjsub --parsable true.sh >>"$W/ids.$k" 2>>"$W/err.$k"
      echo $? >>"$W/rc.$k"
    done
  ) &
  pids+=($!)
  bg_register $!
done
for p in "${pids[@]}"; do wait "$p"; done
t1=$(date +%s.%N)
t_log "submitted in $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b-a}') s"

all_rc=$(cat "$W"/rc.* | sort | uniq -c | sed 's/^ *//' | tr '\n' ' ')
assert_eq "$TOTAL 0 " "$all_rc" "every mjsub exited 0 (count exit-code)"
errs=$(cat "$W"/err.*)
assert_not_contains "$errs" "locked" "no 'database is locked' on stderr"
assert_not_contains "$errs" "busy" "no 'busy' on stderr"
assert_eq "" "$errs" "stderr of all mjsub runs is empty"

printed=$(cat "$W"/ids.* | sort -n)
assert_eq "$TOTAL" "$(grep -cE '^[0-9]+$' <<<"$printed")" "every mjsub printed one id"
assert_eq "$TOTAL" "$(sort -u <<<"$printed" | wc -l)" "the printed ids are distinct"
assert_eq "$TOTAL" "$(count_jobs "$C")" "the job table holds exactly $TOTAL jobs"
assert_eq "$printed" "$(sq "$C" "SELECT id FROM jobs ORDER BY id")" "the job ids are the printed ids"
assert_eq "$TOTAL" "$(sq "$C" "SELECT COUNT(*) FROM events WHERE kind='submit'")" "one submit event per job"

wait_for 90 "all $TOTAL jobs ended" no_active_jobs "$C"
states=$(sq "$C" "SELECT state || ' ' || COUNT(*) FROM jobs GROUP BY state" | tr '\n' ' ')
assert_eq "COMPLETED $TOTAL " "$states" "all jobs COMPLETED (state count)"
bad=$(sq "$C" "SELECT id || ':' || state || ':' || reason FROM jobs WHERE state != 'COMPLETED' LIMIT 10" | tr '\n' ' ')
[[ -z $bad ]] || t_log "not completed (first 10): $bad"
check_started_once "$C"
check_allocations_disjoint "$C"
assert_eq 0 "$(sq "$C" "SELECT COUNT(*) FROM nodes WHERE job_id IS NOT NULL")" "all nodes idle at the end"
t_done
