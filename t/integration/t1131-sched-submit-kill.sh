#!/usr/bin/env bash
# kill -9 of mjsched during a burst of submissions loses no acknowledged job.
#
# 8 loops submit 20 jobs each (names k.i) into an 8-node cluster while mjsched
# is killed with SIGKILL twice (after about a quarter and three quarters of
# the jobs are recorded) and restarted in between; mjsub falls back to
# recording the job itself while no scheduler listens (the owner may). A
# client whose connection died without an answer reports an error. Then:
# every job a client was told about (exit 0, an id printed) is in the state
# file under that id with that name, no id was printed twice, no job is in
# the file twice or unasked for, and after the last restart every recorded
# job runs to COMPLETED exactly once. Then a group commit whose first write
# strace holds for 2 s: mjsched, killed as soon as a client has its answer,
# must not have answered before the COMMIT. About 25 s.
. "${DYNRES_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/t/lib.sh"
t_begin 150

C=$T_TMP/cluster
W=$T_TMP/work
mkdir -p "$W"
cd "$W" || t_fatal "cd $W"
boot_cluster "$C" 8 --tick 0.2 --kill-wait 1
write_script "$W/true.sh" '#!/bin/sh' '#SBATCH -N 1' '#SBATCH -o /dev/null' 'true'

LOOPS=8 PER=20 TOTAL=160
pids=()
for k in $(seq "$LOOPS"); do
  (
    for i in $(seq "$PER"); do
      out=$(mjsub --parsable -J "j$k.$i" true.sh 2>>"$W/err.$k")
      echo "$? j$k.$i ${out:-none}" >>"$W/acks.$k"
    done
  ) &
  pids+=($!)
  bg_register $!
done

recorded_at_least() { [[ $(count_jobs "$C") -ge $1 ]]; }
kill_sched() {
  local sp
  sp=$(sched_pid "$C")
  [[ -n $sp ]] || t_fatal "no mjsched to kill"
  kill -KILL "$sp"
  wait_for 10 "mjsched $sp killed" pids_gone "$sp"
  t_log "killed mjsched $sp with $(count_jobs "$C") jobs recorded"
}
restart_sched() {
  t_run mjsched --home "$C" --daemon
  assert_eq 0 "$T_RC" "mjsched restarts ($T_ERR)"
  wait_for 10 "mjsched serving again" eval '[[ -S $C/mjsched.sock && -n $(sched_pid "$C") ]]'
}
wait_for 60 "a quarter of the jobs recorded" recorded_at_least $((TOTAL / 4)) || t_fatal "submissions stalled"
kill_sched
wait_for 60 "half of the jobs recorded" recorded_at_least $((TOTAL / 2)) || t_fatal "submissions stalled"
restart_sched
wait_for 60 "three quarters of the jobs recorded" recorded_at_least $((TOTAL * 3 / 4)) || t_fatal "submissions stalled"
kill_sched
for p in "${pids[@]}"; do wait "$p"; done
restart_sched

acks=$(cat "$W"/acks.*)
assert_eq "$TOTAL" "$(wc -l <<<"$acks")" "every submission attempted"
okay=$(awk '$1 == 0 {print $2, $3}' <<<"$acks" | sort)
n_ok=$(grep -c . <<<"$okay")
t_log "$n_ok of $TOTAL acknowledged; refused: $(awk '$1 != 0' <<<"$acks" | wc -l)"
assert_le $((TOTAL - 16)) "$n_ok" "nearly every submission acknowledged (at most the ones in flight at the kills fail)"
assert_eq "$n_ok" "$(awk '{print $2}' <<<"$okay" | grep -cE '^[0-9]+$')" "every acknowledged submission printed an id"
assert_eq "$n_ok" "$(awk '{print $2}' <<<"$okay" | sort -u | wc -l)" "no id printed twice"
in_state=$(sq "$C" "SELECT name || ' ' || id FROM jobs ORDER BY name" | sort)
missing=$(comm -23 <(echo "$okay") <(echo "$in_state") | head -5)
assert_eq "" "$missing" "every acknowledged job is in the state file under its id and name"
assert_eq "" "$(sq "$C" "SELECT name FROM jobs GROUP BY name HAVING COUNT(*) > 1 LIMIT 5")" "no job recorded twice"
assert_eq "" "$(sq "$C" "SELECT name FROM jobs WHERE name NOT GLOB 'j[1-8].*' LIMIT 5")" "no job nobody asked for"
assert_eq "" "$(cat "$W"/err.* | grep -v "without answering\|talking to mjsched" | head -5)" \
  "the only errors are the connections cut by the kills"

wait_for 90 "every recorded job ended" no_active_jobs "$C"
assert_eq "" "$(sq "$C" "SELECT id || ':' || state FROM jobs WHERE state != 'COMPLETED' LIMIT 5")" "all recorded jobs COMPLETED"
check_started_once "$C"
check_allocations_disjoint "$C"

# ---- an answer never runs ahead of its commit: 6 submissions queued while
# mjsched is stopped form one group; the first write of the state file after
# it continues (the group's COMMIT) is held 2 s by strace; mjsched is killed
# as soon as the first client has its answer. Every answered job must be in
# the state file (an answer sent before the COMMIT would be lost).
command -v strace >/dev/null || t_skip "strace is needed to hold the commit"
command -v ss >/dev/null || t_skip "ss (iproute2) is needed to see the socket's queue"
SP=$(sched_pid "$C")
cont_sched() { kill -CONT "$SP" 2>/dev/null; }
t_on_exit cont_sched
kill -STOP "$SP"
pids=()
for k in $(seq 6); do
  (out=$(mjsub --parsable -J "held$k" true.sh 2>/dev/null); echo "$? held$k ${out:-none}" >"$W/held.$k") &
  pids+=($!)
  bg_register $!
done
wait_for 20 "6 submissions queued while mjsched is stopped" sched_queued "$C" 6 || t_fatal "submissions not queued"
strace -qq -o /dev/null -e trace=pwrite64 -e inject=pwrite64:delay_enter=2000000:when=1 -p "$SP" &
ST=$!
bg_register $ST
sleep 0.5  # strace attached
kill -CONT "$SP"
answered() { [[ -n $(cat "$W"/held.* 2>/dev/null | awk '$1 == 0') ]]; }
wait_for 20 "a held submission is answered" answered
kill -KILL "$SP"
kill "$ST" 2>/dev/null
for p in "${pids[@]}"; do wait "$p"; done
held=$(cat "$W"/held.* | awk '$1 == 0 {print $2, $3}' | sort)
t_log "answered before the kill: $(grep -c . <<<"$held") of 6"
missing=$(comm -23 <(echo "$held") <(sq "$C" "SELECT name || ' ' || id FROM jobs WHERE name GLOB 'held*'" | sort))
assert_eq "" "$missing" "every answered job of the held group is in the state file"
t_done
