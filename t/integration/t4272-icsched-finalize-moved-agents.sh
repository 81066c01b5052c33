#!/usr/bin/env bash
# An application whose agents were stopped after its newest version became
# durable finalizes cleanly [John24 Alg. 9 line 6]: the controller gives a
# node back (REMOVE_NODES, or iCheck's own release) only once the newest
# version is on the second level, and may stop the agents while the
# application computes its last iterations; icheck_finalize(0)'s flush then
# finds no agent ("peer closed the connection"), but the second level holds
# the version, so finalize succeeds (before, the job failed at finalize).
#   2 nodes, n2 iCheck's. synth (1 process) commits version 1 (iteration 5
#   of 9), then computes 4 iterations more. Once version 1 is on the second
#   level its agent is SIGKILLed: synth ends with status 0 and says
#   why, and its checksum is an uninterrupted run's.
# About 10 s.
. "${DYNRES_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/t/lib.sh"
t_begin 90
t_require synth icheckd icagent stdbuf

C=$T_TMP/cluster
W=$T_TMP/work
mkdir -p "$W"
cd "$W" || t_fatal "cd $W"
boot_cluster "$C" 2 --icheck-nodes 1 --tick 0.2 --kill-wait 1
show_logs() {
  echo "--- synth (tail)" >&2; tail -n 10 "$W/synth.out" >&2
  echo "--- controller (tail)" >&2; tail -n 10 "$C/icheck/controller.log" >&2
}
t_on_fail show_logs
PFS=$(sed -n 's/^pfs_dir: *//p' "$C/icheck.yaml")
S=(-s cp_global=250000 -s cp_interval=5it -s cp_count=9 -s iter_passes=500 -s probe_interval=0)
stdbuf -oL "$DYNRES_BIN/synth" "${S[@]}" -s app_name=fin4272 -s persist=false -s icheck_config="$C/icheck.yaml" \
  >"$W/synth.out" 2>&1 &
SYN=$!
bg_register "$SYN"
wait_for 40 "version 1 committed to the agent" eval 'grep -q "^synth: commit .*version=1 .*mode=rdma" "$W/synth.out"'
wait_for 10 "version 1 on the second level" test -f "$PFS/$(id -u)/fin4272/v0000000001/MANIFEST.json"
AG=$(procs_matching "--app fin4272")
[[ -n $AG ]] || t_fatal "no agent process of fin4272"
pid_alive "$SYN" || t_fatal "synth ended before its agent could be stopped: $(tail -2 "$W/synth.out")"
# shellcheck disable=SC2086
kill -9 $AG
wait "$SYN"
assert_eq 0 "$?" "synth ended normally"
O=$(cat "$W/synth.out")
assert_contains "$O" "the second level holds version 1 (committed 1): finalize goes on" "the library says why the failed flush is no failure"
assert_not_contains "$O" "icheck_finalize failed" "icheck_finalize did not fail"
ref=$("$DYNRES_BIN/synth" "${S[@]}" -s enable_ichk=false -q | sed -n 's/^synth: checksum=\([0-9a-f]*\).*/\1/p')
assert_eq "$ref" "$(sed -n 's/^synth: checksum=\([0-9a-f]*\).*/\1/p' "$W/synth.out")" "the run ends with the uninterrupted checksum"
t_done
