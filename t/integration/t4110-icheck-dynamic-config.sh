#!/usr/bin/env bash
# The dynamic configuration [John24 Listing 6.2] reaches a running
# application: the controller re-reads the file every read_interval and
# sends its transfer settings with every probe reply; the library applies
# them from then on. Evidence comes from the agent itself (its "stats":
# commits begun by pull and by push), not from the library's word.
#  (a) control: file unchanged -> every commit is a pull;
#  (b) transfer: pull -> push while the application runs -> the commits
#      after the next probe are pushes, and the restart still returns the
#      uninterrupted result.
set -u
command -v icheckd >/dev/null && command -v ictest >/dev/null || { echo "not built"; exit 77; }
SRC=${DYNRES_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
W=$(mktemp -d /tmp/icheck_dyn.XXXXXX); chmod 700 "$W"
export DYNRES_HOME=$W
unset ICHECK_CONFIG ICHECK_TRANSFER ICHECK_ZERO_COPY ICHECK_STRATEGY
cleanup() { "$SRC/share/dynres/icheck-down" --home "$W" >/dev/null 2>&1; rm -rf "$W"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$W"/icheck/*.log; do echo "== $f"; tail -5 "$f"; done; exit 1; }
dyn() { # transfer
  sed -e 's/^read_interval:.*/read_interval: 1/' -e "s/^transfer:.*/transfer: $1/" \
    "$SRC/etc/icheck-dynamic.yaml" >"$W/icheck-dynamic.yaml.tmp"
  mv "$W/icheck-dynamic.yaml.tmp" "$W/icheck-dynamic.yaml"
}
# pulls/pushes begun on the agents of APP, summed: "PULLS PUSHES"
agent_counts() {
  icheckd --status --config "$W/icheck.yaml" | python3 -c '
import json, socket, struct, sys
app = sys.argv[1]
d = json.load(sys.stdin)
pulls = pushes = 0
for a in [x for x in d["apps"] if x["name"] == app][0]["agents"]:
    addr = a["address"]
    if addr.startswith("unix:"):
        s = socket.socket(socket.AF_UNIX); s.connect(addr[5:])
    else:
        h, p = addr.removeprefix("tcp:").rsplit(":", 1); s = socket.create_connection((h, int(p)))
    body = json.dumps({"op": "stats"}).encode()
    s.sendall(struct.pack(">I", len(body)) + body)
    n = struct.unpack(">I", s.recv(4, socket.MSG_WAITALL))[0]
    r = json.loads(s.recv(n, socket.MSG_WAITALL))
    pulls += r["pulls"]; pushes += r["pushes"]
print(pulls, pushes)' "$1"
}
grep -q '^read_interval:' "$SRC/etc/icheck-dynamic.yaml" && grep -q '^transfer:' "$SRC/etc/icheck-dynamic.yaml" \
  || fail "etc/icheck-dynamic.yaml lacks read_interval/transfer"
dyn pull
timeout 30 "$SRC/share/dynres/icheck-boot" --home "$W" --no-standby --heartbeat 1 n1 >/dev/null || fail "boot"
export ICHECK_CONFIG=$W/icheck.yaml

# (a) control run: nothing changes, so nothing may be pushed.
timeout 60 ictest ctl 20000 20 5 --probe 10 --sleep-ms 20 --persist >"$W/ctl.out" || fail "control run"
grep -q "FINAL 4 rdma" "$W/ctl.out" || fail "control run not over RDMA: $(cat "$W/ctl.out")"
read -r P0 Q0 <<<"$(agent_counts ctl)" || fail "agent stats (control)"
[ "$P0" -ge 4 ] && [ "$Q0" -eq 0 ] || fail "control run: pulls=$P0 pushes=$Q0 (want >= 4 pulls, 0 pushes)"
echo "ok control: $P0 pulls, $Q0 pushes"

# (b) switch to push while the application runs; it probes at iterations
# 20 and 40 (4 s and 8 s into the run), the controller re-reads every 1 s.
timeout 60 ictest dyn 20000 60 5 --probe 20 --sleep-ms 200 --persist >"$W/dyn.out" &
APP=$!
for _ in $(seq 100); do grep -q '^COMMIT' "$W/dyn.out" 2>/dev/null && break; sleep 0.1; done
grep -q '^COMMIT' "$W/dyn.out" || fail "application did not commit"
dyn push
wait "$APP" || fail "application failed: $(cat "$W/dyn.out")"
grep -q "FINAL 12 rdma" "$W/dyn.out" || fail "not 12 commits over RDMA: $(cat "$W/dyn.out")"
read -r P1 Q1 <<<"$(agent_counts dyn)" || fail "agent stats"
[ "$P1" -ge 1 ] && [ "$Q1" -ge 4 ] || fail "after the change: pulls=$P1 pushes=$Q1 (want >= 1 pull, >= 4 pushes)"
echo "ok dynamic change reached the application: $P1 pulls, $Q1 pushes"

# The pushed versions are the real thing: restart from agent memory, and
# compare with an uninterrupted run written straight to files.
timeout 60 ictest dyn 20000 80 5 --persist >"$W/dyn2.out" || fail "restart run"
grep -q "RESTORED 60 12" "$W/dyn2.out" || fail "restart did not restore v12: $(cat "$W/dyn2.out")"
printf 'direct: true\npfs_dir: %s/ref\n' "$W" >"$W/direct.yaml"
timeout 60 ictest ref 20000 80 5 --config "$W/direct.yaml" >"$W/ref.out" || fail "reference run"
[ "$(grep '^RESULT' "$W/dyn2.out")" = "$(grep '^RESULT' "$W/ref.out")" ] || fail "restarted result differs from reference"
echo "ok restart from pushed versions matches the uninterrupted run"
echo "PASS icheck_dynamic_config"
