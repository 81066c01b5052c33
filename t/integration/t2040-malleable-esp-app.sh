#!/usr/bin/env bash
# esp-app resized in place follows mjsim's model (emulated
# and resized in place): a malleable esp-app (RUNTIME 8 s at 2 nodes, serial fraction
# 0.1, time scale 0.02) on a 4-node local cluster is grown to 4 nodes by hand
# after about a second. It pauses 14.55 x 0.02 s (Finnerty et al.'s grow cost,
# scaled) without progress, commits, and then runs at the Amdahl rate of
# 4 nodes, so it ends after
#   at + 0.291 + (8 - at) * f(4) / f(2),  f(n) = 0.1 + 0.9 / n,
# where `at` is when the order came (its resize line). It reports its MTCT
# (mtct_of(0.1, n) = 0.1 n / 0.9) and progress to the scheduler.
. "${DYNRES_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/t/lib.sh"
t_begin 60
[[ -x $DYNRES_BIN/esp-app ]] || t_skip "esp-app is not built (needs libmj)"
C=$T_TMP/c W=$T_TMP/w
mkdir -p "$W"
boot_cluster "$C" 4 --tick 0.1 --kill-wait 1
write_script "$W/esp.sh" '#!/bin/bash' '#SBATCH -o esp.out' \
  "exec $DYNRES_SRC/share/dynres/examples/esp-app/esp-app 8 2 0.1 --malleable --scale 0.02 --report-interval 0.2"
# a rigid job holds the other nodes so that the malleable one starts on 2
write_script "$W/block.sh" '#!/bin/bash' 'sleep 300'
blk=$(cd "$W" && mjsub --parsable -J block -N 2 --rigid block.sh) || t_fatal "mjsub failed: $blk"
wait_state 20 "$C" "$blk" RUNNING || t_fatal "the blocker did not start"
id=$(cd "$W" && mjsub --parsable -J esp -N 2 --min-nodes 1 --max-nodes 4 --malleable esp.sh) || t_fatal "mjsub failed: $id"
wait_state 20 "$C" "$id" RUNNING || t_fatal "the job did not start"
mjcancel "$blk"
wait_state 10 "$C" "$blk" CANCELLED || t_fatal "the blocker was not cancelled"
out() { cat "$W/esp.out" 2>/dev/null; }
has() { out | grep -qE "$1"; }
wait_for 10 "esp-app started" has '^esp-app: job ' || t_fatal "$(out)"
assert_contains "$(out)" "on 2 node(s)" "starts on 2 nodes"
sleep 1
t_run mjcontrol resize "$id" 4
assert_eq 0 "$T_RC" "mjcontrol resize $id 4 ($T_ERR)"
wait_for 10 "the expand is committed" has '^esp-app: resize expand 2->4 ' || t_fatal "$(out)"
line=$(out | grep '^esp-app: resize expand')
lat=$(grep -oE 'latency_s=[0-9.]+' <<<"$line" | cut -d= -f2)
at=$(grep -oE 'at_s=[0-9.]+' <<<"$line" | cut -d= -f2)
assert_le 0.29 "$lat" "the grow cost 14.55 x 0.02 s is paid before the commit (latency $lat s)"
assert_lt "$lat" 0.6 "and not much more"
assert_eq 4 "$(job_col "$C" "$id" num_nodes)" "the state file gives the job 4 nodes"
# mjsched keeps the latest ratio and writes it to the state file at most once a second
mtct_of_job() {
  mjstat -j "$id" --json 2>/dev/null | perl -MJSON::PP -0777 -ne 'my $d = decode_json($_);
    $d = $d->{jobs}[0] if exists $d->{jobs}; my $v = ($d->{malleable} // {})->{mtct}; print defined $v ? $v : ""'
}
mtct_is() { awk -v m="$(mtct_of_job)" -v w="$1" 'BEGIN { d = m - w; exit !(m != "" && d < 1e-6 && d > -1e-6) }'; }
wait_for 4 "mjstat shows the MTCT of 4 nodes, 0.1*4/0.9 = 0.444 (was 0.222 at 2)" mtct_is 0.444444444444
t_run mjstat -j "$id"
assert_match 'Resize order=[0-9]+ expand 2->4' "$T_OUT" "mjstat -j lists the expand"
wait_state 20 "$C" "$id" COMPLETED || t_fatal "$(out)"
el=$(out | grep -oE 'done elapsed_s=[0-9.]+' | cut -d= -f2)
want=$(awk -v a="$at" 'BEGIN { f2 = 0.1 + 0.9 / 2; f4 = 0.1 + 0.9 / 4; printf "%.3f", a + 14.55 * 0.02 + (8 - a) * f4 / f2 }')
t_log "order at $at s; elapsed $el s, model $want s (rigid: 8 s)"
assert_lt "$(awk -v e="$el" -v w="$want" 'BEGIN { d = e - w; print d < 0 ? -d : d }')" 0.15 \
  "runtime $el s follows the model ($want s)"
check_allocations_disjoint "$C"
t_done
