#!/usr/bin/env bash
# Durability order of iCheck's second level, checked with a real tool: a
# commit runs under strace and the trace must show, for every version
# directory V whose MANIFEST.json is renamed into place,
#   - every chunk file of V fsynced after its last write and before the rename,
#   - the manifest's temporary file fsynced after its last write and before
#     the rename,
#   - V itself fsynced after the rename (the rename is durable),
#   - the parent of V fsynced after V was created and before the rename.
# Both writers are traced: an application in direct mode (the library's
# fallback) and an agent writing the second level (icagent). A call that
# strace splits over two lines (<unfinished ...> / <... resumed>, threads)
# counts where it completed.
. "${DYNRES_SRC:-$(dirname "$0")/../..}/t/lib.sh"
t_begin 120
command -v strace >/dev/null || t_skip "strace (Debian package strace) is not installed"
for t in ictest icagent; do [[ -x $DYNRES_BIN/$t ]] || t_skip "$t is not built"; done

# check TRACE PFS WHAT — parse an `strace -f -y` trace
check() {
  local out
  if out=$(python3 - "$1" "$2" <<'PY'
import os, re, sys
trace, pfs = sys.argv[1], sys.argv[2]
lines = open(trace).read().splitlines()
fdpath = re.compile(r'^\s*\d+\s+(\w+)\((\d+)<([^>]*)>')
ren = re.compile(r'^\s*\d+\s+rename(?:at2?)?\(.*"([^"]*/\.MANIFEST\.json\.tmp-[^"]*)".*"([^"]*/MANIFEST\.json)".*\)\s*=\s*0')
last_write, fsyncs, renames, pending = {}, {}, [], {}
resumed = re.compile(r'^\s*(\d+)\s+<\.\.\. (fsync|fdatasync) resumed>.*=\s*0\s*$')
for i, l in enumerate(lines):
    m = fdpath.match(l)
    if m:
        call, path = m.group(1), m.group(3)
        if call in ('write', 'pwrite64'):
            last_write[path] = i
        elif call in ('fsync', 'fdatasync') and l.rstrip().endswith('= 0'):
            fsyncs.setdefault(path, []).append(i)
        elif call in ('fsync', 'fdatasync') and '<unfinished' in l:
            pending[l.split()[0]] = path      # completes at its "resumed" line
    r2 = resumed.match(l)
    if r2 and r2.group(1) in pending:
        fsyncs.setdefault(pending.pop(r2.group(1)), []).append(i)
    r = ren.match(l)
    if r:
        renames.append((i, r.group(1), r.group(2)))
errors, checked = [], 0
if not renames:
    errors.append('no MANIFEST.json rename in the trace')
for i, tmp, final in renames:
    v = os.path.dirname(final)
    chunks = [os.path.join(v, f) for f in os.listdir(v) if f.endswith('.dat')] if os.path.isdir(v) else []
    if not chunks and os.path.isdir(v):
        errors.append(f'{v}: no chunk files')
    for c in chunks + [tmp]:
        w = last_write.get(c, -1)
        if not any(w < k < i for k in fsyncs.get(c, [])):
            errors.append(f'{c}: not fsynced between its last write (line {w + 1}) and the rename (line {i + 1})')
        checked += 1
    if not any(k > i for k in fsyncs.get(v, [])):
        errors.append(f'{v}: the directory is not fsynced after the rename (line {i + 1})')
    if not any(k < i for k in fsyncs.get(os.path.dirname(v), [])):
        errors.append(f'{os.path.dirname(v)}: the parent is not fsynced before the rename (line {i + 1})')
    checked += 2
print(f'{len(renames)} versions, {checked} ordering checks')
for e in errors[:10]:
    print('ERROR ' + e)
sys.exit(1 if errors else 0)
PY
  ); then
    t_pass "$3: $out"
  else
    t_fail "$3: $out"
  fi
}

TR="strace -f -y -qq -e trace=openat,write,pwrite64,fsync,fdatasync,rename,renameat,renameat2"

# 1. direct mode: the application writes the second level itself
D=$T_TMP/direct
mkdir -p "$D"
printf 'direct: true\npfs_dir: %s/pfs\n' "$D" >"$D/direct.yaml"
t_run timeout 60 $TR -o "$D/trace" ictest dur 50000 8 2 --config "$D/direct.yaml"
assert_eq 0 "$T_RC" "ictest in direct mode under strace"
assert_contains "$T_OUT" "FINAL 4 direct" "four versions committed directly"
check "$D/trace" "$D/pfs" "direct mode"

# 2. an agent writes the second level ([John24 §6.2]: multi-level)
A=$T_TMP/agent
mkdir -p "$A"
$TR -o "$A/trace" icagent --listen "unix:$A/a0.sock" --app dur --pfs-dir "$A/pfs" >"$A/agent.log" 2>&1 &
AGENT=$!
bg_register "$AGENT"
wait_for 20 "the agent listens" test -S "$A/a0.sock" || t_fatal "agent did not start: $(cat "$A/agent.log")"
printf 'agents: [ "unix:%s/a0.sock" ]\npfs_dir: %s/pfs\n' "$A" "$A" >"$A/one.yaml"
t_run timeout 60 ictest dur 50000 8 2 --config "$A/one.yaml"
assert_eq 0 "$T_RC" "ictest with one agent"
wait_for 20 "the agent wrote a second-level version" \
  bash -c "ls '$A'/pfs/*/dur/v*/MANIFEST.json >/dev/null 2>&1"
pkill -TERM -P "$AGENT" icagent   # the traced agent; strace ends with it
wait_for 20 "the agent and its tracer exited" bash -c "! kill -0 $AGENT 2>/dev/null"
check "$A/trace" "$A/pfs" "agent"
t_done
