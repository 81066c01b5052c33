#!/usr/bin/env bash
# Node states as Slurm users know them, on a 4-node local cluster with node
# agents (mjnoded): mjstat -N shows idle/allocated nodes; mjcontrol update
# node ... state=drain reason=... drains an idle node (DRAINED, the reason,
# who and when, an event) and a busy one (DRAINING while its job runs,
# DRAINED after); no job is started on a drained or down node (a 4-node job
# waits until RESUME); state=down sets DOWN; bad requests (unknown state,
# missing reason, unknown node, resume of an up node, drain of a down node)
# exit non-zero naming the problem and change nothing; another user is
# refused by the daemon (SO_PEERCRED), not only by the client; mjstat -N
# --json carries the same. About 15 s.
. "${DYNRES_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/t/lib.sh"
t_begin 60
C=$T_TMP/c W=$T_TMP/w
mkdir -p "$W"
boot_cluster "$C" 4 --tick 0.2 --kill-wait 1
ns() { sq "$C" "SELECT state FROM nodes WHERE name='$1'"; }
nodes_json() { mjstat -N --json | perl -MJSON::PP -0777 -ne 'my $d = decode_json($_);
  print join(" ", map { "$_->{name}=$_->{state}" } @{$d->{nodes}}), "\n"'; }
agents() { (($(grep -c 'connected' "$C/nodes/mjnoded.log" 2>/dev/null) >= 4)); }
wait_for 10 "4 node agents connected" agents || t_fatal "$(cat "$C/nodes/mjnoded.log")"

t_run mjstat -N
assert_eq 0 "$T_RC" "mjstat -N ($T_ERR)"
assert_match '^NODELIST +STATE +CPUS +JOBID +TIMESTAMP +USER +REASON' "$T_OUT" "sinfo -N -l style header"
assert_eq "n1=idle n2=idle n3=idle n4=idle" "$(nodes_json)" "all idle"

# a rigid job on n1 (-w n1), then n1 and n4 drained
write_script "$W/s.sh" '#!/bin/bash' 'sleep 4'
j1=$(cd "$W" && mjsub --parsable -N 1 -w n1 s.sh) || t_fatal "mjsub: $j1"
wait_state 10 "$C" "$j1" RUNNING || t_fatal "job $j1 did not start"
t_run mjcontrol update node 'n[1,4]' state=DRAIN reason="disk check"
assert_eq 0 "$T_RC" "drain n[1,4] ($T_ERR)"
assert_contains "$T_OUT" "node n4: up -> drain" "mjcontrol prints the change"
assert_eq "n1=draining n2=idle n3=idle n4=drained" "$(nodes_json)" "DRAINING while the job runs, DRAINED when empty"
t_run mjstat -N
assert_match 'n4 +drained +[0-9]+ +- +[0-9T:-]+ +root +disk check' "$T_OUT" "reason, time and user shown"
assert_eq 2 "$(sq "$C" "SELECT COUNT(*) FROM events WHERE kind='node' AND detail LIKE '%up->drain disk check'")" "one event per node"
# a 4-node job cannot start while two nodes are drained
j2=$(cd "$W" && mjsub --parsable -N 4 s.sh) || t_fatal "mjsub: $j2"
wait_state 10 "$C" "$j1" COMPLETED || t_fatal "job $j1 did not complete"
assert_eq "n1=drained n2=idle n3=idle n4=drained" "$(nodes_json)" "DRAINED once the job ended"
sleep 1
assert_eq PENDING "$(job_state "$C" "$j2")" "no job on drained nodes"
assert_eq 0 "$(sq "$C" "SELECT COUNT(*) FROM nodes WHERE job_id IS NOT NULL AND state!='up'")" "no drained node handed out"

# bad requests change nothing
before=$(sq "$C" "SELECT group_concat(name||state||reason) FROM nodes")
for bad in "n2 state=sleepy reason=x|invalid state 'sleepy'" "n2 state=down|needs a reason" \
           "n9 state=drain reason=x|no node named 'n9'" "n2 state=resume|neither drained nor down" \
           "n[2-3] bogus=1|unknown setting 'bogus=1'"; do
  args=${bad%%|*} want=${bad#*|}
  # shellcheck disable=SC2086
  t_run mjcontrol update node $args
  assert_ne 0 "$T_RC" "mjcontrol update node $args fails"
  assert_contains "$T_ERR" "$want" "the message names the problem ($T_ERR)"
done
t_run mjcontrol update node 'n[2-3]' state=drain reason=x extra=1
assert_ne 0 "$T_RC" "an unknown extra setting fails"
assert_eq "$before" "$(sq "$C" "SELECT group_concat(name||state||reason) FROM nodes")" "bad requests changed nothing"

# DOWN; drain of a down node refused; resume returns nodes, the 4-node job starts
t_run mjcontrol update node n2 state=down reason="power supply"
assert_eq 0 "$T_RC" "down n2 ($T_ERR)"
assert_eq down "$(ns n2)" "n2 is down"
t_run mjcontrol update node n2 state=drain reason=x
assert_ne 0 "$T_RC" "drain of a down node is refused"
assert_contains "$T_ERR" "n2 is down" "the message says why"
sleep 0.5
assert_eq PENDING "$(job_state "$C" "$j2")" "still pending with n[1,2,4] out"
t_run mjcontrol update node 'n[1-2,4]' state=resume
assert_eq 0 "$T_RC" "resume ($T_ERR)"
wait_state 10 "$C" "$j2" RUNNING || t_fatal "job $j2 did not start after RESUME"
assert_eq "n1=allocated n2=allocated n3=allocated n4=allocated" "$(nodes_json)" "all allocated"

# another user: refused by the daemon (the socket is opened up for the test)
u=dynresft$$
if useradd -M -s /usr/sbin/nologin "$u" 2>/dev/null; then
  chmod 711 "$T_TMP" "$C"; chmod 666 "$C/mjsched.sock"
  t_run setpriv --reuid "$u" --regid "$u" --clear-groups "$DYNRES_BIN/mjcontrol" --home "$C" update node n3 state=down reason=mine
  userdel "$u" 2>/dev/null
  chmod 700 "$T_TMP" "$C"; chmod 600 "$C/mjsched.sock"
  assert_ne 0 "$T_RC" "another user cannot set a node down"
  assert_contains "$T_ERR" "Access/permission denied" "the daemon refuses ($T_ERR)"
  assert_eq up "$(ns n3)" "n3 still up"
else
  t_log "useradd not possible here: the other-user case is skipped"
fi
mjcancel "$j2"
t_done
