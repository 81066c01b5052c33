#!/usr/bin/env bash
# ctest-cost: 20
# ctest-processors: 2
# No false DOWNs under load, the shortened form of bench/ft/false_down.sh
# (600 s there): a 3-node local cluster with node agents and a 3 s node
# timeout (the default is 10 s) runs a busy job on every node while
# stress-ng saturates every core (2 x nproc CPU workers) for 15 s; no node
# may be set DOWN. Then the timeout path itself: a frozen agent
# (vcluster-fail --freeze) is set DOWN after the timeout, not at once.
# About 25 s.
. "${DYNRES_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/t/lib.sh"
t_begin 60
command -v stress-ng >/dev/null || t_skip "stress-ng (Debian package stress-ng) is not installed"
C=$T_TMP/c
boot_cluster "$C" 3 --tick 0.5 --node-timeout 3
agents() { (($(grep -c 'connected' "$C/nodes/mjnoded.log" 2>/dev/null) >= 3)); }
wait_for 10 "3 node agents connected" agents || t_fatal "$(cat "$C/nodes/mjnoded.log")"
write_script "$T_TMP/spin.sh" '#!/bin/bash' 'while :; do :; done'
for _ in 1 2 3; do mjsub --parsable -N 1 -o /dev/null "$T_TMP/spin.sh" >/dev/null || t_fatal "mjsub failed"; done
stress-ng --cpu $((2 * $(nproc))) --timeout 15 >/dev/null 2>&1 &
bg_register $!
wait $!
assert_eq 0 "$(sq "$C" "SELECT COUNT(*) FROM events WHERE kind='node' AND detail LIKE '%->down%'")" \
  "no node set DOWN under saturating load"
assert_eq 3 "$(sq "$C" "SELECT COUNT(*) FROM jobs WHERE state='RUNNING'")" "the jobs still run"
mjcancel --state RUNNING -Q >/dev/null 2>&1

t0=$(date +%s.%N)
t_run vcluster-fail --freeze n3
assert_eq 0 "$T_RC" "freeze n3 ($T_ERR)"
sleep 1
assert_eq up "$(sq "$C" "SELECT state FROM nodes WHERE name='n3'")" "a frozen node is not down before the timeout"
down() { [[ $(sq "$C" "SELECT state FROM nodes WHERE name='n3'") == down ]]; }
wait_for 10 "n3 DOWN after the timeout" down || t_fatal "n3 is not down"
d=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
assert_le 3 "$d" "not before the 3 s timeout ($d s)"
vcluster-fail --thaw n3 >/dev/null
t_done
