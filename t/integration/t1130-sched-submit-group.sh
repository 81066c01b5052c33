#!/usr/bin/env bash
# Submissions at scheduler speed: group commit and pass coalescing in mjsched.
#
#  1. Group commit. mjsched is stopped (SIGSTOP) while 12 mjsub clients, each
#     with its own job name, connect and send; once all 12 wait in the
#     socket's queue it continues. All 12 are recorded in one transaction
#     (ping's stats: a group of 12), every client gets its own job (the id it
#     prints names the job it submitted), ids are distinct, all in the state.
#  2. Coalescing. scheduler.min_interval 1 s, tick 30 s: 80 submissions from
#     8 concurrent loops run at most one pass per second (plus one), not one
#     per submission or group.
#  3. No starvation. After a quiet spell, a job submitted alone starts at once
#     (leading edge: well under min_interval after its submission); a second
#     one submitted right after it starts within min_interval (trailing
#     pass), not at the next 30 s tick.
# About 15 s.
. "${DYNRES_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/t/lib.sh"
t_begin 120

C=$T_TMP/cluster
W=$T_TMP/work
mkdir -p "$W"
cd "$W" || t_fatal "cd $W"
boot_cluster "$C" 4 --tick 30 --kill-wait 1
# min_interval 1 s: restart mjsched with it
SP=$(sched_pid "$C")
kill -TERM "$SP"
wait_for 10 "mjsched stopped" pids_gone "$SP" || t_fatal "mjsched did not stop"
sed -i 's/^  tick: .*/&\n  min_interval: 1.0/' "$C/dynres.yaml"
grep -q '^  min_interval: 1.0$' "$C/dynres.yaml" || t_fatal "cannot set min_interval in $C/dynres.yaml"
t_run mjsched --home "$C" --daemon
assert_eq 0 "$T_RC" "mjsched restarts with min_interval 1 s ($T_ERR)"
wait_for 10 "mjsched serving" eval '[[ -S $C/mjsched.sock && -n $(sched_pid "$C") ]]' || t_fatal "no mjsched"
SP=$(sched_pid "$C")

# stat NAME — a counter of the running mjsched (ping's "stats")
stat() {
  mjstat --summary --json | perl -MJSON::PP -0777 -ne \
    'my $d = decode_json($_); my $v = $d->{scheduler}{stats}{$ARGV_F}; print defined $v ? $v : "none";
     BEGIN { $ARGV_F = shift @ARGV }' "$1"
}
assert_eq 1 "$(mjstat --summary --json | perl -MJSON::PP -0777 -ne 'print decode_json($_)->{scheduler}{min_interval}')" \
  "ping reports min_interval"

# jobs hold their node until released: no job end wakes a pass meanwhile
write_script "$W/hold.sh" '#!/bin/sh' '#SBATCH -N 1' '#SBATCH -o /dev/null' \
  'i=0; while [ ! -e "$MJ_SUBMIT_DIR/go" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done'

# ---- 1. group commit
command -v ss >/dev/null || t_skip "ss (iproute2) is needed to see the socket's queue"
cont_sched() { kill -CONT "$SP" 2>/dev/null; }
t_on_exit cont_sched
kill -STOP "$SP"
pids=()
for k in $(seq 12); do
  (mjsub --parsable -J "grp$k" hold.sh >"$W/grp.$k" 2>"$W/grp.err.$k"; echo $? >"$W/grp.rc.$k") &
  pids+=($!)
  bg_register $!
done
wait_for 20 "12 submissions queued while mjsched is stopped" sched_queued "$C" 12
kill -CONT "$SP"
for p in "${pids[@]}"; do wait "$p"; done
assert_eq "$(printf '0\n%.0s' $(seq 12))" "$(cat "$W"/grp.rc.*)" "the 12 grouped mjsub exit 0"
assert_eq "" "$(cat "$W"/grp.err.*)" "no stderr from the grouped mjsub"
ok=0
for k in $(seq 12); do
  id=$(cat "$W/grp.$k")
  [[ $id =~ ^[0-9]+$ && $(job_col "$C" "$id" name) == "grp$k" ]] && ok=$((ok + 1)) ||
    t_log "client grp$k printed '$id', the job of that id is named '$(job_col "$C" "${id:-0}" name)'"
done
assert_eq 12 "$ok" "every client printed the id of its own job"
assert_eq 12 "$(cat "$W"/grp.[0-9]* | sort -u | wc -l)" "12 distinct ids"
assert_eq 12 "$(count_jobs "$C" "name LIKE 'grp%'")" "12 jobs in the state file"
assert_eq 12 "$(stat largest_group)" "the 12 were recorded in one group commit"
assert_eq 12 "$(stat submissions)" "12 submissions counted"

# ---- 2. coalescing: a burst of 80 from 8 loops
p0=$(stat passes)
t0=$(date +%s.%N)
pids=()
for k in $(seq 8); do
  (for i in $(seq 10); do mjsub --parsable -J "b$k.$i" hold.sh >>"$W/b.ids" 2>>"$W/b.err"; echo $? >>"$W/b.rc"; done) &
  pids+=($!)
  bg_register $!
done
for p in "${pids[@]}"; do wait "$p"; done
t1=$(date +%s.%N)
p1=$(stat passes)
groups=$(stat submit_groups)
dur=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b-a}')
t_log "burst: 80 submissions in $dur s, $((p1 - p0)) passes, $((groups - 1)) groups"
assert_eq 80 "$(grep -c '^0$' "$W/b.rc")" "the 80 burst submissions exit 0"
assert_eq 80 "$(count_jobs "$C" "name LIKE 'b%'")" "80 burst jobs recorded"
# one pass per min_interval (1 s) at most, plus the leading one and the one after the burst
bound=$(awk -v d="$dur" 'BEGIN{printf "%d", d / 1.0 + 2.999}')
assert_le "$((p1 - p0))" "$bound" "passes during the burst ($((p1 - p0))) <= one per min_interval + 2 ($bound)"

# ---- 3. a lone submission starts at once; the next, within min_interval
t_run mjcancel --state PENDING --user "$(id -un)"
assert_eq 0 "$T_RC" "the pending burst jobs are cancelled ($T_ERR)"
touch "$W/go"  # release the running ones: the cluster goes quiet
wait_for 30 "all jobs ended" no_active_jobs "$C" || t_fatal "jobs did not end"
rm -f "$W/go"
sleep 1.5  # a quiet spell longer than min_interval
a=$(mjsub --parsable -J lone hold.sh)
b=$(mjsub --parsable -J next hold.sh)
wait_state 10 "$C" "$a" RUNNING || t_fatal "the lone job did not start"
wait_state 10 "$C" "$b" RUNNING || t_fatal "the next job did not start before the 30 s tick"
da=$(sq "$C" "SELECT start_time - submit_time FROM jobs WHERE id=$a")
db=$(sq "$C" "SELECT start_time - submit_time FROM jobs WHERE id=$b")
t_log "lone job started $da s after its submission, the next $db s after its own"
assert_lt "$da" 0.6 "a job submitted after a quiet spell starts at once (not after min_interval 1 s)"
assert_lt "$db" 1.8 "a job submitted right after starts within min_interval (a trailing pass, not the tick)"
touch "$W/go"
wait_for 20 "the last jobs ended" no_active_jobs "$C"
check_started_once "$C"
check_allocations_disjoint "$C"
t_done
