#!/usr/bin/env bash
# The policies differ for real on the live daemon, and time limits and
# mjcancel work end to end.
#
# Three 4-node clusters (fcfs, backfill, easy; tick 0.2 s, kill_wait 1 s).
# On each: A (3 nodes, limit 40 s) runs until released; then B (4 nodes,
# limit 10 s) and C (1 node, limit 5 s) are submitted; on easy also D
# (1 node, limit 5 min).
#   fcfs:     C waits for B (C starts after B ended).
#   backfill: C starts at once, before B.
#   easy:     C starts at once (it ends before B's reservation at A's start
#             + 40 s); D would end after it, so D waits for B.
# Then: a job over its limit (--time-exact 0:02, sleep 30) ends TIMEOUT, also when it
# ignores SIGTERM (SIGKILL after kill_wait); mjcancel of a running job ends
# it CANCELLED with all its processes gone; mjcancel of a pending job
# cancels it without it ever starting. About 20 s.
. "${DYNRES_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/t/lib.sh"
t_begin 120

POLICIES=(fcfs backfill easy)
for p in "${POLICIES[@]}"; do
  mkdir -p "$T_TMP/w-$p"
  boot_cluster "$T_TMP/c-$p" 4 --tick 0.2 --kill-wait 1 --policy "$p"
done
for p in "${POLICIES[@]}"; do
  write_script "$T_TMP/w-$p/wait.sh" '#!/bin/bash' '#SBATCH -o %x.out' \
    'echo "$MJ_JOB_NAME on $MJ_JOB_NUM_NODES"' \
    'for i in $(seq 300); do [[ -e $MJ_SUBMIT_DIR/$MJ_JOB_NAME.go ]] && break; sleep 0.1; done'
  write_script "$T_TMP/w-$p/quick.sh" '#!/bin/bash' '#SBATCH -o %x.out' 'echo "$MJ_JOB_NAME on $MJ_JOB_NUM_NODES"; sleep 0.3'
done

# sub POLICY NAME ARGS... -> id (submitted from that cluster's work dir)
sub() {
  local p=$1 name=$2 out
  shift 2
  if out=$(cd "$T_TMP/w-$p" && DYNRES_HOME=$T_TMP/c-$p mjsub --parsable -J "$name" "$@" 2>&1) &&
    [[ $out =~ ^[0-9]+$ ]]; then
    echo "$out"
    return 0
  fi
  echo "mjsub -J $name $* on $p failed: $out" >&2
  return 1
}
declare -A A B C
for p in "${POLICIES[@]}"; do A[$p]=$(sub "$p" A -N 3 --time-exact 0:40 wait.sh) || t_fatal "cannot submit A"; done
for p in "${POLICIES[@]}"; do wait_state 20 "$T_TMP/c-$p" "${A[$p]}" RUNNING || t_fatal "A did not start on $p"; done
for p in "${POLICIES[@]}"; do
  B[$p]=$(sub "$p" B -N 4 --time-exact 0:10 quick.sh) || t_fatal "cannot submit B"
  C[$p]=$(sub "$p" C -N 1 --time-exact 0:05 quick.sh) || t_fatal "cannot submit C"
done
D=$(sub easy D -N 1 -t 5:00 quick.sh) || t_fatal "cannot submit D"
cf=$T_TMP/c-fcfs cb=$T_TMP/c-backfill ce=$T_TMP/c-easy
# backfill and easy start C while A still runs; then several more passes
wait_state 20 "$cb" "${C[backfill]}" RUNNING COMPLETED
wait_state 20 "$ce" "${C[easy]}" RUNNING COMPLETED
sleep 1  # five more ticks: nothing else may start
assert_eq RUNNING "$(job_state "$cf" "${A[fcfs]}")" "fcfs: A still running"
assert_eq PENDING "$(job_state "$cf" "${B[fcfs]}")" "fcfs: B waits for A"
assert_eq PENDING "$(job_state "$cf" "${C[fcfs]}")" "fcfs: C waits behind B"
assert_eq Priority "$(job_col "$cf" "${C[fcfs]}" reason)" "fcfs: C's reason"
assert_eq Resources "$(job_col "$cf" "${B[fcfs]}" reason)" "fcfs: B's reason"
assert_eq PENDING "$(job_state "$cb" "${B[backfill]}")" "backfill: B waits for A"
assert_eq PENDING "$(job_state "$ce" "${B[easy]}")" "easy: B waits for A"
assert_eq PENDING "$(job_state "$ce" "$D")" "easy: D (would delay B) waits"
assert_eq RUNNING "$(job_state "$ce" "${A[easy]}")" "easy: A still running"

for p in "${POLICIES[@]}"; do touch "$T_TMP/w-$p/A.go"; done
for p in "${POLICIES[@]}"; do wait_for 30 "$p: all jobs ended" no_active_jobs "$T_TMP/c-$p"; done

col() { job_col "$1" "$2" "$3"; }
t_log "release A; B and the rest follow"
for p in "${POLICIES[@]}"; do
  c=$T_TMP/c-$p
  for id in "${A[$p]}" "${B[$p]}" "${C[$p]}"; do assert_eq COMPLETED "$(job_state "$c" "$id")" "$p: job $id COMPLETED"; done
  assert_le "$(col "$c" "${A[$p]}" end_time)" "$(col "$c" "${B[$p]}" start_time)" "$p: B started after A ended"
  check_started_once "$c"
  check_allocations_disjoint "$c"
done
assert_le "$(col "$cf" "${B[fcfs]}" end_time)" "$(col "$cf" "${C[fcfs]}" start_time)" "fcfs: C started after B ended"
assert_lt "$(col "$cb" "${C[backfill]}" start_time)" "$(col "$cb" "${B[backfill]}" start_time)" "backfill: C started before B"
assert_lt "$(col "$cb" "${C[backfill]}" start_time)" "$(col "$cb" "${A[backfill]}" end_time)" "backfill: C started while A ran"
assert_lt "$(col "$ce" "${C[easy]}" start_time)" "$(col "$ce" "${A[easy]}" end_time)" "easy: C started while A ran"
assert_le "$(col "$ce" "${B[easy]}" end_time)" "$(col "$ce" "$D" start_time)" "easy: D started after B ended"
assert_eq COMPLETED "$(job_state "$ce" "$D")" "easy: D COMPLETED"

# ---------------------------------------------------------------- time limit
write_script "$T_TMP/w-easy/slow.sh" '#!/bin/bash' 'echo started; sleep 30; echo never'
write_script "$T_TMP/w-easy/stubborn.sh" '#!/bin/bash' "trap '' TERM" 'echo started; sleep 30; echo never'
T1=$(sub easy slow --time-exact 0:02 -o slow.out slow.sh) || t_fatal "cannot submit slow"
T2=$(sub easy stubborn --time-exact 0:02 -o stubborn.out stubborn.sh) || t_fatal "cannot submit stubborn"

# ---------------------------------------------------------------- mjcancel
MARK="dynres-cancel-marker-$$-$RANDOM"
write_script "$T_TMP/w-backfill/victim.sh" '#!/bin/bash' \
  'sleep 300 & echo $! > pids' "bash -c 'sleep 301; : $MARK' & echo \$! >> pids" 'echo $$ >> pids' 'wait'
X=$(sub backfill victim -N 1 victim.sh) || t_fatal "cannot submit victim"
H=$(sub backfill hold -N 3 wait.sh) || t_fatal "cannot submit hold"
wait_state 20 "$cb" "$X" RUNNING
wait_state 20 "$cb" "$H" RUNNING
P=$(sub backfill pend -N 2 quick.sh) || t_fatal "cannot submit pend"
wait_for 10 "victim wrote its pids" eval '[[ $(wc -l <"$T_TMP/w-backfill/pids" 2>/dev/null) == 3 ]]'
XP=$(cat "$T_TMP/w-backfill/pids")
# shellcheck disable=SC2086
pids_alive $XP && t_pass "victim processes alive" || t_fail "victim processes not all alive: $(echo $XP)"
assert_ne "" "$(procs_matching "$MARK")" "marker process found before mjcancel"
assert_eq PENDING "$(job_state "$cb" "$P")" "pend is pending on a full cluster"

# pending job
t_run mjcancel --home "$cb" "$P"
assert_eq 0 "$T_RC" "mjcancel of a pending job exits 0 (stderr: $T_ERR)"
assert_eq CANCELLED "$(job_state "$cb" "$P")" "pending job CANCELLED at once"
assert_eq "" "$(col "$cb" "$P" start_time)" "cancelled pending job never started"
assert_ne "" "$(col "$cb" "$P" end_time)" "cancelled pending job has an end time"
t_run mjcancel --home "$cb" "$P"
assert_eq 0 "$T_RC" "mjcancel twice exits 0"
assert_contains "$T_ERR" "already ended" "mjcancel twice says the job already ended"

# running job
t_run mjcancel --home "$cb" "$X"
assert_eq 0 "$T_RC" "mjcancel of a running job exits 0 (stderr: $T_ERR)"
wait_state 20 "$cb" "$X" CANCELLED
assert_eq Cancelled "$(col "$cb" "$X" reason)" "cancelled job's reason"
# shellcheck disable=SC2086
wait_for 15 "all victim processes gone" pids_gone $XP
wait_for 15 "no process with the marker left" no_procs_matching "$MARK"
wait_for 15 "no process of the job script left" no_procs_matching "$cb/spool/job$X.sh"
assert_eq RUNNING "$(job_state "$cb" "$H")" "the other running job is untouched"
assert_eq 0 "$(sq "$cb" "SELECT COUNT(*) FROM nodes WHERE job_id=$X")" "cancelled job's node freed"
touch "$T_TMP/w-backfill/hold.go"

# time limits (submitted above; they have run meanwhile)
wait_state 20 "$ce" "$T1" TIMEOUT
wait_state 20 "$ce" "$T2" TIMEOUT
for id in "$T1" "$T2"; do
  el=$(sq "$ce" "SELECT end_time - start_time FROM jobs WHERE id=$id")
  assert_le 1.9 "$el" "job $id ran at least its 2 s limit"
  assert_le "$el" 10 "job $id ended soon after its limit (+1 s kill_wait)"
  assert_eq TimeLimit "$(col "$ce" "$id" reason)" "job $id reason TimeLimit"
done
assert_file_content "$T_TMP/w-easy/slow.out" "started" "slow job's output stops at the limit"
assert_file_content "$T_TMP/w-easy/stubborn.out" "started" "stubborn job's output stops at the limit"
wait_for 15 "no process of the timed-out jobs left" eval \
  '[[ -z $(procs_matching "$ce/spool/job$T1.sh")$(procs_matching "$ce/spool/job$T2.sh") ]]'

for p in "${POLICIES[@]}"; do
  wait_for 15 "$p: idle at the end" no_active_jobs "$T_TMP/c-$p"
  check_started_once "$T_TMP/c-$p"
  check_allocations_disjoint "$T_TMP/c-$p"
done
t_done
