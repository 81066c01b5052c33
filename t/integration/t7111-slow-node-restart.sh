#!/usr/bin/env bash
# ctest-cost: 30
# The cooldown of a migration off a slow node survives a kill -9 of mjsched
# [HoG14 §5.5]: heat --malleable (iCheck, one MPI rank per node, libmjprof
# reporting every 0.3 s) on 3 of the 4 compute nodes of a local cluster,
# slow-node windows of 2 s, 3 windows, factor 1.5, cooldown 300 s.
#  1. n2 under a CPU quota of 1 % of one core: found slow, swapped onto n4
#     (migrate kind=swap, the second half kept in the state file's
#     expand_after until the shrink committed, then migrate_expand);
#  2. mjsched is killed (-9) inside the job's cooldown and started again;
#  3. n4 is then throttled too: the new mjsched finds it slow but keeps the
#     cooldown of the migration ordered before its restart (its migrate
#     event in the state file; migrate_note "within the cooldown"): still
#     one migration;
#  4. released, the job ends COMPLETED on n[1,3-4] with the fixed-size
#     checksum.
# About 30 s (more on a loaded machine).
. "${DYNRES_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/t/lib.sh"
t_begin 240
C=$T_TMP/c W=$T_TMP/w
# enough iterations that the job still runs when n4 is found slow, after a
# swap and a restart (1500 were all done on a quiet machine)
ARGS=(--nx 800 --ny 600 --iters 2500 -q)
slow_node_cluster "$C" 300 "${ARGS[@]}"
dump() { grep -E 'slow|migrat|swap|cooldown|order' "$C/mjsched.log" | tail -25 >&2; echo "heat ranks (CPU share over 1 s):" >&2; rank_cpu_shares "$C" >&2; }
t_on_fail dump

"$DYNRES_BIN/heat" "${ARGS[@]}" --no-icheck >"$T_TMP/ref" &  # the fixed-size reference, meanwhile
REF=$!
ev() { sq "$C" "SELECT COUNT(*) FROM events WHERE job_id=$1 AND kind='$2'"; }
registered() { [[ $(sq "$C" "SELECT phase FROM mj_jobs WHERE job_id=$1") == accepting ]]; }

B=$(mjsub --parsable -N 3 -t 5 -o "$W/heat-%j.out" "$W/job.sh") || t_fatal "mjsub: $B"
wait_state 20 "$C" "$B" RUNNING || t_fatal "job $B did not start"
wait_for 20 "heat registered as malleable" registered "$B" || t_fatal "$(cat "$W/heat-$B.out")"
assert_eq "n[1-3]" "$(job_col "$C" "$B" nodelist)" "job $B on n[1-3], n4 idle"

# 1. n2 slow: swapped onto n4
t_run "$THR" --dir "$C" n2 1
assert_eq 0 "$T_RC" "vcluster-throttle n2 1 ($T_ERR)"
assert_eq RUNNING "$(job_state "$C" "$B")" "job $B still runs when n2's throttle starts"
mig() { [[ $(ev "$B" migrate) -ge 1 ]]; }
wait_for 40 "migration off n2 ordered" mig || t_fatal "no migration off n2"
assert_match '^kind=swap from=n2 to=n4 order=[0-9]+ ' "$(sq "$C" "SELECT detail FROM events WHERE job_id=$B AND kind='migrate'")" \
  "swap n2 -> n4"

expanded() { [[ $(ev "$B" migrate_expand) -ge 1 ]]; }
wait_for 60 "the expand half" expanded || t_fatal "no expand onto n4"
on_n4() { [[ $(sq "$C" "SELECT COUNT(*) FROM resize_orders WHERE job_id=$B AND kind='expand' AND state='committed'") == 1 ]] && registered "$B"; }
wait_for 60 "the job running on n4" on_n4 || t_fatal "the expand onto n4 did not commit"
assert_eq "n[1,3-4]" "$(job_col "$C" "$B" nodelist)" "job $B on n[1,3-4]"
assert_eq 0 "$(sq "$C" "SELECT COUNT(*) FROM expand_after")" "the swap's second half is no longer pending"

# 2. kill -9 inside the cooldown
sched_restart "$C" KILL

# 3. n4 slow too: within the cooldown of the migration before the restart
t_run "$THR" --dir "$C" n4 1
assert_eq 0 "$T_RC" "vcluster-throttle n4 1 ($T_ERR)"
assert_eq RUNNING "$(job_state "$C" "$B")" "job $B still runs when n4's throttle starts"
cooled() { [[ $(sq "$C" "SELECT COUNT(*) FROM events WHERE job_id=$B AND kind='migrate_note' AND detail LIKE 'slow node n4: within the cooldown%'") -ge 1 ]]; }
settled() { cooled || [[ $(ev "$B" migrate) -ge 2 ]]; }
wait_for 40 "n4 found slow: not moved (cooldown) or moved" settled || t_fatal "n4 not found slow"
assert_eq 1 "$(ev "$B" migrate)" "one migration: the cooldown held across the restart"
cooled || t_fatal "no cooldown note for n4"
"$THR" --dir "$C" --release n4 >/dev/null

# 4. the job completes with the fixed-size checksum
wait_state 120 "$C" "$B" COMPLETED FAILED
assert_eq COMPLETED "$(job_state "$C" "$B")" "the migrated job completed ($(job_col "$C" "$B" reason))"
wait "$REF"
ref=$(sed -n 's/^heat: checksum=\([0-9a-f]*\).*/\1/p' "$T_TMP/ref")
[[ -n $ref ]] || t_fail "the fixed-size reference run printed no checksum"
assert_eq "$ref" "$(sed -n 's/^heat: checksum=\([0-9a-f]*\).*/\1/p' "$W/heat-$B.out" | tail -1)" "with the fixed-size checksum"
assert_eq 1 "$(ev "$B" migrate)" "still one migration"
assert_eq 0 "$(sq "$C" "SELECT COUNT(*) FROM expand_after")" "nothing left pending"
check_allocations_disjoint "$C"
t_done
