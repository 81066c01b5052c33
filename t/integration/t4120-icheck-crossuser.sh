#!/usr/bin/env bash
# iCheck across users, end to end over TCP with the real munged:
# the service (controller, manager, agents) runs as root, applications run as
# root and as nobody (setpriv).
#   (1) item 4: an application of nobody commits through root's agents; its
#       finalize flushes, so the second level holds the version (files owned
#       by nobody) and a rerun restarts from it;
#   (2) items 8/9: nobody, authenticated by MUNGE, tries every controller
#       message on root's application (finalize, version, probe,
#       agent_failed, register as uid 0), a heartbeat for root's node, and
#       start/stop on root's manager: every one is refused with "perm:" and
#       the state file is unchanged; nobody's status lists only its own apps;
#   (3) item 7: a TCP peer announcing a 64 MiB frame before authenticating is
#       refused at once (the body is never read); eight silent TCP peers do
#       not delay an authenticated client (authentication off the accept
#       thread);
#   (4) item 10: ICHECK_TCP_AUTH=none is refused on a non-loopback address.
# Needs root, the user nobody, setpriv and a working munged (t/fixtures/munge).
. "${DYNRES_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/t/lib.sh"

for t in icheckd icagent ictest; do
  [[ -x $DYNRES_BIN/$t ]] || t_skip "$DYNRES_BIN/$t is not built"
done
command -v python3 >/dev/null || t_skip "python3 is not installed"
command -v setpriv >/dev/null || t_skip "setpriv is not installed"
((EUID == 0)) || t_skip "needs root (runs applications as nobody)"
id nobody >/dev/null 2>&1 || t_skip "no user nobody"
t_begin 150

MUNGE_FIXTURE=$DYNRES_SRC/t/fixtures/munge
"$MUNGE_FIXTURE" start "$T_TMP"
case $? in
  0) ;;
  77) t_skip "munged does not work and cannot be started here (see above)" ;;
  *) t_fatal "t/fixtures/munge start failed" ;;
esac
trap 'rc=$?; "$MUNGE_FIXTURE" stop "$T_TMP" >&2 || true; (exit $rc); _t_cleanup' EXIT
unset ICHECK_CONFIG ICHECK_TRANSFER ICHECK_TCP_AUTH ICHECK_ZERO_COPY

NOBODY=$(id -u nobody)
# a python nobody may run (root's may be a shim under /root)
SYSPY=/usr/bin/python3
[[ -x $SYSPY ]] || t_skip "needs /usr/bin/python3 for the user nobody"
as_nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
sq() { sqlite3 -batch -cmd '.timeout 5000' "$C/state.db" "$1"; }

# Private service state in $C (0700); configuration and the second level in
# $P, readable and traversable by nobody (the library reads its own versions).
chmod 711 "$T_TMP"
C=$T_TMP/c P=$T_TMP/pub
mkdir -p "$C/icheck" "$P/pfs"
chmod 700 "$C" "$C/icheck"
chmod 755 "$P" "$P/pfs"
PORT=$(free_port)
cat >"$P/icheck.yaml" <<EOF
controller: 127.0.0.1:$PORT
managers: [n1]
heartbeat_interval: 1
heartbeat_misses: 60
manager_relaunch_attempts: 0
state_file: $C/state.db
pfs_dir: $P/pfs
run_dir: $C/icheck
dynamic_config: $P/icheck-dynamic.yaml
transport: {provider: "tcp;ofi_rxm", node: 127.0.0.1}
connect_retries: 2
connect_timeout_ms: 1000
EOF
echo "read_interval: 30" >"$P/icheck-dynamic.yaml"
chmod 644 "$P/icheck.yaml" "$P/icheck-dynamic.yaml"
icheckd --role controller --config "$P/icheck.yaml" >"$C/controller.log" 2>&1 &
bg_register $!; disown $!
icheckd --role manager --node n1 --listen 127.0.0.1:0 --config "$P/icheck.yaml" >"$C/manager.log" 2>&1 &
bg_register $!; disown $!
manager_up() { [[ $(sq "SELECT state FROM icheck_nodes WHERE node = 'n1'" 2>/dev/null) == up ]]; }
wait_for 20 "manager n1 registered over TCP" manager_up ||
  { cat "$C/manager.log" "$C/controller.log" >&2; t_fatal "no manager"; }
ADDR=127.0.0.1:$PORT

# ------------------------------------------- (1) nobody's app, root's agents
t_run as_nobody env ICHECK_CONFIG="$P/icheck.yaml" timeout 60 ictest xu 50000 20 5
assert_eq 0 "$T_RC" "nobody's ictest exits 0, finalize included (stderr: $T_ERR)"
assert_contains "$T_OUT" "FINAL 4 rdma" "nobody's application committed through root's agents"
assert_contains "$T_OUT" "FINALIZE 0" "its finalize (flush to the second level) succeeded"
M=$P/pfs/$NOBODY/xu/v0000000004/MANIFEST.json
if [[ -f $M ]]; then t_pass "root's agents wrote version 4 of nobody's app"; else
  t_fail "no $M: $(ls -R "$P/pfs" 2>&1 | head; grep -h 'second level\|manifest' "$C"/icheck/agent-*.log | head -3)"; fi
assert_eq "$NOBODY" "$(stat -c %u "$M" 2>/dev/null)" "the manifest belongs to nobody"
t_run as_nobody env ICHECK_CONFIG="$P/icheck.yaml" timeout 60 ictest xu 50000 30 5 --persist
assert_contains "$T_OUT" "RESTORED 20 4" "nobody's rerun restarts from version 4 (stderr: $T_ERR)"

# ------------------------------------------- (2) nobody against root's app
t_run env ICHECK_CONFIG="$P/icheck.yaml" timeout 60 ictest rootapp 50000 20 5 --persist
assert_contains "$T_OUT" "FINAL 4 rdma" "root's application committed through agents"
APP=$(sq "SELECT id FROM icheck_apps WHERE name = 'rootapp' AND uid = 0")
MGR=$(sq "SELECT address FROM icheck_nodes WHERE node = 'n1'")
# nobody even knows the application's token: the uid binding alone refuses
TOK=$(sq "SELECT token FROM icheck_apps WHERE id = $APP")
assert_match '^[0-9a-f]{32}$' "$TOK" "root's application has a 128-bit token"
snapshot() {
  sq "SELECT is_active, version, needs_change, num_agents FROM icheck_apps WHERE id = $APP;
      SELECT id, state FROM icheck_agents WHERE app_id = $APP ORDER BY id;
      SELECT address, epoch, pid FROM icheck_nodes WHERE node = 'n1';"
}
BEFORE=$(snapshot)
# mungecall ADDR FRAME — as the calling user: a fresh MUNGE credential, then FRAME; prints the reply
cat >"$P/mungecall.py" <<'EOF'
import json, socket, struct, subprocess, sys
host, port = sys.argv[1].rsplit(":", 1)
cred = subprocess.run(["munge", "-n"], capture_output=True, text=True, check=True).stdout.strip()
s = socket.create_connection((host, int(port)), timeout=10)
for f in [json.dumps({"op": "auth", "munge": cred}), sys.argv[2]]:
    b = f.encode()
    s.sendall(struct.pack(">I", len(b)) + b)
def need(n):
    buf = b""
    while len(buf) < n:
        c = s.recv(n - len(buf))
        if not c:
            return None
        buf += c
    return buf
h = need(4)
body = need(struct.unpack(">I", h)[0]) if h else None
print("EOF" if body is None else json.dumps(json.loads(body), separators=(",", ":")))
EOF
chmod 644 "$P/mungecall.py"
nobody_call() { as_nobody "$SYSPY" "$P/mungecall.py" "$@"; }
for frame in \
  "{\"op\":\"finalize\",\"app_id\":$APP,\"app_token\":\"$TOK\"}" \
  "{\"op\":\"version\",\"app_id\":$APP,\"app_token\":\"$TOK\",\"v\":999999999}" \
  "{\"op\":\"probe\",\"app_id\":$APP,\"app_token\":\"$TOK\",\"failed\":true}" \
  "{\"op\":\"agent_failed\",\"app_id\":$APP,\"app_token\":\"$TOK\"}" \
  "{\"op\":\"register\",\"app\":\"rootapp\",\"uid\":0}" \
  '{"op":"heartbeat","node":"n1","address":"127.0.0.1:9","epoch":0}'; do
  REPLY=$(nobody_call "$ADDR" "$frame")
  assert_match '^\{"error":"perm: ' "$REPLY" "nobody's $(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["op"])' "$frame") on root's app/node is refused"
done
REPLY=$(nobody_call "$MGR" '{"op":"stop","ids":["x"],"flush":false}')
assert_match '^\{"error":"perm: ' "$REPLY" "nobody's stop on root's manager is refused"
REPLY=$(nobody_call "$MGR" '{"op":"start","app":"evil","uid":0,"ids":["evil1"]}')
assert_match '^\{"error":"perm: ' "$REPLY" "nobody's start on root's manager is refused"
assert_eq "$BEFORE" "$(snapshot)" "root's application, agents and node are unchanged"
REPLY=$(nobody_call "$ADDR" '{"op":"status"}')
assert_contains "$REPLY" '"name":"xu"' "nobody's status lists its own application"
assert_not_contains "$REPLY" '"name":"rootapp"' "nobody's status does not list root's application"
t_run env ICHECK_CONFIG="$P/icheck.yaml" timeout 60 ictest rootapp 50000 30 5 --persist
assert_contains "$T_OUT" "RESTORED 20 4" "root's application restarts from its agents afterwards"
assert_contains "$(cat "$C/controller.log")" "refused heartbeat from uid $NOBODY" "the controller logs the refusals"

# ------------------------------------------- (3) no body read before auth
REPLY=$(python3 - "$ADDR" <<'EOF'
import socket, struct, sys, time
host, port = sys.argv[1].rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=10)
t0 = time.time()
s.sendall(struct.pack(">I", 64 << 20))  # announce 64 MiB, send none of it
data = s.recv(65536)
print("%.2f %s" % (time.time() - t0, data[4:].decode(errors="replace")))
EOF
)
assert_contains "$REPLY" "exceeds the limit of 8192 bytes" "a 64 MiB pre-auth frame is refused by size ($REPLY)"
assert_le "${REPLY%% *}" 1.0 "the refusal comes at once, without waiting for the body"
# silent peers holding connections open do not stall other clients: the
# controller authenticates each connection on its own thread
REPLY=$(python3 - "$ADDR" "$P/icheck.yaml" <<'EOF'
import socket, subprocess, sys, time
host, port = sys.argv[1].rsplit(":", 1)
idle = [socket.create_connection((host, int(port)), timeout=10) for _ in range(8)]
time.sleep(0.2)
t0 = time.time()
r = subprocess.run(["icheckd", "--status", "--config", sys.argv[2]], capture_output=True, text=True)
print("%.2f rc=%d" % (time.time() - t0, r.returncode))
EOF
)
assert_contains "$REPLY" "rc=0" "icheckd --status is served while 8 silent peers are connected ($REPLY)"
assert_le "${REPLY%% *}" 1.5 "and promptly"
# the same for a manager (it served one connection at a time on its accept loop)
REPLY=$(python3 - "$MGR" "$P/mungecall.py" <<'EOF'
import socket, subprocess, sys, time
host, port = sys.argv[1].rsplit(":", 1)
idle = [socket.create_connection((host, int(port)), timeout=10) for _ in range(8)]
time.sleep(0.2)
t0 = time.time()
r = subprocess.run([sys.executable, sys.argv[2], sys.argv[1], '{"op":"ping"}'], capture_output=True, text=True)
print("%.2f %s" % (time.time() - t0, r.stdout.strip()))
EOF
)
assert_contains "$REPLY" '"ok":true' "a manager answers a ping while 8 silent peers are connected ($REPLY)"
assert_le "${REPLY%% *}" 1.5 "and promptly"

# ------------------------------------------- (4) ICHECK_TCP_AUTH=none off loopback
t_run env ICHECK_TCP_AUTH=none timeout 10 icheckd --role controller --listen "0.0.0.0:$(free_port)" --config "$P/icheck.yaml"
assert_eq 1 "$T_RC" "a controller with ICHECK_TCP_AUTH=none on 0.0.0.0 does not start"
assert_contains "$T_ERR" "ICHECK_TCP_AUTH=none refused" "and says why"
t_run env ICHECK_TCP_AUTH=none timeout 10 icheckd --role manager --node n9 --listen "0.0.0.0:0" --config "$P/icheck.yaml"
assert_eq 1 "$T_RC" "a manager with ICHECK_TCP_AUTH=none on 0.0.0.0 does not start"
t_run env ICHECK_TCP_AUTH=none timeout 10 icagent --listen "0.0.0.0:0" --app x
assert_eq 1 "$T_RC" "an agent with ICHECK_TCP_AUTH=none on 0.0.0.0 does not start"
assert_contains "$T_ERR" "ICHECK_TCP_AUTH=none refused" "and says why"

t_done
