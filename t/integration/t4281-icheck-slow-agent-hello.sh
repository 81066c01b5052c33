#!/usr/bin/env bash
# An agent slow to answer is not a failed one [John24 §6.5.1]: the
# application's agent stalls (SIGSTOP) so that its hello times out at
# icheck_init. The application commits directly meanwhile, does not report
# the agent as failed (the controller would stop it and start another, which
# on a loaded node starts as slowly: the application, told to reconnect at
# every probe, then never caught one ready and ran out of time, t4040), and
# once the agent answers again the next probe reconnects to the SAME agent.
# About 15 s.
. "${DYNRES_SRC:-$(dirname "$0")/../..}/t/lib.sh"
t_begin 90
t_require icheckd icagent ictest sqlite3
W=$T_TMP/home
icheck_service "$W" --heartbeat 1 --misses 3 --no-standby n1
echo 'hello_timeout_ms: 3000' >>"$W/icheck.yaml"
sqw() { icsql "$1"; }
agents_of() { sqw "SELECT a.$1 FROM icheck_agents a JOIN icheck_apps p ON p.id = a.app_id WHERE p.name = 'slow' ${2:+AND a.state = '$2'}"; }

t_run timeout 60 ictest slow 20000 5 5 --persist
assert_contains "$T_OUT" "FINAL 1 rdma" "the first run committed through its agent (stderr: $T_ERR)"
APID=$(agents_of pid up)
AID=$(agents_of id up)
[[ -n $APID ]] && pid_alive "$APID" || t_fatal "no live agent (pid '$APID')"

kill -STOP "$APID"
T_ICHECK_STOPPED=("$APID")
timeout 60 ictest slow 20000 60 1 --sleep-ms 100 --persist >"$T_TMP/out" 2>"$T_TMP/err" &
APP=$!
bg_register "$APP"
started() { grep -q '^STATUS' "$T_TMP/out"; }
wait_for 20 "icheck_init returns" started || t_fatal "no STATUS line: $(cat "$T_TMP/err")"
assert_contains "$(cat "$T_TMP/out")" "mode direct" "the stalled agent's hello timed out: direct writes"
kill -CONT "$APID"
wait "$APP"
assert_eq 0 "$?" "the application ran to the end (stderr: $(tail -3 "$T_TMP/err"))"
OUT=$(cat "$T_TMP/out")
assert_match "FINAL [0-9]+ rdma" "$OUT" "back on the agent once it answered ($(grep -c ' direct 0$' "$T_TMP/out") direct commits)"
assert_eq "$AID" "$(agents_of id)" "the same agent served it throughout (no other was started)"
pid_alive "$APID" && t_pass "agent $AID (pid $APID) was never stopped" || t_fail "agent $AID (pid $APID) was stopped"
assert_eq 0 "$(sqw "SELECT needs_change FROM icheck_apps WHERE name = 'slow'")" "the controller was not told the agent failed"
t_done
