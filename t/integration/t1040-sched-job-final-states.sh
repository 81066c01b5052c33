#!/usr/bin/env bash
# Every final state a job can reach, end to end, as users read it through
# mjstat -j ID --json and mjstat --history (states named like Slurm's):
#   exit 3                      -> FAILED, exit code 3, reason NonZeroExitCode
#   killed by SIGKILL (itself)  -> FAILED, exit code 128+9
#   exit 0                      -> COMPLETED, exit code 0
#   past its time limit         -> TIMEOUT (SIGTERM, then SIGKILL after kill_wait)
#   cancelled while pending     -> CANCELLED
#   cancelled while running     -> CANCELLED
#   supervisor lost (SIGKILL)   -> FAILED, reason "supervisor lost"
. "${DYNRES_SRC:-$(dirname "$0")/../..}/t/lib.sh"
t_begin 120
C=$T_TMP/c
boot_cluster "$C" 2 --tick 0.2 --kill-wait 1

sub() { mjsub --parsable -o "$T_TMP/%j.out" "$@"; }
write_script "$T_TMP/ok.sh" '#!/bin/bash' 'exit 0'
write_script "$T_TMP/three.sh" '#!/bin/bash' 'exit 3'
write_script "$T_TMP/sig.sh" '#!/bin/bash' 'kill -KILL $$'
write_script "$T_TMP/long.sh" '#!/bin/bash' 'sleep 300'
write_script "$T_TMP/trap.sh" '#!/bin/bash' 'trap "" TERM' 'sleep 300 & wait; sleep 300'

OK=$(sub "$T_TMP/ok.sh") THREE=$(sub "$T_TMP/three.sh") SIG=$(sub "$T_TMP/sig.sh")
TO=$(sub --time-exact 0:02 "$T_TMP/trap.sh")              # ignores SIGTERM: needs the SIGKILL
wait_for 30 "the short jobs ended" bash -c "[[ \$(sqlite3 '$C/state.db' \"SELECT COUNT(*) FROM jobs WHERE id IN ($OK,$THREE,$SIG) AND state NOT IN ('PENDING','RUNNING')\") == 3 ]]"

# field ID KEY — one key of mjstat -j ID --json
field() { mjstat -j "$1" --json | json_get "$2"; }
assert_eq "COMPLETED 0 None" "$(field "$OK" state) $(field "$OK" exit_code) $(field "$OK" reason)" "exit 0 -> COMPLETED"
assert_eq "FAILED 3 NonZeroExitCode" "$(field "$THREE" state) $(field "$THREE" exit_code) $(field "$THREE" reason)" \
  "exit 3 -> FAILED, exit code 3, NonZeroExitCode"
assert_eq "FAILED 137" "$(field "$SIG" state) $(field "$SIG" exit_code)" "killed by SIGKILL -> FAILED, exit code 128+9"

# cancel a pending job (both nodes busy) and a running one
L1=$(sub -N 2 "$T_TMP/long.sh")
wait_state 20 "$C" "$L1" RUNNING
P=$(sub "$T_TMP/ok.sh")
sleep 0.5
assert_eq PENDING "$(field "$P" state)" "a job waits while both nodes are busy"
t_run mjcancel "$P"
assert_eq 0 "$T_RC" "mjcancel a pending job"
assert_eq CANCELLED "$(field "$P" state)" "cancelled while pending -> CANCELLED"
assert_eq null "$(field "$P" start_time)" "a job cancelled while pending never started"
t_run mjcancel "$L1"
wait_state 20 "$C" "$L1" CANCELLED
assert_eq CANCELLED "$(field "$L1" state)" "cancelled while running -> CANCELLED"

wait_state 40 "$C" "$TO" TIMEOUT
assert_eq "TIMEOUT TimeLimit" "$(field "$TO" state) $(field "$TO" reason)" "past its limit -> TIMEOUT"
run=$(sq "$C" "SELECT end_time - start_time FROM jobs WHERE id=$TO")
assert_le 2 "$run" "TIMEOUT after the 2 s limit"
assert_le "$run" 6 "... and about kill_wait (1 s) later, though it ignored SIGTERM"

# a lost supervisor
LS=$(sub "$T_TMP/long.sh")
wait_state 20 "$C" "$LS" RUNNING
kill -KILL "$(job_col "$C" "$LS" supervisor_pid)"
wait_state 20 "$C" "$LS" FAILED
assert_eq "FAILED supervisor lost" "$(field "$LS" state) $(field "$LS" reason)" "supervisor lost -> FAILED"

# the history view shows every one of them with its state
t_run mjstat --history -o jobid,state,exitcode -h
for pair in "$OK COMPLETED" "$THREE FAILED" "$SIG FAILED" "$P CANCELLED" "$L1 CANCELLED" "$TO TIMEOUT" "$LS FAILED"; do
  assert_match "(^|[[:space:]])${pair% *} +${pair#* }" "$T_OUT" "mjstat --history: job ${pair% *} ${pair#* }"
done
t_done
