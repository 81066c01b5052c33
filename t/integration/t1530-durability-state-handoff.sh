#!/usr/bin/env bash
# Durability order of the one piece of job state dynres writes outside
# SQLite: a job's exit status hand-off (spool/jobN.end, written by its
# supervisor before it records the end in the state file, so no result is
# lost if the state file is busy or the supervisor dies). Under strace the
# temporary file must be fsynced after its last write and before the rename,
# and the spool directory fsynced after the rename.
. "${DYNRES_SRC:-$(dirname "$0")/../..}/t/lib.sh"
t_begin 60
command -v strace >/dev/null || t_skip "strace (Debian package strace) is not installed"
H=$T_TMP/h
mkdir -p "$H"
strace -f -y -qq -o "$T_TMP/trace" -e trace=openat,write,fsync,fdatasync,rename,renameat,renameat2 \
  mjsched --home "$H" --nodes n1 --tick 0.2 >"$T_TMP/mjsched.log" 2>&1 &
S=$!
bg_register "$S"
wait_for 20 "mjsched listens" test -S "$H/mjsched.sock" || t_fatal "mjsched did not start: $(cat "$T_TMP/mjsched.log")"
export DYNRES_HOME=$H
write_script "$T_TMP/job.sh" '#!/bin/bash' 'exit 3'
ID=$(mjsub --parsable -o "$T_TMP/%j.out" "$T_TMP/job.sh")
wait_state 20 "$H" "$ID" FAILED
pkill -TERM -P "$S" mjsched
wait_for 20 "mjsched and its tracer exited" bash -c "! kill -0 $S 2>/dev/null"

out=$(python3 - "$T_TMP/trace" "$H/spool" "$ID" <<'PY'
import re, sys
trace, spool, job = sys.argv[1:]
tmp, final = f"{spool}/job{job}.end.tmp", f"{spool}/job{job}.end"
lines = open(trace).read().splitlines()
fd = re.compile(r'^\s*\d+\s+(\w+)\((\d+)<([^>]*)>')
last_write = fsync_tmp = rename = None
dir_fsyncs = []
for i, l in enumerate(lines):
    m = fd.match(l)
    if m and m.group(3) == tmp and m.group(1) == 'write': last_write = i
    if m and m.group(3) == tmp and m.group(1) in ('fsync', 'fdatasync') and (l.rstrip().endswith('= 0') or '<unfinished' in l): fsync_tmp = i
    if m and m.group(3) == spool and m.group(1) in ('fsync', 'fdatasync') and (l.rstrip().endswith('= 0') or '<unfinished' in l): dir_fsyncs.append(i)
    if re.match(r'^\s*\d+\s+rename(at2?)?\(.*' + re.escape('"' + tmp + '"') + r'.*' + re.escape('"' + final + '"') + r'.*=\s*0', l):
        rename = i
err = []
if last_write is None: err.append('no write to ' + tmp)
if rename is None: err.append('no rename of ' + tmp)
if not err:
    if fsync_tmp is None or not (last_write < fsync_tmp < rename):
        err.append(f'{tmp} not fsynced between its last write (line {last_write + 1}) and the rename (line {rename + 1})')
    if not any(k > rename for k in dir_fsyncs):
        err.append(f'{spool} not fsynced after the rename (line {rename + 1})')
print('; '.join(err) if err else f'hand-off of job {job}: write, fsync, rename, directory fsync in order')
sys.exit(1 if err else 0)
PY
)
if [[ $? == 0 ]]; then t_pass "$out"; else t_fail "$out"; fi
assert_eq "FAILED 3" "$(sq "$H" "SELECT state, exit_code FROM jobs WHERE id=$ID" | tr '|' ' ')" "the end is recorded"
t_done
