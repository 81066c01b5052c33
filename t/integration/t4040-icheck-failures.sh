#!/usr/bin/env bash
# ctest-cost: 25
# iCheck failure handling [John24 §6.5]: agent killed during commits ->
# direct writes, back to RDMA after a probe; every agent gone + restart ->
# restore from the second level; corrupted second-level file -> refused,
# older valid version used; application SIGKILLed at random moments ->
# resumes, same final result as an uninterrupted run.
. "${DYNRES_SRC:-$(dirname "$0")/../..}/t/lib.sh"
t_begin 180
t_require icheckd ictest
SRC=$DYNRES_SRC
W=$T_TMP
export DYNRES_HOME=$W
unset ICHECK_CONFIG ICHECK_TRANSFER
APP_PID=""
stop_icheck() {
  [ -n "$APP_PID" ] && kill -9 "$APP_PID" 2>/dev/null
  "$SRC/share/dynres/icheck-down" --home "$W"
  # an agent may still be writing its last second-level version: wait until no
  # process of this test's service is left before $T_TMP is removed
  for _ in $(seq 100); do pgrep -f -- "$W/" >/dev/null || break; sleep 0.1; done
}
t_on_exit stop_icheck
T="timeout 60"
result() { grep '^RESULT' "$1" | awk '{print $2}'; }
boot() { timeout 30 "$SRC/share/dynres/icheck-boot" --home "$W" --heartbeat 1 --misses 2 --no-standby n1 >/dev/null || t_fatal boot; }
agent_pid() { pgrep -f "icagent --listen unix:$W/icheck/agent-.* --app $1 " | head -1; }
ref() { # app n iters every -> reference result of an uninterrupted direct run
  printf 'direct: true\npfs_dir: %s/ref\n' "$W" >"$W/direct.yaml"
  $T ictest "ref_$1" "$2" "$3" "$4" --config "$W/direct.yaml" >"$W/ref_$1.out" || t_fatal "reference $1"
  result "$W/ref_$1.out"
}
boot
export ICHECK_CONFIG=$W/icheck.yaml

# wait_progress PID OUT STALL — wait for the application PID (`timeout`
# around ictest) writing OUT; when OUT gains no line for STALL seconds the
# application hangs: its threads' stacks and the daemons' logs are shown
# and the wait fails at once (returns 2) instead of at the 60 s timeout.
wait_progress() {
  local pid=$1 out=$2 stall=$3 n last=-1 since=$SECONDS app
  while pid_alive "$pid"; do
    n=$(wc -l <"$out")
    if [[ $n != "$last" ]]; then
      last=$n since=$SECONDS
    elif ((SECONDS - since >= stall)); then
      t_log "no output for $stall s after: $(tail -1 "$out")"
      app=$(pgrep -P "$pid" -x ictest || echo "$pid")
      if command -v gdb >/dev/null; then
        gdb -p "$app" -batch -ex 'thread apply all bt' 2>&1 | grep -E '^(Thread|#)' | head -80 >&2
      fi
      tail -n 5 "$W"/icheck/controller.log "$W"/icheck/manager-n1.log >&2
      return 2
    fi
    sleep 0.2
  done
  wait "$pid"
}

# (e) agent killed while the application commits every iteration. It must
# go on at once: every line of its output follows the previous one within
# 25 s (a fallback, a probe that starts a new agent and its hello take a
# few seconds even beside other tests).
R=$(ref kill 1000000 40 1)
ICHECK_DEBUG=1 $T ictest kill 1000000 40 1 --sleep-ms 50 --probe 30 >"$W/e.out" 2>"$W/e.err" &
APP_PID=$!
for _ in $(seq 50); do grep -q "COMMIT 3 " "$W/e.out" 2>/dev/null && break; sleep 0.1; done
AP=$(agent_pid kill); [ -n "$AP" ] || t_fatal "no agent for app kill"
kill -9 "$AP"
wait_progress "$APP_PID" "$W/e.out" 25 ||
  t_fatal "application died or hung with its agent (exit $?): $(tail -3 "$W/e.out") $(cat "$W/e.err")"
APP_PID=""
grep -q " direct 0$" "$W/e.out" || t_fatal "no direct fallback: $(cat $W/e.out)"
grep -q "PROBE 30 rdma 0" "$W/e.out" || t_fatal "no return to RDMA after the probe: $(tail -5 $W/e.out)"
grep -q "COMMIT 40 40 rdma 0" "$W/e.out" || t_fatal "not back on agents at the end: $(tail -3 $W/e.out)"
[ "$(result $W/e.out)" = "$R" ] || t_fatal "result differs after agent failure"
t_pass "agent killed -> direct -> rdma"

# (f) every agent gone (service down), application restarted -> second level
R=$(ref gone 50000 40 5)
$T ictest gone 50000 20 5 --persist >"$W/f1" || t_fatal "first half"
grep -q "FINAL 4 rdma" "$W/f1" || t_fatal "f1: $(cat $W/f1)"
sleep 0.5
"$SRC/share/dynres/icheck-down" --home "$W"
pgrep -f "icagent --listen unix:$W/" >/dev/null && t_fatal "agents survived icheck-down"
boot
$T ictest gone 50000 40 5 >"$W/f2" || t_fatal "restart after losing all agents"
grep -q "RESTORED 20 4" "$W/f2" || t_fatal "not restored from the second level: $(cat $W/f2)"
[ "$(result $W/f2)" = "$R" ] || t_fatal "result differs after restore from the second level"
t_pass "all agents gone -> second level"

# (g) corrupted second-level files -> refused, the newest valid version used.
# Four versions are kept (iterations 5, 10, 15, 20), so "newest valid" and
# "oldest" differ: corrupt v4 -> v3 (15); corrupt v4 and v3 -> v2 (10).
printf 'keep_versions: 4\n' >"$W/dyn2.yaml"
printf 'direct: true\npfs_dir: %s/pfs2\ndynamic_config: %s/dyn2.yaml\n' "$W" "$W" >"$W/d2.yaml"
flip() {  # FILE: flip one bit in the middle
  python3 - "$1" <<'PY'
import sys
p = sys.argv[1]
b = bytearray(open(p, 'rb').read()); b[len(b) // 2] ^= 0x40
open(p, 'wb').write(bytes(b))
PY
}
for app in corrupt corrupt2; do
  R=$(ref "$app" 50000 40 5)
  $T ictest "$app" 50000 20 5 --config "$W/d2.yaml" >"$W/g1" || t_fatal "g1 $app"
  n=$(ls -d "$W"/pfs2/*/"$app"/v* | wc -l)
  [ "$n" = 4 ] || t_fatal "$app: $n versions kept, expected 4"
  F=$(ls "$W"/pfs2/*/"$app"/v0000000004/r000000.grid.*dat) && [ -f "$F" ] || t_fatal "no v4 file"
  flip "$F"
  expect=15
  if [ "$app" = corrupt2 ]; then
    F=$(ls "$W"/pfs2/*/"$app"/v0000000003/r000000.grid.*dat) && [ -f "$F" ] || t_fatal "no v3 file"
    flip "$F"
    expect=10
  fi
  $T ictest "$app" 50000 40 5 --config "$W/d2.yaml" >"$W/g2" || t_fatal "restart with corrupted files"
  grep -q "RESTORED $expect " "$W/g2" || t_fatal "$app: expected the restore of iteration $expect: $(head -3 $W/g2)"
  [ "$(result $W/g2)" = "$R" ] || t_fatal "$app: result differs after refusing the corrupt versions"
done
t_pass "corrupted versions refused, the newest valid one restored"

# (h) application SIGKILLed at random moments, restarted until done
R=$(ref sigkill 200000 60 3)
for round in 1 2 3; do
  $T ictest sigkill 200000 60 3 --sleep-ms 30 >"$W/h$round" 2>&1 &
  APP_PID=$!
  sleep "0.$((RANDOM % 7 + 3))"
  kill -9 "$APP_PID" 2>/dev/null; wait "$APP_PID" 2>/dev/null; APP_PID=""
done
$T ictest sigkill 200000 60 3 >"$W/h_final" || t_fatal "final run after kills"
[ "$(result $W/h_final)" = "$R" ] || t_fatal "result after SIGKILLs differs: $(cat $W/h_final)"
t_pass "SIGKILL + restart ($(grep RESTORED $W/h_final))"
t_done
