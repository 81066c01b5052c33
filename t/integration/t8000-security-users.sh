#!/usr/bin/env bash
# t8000-security-users.sh — the trust model across users (dynres(7), SECURITY), with two throw-away
# local users A and B beside root, each attack as an attacker would run it:
#   (1) squatted directory: A leaves a cluster directory (with a queued job)
#       where root boots one: vcluster-boot refuses it, the job never runs;
#   (2) configuration as shell: A writes kill_wait: SECONDS[$(id>FILE)] into its
#       dynres.yaml; root's vcluster-down on it runs nothing;
#       and A's daemon (an ordinary user's) refuses B's submission;
#   (3) cross-cluster stop: A's directory c.1 names the pid of root's
#       cluster cX1's mjsched (and holds its lock); root's vcluster-down on
#       c.1 leaves cX1's daemon, supervisor and job alone;
#   (4) a cluster of root opened up by hand (the directory 0755, the state
#       file 0666): B cannot edit A's held job in the state file, nor release
#       or cancel it, nor set the corridor; A's job runs as A (id -u), its
#       output belongs to A and follows A's umask 077.
# Every check fails on a build where the tools write the state file
# themselves and mjstepd runs jobs as the scheduler's user. Needs root.
. "${DYNRES_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/t/lib.sh"

((EUID == 0)) || t_skip "needs root (creates throw-away users)"
for c in useradd userdel setpriv flock; do command -v $c >/dev/null || t_skip "$c is not installed"; done
t_begin 150
umask 022

UA=dyta$$ UB=dytb$$
del_users() { userdel "$UA" >/dev/null 2>&1; userdel "$UB" >/dev/null 2>&1; return 0; }
trap 'rc=$?; ( (exit $rc); _t_cleanup ); rc=$?; del_users; exit $rc' EXIT
useradd -M -U -d /nonexistent -s /bin/sh "$UA" || t_fatal "useradd $UA failed"
useradd -M -U -d /nonexistent -s /bin/sh "$UB" || t_fatal "useradd $UB failed"
A_UID=$(id -u "$UA") B_UID=$(id -u "$UB")
as() { local u=$1; shift; setpriv --reuid="$u" --regid="$u" --init-groups env -u DYNRES_HOME HOME=/nonexistent "$@"; }
as "$UA" test -x "$DYNRES_BIN/mjsub" || t_skip "$DYNRES_BIN is not reachable by other users"

chmod 711 "$T_TMP"
PUB=$T_TMP/pub          # a shared scratch directory, like /tmp
mkdir -m 1777 "$PUB"
cd "$PUB" || t_fatal "cd $PUB"   # jobs start in the submitter's directory: one every user reaches

# ------------------------------------------------------------------ (1)
SQ=$PUB/squat
as "$UA" vcluster-boot --local 2 --dir "$SQ" >/dev/null || t_fatal "A cannot boot a cluster of its own"
T_CLUSTERS+=("$SQ")
as "$UA" vcluster-down --dir "$SQ" >/dev/null
as "$UA" mjsub --home "$SQ" -o "$SQ/squat.out" --wrap 'id -u' >/dev/null ||
  t_fail "A cannot queue a job in its own stopped cluster (the owner may, for the scheduler's next start)"
t_run vcluster-boot --local 2 --dir "$SQ"
assert_ne 0 "$T_RC" "(1) root's vcluster-boot refuses a directory A owns"
assert_contains "$T_ERR" "not to you" "(1) the message says whose directory it is"
sleep 2
[[ ! -s $SQ/squat.out ]] && t_pass "(1) A's queued job did not run" ||
  t_fail "(1) A's queued job ran in root's cluster: $(cat "$SQ/squat.out") (uid 0 = code run as root)"
root_procs() {  # DIR — processes of root working for the cluster in DIR
  local p
  for p in $(procs_matching "--home $1"); do [[ $(stat -c %u "/proc/$p" 2>/dev/null) == 0 ]] && echo "$p"; done
  return 0
}
[[ -z $(root_procs "$SQ") ]] && t_pass "(1) no root daemon serves A's directory" ||
  t_fail "(1) a root daemon serves A's directory"

# ------------------------------------------------------------------ (2)
CA=$PUB/ca
as "$UA" vcluster-boot --local 2 --dir "$CA" --shared >/dev/null 2>&1 ||
  as "$UA" vcluster-boot --local 2 --dir "$CA" >/dev/null || t_fatal "A cannot boot its second cluster"
T_CLUSTERS+=("$CA")
as "$UA" chmod 711 "$CA"
t_run as "$UB" mjsub --home "$CA" --wrap true
assert_ne 0 "$T_RC" "(2) A's daemon (an ordinary user's) refuses B's submission"
assert_eq 0 "$(count_jobs "$CA")" "(2) nothing recorded for B in A's cluster"
MARK=$PUB/pwned
as "$UA" sed -i "s|^  kill_wait:.*|  kill_wait: SECONDS[\$(id>$MARK)]|" "$CA/dynres.yaml"
grep -q "kill_wait: SECONDS\\[" "$CA/dynres.yaml" || t_fatal "could not plant the configuration"
t_run vcluster-down --dir "$CA"
[[ ! -e $MARK ]] && t_pass "(2) vcluster-down read kill_wait as data" ||
  t_fail "(2) root's vcluster-down ran A's configuration as shell: $(cat "$MARK")"
[[ -z $(procs_matching "mjsched --home $CA") ]] && t_pass "(2) A's cluster is stopped" ||
  t_fail "(2) A's cluster still runs after root's vcluster-down"

# ------------------------------------------------------------------ (3)
V=$PUB/cX1
boot_cluster "$V" 2 --tick 0.3
VJ=$(mjsub --home "$V" --parsable -o /dev/null --wrap 'sleep 60')
wait_state 20 "$V" "$VJ" RUNNING
VPID=$(sched_pid "$V") VSUP=$(job_col "$V" "$VJ" supervisor_pid)
EVIL=$PUB/c.1
as "$UA" mkdir -m 700 "$EVIL"
as "$UA" sh -c "echo $VPID >'$EVIL/mjsched.pid'"
as "$UA" flock "$EVIL/mjsched.lock" sleep 60 &
bg_register $!
sleep 0.3
t_run vcluster-down --dir "$EVIL"
pid_alive "$VPID" && t_pass "(3) cX1's mjsched survives vcluster-down --dir c.1" ||
  t_fail "(3) vcluster-down --dir $EVIL killed the mjsched of $V"
pid_alive "$VSUP" && t_pass "(3) cX1's job supervisor survives" || t_fail "(3) vcluster-down --dir $EVIL killed a supervisor of $V"
assert_eq RUNNING "$(job_state "$V" "$VJ")" "(3) cX1's job still runs"
mjcancel --home "$V" "$VJ"

# ------------------------------------------------------------------ (4)
S=$PUB/shared
boot_cluster "$S" 2 --tick 0.3
# opened up by hand, the way sharing a cluster used to be done
chmod 755 "$S"
chmod 666 "$S"/state.db*
sleep 1
t_run as "$UA" mjsub --home "$S" --hold -o "$PUB/a-%j.out" --wrap 'id -u; id -g'
assert_eq 0 "$T_RC" "(4) A submits to root's cluster over the socket: $T_ERR"
JA=$(sq "$S" "SELECT MAX(id) FROM jobs WHERE uid=$A_UID")
[[ -n $JA ]] || t_fatal "(4) A's job is not recorded"
assert_eq "$A_UID" "$(job_col "$S" "$JA" uid)" "(4) the job is recorded as A's"
SCRIPT0=$(job_col "$S" "$JA" script)
t_run as "$UB" sqlite3 -cmd '.timeout 2000' "$S/state.db" "UPDATE jobs SET script='#!/bin/sh
echo pwned-by-B' WHERE id=$JA"
assert_ne 0 "$T_RC" "(4) B cannot write the state file"
assert_eq "$SCRIPT0" "$(job_col "$S" "$JA" script)" "(4) A's job script is unchanged"
t_run as "$UB" mjcontrol --home "$S" release "$JA"
assert_ne 0 "$T_RC" "(4) B cannot release A's job"
assert_contains "$T_ERR" "permission denied" "(4) B is told why"
t_run as "$UB" mjcancel --home "$S" "$JA"
assert_ne 0 "$T_RC" "(4) B cannot cancel A's job"
assert_eq "PENDING 1" "$(sq "$S" "SELECT state || ' ' || held FROM jobs WHERE id=$JA")" "(4) A's job is still pending and held"
t_run as "$UB" pcorridor --home "$S" set 1 2 --force
assert_ne 0 "$T_RC" "(4) B cannot set the corridor"
assert_contains "$T_ERR" "permission denied" "(4) B is told why the corridor was refused"
n=$(sq "$S" "SELECT COUNT(*) FROM power_corridor" 2>/dev/null)
assert_eq 0 "${n:-0}" "(4) no corridor recorded"
t_run pcorridor --home "$S" set 1 2 --force
assert_eq 0 "$T_RC" "(4) root sets the same corridor: $T_ERR"
assert_eq 1 "$(sq "$S" "SELECT COUNT(*) FROM power_corridor")" "(4) root's corridor is recorded"
# node sizes (slurm.conf's RealMemory/Gres) are the owner's too, checked by mjsched
mem_before=$(sq "$S" "SELECT group_concat(mem_mb) FROM nodes")
t_run as "$UB" mjcontrol --home "$S" update node ALL realmemory=1
assert_ne 0 "$T_RC" "(4) B cannot set the nodes' memory"
assert_contains "$T_ERR" "permission denied" "(4) B is told why"
assert_eq "$mem_before" "$(sq "$S" "SELECT group_concat(mem_mb) FROM nodes")" "(4) the nodes' memory is unchanged"
t_run mjcontrol --home "$S" update node ALL realmemory=4096
assert_eq 0 "$T_RC" "(4) root sets the nodes' memory: $T_ERR"
assert_eq 4096 "$(sq "$S" "SELECT MIN(mem_mb) FROM nodes")" "(4) root's memory size is recorded"
t_run as "$UA" mjcontrol --home "$S" release "$JA"
assert_eq 0 "$T_RC" "(4) A releases its own job: $T_ERR"
wait_state 20 "$S" "$JA" COMPLETED
OUT=$PUB/a-$JA.out
assert_eq "$A_UID $(id -g "$UA")" "$(tr '\n' ' ' <"$OUT" | sed 's/ $//')" "(4) A's job ran as A (uid, gid)"
assert_eq "$UA" "$(stat -c %U "$OUT")" "(4) A's output file belongs to A"
t_run as "$UA" sh -c "umask 077; exec mjsub --home '$S' --parsable -o '$PUB/priv-%j.out' --wrap true"
assert_eq 0 "$T_RC" "(4) A submits with umask 077: $T_ERR"
wait_state 20 "$S" "$T_OUT" COMPLETED
assert_eq 600 "$(stat -c %a "$PUB/priv-$T_OUT.out")" "(4) the output follows the submitter's umask 077"
t_run as "$UB" mjsub --home "$S" --parsable -o "$PUB/b-%j.out" --wrap 'id -u'
wait_state 20 "$S" "$T_OUT" COMPLETED
assert_eq "$B_UID" "$(cat "$PUB/b-$T_OUT.out")" "(4) B's job runs as B"
assert_eq 600 "$(stat -c %a "$S/state.db")" "(4) the daemon closed the state file again"

t_done
