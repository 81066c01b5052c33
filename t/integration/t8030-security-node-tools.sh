#!/usr/bin/env bash
# t8030-security-node-tools.sh — the operator's node tools vcluster-fail(1)
# and vcluster-throttle(1) against bad input, another user and a second
# cluster on the same machine (dynres(7), SECURITY). Two local clusters A
# and B, each with a job on its node n1:
#   - bad input (no node, an unknown option, a node name carrying shell, a
#     node the cluster does not have, no cluster, two nodes, a PERCENT out of
#     1-100000 or not an integer) is refused with a message naming the
#     problem, exit 1, and changes nothing: both jobs run, every node UP,
#     the shell in the name never ran;
#   - a second user is refused on root's cluster, even one opened up by hand
#     ("not your cluster"), and nothing of it is touched;
#   - vcluster-fail A n1 kills A's n1 only: B's node n1, its agent and its
#     job (same node name, same machine) live on, and A's n1 goes DOWN.
# Needs root (a throw-away second user). About 10 s.
. "${DYNRES_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/t/lib.sh"

((EUID == 0)) || t_skip "needs root (creates a throw-away user)"
for c in useradd userdel setpriv; do command -v $c >/dev/null || t_skip "$c is not installed"; done
t_begin 90
umask 022
U=dytn$$
trap 'rc=$?; ( (exit $rc); _t_cleanup ); rc=$?; userdel "$U" >/dev/null 2>&1; exit $rc' EXIT
useradd -M -U -d /nonexistent -s /bin/sh "$U" || t_fatal "useradd $U failed"
as() { local u=$1; shift; setpriv --reuid="$u" --regid="$u" --init-groups env -u DYNRES_HOME HOME=/nonexistent "$@"; }
chmod 711 "$T_TMP"

A=$T_TMP/a B=$T_TMP/b
boot_cluster "$B" 2 --tick 0.2
boot_cluster "$A" 2 --tick 0.2   # DYNRES_HOME=A from here on
agents() { (($(grep -c 'connected' "$1/nodes/mjnoded.log" 2>/dev/null) >= 2)); }
for c in "$A" "$B"; do wait_for 10 "node agents of $c" agents "$c" || t_fatal "$(cat "$c/nodes/mjnoded.log")"; done
ja=$(mjsub --home "$A" --parsable -N 1 -o "$T_TMP/ja.out" --wrap 'sleep 120') || t_fatal "mjsub A: $ja"
jb=$(mjsub --home "$B" --parsable -N 1 -o "$T_TMP/jb.out" --wrap 'sleep 120') || t_fatal "mjsub B: $jb"
wait_state 10 "$A" "$ja" RUNNING || t_fatal "A's job did not start"
wait_state 10 "$B" "$jb" RUNNING || t_fatal "B's job did not start"
assert_eq n1 "$(job_col "$A" "$ja" nodelist)" "A's job on A's n1"
assert_eq n1 "$(job_col "$B" "$jb" nodelist)" "B's job on B's n1"
# the processes of each cluster's node n1 (its agent and its job), as vcluster-fail finds them
on_n1() { grep -lzxF "MJ_SOCKET=$1/mjsched.sock" $(grep -lzxF "MJ_NODE=n1" /proc/[0-9]*/environ 2>/dev/null) 2>/dev/null |
  sed 's|/proc/||; s|/environ||' | sort -n | xargs; }
wait_for 10 "A's job and agent on n1" eval '[[ $(on_n1 "$A" | wc -w) -ge 2 ]]' || t_fatal "no processes on A's n1"
PA=$(on_n1 "$A") PB=$(on_n1 "$B")
t_log "A's n1: $PA; B's n1: $PB"
unchanged() {  # WHAT — both clusters exactly as before
  local p dead=""
  for p in $PA $PB; do [[ -d /proc/$p ]] || dead+=" $p"; done
  [[ -z $dead ]] && t_pass "$1: every process of both n1 lives" || t_fail "$1: killed$dead"
  assert_eq "RUNNING RUNNING" "$(job_state "$A" "$ja") $(job_state "$B" "$jb")" "$1: both jobs run"
  assert_eq "up up" "$(sq "$A" "SELECT group_concat(state, ' ') FROM nodes")" "$1: A's nodes are UP"
  [[ ! -e $T_TMP/pwned ]] && t_pass "$1: no shell ran" || t_fail "$1: a node name ran as shell"
}

# ---- bad input
refused() {  # REGEX WHAT — the last t_run exited 1 with a message matching REGEX
  assert_eq 1 "$T_RC" "$2: exit 1"
  assert_match "$1" "$T_ERR" "$2: says why ($T_ERR)"
}
t_run vcluster-fail;                        refused 'no node given' "vcluster-fail without a node"
t_run vcluster-fail --crash n1;             refused "unknown option '--crash'" "vcluster-fail --crash"
t_run vcluster-fail 'n1;touch $T_TMP/pwned'; refused "invalid node name" "vcluster-fail with shell in the node name"
t_run vcluster-fail "n1\$(touch $T_TMP/pwned)"; refused "invalid node name" "vcluster-fail with a command substitution"
t_run vcluster-fail n9;                     refused "no node named 'n9'" "vcluster-fail on a node A does not have"
t_run vcluster-fail n1 n2;                  refused "one node at a time" "vcluster-fail with two nodes"
t_run vcluster-fail --dir "$T_TMP/none" n1; refused "no cluster in" "vcluster-fail on no cluster"
for pct in 0 100001 20% 1e2 -5 ""; do
  t_run vcluster-throttle n1 $pct
  if [[ -z $pct ]]; then refused 'no PERCENT given' "vcluster-throttle without a PERCENT"
  else refused "PERCENT must be an integer from 1 to 100000, got '$pct'|unknown option '$pct'" "vcluster-throttle n1 $pct"; fi
done
t_run vcluster-throttle 'n1;touch $T_TMP/pwned' 20; refused "invalid node name" "vcluster-throttle with shell in the node name"
t_run vcluster-throttle n9 20;              refused "no node named 'n9'" "vcluster-throttle on a node A does not have"
unchanged "after the bad input"

# ---- another user on root's cluster, opened up by hand (vcluster-boot
# makes it 0700: the user would not even see its state file)
chmod 755 "$A"
t_run as "$U" "$DYNRES_SRC/share/dynres/vcluster-fail" --dir "$A" n1
refused "not your cluster" "another user's vcluster-fail on root's cluster"
t_run as "$U" "$DYNRES_SRC/share/dynres/vcluster-throttle" --dir "$A" n1 20
refused "not your cluster" "another user's vcluster-throttle on root's cluster"
unchanged "after another user's attempts"

# ---- vcluster-fail A n1 crashes A's n1 and nothing of B's n1
t_run vcluster-fail --dir "$A" n1
assert_eq 0 "$T_RC" "vcluster-fail --dir A n1 ($T_ERR)"
gone() { local p; for p in $PA; do [[ -d /proc/$p && $(awk '{print $3}' /proc/$p/stat 2>/dev/null) != Z ]] && return 1; done; return 0; }
wait_for 5 "A's n1 processes gone" gone && t_pass "A's n1: its agent and its job were killed" || t_fail "A's n1 lives: $PA"
wait_for 10 "A's n1 DOWN" eval '[[ $(sq "$A" "SELECT state FROM nodes WHERE name='"'n1'"'") == down ]]' ||
  t_fail "A's n1 is $(sq "$A" "SELECT state FROM nodes WHERE name='n1'")"
alive=1
for p in $PB; do [[ -d /proc/$p ]] || alive=0; done
((alive)) && t_pass "B's n1 (same name, other cluster) lives: $PB" || t_fail "vcluster-fail A n1 killed B's n1 processes"
assert_eq RUNNING "$(job_state "$B" "$jb")" "B's job still runs"
assert_eq "up up" "$(sq "$B" "SELECT group_concat(state, ' ') FROM nodes")" "B's nodes stay UP"
t_done
