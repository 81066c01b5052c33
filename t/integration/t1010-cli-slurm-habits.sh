#!/usr/bin/env bash
# squeue / scancel habits of mjstat and mjcancel, on a real local
# cluster of 3 nodes with the EASY policy:
#   mjstat: -h, -o with % codes and widths, -t (PD,R / long names / all),
#           -j lists, -u / --me, -l, --start (expected start from the policy
#           replayed on time limits), -i (live view), bad input;
#   mjcancel: -s SIGNAL (running job gets it, keeps running; pending refused),
#           -n, -t, -u, --me, id lists, bad input, and a cross-user cancel
#           refused with scancel's message (as user nobody; root only).
# About 10 s.
. "${DYNRES_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/t/lib.sh"
t_begin 90

C=$T_TMP/cluster
W=$T_TMP/work
mkdir -p "$W"
cd "$W" || t_fatal "cd $W"
boot_cluster "$C" 3 --tick 0.2 --kill-wait 1 --policy easy
ME=$(id -un)

write_script "$W/long.sh" '#!/bin/bash' '#SBATCH -t 2' \
  'trap "echo got-usr1 >>$MJ_SUBMIT_DIR/usr1-$MJ_JOB_ID.txt" USR1' \
  'for i in $(seq 600); do sleep 0.1; done'
A=$(mjsub --parsable -N 2 -J alpha long.sh) || t_fatal "mjsub A"
wait_state 20 "$C" "$A" RUNNING || t_fatal "A did not start"
B=$(mjsub --parsable -N 2 -J beta long.sh) || t_fatal "mjsub B"
Cc=$(mjsub --parsable -N 3 -J gamma -t 5 long.sh) || t_fatal "mjsub C"
wait_for 10 "B and C held" eval '[[ $(job_col "$C" "$Cc" reason) == Priority ]]'

# ---- mjstat
t_run mjstat -h -o '%.6i|%-6j|%u|%T|%t|%D|%R'
assert_eq 0 "$T_RC" "mjstat -h -o %codes ($T_ERR)"
assert_eq "$(printf '%6s|alpha |%s|RUNNING|R|2|n[1-2]\n%6s|beta  |%s|PENDING|PD|2|(Resources)\n%6s|gamma |%s|PENDING|PD|3|(Priority)' \
  "$A" "$ME" "$B" "$ME" "$Cc" "$ME")" "$T_OUT" "squeue % codes with widths, no header"
t_run mjstat -o '%i %j %T'
assert_eq "JOBID NAME STATE" "$(head -1 <<<"$T_OUT")" "squeue-style header for % codes"
t_run mjstat -t PD -o jobid -h
assert_eq "$B $Cc" "$(echo $T_OUT)" "-t PD: pending jobs only"
t_run mjstat -t RUNNING,pd -o jobid -h
assert_eq "$A $B $Cc" "$(echo $T_OUT)" "-t RUNNING,pd: long and short names, any case"
t_run mjstat -j "$A,$Cc" -o jobid -h
assert_eq "$A $Cc" "$(echo $T_OUT)" "-j LIST shows those jobs"
t_run mjstat -u "$ME" -o jobid -h
assert_eq "$A $B $Cc" "$(echo $T_OUT)" "-u me by name"
t_run mjstat -u nobody -o jobid -h
assert_eq "" "$T_OUT" "-u nobody: none"
t_run mjstat --me -o jobid -h
assert_eq "$A $B $Cc" "$(echo $T_OUT)" "--me"
t_run mjstat -l
assert_match '^JOBID +NAME +USER +STATE +TIME +TIMELIMIT +NODES +NODELIST\(REASON\)' "$(head -1 <<<"$T_OUT")" "-l header"
# --start: B starts when A reaches its 2-minute limit; C when B reaches its limit
t_run mjstat --start --json
assert_eq 0 "$T_RC" "mjstat --start --json ($T_ERR)"
exp_b=$(perl -MJSON::PP -0777 -ne 'for (@{decode_json($_)->{jobs}}) { print $_->{expected_start_time} if $_->{job_id} == '"$B"' }' <<<"$T_OUT")
exp_c=$(perl -MJSON::PP -0777 -ne 'for (@{decode_json($_)->{jobs}}) { print $_->{expected_start_time} if $_->{job_id} == '"$Cc"' }' <<<"$T_OUT")
a_start=$(job_col "$C" "$A" start_time)
assert_le "$(awk -v e="$exp_b" -v s="$a_start" 'BEGIN{d=e-(s+120); print (d<0?-d:d)}')" 0.01 "expected start of B = A's start + its limit"
assert_le "$(awk -v e="$exp_c" -v b="$exp_b" 'BEGIN{d=e-(b+120); print (d<0?-d:d)}')" 0.01 "expected start of C = B's expected start + its limit"
t_run mjstat --start
assert_match 'START' "$(head -1 <<<"$T_OUT")" "--start table has a START column"
assert_not_contains "$T_OUT" "alpha" "--start lists pending jobs only"
t_run timeout 2.6 mjstat -i 1 -o jobid
assert_le 2 "$(grep -c '^JOBID' <<<"$T_OUT")" "-i 1 repeats the queue (2.6 s: at least 2 views)"
# bad input: message names the problem, exit 1
for args in "-t XX|invalid job state 'XX'" "-j 1,x|invalid job id 'x'" "-u no-such-user-$$|invalid user 'no-such-user-$$'" \
  "-o %Z|unknown field code '%Z'" "-i 0|-i"; do
  t_run mjstat ${args%%|*}
  assert_ne 0 "$T_RC" "mjstat ${args%%|*} exits non-zero"
  assert_contains "$T_ERR" "${args#*|}" "mjstat ${args%%|*} names the problem"
done

# ---- mjcancel -s
t_run mjcancel -s USR1 "$A"
assert_eq 0 "$T_RC" "mjcancel -s USR1 of a running job ($T_ERR)"
wait_for 5 "the job got SIGUSR1" test -s "$W/usr1-$A.txt"
sleep 0.3
assert_eq RUNNING "$(job_state "$C" "$A")" "a signalled job keeps running"
t_run mjcancel -s USR1 "$B"
assert_eq 1 "$T_RC" "mjcancel -s of a pending job fails"
assert_contains "$T_ERR" "not running" "mjcancel -s of a pending job says why"
t_run mjcancel -s USR1 --me
assert_eq 0 "$T_RC" "mjcancel -s USR1 --me signals my running jobs only, pending ones are not an error ($T_ERR)"
wait_for 5 "the job got SIGUSR1 twice" eval '[[ $(wc -l <"$W/usr1-$A.txt") == 2 ]]'
assert_eq PENDING "$(job_state "$C" "$B")" "a pending job is left alone by -s"
t_run mjcancel -s BOGUS "$A"
assert_eq 1 "$T_RC" "mjcancel -s BOGUS fails"
assert_contains "$T_ERR" "invalid signal 'BOGUS'" "mjcancel -s BOGUS names it"
t_run mjcancel -t XX
assert_contains "$T_ERR" "invalid job state 'XX'" "mjcancel -t XX names it"
t_run mjcancel -t COMPLETED
assert_eq 1 "$T_RC" "mjcancel -t COMPLETED refused"

# ---- cross-user: refused unless root
if ((EUID == 0)) && command -v runuser >/dev/null; then
  chmod 755 "$T_TMP" && chmod 777 "$C" && chmod 666 "$C"/state.db*
  before=$(state_digest "$C")
  t_run runuser -u nobody -- env DYNRES_HOME="$C" "$DYNRES_BIN/mjcancel" "$A"
  assert_eq 1 "$T_RC" "mjcancel of root's job as nobody exits 1"
  assert_contains "$T_ERR" "Kill job error on job id $A: Access/permission denied" "scancel's message"
  t_run runuser -u nobody -- env DYNRES_HOME="$C" "$DYNRES_BIN/mjcancel" -u "$ME"
  assert_eq 1 "$T_RC" "mjcancel -u root as nobody exits 1"
  t_run runuser -u nobody -- env DYNRES_HOME="$C" "$DYNRES_BIN/mjcancel" -s KILL "$A"
  assert_eq 1 "$T_RC" "mjcancel -s KILL of root's job as nobody exits 1"
  assert_eq "$before" "$(state_digest "$C")" "refused cross-user actions change nothing"
  assert_eq RUNNING "$(job_state "$C" "$A")" "root's job still runs"
else
  t_log "not root (or no runuser): cross-user refusal not checked here"
fi

# ---- mjcancel selections
t_run mjcancel -u nobody
assert_eq 0 "$T_RC" "mjcancel -u nobody (no jobs) succeeds"
assert_eq "RUNNING PENDING PENDING" "$(for j in $A $B $Cc; do job_state "$C" $j; done | xargs)" "mjcancel -u nobody cancelled nothing"
t_run mjcancel -n gamma
wait_state 10 "$C" "$Cc" CANCELLED
assert_eq PENDING "$(job_state "$C" "$B")" "-n gamma leaves beta"
t_run mjcancel --me -t PD
wait_state 10 "$C" "$B" CANCELLED
assert_eq RUNNING "$(job_state "$C" "$A")" "--me -t PD leaves the running job"
D1=$(mjsub --parsable -N 1 -J d1 long.sh) && D2=$(mjsub --parsable -N 1 -J d2 long.sh) || t_fatal "mjsub d"
t_run mjcancel "$A,$D1" "$D2"
assert_eq 0 "$T_RC" "mjcancel with an id list ($T_ERR)"
for j in $A $D1 $D2; do wait_state 10 "$C" "$j" CANCELLED; done
check_started_once "$C"
check_allocations_disjoint "$C"
t_done
