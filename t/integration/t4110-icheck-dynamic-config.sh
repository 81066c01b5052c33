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
. "${DYNRES_SRC:-$(dirname "$0")/../..}/t/lib.sh"
t_begin 150
t_require icheckd ictest
SRC=$DYNRES_SRC
W=$T_TMP
export DYNRES_HOME=$W
unset ICHECK_CONFIG ICHECK_TRANSFER ICHECK_ZERO_COPY ICHECK_STRATEGY
stop_icheck() { "$SRC/share/dynres/icheck-down" --home "$W" >/dev/null 2>&1; }
t_on_exit stop_icheck
show_logs() { for f in "$W"/icheck/*.log; do echo "== $f"; tail -5 "$f"; done; }
t_on_fail show_logs
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
  || t_fatal "etc/icheck-dynamic.yaml lacks read_interval/transfer"
dyn pull
timeout 30 "$SRC/share/dynres/icheck-boot" --home "$W" --no-standby --heartbeat 1 n1 >/dev/null || t_fatal "boot"
export ICHECK_CONFIG=$W/icheck.yaml

# (a) control run: nothing changes, so nothing may be pushed.
timeout 60 ictest ctl 20000 20 5 --probe 10 --sleep-ms 20 --persist >"$W/ctl.out" || t_fatal "control run"
grep -q "FINAL 4 rdma" "$W/ctl.out" || t_fatal "control run not over RDMA: $(cat "$W/ctl.out")"
read -r P0 Q0 <<<"$(agent_counts ctl)" || t_fatal "agent stats (control)"
[ "$P0" -ge 4 ] && [ "$Q0" -eq 0 ] || t_fatal "control run: pulls=$P0 pushes=$Q0 (want >= 4 pulls, 0 pushes)"
t_pass "control: $P0 pulls, $Q0 pushes"

# (b) switch to push while the application runs; it probes at iterations
# 20 and 40 (4 s and 8 s into the run), the controller re-reads every 1 s.
timeout 60 ictest dyn 20000 60 5 --probe 20 --sleep-ms 200 --persist >"$W/dyn.out" &
APP=$!
for _ in $(seq 100); do grep -q '^COMMIT' "$W/dyn.out" 2>/dev/null && break; sleep 0.1; done
grep -q '^COMMIT' "$W/dyn.out" || t_fatal "application did not commit"
dyn push
wait "$APP" || t_fatal "application failed: $(cat "$W/dyn.out")"
grep -q "FINAL 12 rdma" "$W/dyn.out" || t_fatal "not 12 commits over RDMA: $(cat "$W/dyn.out")"
read -r P1 Q1 <<<"$(agent_counts dyn)" || t_fatal "agent stats"
[ "$P1" -ge 1 ] && [ "$Q1" -ge 4 ] || t_fatal "after the change: pulls=$P1 pushes=$Q1 (want >= 1 pull, >= 4 pushes)"
t_pass "dynamic change reached the application: $P1 pulls, $Q1 pushes"

# The pushed versions are the real thing: restart from agent memory, and
# compare with an uninterrupted run written straight to files.
timeout 60 ictest dyn 20000 80 5 --persist >"$W/dyn2.out" || t_fatal "restart run"
grep -q "RESTORED 60 12" "$W/dyn2.out" || t_fatal "restart did not restore v12: $(cat "$W/dyn2.out")"
printf 'direct: true\npfs_dir: %s/ref\n' "$W" >"$W/direct.yaml"
timeout 60 ictest ref 20000 80 5 --config "$W/direct.yaml" >"$W/ref.out" || t_fatal "reference run"
[ "$(grep '^RESULT' "$W/dyn2.out")" = "$(grep '^RESULT' "$W/ref.out")" ] || t_fatal "restarted result differs from reference"
t_pass "restart from pushed versions matches the uninterrupted run"
t_done
