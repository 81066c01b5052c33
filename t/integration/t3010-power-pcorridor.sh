#!/usr/bin/env bash
# pcorridor on a local 4-node cluster (idle 71 W, at most 250 W per node):
# every bad input exits 2 with a message naming the problem and leaves the
# state file unchanged (also before the power schema exists); set records
# the corridor with time and reason, is idempotent and silent when nothing
# changed, goes to mjsched as a corridor_set request; show --json reports the
# modelled draw of a running job with power hints, headroom and the Eq.
# 5.4/5.5 guarantees; sample writes one modelled reading per node; history
# and plot work (plot output path with a space and a quote). About 10 s.
. "${DYNRES_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/t/lib.sh"
t_begin 90
command -v pcorridor >/dev/null || t_skip "pcorridor is not built"
C=$T_TMP/cluster
boot_cluster "$C" 4 --tick 0.2 --kill-wait 1

bad() {  # DESCRIPTION NEEDLE -- CMD...
  local what=$1 needle=$2 before
  shift 3
  before=$(state_digest "$C")
  t_run "$@"
  assert_eq 2 "$T_RC" "$what: exit code 2"
  assert_contains "$T_ERR" "$needle" "$what: stderr names the problem"
  assert_eq "" "$T_OUT" "$what: nothing on stdout"
  assert_eq "$before" "$(state_digest "$C")" "$what: state file unchanged"
}
bad "lower above upper" "must be below the upper bound" -- pcorridor set 900 300
bad "upper above the maximum draw" "above the most the cluster can draw: 4 nodes x 250 W = 1000 W" -- pcorridor set 300 1001
bad "lower below the idle floor" "below the idle floor: 4 nodes x 71 W = 284 W" -- pcorridor set 200 900
bad "negative lower" "is negative" -- pcorridor set --force --lower=-5 --upper 900
bad "not a number" "'3OO' is not a number of watts" -- pcorridor set 3OO 900
bad "infinite" "'inf' is not a number of watts" -- pcorridor set 300 inf
bad "one bound only" "give both LOWER and UPPER" -- pcorridor set 300
bad "both forms" "not both" -- pcorridor set 300 900 --lower 300
bad "--at in the past" "is in the past" -- pcorridor set 300 900 --at -1h
bad "--at garbage" "time 'tomorrowish'" -- pcorridor set 300 900 --at tomorrowish
bad "unknown option" "--bogus" -- pcorridor set 300 900 --bogus
bad "no subcommand" "subcommand" -- pcorridor
assert_eq "" "$(sq "$C" "SELECT name FROM sqlite_master WHERE name='power_corridor'")" "bad input created no power tables"

# ---------------------------------------------------------------- set
t_run pcorridor set 300 900 --reason "cron test"
assert_eq 0 "$T_RC" "set 300 900: exit 0"
assert_contains "$T_OUT" "corridor 300 - 900 W recorded" "set says what it recorded"
assert_eq "300.0|900.0|cron test|0" "$(sq "$C" "SELECT lower, upper, reason, forced FROM power_corridor")" "corridor row"
assert_le "$(date +%s)" "$(sq "$C" "SELECT CAST(set_time AS INT) + 5 FROM power_corridor")" "set_time is now"
d=$(state_digest "$C")
t_run pcorridor set 300 900
assert_eq "0||" "$T_RC|$T_OUT|$T_ERR" "same corridor again: exit 0, no output"
assert_eq "$d" "$(state_digest "$C")" "same corridor again: state unchanged"
t_run pcorridor set --lower 300 --upper 900 -v
assert_contains "$T_OUT" "nothing changed" "-v says nothing changed"
t_run pcorridor set 100 900 --force --reason "maintenance"
assert_eq 0 "$T_RC" "--force accepts a lower bound below the idle floor"
assert_eq "100.0|1" "$(sq "$C" "SELECT lower, forced FROM power_corridor ORDER BY id DESC LIMIT 1")" "forced row"
t_run pcorridor set 400 950 --at +1h --reason later
assert_eq 0 "$T_RC" "scheduled change recorded"
assert_eq 3 "$(sq "$C" "SELECT COUNT(*) FROM power_corridor")" "history keeps every change"

# the wake-up frame: a listener on a copy of the cluster's directory
F=$T_TMP/fake
mkdir -p "$F"
sqlite3 "$C/state.db" ".backup '$F/state.db'"
python3 - "$F/mjsched.sock" >"$T_TMP/wake.txt" 2>&1 <<'PY' &
import socket, struct, sys
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(1); s.settimeout(20)
c, _ = s.accept(); n = struct.unpack(">I", c.recv(4))[0]; b = b""
while len(b) < n: b += c.recv(n - len(b))
print(b.decode())
r = b'{"rc":0,"changed":true,"out":"","err":""}'
c.sendall(struct.pack(">I", len(r)) + r)
PY
py=$!
bg_register $py
wait_for 10 "the wake listener" test -S "$F/mjsched.sock"
t_run pcorridor --home "$F" set 500 980
assert_contains "$T_OUT" "scheduler woken" "set reports the wake-up ($T_ERR)"
wait $py
# the change is a request to mjsched, which records it and runs a pass
assert_contains "$(cat "$T_TMP/wake.txt")" '"op":"corridor_set"' "mjsched's socket got the corridor_set request"
assert_contains "$(cat "$T_TMP/wake.txt")" '"lower":500.0' "... with the lower bound"

# ---------------------------------------------------------------- show / sample
write_script "$T_TMP/heat.sh" '#!/bin/sh' 'sleep 30'
mjsub -N 2 --job-name heat --min-power 240 --max-power 260 "$T_TMP/heat.sh" >/dev/null
wait_state 15 "$C" 1 RUNNING
t_run pcorridor show --json
assert_eq 0 "$T_RC" "show --json: exit 0"
echo "$T_OUT" >"$T_TMP/show.json"
draw=$(json_get draw <"$T_TMP/show.json")
assert_contains "$draw" '"min":622' "modelled min draw = 2 x 240 + 2 x 71 W"
assert_contains "$draw" '"max":662' "modelled max draw = 2 x 260 + 2 x 71 W"
assert_contains "$draw" '"source":"modelled"' "draw labelled modelled"
assert_contains "$(json_get headroom <"$T_TMP/show.json")" '"upper":238' "headroom below the upper bound 900 W"
assert_contains "$(json_get guarantees <"$T_TMP/show.json")" "Eq. 5.4 holds" "guarantees in words"
t_run pcorridor show
assert_contains "$T_OUT" "job 1 heat: 2 node(s) x 240 W-260 W (hint, modelled)" "show names the job's modelled draw"
t_run pcorridor sample
assert_eq 0 "$T_RC" "sample: exit 0"
assert_eq 4 "$(grep -c ' W  modelled' <<<"$T_OUT")" "one modelled reading per node"
assert_eq 2 "$(grep -c 'job 1' <<<"$T_OUT")" "two readings of job 1"
assert_eq "4|642.0" "$(sq "$C" "SELECT COUNT(*), SUM(watts) FROM power_samples")" "samples recorded (2 x 250 + 2 x 71 W)"
pcorridor sample >/dev/null

# violations: the modelled draw (642 W) below a new lower bound of 700 W
pcorridor set 700 1000 >/dev/null
pcorridor sample >/dev/null
sleep 0.5
pcorridor sample >/dev/null
pcorridor show --json >"$T_TMP/show2.json"
v=$(json_get violations <"$T_TMP/show2.json")
assert_contains "$v" '"count":1' "one violation (draw below the lower bound)"
assert_contains "$v" '"above_watt_seconds":0' "nothing above the upper bound"
below=$(perl -MJSON::PP -0777 -ne 'print decode_json($_)->{violations}{below_watt_seconds}' "$T_TMP/show2.json")
assert_lt 20 "$below" "58 W below for about 0.5 s counted in watt-seconds"
assert_lt "$below" 200 "watt-seconds below bounded by the time between samples"
for _ in 1 2 3 4 5 6; do pcorridor sample >/dev/null; done
t_run pcorridor show --json
assert_contains "$(json_get forecast <<<"$T_OUT")" '"max":642' "forecast of a steady modelled draw is 642 W"
t_run pcorridor show
assert_contains "$T_OUT" "violations: 1 so far" "show names the violations in words"

# RAPL on synthetic powercap trees: a readable package counter, then an unreadable one
R=$T_TMP/powercap
mkdir -p "$R/intel-rapl:0" "$R/intel-rapl:1"
echo package-0 >"$R/intel-rapl:0/name"; echo 1000 >"$R/intel-rapl:0/energy_uj"
echo 262143328850 >"$R/intel-rapl:0/max_energy_range_uj"
echo psys >"$R/intel-rapl:1/name"; echo 5 >"$R/intel-rapl:1/energy_uj"; echo 262143328850 >"$R/intel-rapl:1/max_energy_range_uj"
t_run pcorridor sample --rapl "$R" --interval 0.05
assert_eq 0 "$T_RC" "sample --rapl: exit 0 ($T_ERR)"
assert_match ' W  rapl' "$T_OUT" "sample --rapl prints a reading labelled rapl"
assert_contains "$T_ERR" "intel-rapl:1 (psys" "psys zone named as skipped"
assert_eq 1 "$(sq "$C" "SELECT COUNT(*) FROM power_samples WHERE source='rapl'")" "rapl reading recorded"
rm "$R/intel-rapl:0/energy_uj"; mkdir "$R/intel-rapl:0/energy_uj"
before=$(state_digest "$C")
t_run pcorridor sample --rapl "$R" --interval 0.05
assert_eq 1 "$T_RC" "unreadable RAPL counter: exit 1"
assert_contains "$T_ERR" "no readable RAPL package or dram counter" "unreadable counter reported"
assert_contains "$T_ERR" "intel-rapl:0/energy_uj" "the unreadable file is named"
assert_eq "$before" "$(state_digest "$C")" "failed sample records nothing"

# ---------------------------------------------------------------- history / plot
t_run pcorridor history --json
assert_eq 4 "$(perl -MJSON::PP -0777 -ne 'print scalar @{decode_json($_)}' <<<"$T_OUT")" "history --json lists 4 corridors"
t_run pcorridor history --since +30m
assert_contains "$T_OUT" "400 - 950 W  later" "history --since shows only the scheduled one"
mkdir -p "$T_TMP/out dir"
t_run pcorridor plot --output "$T_TMP/out dir/it's.png"
assert_eq 0 "$T_RC" "plot: exit 0 ($T_ERR)"
assert_eq "89504e47" "$(head -c 4 "$T_TMP/out dir/it's.png" | od -An -tx1 | tr -d ' \n')" "plot wrote a PNG"
bad "plot into a missing directory" "does not exist" -- pcorridor plot -o "$T_TMP/nope/p.png"
mjcancel 1
t_done
