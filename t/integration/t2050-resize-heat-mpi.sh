#!/bin/bash
# ctest-cost: 25
# An MPI job resized by checkpoint-restart through iCheck
# ([John24 §7.4.4]): heat --malleable in the job script
# share/dynres/examples/heat/heat-malleable.sh, one MPI rank per node, on a
# local virtual cluster of 4 compute nodes and 1 iCheck node.
#   - the job starts on 1 node; `mjcontrol resize J 4` orders an expand:
#     heat's rank 0 begins it (MJ_ADAPT_RESTART), every rank commits with
#     iCheck and exits; mjstepd runs the script again on 4 nodes; heat
#     restores the grid redistributed from 1 rank to 4 and commits the order
#   - `mjcontrol resize J 2` shrinks it the same way, 4 ranks -> 2
#   - the job ends with the checksum of a fixed-size run without iCheck
#   - events: resize_order, adapt_begin, expand/shrink with their duration;
#     restart count 2; a new allocation per resize; node states consistent
#     after each step (no node held by a job not running, counts match)
#   - heat --malleable outside a job, or with the scheduler unreachable, or
#     run a second time in a job (no re-registration), says so and runs at a
#     fixed size (same checksum); bad options exit 2
# About 20 s.
. "${DYNRES_SRC:-$(dirname "$0")/../..}/t/lib.sh"
t_begin 90
command -v mpiexec >/dev/null || t_skip "mpiexec (Debian package mpich) is not installed"
for t in heat icheckd icagent mjcontrol; do [[ -x $DYNRES_BIN/$t ]] || t_skip "$DYNRES_BIN/$t is not built"; done
[[ $(ldd "$DYNRES_BIN/heat") == *libmj* ]] || t_skip "heat is built without libmj"

C=$T_TMP/c
W=$T_TMP/work
mkdir -p "$W"
cd "$W" || t_fatal "cd $W"
boot_cluster "$C" 5 --tick 0.2 --kill-wait 1 --icheck-nodes 1 --resize-timeout 30

out() { cat "$W/heat-$J.out" 2>/dev/null; }
registered_times() { [[ $(out | grep -c '^heat: malleable job=') -ge $1 && $(sq "$C" "SELECT phase FROM mj_jobs WHERE job_id=$J") == accepting ]]; }
ck() { sed -n 's/^heat: checksum=\([0-9a-f]*\).*/\1/p' | tail -1; }

# 240 iterations of at least 0.05 s: 12 s of computing in all, whatever the
# rank count, so both orders land while heat runs.
ARGS=(--nx 96 --ny 90 --iters 240 --iter-seconds 0.05 --print-every 40)
ref=$("$DYNRES_BIN/heat" --nx 96 --ny 90 --iters 240 --no-icheck | ck)
[[ -n $ref ]] || t_fatal "the fixed-size reference run printed no checksum"

# ---- heat --malleable where it cannot resize: fixed size, same result ------
printf 'direct: true\npfs_dir: %s/pfs\n' "$W" >"$W/direct.yaml"
t_run env -u MJ_JOB_ID heat --malleable --nx 96 --ny 90 --iters 240 --app outside --config "$W/direct.yaml" --no-persist
assert_eq 0 "$T_RC" "--malleable outside a dynres job runs ($T_ERR)"
assert_contains "$T_ERR" "not inside a dynres job (MJ_JOB_ID unset): running at a fixed size" "and says so"
assert_eq "$ref" "$(ck <<<"$T_OUT")" "at a fixed size, with the fixed-size checksum"
t_run env MJ_JOB_ID=7 MJ_SECRET=00 MJ_SOCKET="$T_TMP/nosuch.sock" heat --malleable --nx 96 --ny 90 --iters 240 \
  --app nosched --config "$W/direct.yaml" --no-persist
assert_eq 0 "$T_RC" "--malleable with the scheduler unreachable runs ($T_ERR)"
assert_match 'mj_init_adapt: .*running at a fixed size' "$(tr '\n' ' ' <<<"$T_ERR")" "and names the problem"
assert_eq "$ref" "$(ck <<<"$T_OUT")" "with the fixed-size checksum"
for bad in "--malleable --no-icheck" "--malleable --hand-redist $W/h.bin" "--iter-seconds -1" "--iter-seconds 1x" "--iter-seconds nan"; do
  # shellcheck disable=SC2086
  t_run heat --nx 8 --ny 8 --iters 2 $bad
  assert_eq 2 "$T_RC" "heat $bad is refused (exit 2)"
  assert_match '^heat: --(malleable|iter-seconds)' "$T_ERR" "heat $bad: the message names the option"
done

# A malleable job starts on as many idle nodes as it may take (easy): a
# rigid job holds 3 of the 4 nodes until heat runs on the fourth.
write_script "$W/block.sh" '#!/bin/bash' 'sleep 300'
B=$(mjsub --parsable -N 3 -o /dev/null "$W/block.sh") || t_fatal "mjsub of the blocker failed"
wait_state 10 "$C" "$B" RUNNING
J=$(HEAT=$DYNRES_BIN/heat mjsub --parsable -o "$W/heat-%j.out" \
  "$DYNRES_SRC/share/dynres/examples/heat/heat-malleable.sh" "${ARGS[@]}") || t_fatal "mjsub failed"
wait_state 10 "$C" "$J" RUNNING
assert_eq 1 "$(job_col "$C" "$J" num_nodes)" "the job starts on 1 node (-N 1)"
assert_eq malleable "$(job_col "$C" "$J" kind)" "#SBATCH --malleable makes it malleable"
check_nodes_consistent "$C" "1 node"
mjcancel "$B" >/dev/null
wait_state 10 "$C" "$B" CANCELLED
wait_for 10 "the blocker's nodes idle" eval "[[ \$(sq $C 'SELECT COUNT(*) FROM nodes WHERE job_id IS NULL') == 3 ]]"
# (heat iterates only once registered: the order follows within a few iterations)
wait_for 15 "heat registered as malleable" registered_times 1

# ---- grow 1 -> 4 ----------------------------------------------------------
t_run mjcontrol resize "$J" 4 --wait 30
assert_eq 0 "$T_RC" "expand 1 -> 4 committed ($T_OUT $T_ERR)"
O=$(out)
assert_match 'heat: adapt order=[0-9]+ expand nodes=1->4 iteration=[0-9]+' "$O" "heat's rank 0 took the expand order"
assert_match 'heat: stopped for resize order=[0-9]+ iteration=[0-9]+ ranks=1 ' "$O" "1 rank committed and exited"
assert_match 'heat-malleable: run 2 on 4 node\(s\) n\[[0-9-]+\]: 4 rank\(s\) \(resumed after order [0-9]+, from 1 node' "$O" \
  "mjstepd ran the script again on 4 nodes"
assert_match 'heat: restart version=[0-9]+ iteration=[0-9]+ seconds=[0-9.]+ from_ranks=1 ranks=4' "$O" "4 ranks restored 1 rank's grid"
assert_match 'heat: resumed order=[0-9]+ nodes=1->4 ranks=4 restart=1 iteration=[0-9]+ commit=ok' "$O" "rank 0 committed the order"
assert_eq 4 "$(job_col "$C" "$J" num_nodes)" "the job holds 4 nodes"
check_nodes_consistent "$C" "after the expand"
it1=$(sed -n 's/^heat: stopped for resize order=[0-9]* iteration=\([0-9]*\).*/\1/p' <<<"$O" | head -1)
assert_lt "$it1" 240 "the expand happened while heat ran (iteration $it1)"

# ---- shrink 4 -> 2 --------------------------------------------------------
wait_for 15 "heat registered again after the expand" registered_times 2
t_run mjcontrol resize "$J" 2 --wait 30
assert_eq 0 "$T_RC" "shrink 4 -> 2 committed ($T_OUT $T_ERR)"
O=$(out)
assert_match 'heat: adapt order=[0-9]+ shrink nodes=4->2' "$O" "heat took the shrink order"
assert_match 'heat: stopped for resize order=[0-9]+ iteration=[0-9]+ ranks=4 ' "$O" "4 ranks committed and exited"
assert_match 'heat: restart version=[0-9]+ iteration=[0-9]+ seconds=[0-9.]+ from_ranks=4 ranks=2' "$O" "2 ranks restored 4 ranks' grid"
assert_match 'heat: resumed order=[0-9]+ nodes=4->2 ranks=2 restart=2 iteration=[0-9]+ commit=ok' "$O" "rank 0 committed the shrink"
assert_eq 2 "$(job_col "$C" "$J" num_nodes)" "the job holds 2 nodes"
check_nodes_consistent "$C" "after the shrink"
it2=$(sed -n 's/^heat: stopped for resize order=[0-9]* iteration=\([0-9]*\).*/\1/p' <<<"$O" | tail -1)
assert_lt "$it2" 240 "the shrink happened while heat ran (iteration $it2)"

# ---- the end --------------------------------------------------------------
wait_state 40 "$C" "$J" COMPLETED FAILED
assert_eq COMPLETED "$(job_state "$C" "$J")" "the job completed ($(job_col "$C" "$J" reason))"
O=$(out)
assert_eq "$ref" "$(ck <<<"$O")" "grown 1 -> 4 and shrunk 4 -> 2, heat ends with the fixed-size checksum"
assert_eq 1 "$(grep -c '^heat: checksum=' <<<"$O")" "one final result (the stopped runs print none)"
assert_match 'heat: malleable probes=[1-9][0-9]* probe_seconds=' "$O" "the last run probed for orders and says how long it took"
assert_eq 2 "$(sq "$C" "SELECT COUNT(*) FROM events WHERE job_id=$J AND kind='resize_order'")" "two resize_order events"
assert_eq 2 "$(sq "$C" "SELECT COUNT(*) FROM events WHERE job_id=$J AND kind='adapt_begin'")" "two adapt_begin events"
assert_match '^from=1 to=4 order=[0-9]+ duration=[0-9.]+s?' "$(sq "$C" "SELECT detail FROM events WHERE job_id=$J AND kind='expand'")" \
  "the expand event with its duration"
assert_match '^from=4 to=2 order=[0-9]+ duration=[0-9.]+s?' "$(sq "$C" "SELECT detail FROM events WHERE job_id=$J AND kind='shrink'")" \
  "the shrink event with its duration"
assert_eq "committed committed" "$(sq "$C" "SELECT group_concat(state, ' ') FROM resize_orders WHERE job_id=$J")" "both orders committed"
assert_eq "1 1" "$(sq "$C" "SELECT group_concat(restart, ' ') FROM resize_orders WHERE job_id=$J")" "both were restart-based"
assert_eq 2 "$(sq "$C" "SELECT restart_count FROM mj_jobs WHERE job_id=$J")" "restart count 2"
assert_eq 3 "$(sq "$C" "SELECT COUNT(*) FROM allocations WHERE job_id=$J")" "a new allocation per resize"
assert_eq 0 "$(sq "$C" "SELECT COUNT(*) FROM nodes WHERE job_id IS NOT NULL")" "no node held after the end"
check_nodes_consistent "$C" "at the end"

# ---- a second heat in the same job cannot register again (the job
# deregistered at the end of the first): it runs at a fixed size, every rank
write_script "$W/twice.sh" '#!/bin/bash' '#SBATCH -N 2' '#SBATCH --malleable' '#SBATCH --min-nodes 2' '#SBATCH --max-nodes 2' \
  "for r in 1 2; do mpiexec -f \"\$MJ_NODEFILE\" -n 2 $DYNRES_BIN/heat --malleable --nx 96 --ny 90 --iters 240 --app tw\$r-\$MJ_JOB_ID --no-persist || exit 1; done"
T=$(mjsub --parsable -o "$W/twice.out" "$W/twice.sh") || t_fatal "mjsub twice.sh failed"
wait_state 30 "$C" "$T" COMPLETED FAILED
assert_eq COMPLETED "$(job_state "$C" "$T")" "two malleable heat runs in one job complete"
assert_contains "$(cat "$W/twice.out")" "mj_register: call out of order" "the second cannot register again"
assert_eq "$ref $ref" "$(sed -n 's/^heat: checksum=\([0-9a-f]*\).*/\1/p' "$W/twice.out" | tr '\n' ' ' | sed 's/ $//')" \
  "both end with the fixed-size checksum"
check_allocations_disjoint "$C"
t_done
