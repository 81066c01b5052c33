#!/bin/bash
# t2060-resize-shrink-roles.sh — an in-place shrink tells exactly the
# processes on the released nodes to leave and every other process to stay
# (mj_probe_adapt's role, mj(3)). One process of the job per node (mjtest
# role NODE, its MJ_NODE) registers and prints the role libmj gives it for
# the order; the job's serving process carries the order out. Two shrinks,
# 5 -> 3 and 3 -> 2: a process kept by the first is released by the second.
. "${DYNRES_SRC:-$(dirname "$0")/../..}/t/lib.sh"
t_begin 60

C=$T_TMP/c
boot_cluster "$C" 5 --tick 0.2 --resize-timeout 5

nodes_of() { sq "$C" "SELECT name FROM nodes WHERE job_id=$1 ORDER BY name"; }
go=$T_TMP/go
write_script "$T_TMP/job.sh" '#!/bin/bash' \
  "mjtest serve 50 >$C/serve.txt 2>&1 &" \
  "for round in 1 2; do" \
  "  while [ ! -s $go.\$round ]; do sleep 0.1; done" \
  "  for n in \$(cat $go.\$round); do mjtest role \$n 20 >$C/role-\$round-\$n.txt 2>&1 & done" \
  "done" \
  "wait"
A=$(mjsub --parsable --malleable -N 5 --min-nodes 1 --max-nodes 5 -o "$C/out-%j.txt" "$T_TMP/job.sh")
wait_state 10 "$C" "$A" RUNNING || t_fatal "job $A did not start"
wait_for 10 "the serving process registered" grep -qs '^registered' "$C/serve.txt"

# shrink ROUND TARGET: start a role process per node the job holds, shrink,
# then compare each process's role with the nodes the job gave back
shrink() {
  local round=$1 target=$2 before after n want got
  before=$(nodes_of "$A")
  printf '%s\n' $before >"$go.$round.tmp" && mv "$go.$round.tmp" "$go.$round"
  for n in $before; do
    wait_for 10 "round $round: the process on $n registered" grep -qs '^registered' "$C/role-$round-$n.txt" || return
  done
  t_run mjcontrol resize "$A" "$target" --wait 8
  assert_eq 0 "$T_RC" "round $round: shrink to $target committed ($T_OUT $T_ERR)"
  after=$(nodes_of "$A")
  assert_eq "$target" "$(wc -w <<<"$after")" "round $round: the job holds $target nodes"
  for n in $before; do
    wait_for 10 "round $round: the process on $n got the order" grep -qs '^role ' "$C/role-$round-$n.txt" || continue
    got=$(awk '/^role /{print $3}' "$C/role-$round-$n.txt")
    if grep -qx "$n" <<<"$after"; then want=stay; else want=leave; fi
    assert_eq "$want" "$got" "round $round: the process on $n (kept: $( [[ $want == stay ]] && echo yes || echo no)) is told to $want"
  done
  assert_eq "$(( $(wc -w <<<"$before") - target ))" "$(cat "$C"/role-$round-*.txt | grep -c '^role .* leave')" \
    "round $round: as many leave as nodes were released"
}
shrink 1 3
shrink 2 2
check_nodes_consistent "$C" "after the shrinks"
t_run mjcancel "$A"
t_done
