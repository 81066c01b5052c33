#!/usr/bin/env bash
# esp-app (share/dynres/examples/esp-app), the emulated ESP application, when
# it is not malleable (outside a job): the script runs the built binary, which
# prints the former line and holds for the Amdahl time
#   T(n) = RUNTIME * (s + (1-s)/n) / (s + (1-s)/REQ_NODES),  n = MJ_JOB_NUM_NODES,
# exactly as the former bash script (its awk formula is the reference here);
# an MTCT profile (--phases, --esp-job) keeps the runtime at REQ_NODES and
# changes it elsewhere; bad options and environment are refused, naming the
# problem. A few seconds.
. "${DYNRES_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/t/lib.sh"
t_begin 60
[[ -x $DYNRES_BIN/esp-app ]] || t_skip "esp-app is not built (needs libmj)"
APP=$DYNRES_SRC/share/dynres/examples/esp-app/esp-app
cd "$T_TMP" || t_fatal "cd"
unset MJ_JOB_ID MJ_SECRET MJ_SOCKET MJ_JOB_NUM_NODES MJ_JOB_NODELIST

runs() { grep -oE 'runs [0-9.]+s' <<<"$1" | grep -oE '[0-9.]+'; }
awk_t() { awk -v T="$1" -v n0="$2" -v n="$3" -v s="$4" 'BEGIN { printf "%.3f", T * (s + (1 - s) / n) / (s + (1 - s) / n0) }'; }

for c in "12 4 4 0.05" "12 4 1 0.05" "12 4 8 0.05" "30 16 5 0.2" "7 2 3 0"; do
  read -r T n0 n s <<<"$c"
  out=$(MJ_JOB_NUM_NODES=$n timeout 5 "$DYNRES_BIN/esp-app" "$T" "$n0" "$s" --report-interval 0.5 --scale 0.01 & sleep 0.2; kill $! 2>/dev/null)
  assert_eq "$(awk_t "$T" "$n0" "$n" "$s")" "$(runs "$out")" "runtime of $T s at $n0 node(s) on $n node(s), s=$s, as the former script"
done
# the script execs the binary and the binary really holds for that long
t0=$(date +%s.%N)
t_run env MJ_JOB_NUM_NODES=2 MJ_JOB_ID=41 MJ_JOB_NODELIST='n[1-2]' bash "$APP" 1.2 4 0.1
t1=$(date +%s.%N)
assert_eq 0 "$T_RC" "esp-app exits 0"
want=$(awk_t 1.2 4 2 0.1)
assert_eq "esp-app: job 41 on 2 node(s) (n[1-2]), requested 4, runs ${want}s" "$T_OUT" "the former output line"
el=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')
assert_le "$want" "$el" "held at least ${want} s (took $el s)"
assert_lt "$el" "$(awk -v w="$want" 'BEGIN { print w + 0.5 }')" "and not much longer"

# a profile keeps the runtime at REQ_NODES and changes it elsewhere
out=$(timeout 5 "$DYNRES_BIN/esp-app" 20 4 0.05 --phases 0.25:0.01,0.5:0.1,0.75:0.02,1:0.05 & sleep 0.2; kill $! 2>/dev/null)
assert_eq 20.000 "$(runs "$out")" "a phased job runs RUNTIME at REQ_NODES"
flat=$(MJ_JOB_NUM_NODES=16 timeout 5 "$DYNRES_BIN/esp-app" 20 4 0.05 & sleep 0.2; kill $! 2>/dev/null)
phased=$(MJ_JOB_NUM_NODES=16 timeout 5 "$DYNRES_BIN/esp-app" 20 4 0.05 --phases 0.5:0.2,1:0.2 & sleep 0.2; kill $! 2>/dev/null)
assert_lt "$(runs "$flat")" "$(runs "$phased")" "a more serial profile gains less from 16 nodes ($(runs "$flat") s vs $(runs "$phased") s)"
out=$(timeout 5 "$DYNRES_BIN/esp-app" 20 4 --esp-job 3 & sleep 0.2; kill $! 2>/dev/null)
assert_eq 20.000 "$(runs "$out")" "mjsim's ESP profile (--esp-job 3) keeps RUNTIME at REQ_NODES"
dn=$(MJ_JOB_NUM_NODES=8 timeout 5 "$DYNRES_BIN/esp-app" 20 4 0.05 --model downey & sleep 0.2; kill $! 2>/dev/null)
am=$(MJ_JOB_NUM_NODES=8 timeout 5 "$DYNRES_BIN/esp-app" 20 4 0.05 & sleep 0.2; kill $! 2>/dev/null)
assert_ne "$(runs "$am")" "$(runs "$dn")" "--model downey changes the runtime at 8 nodes"

# bad input
t_run "$DYNRES_BIN/esp-app" --help
assert_eq 0 "$T_RC" "--help exits 0"
for bad in "--scale 0" "--phases 0.5:0.1" "--phases 0.5:0.1,0.4:0.1,1:0.1" "--phases 1:1.5" "--phases x" "--model gustafson" "--esp-job 100000"; do
  t_run "$DYNRES_BIN/esp-app" 10 4 0.05 $bad
  assert_ne 0 "$T_RC" "esp-app $bad is refused"
done
t_run "$DYNRES_BIN/esp-app" 10 4 0.05 --phases 0.5:0.1
assert_contains "$T_ERR" "last phase must end at 1" "names the problem"
t_run env MJ_JOB_NUM_NODES=zero "$DYNRES_BIN/esp-app" 10 4
assert_ne 0 "$T_RC" "a malformed MJ_JOB_NUM_NODES is refused"
assert_contains "$T_ERR" "MJ_JOB_NUM_NODES" "and named"
t_run "$DYNRES_BIN/esp-app" 10 0
assert_ne 0 "$T_RC" "REQ_NODES 0 is refused"
t_done
