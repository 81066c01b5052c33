#!/usr/bin/env bash
# t1050-sched-signals — mjcancel of a running job sends SIGTERM, then SIGKILL
# only after kill_wait seconds, as Slurm's KillWait:
#   a job that traps SIGTERM gets the whole grace to clean up and does so;
#   a job that ignores SIGTERM is killed after the grace, not before it;
#   a job with no handler ends at the SIGTERM, long before the grace is over.
. "${DYNRES_SRC:-$(dirname "$0")/../..}/t/lib.sh"
t_begin 90
C=$T_TMP/c
KW=3   # kill_wait, seconds
boot_cluster "$C" 3 --tick 0.2 --kill-wait "$KW"

# the cleanup takes 1 s, well inside the grace
write_script "$T_TMP/graceful.sh" '#!/bin/bash' \
  "trap 'sleep 1; echo cleaned > \"$T_TMP/graceful.done\"; exit 0' TERM" \
  "echo \$\$ > \"$T_TMP/graceful.pid\"" 'sleep 300 & wait'
write_script "$T_TMP/stubborn.sh" '#!/bin/bash' 'trap "" TERM' \
  "echo \$\$ > \"$T_TMP/stubborn.pid\"" 'sleep 300 & wait; sleep 300'
write_script "$T_TMP/plain.sh" '#!/bin/bash' "echo \$\$ > \"$T_TMP/plain.pid\"" 'sleep 300'

G=$(mjsub --parsable -o /dev/null "$T_TMP/graceful.sh")
S=$(mjsub --parsable -o /dev/null "$T_TMP/stubborn.sh")
P=$(mjsub --parsable -o /dev/null "$T_TMP/plain.sh")
for j in "$G" "$S" "$P"; do wait_state 20 "$C" "$j" RUNNING || t_fatal "job $j did not start"; done
for f in graceful stubborn plain; do wait_for 10 "$f.pid written" test -s "$T_TMP/$f.pid"; done

# gone_after PIDFILE — seconds from now until the process is gone (max 20)
gone_after() {
  local pid t0
  pid=$(cat "$1") t0=$(date +%s.%N)
  for _ in $(seq 400); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }'
}

t_run mjcancel "$G" "$S" "$P"
assert_eq 0 "$T_RC" "mjcancel of three running jobs"
gone_after "$T_TMP/plain.pid" >"$T_TMP/plain.t" &
gone_after "$T_TMP/graceful.pid" >"$T_TMP/graceful.t" &
gone_after "$T_TMP/stubborn.pid" >"$T_TMP/stubborn.t" &
wait
tp=$(cat "$T_TMP/plain.t") tg=$(cat "$T_TMP/graceful.t") ts=$(cat "$T_TMP/stubborn.t")
t_log "gone after: plain ${tp}s, graceful ${tg}s, stubborn ${ts}s (kill_wait ${KW}s)"

assert_le "$tp" 1.5 "a job without a handler ends at the SIGTERM, not at the SIGKILL"
assert_eq cleaned "$(cat "$T_TMP/graceful.done" 2>/dev/null)" "a job trapping SIGTERM ran its cleanup in the grace"
assert_le 0.9 "$tg" "... which took its 1 s (it was not killed at once)"
assert_le "$tg" "$KW" "... and it ended before the SIGKILL"
assert_le "$(awk -v k="$KW" 'BEGIN { print k - 0.3 }')" "$ts" "a job ignoring SIGTERM lives until kill_wait"
assert_le "$ts" "$((KW + 3))" "... and is killed by the SIGKILL soon after it"
for j in "$G" "$S" "$P"; do wait_state 20 "$C" "$j" CANCELLED; done
t_done
