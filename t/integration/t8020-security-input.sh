#!/usr/bin/env bash
# t8020-security-input.sh — wrong state and unclear messages from hostile or odd
# input (dynres(7), SECURITY): every case changes nothing it should not, and
# says what is wrong.
#   - mjsub --json with an output path that is not UTF-8: exit 0, valid JSON,
#     the job recorded once; a job name that is not UTF-8 never breaks any
#     --json view; a newline in a job name does not split mjstat rows;
#   - mjcontrol release 999,ID: exit 1, names 999, ID stays held;
#   - configuration: NaN/inf tick, kill_wait 1e300-style values, an unknown
#     power key: mjsched --daemon refuses to start (exit != 0, message);
#     vcluster-boot --kill-wait 1e1 is refused before anything starts;
#   - pcorridor: set 0x1f4 1000 and set -5 1000 refused with clear messages,
#     show --grace nan refused;
#   - a state file another user cannot read: "permission denied", not "no
#     state file" (as root: run as the user nobody).
. "${DYNRES_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/t/lib.sh"
t_begin 90
C=$T_TMP/c
boot_cluster "$C" 2 --tick 0.3
cd "$T_TMP" || t_fatal "cd"

# ---- non-UTF-8 bytes and newlines in what users name
bad=$(printf 'out-\xff-%%j.txt')
t_run mjsub --json -o "$T_TMP/$bad" --wrap true
assert_eq 0 "$T_RC" "mjsub --json with a non-UTF-8 output path exits 0: $T_ERR"
id=$(printf '%s' "$T_OUT" | json_get job_id)
[[ $id =~ ^[0-9]+$ ]] && t_pass "its JSON parses" || t_fail "mjsub --json printed no valid JSON: $T_OUT"
assert_eq 1 "$(count_jobs "$C")" "the job is recorded once"
t_run mjsub --parsable -J "$(printf 'n\xfe')" -o /dev/null --wrap true
t_run mjsub --parsable -J "$(printf 'two\nlines')" -o /dev/null --hold --wrap true
HELD=$T_OUT
others_done() { [[ $(count_jobs "$C" "state IN ('PENDING','RUNNING') AND id != $HELD") == 0 ]]; }
wait_for 20 "the first two jobs ended" others_done
for v in "mjstat --json" "mjstat --json --history" "mjstat --json -j $HELD" "mjcontrol --json show job" "mjstat --summary --json"; do
  t_run $v
  assert_eq 0 "$T_RC" "$v works with non-UTF-8 names: $T_ERR"
done
t_run mjstat --history -h
assert_eq 3 "$(printf '%s\n' "$T_OUT" | grep -c .)" "one mjstat row per job, whatever the names hold"

# ---- all or nothing
t_run mjcontrol release "999,$HELD"
assert_eq 1 "$T_RC" "mjcontrol release 999,$HELD exits 1"
assert_contains "$T_ERR" "invalid job id 999" "the message names 999"
assert_eq 1 "$(job_col "$C" "$HELD" held)" "job $HELD stays held (nothing released)"
mjcancel "$HELD"

# ---- configuration validated before the daemon reports its start
D=$T_TMP/d
mkdir -m 700 "$D"
check_conf() {  # WHAT YAML — mjsched --daemon must refuse it
  printf '%s\n' "$2" >"$D/dynres.yaml"
  t_run mjsched --home "$D" --nodes 'n[1-2]' --daemon
  assert_ne 0 "$T_RC" "mjsched refuses $1"
  [[ -S $D/mjsched.sock ]] && { t_fail "a daemon started with $1"; vcluster-down --dir "$D" >/dev/null; }
  [[ -n $T_ERR ]] && t_pass "$1: says why ($T_ERR)" || t_fail "$1: no message"
}
check_conf "tick: .nan" $'scheduler:\n  tick: .nan'
check_conf "tick: .inf" $'scheduler:\n  tick: .inf'
check_conf "kill_wait: .nan" $'scheduler:\n  kill_wait: .nan'
check_conf "default_time_limit: 1e300" $'scheduler:\n  default_time_limit: 1e300'
check_conf "power.idle_watts: .nan and an unknown key" $'power:\n  idle_watts: .nan\n  unknown_key: 1'
assert_contains "$T_ERR" "power" "the power section's problem is named"
t_run mjsched --home "$D" --nodes 'n[1-2]' --tick nan
assert_ne 0 "$T_RC" "mjsched --tick nan is refused"
t_run vcluster-boot --local 2 --dir "$T_TMP/e" --kill-wait 1e1
assert_ne 0 "$T_RC" "vcluster-boot --kill-wait 1e1 is refused"
assert_contains "$T_ERR" "--kill-wait" "the message names --kill-wait"
[[ ! -e $T_TMP/e/mjsched.sock ]] && t_pass "nothing started" || t_fail "a cluster started with --kill-wait 1e1"

# ---- pcorridor input
t_run pcorridor set 0x1f4 1000
assert_eq 2 "$T_RC" "pcorridor set 0x1f4 1000 is refused"
assert_contains "$T_ERR" "0x1f4" "the message names the value"
t_run pcorridor set -5 1000
assert_eq 2 "$T_RC" "pcorridor set -5 1000 is refused"
assert_contains "$T_ERR" "negative" "the message says the bound is negative"
assert_not_contains "$T_ERR" "not expected" "not CLI11's 'arguments were not expected'"
n=$(sq "$C" "SELECT COUNT(*) FROM power_corridor" 2>/dev/null)
assert_eq 0 "${n:-0}" "no corridor recorded"
t_run pcorridor show --grace nan
assert_ne 0 "$T_RC" "pcorridor show --grace nan is refused"

# ---- a private state file read by another user
if ((EUID == 0)) && id nobody >/dev/null 2>&1 && command -v setpriv >/dev/null; then
  chmod 711 "$T_TMP" "$C"
  t_run setpriv --reuid=nobody --regid=nogroup --clear-groups mjstat --home "$C"
  assert_ne 0 "$T_RC" "another user cannot read the state file"
  assert_contains "$T_ERR" "permission denied" "and is told so"
  assert_not_contains "$T_ERR" "no state file" "not that there is no state file"
else
  t_log "not root: the unreadable-state-file case is skipped"
fi
t_done
