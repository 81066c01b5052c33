#!/usr/bin/env bash
# Short kill campaign: bench/icheck/kill_campaign.py with one
# SIGKILL of each kind -- an agent, a manager, the active controller, the
# application -- during asynchronous commits every 200 ms, each followed by
# the normal recovery. Every application restart must restore the newest
# committed version byte for byte (no loss, no corrupt or mixed restore),
# and the final run must reach the uninterrupted result. The 30-kill run is
# the benchmark (bench/icheck/README).
. "${DYNRES_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/t/lib.sh"

for t in icheckd icagent ictest; do
  [[ -x $DYNRES_BIN/$t ]] || t_skip "$DYNRES_BIN/$t is not built"
done
command -v python3 >/dev/null || t_skip "python3 is not installed"
t_begin 60
t_run timeout 55 python3 "$DYNRES_SRC/bench/icheck/kill_campaign.py" --kills 4 \
  --sequence agent,manager,controller,app --gap 2 3 --sleep-ms 200 --seed 11
assert_eq 0 "$T_RC" "the campaign passes (stderr: ${T_ERR: -300})"
S=$(grep '^SUMMARY' <<<"$T_OUT")
assert_contains "$S" "kills=4 " "four kills done ($S)"
assert_contains "$S" "losses=0 " "no committed version lost"
assert_contains "$S" "corrupt=0 " "no corrupt or mixed restore"
assert_contains "$S" "final_result_matches=1" "the final run reaches the uninterrupted result"
assert_match "restored_intact=[1-9]" "$S" "restores were checked byte for byte"
t_done
