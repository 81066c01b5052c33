#!/usr/bin/env bash
# ctest-cost: 20
# The iCheck controller under a hostile ordinary user, over TCP with the real
# munged, with two throw-away users created here (removed afterwards): the
# attacker A and another user B.
#   (1) connections: A holds 40 authenticated connections, each in the middle
#       of a frame; B is still served at once (the cap is per uid, not per
#       host: 127.0.0.1 is every local user's host), and A's connections over
#       its cap are refused with "busy:";
#   (2) memory: 40 connections of A announcing 64 MiB frames are refused from
#       the announced length, and 30 within the request limit cost only the
#       bytes sent: the controller's RSS stays bounded (it once grew to 2.1 GB);
#   (3) register: counts out of range (nodes 1000000, procs 1000000000,
#       nodes 2^31) are refused with no agent started, application names "",
#       "..", "a\nb" are refused, a version of -5 bytes is refused; A's agents
#       are capped per user (max_agents_user), so B's application still gets
#       agents (no fall-back to direct writes).
# Needs root (creates users), useradd/userdel, setpriv, python3 and a working
# munged (t/fixtures/munge). About 30 s.
. "${DYNRES_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/t/lib.sh"

for t in icheckd icagent ictest; do
  [[ -x $DYNRES_BIN/$t ]] || t_skip "$DYNRES_BIN/$t is not built"
done
((EUID == 0)) || t_skip "needs root (creates throw-away users)"
for c in useradd userdel setpriv python3; do command -v $c >/dev/null || t_skip "$c is not installed"; done
[[ -x /usr/bin/python3 ]] || t_skip "needs /usr/bin/python3 for the throw-away users"
t_begin 150

MUNGE_FIXTURE=$DYNRES_SRC/t/fixtures/munge
"$MUNGE_FIXTURE" start "$T_TMP"
case $? in
  0) ;;
  77) t_skip "munged does not work and cannot be started here (see above)" ;;
  *) t_fatal "t/fixtures/munge start failed" ;;
esac
UA=dyfa$$ UB=dyfb$$
remove_users() { userdel "$UA" 2>/dev/null; userdel "$UB" 2>/dev/null; true; }
trap 'rc=$?; remove_users; "$MUNGE_FIXTURE" stop "$T_TMP" >&2 || true; (exit $rc); _t_cleanup' EXIT
useradd --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin --user-group "$UA" ||
  t_fatal "useradd $UA failed"
useradd --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin --user-group "$UB" ||
  t_fatal "useradd $UB failed"
A=$(id -u "$UA")
as_a() { setpriv --reuid="$UA" --regid="$UA" --clear-groups "$@"; }
as_b() { setpriv --reuid="$UB" --regid="$UB" --clear-groups "$@"; }
unset ICHECK_CONFIG ICHECK_TRANSFER ICHECK_TCP_AUTH ICHECK_ZERO_COPY
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
sq() { sqlite3 -batch -cmd '.timeout 5000' "$C/state.db" "$1"; }

chmod 711 "$T_TMP"
C=$T_TMP/c P=$T_TMP/pub
mkdir -p "$C/icheck" "$P/pfs"
chmod 700 "$C" "$C/icheck"
chmod 755 "$P"
chmod 1777 "$P/pfs"
PORT=$(free_port)
cat >"$P/icheck.yaml" <<YAML
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
YAML
# a small checkpoint node: 8 agents in all, 3 per user
printf 'read_interval: 30\nmax_agents_node: 8\nmax_agents_user: 3\n' >"$P/icheck-dynamic.yaml"
chmod 644 "$P/icheck.yaml" "$P/icheck-dynamic.yaml"
icheckd --role controller --config "$P/icheck.yaml" >"$C/controller.log" 2>&1 &
CTL=$!
bg_register $CTL
disown $CTL
icheckd --role manager --node n1 --listen 127.0.0.1:0 --config "$P/icheck.yaml" >"$C/manager.log" 2>&1 &
bg_register $!
disown $!
manager_up() { [[ $(sq "SELECT state FROM icheck_nodes WHERE node = 'n1'" 2>/dev/null) == up ]]; }
wait_for 20 "manager n1 registered over TCP" manager_up ||
  { cat "$C/manager.log" "$C/controller.log" >&2; t_fatal "no manager"; }
ADDR=127.0.0.1:$PORT
rss_mib() { awk '/^VmRSS:/ { printf "%d", $2 / 1024 }' "/proc/$CTL/status"; }

# call.py ADDR FRAME... — as the calling user: for each FRAME a connection
# with a fresh MUNGE credential; prints each reply on one line
cat >"$P/call.py" <<'PY'
import json, socket, struct, subprocess, sys
host, port = sys.argv[1].rsplit(":", 1)
def frame(s, text):
    b = text.encode()
    s.sendall(struct.pack(">I", len(b)) + b)
def reply(s):
    buf = b""
    while len(buf) < 4 or len(buf) < 4 + struct.unpack(">I", buf[:4])[0]:
        c = s.recv(65536)
        if not c:
            return "EOF"
        buf += c
    return json.dumps(json.loads(buf[4:]), separators=(",", ":"))
for f in sys.argv[2:]:
    cred = subprocess.run(["munge", "-n"], capture_output=True, text=True, check=True).stdout.strip()
    s = socket.create_connection((host, int(port)), timeout=30)
    frame(s, json.dumps({"op": "auth", "munge": cred}))
    frame(s, f)
    print(reply(s), flush=True)
PY
# hold.py ADDR N ANNOUNCE SEND SECONDS — as the calling user: N authenticated
# connections, each announcing a frame of ANNOUNCE bytes and sending SEND of
# them; 1 s later prints how many were answered, and how ("busy" / "limit" /
# "other"), then holds them open SECONDS more
cat >"$P/hold.py" <<'PY'
import json, select, socket, struct, subprocess, sys, time
host, port = sys.argv[1].rsplit(":", 1)
n, announce, send, hold = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
conns = []
for i in range(n):
    cred = subprocess.run(["munge", "-n"], capture_output=True, text=True, check=True).stdout.strip()
    s = socket.create_connection((host, int(port)), timeout=10)
    a = json.dumps({"op": "auth", "munge": cred}).encode()
    s.sendall(struct.pack(">I", len(a)) + a + struct.pack(">I", announce))
    try:
        s.sendall(b"[" * send)
    except OSError:
        pass
    conns.append(s)
time.sleep(1)
busy = limit = other = 0
for s in conns:
    r, _, _ = select.select([s], [], [], 0)
    if not r:
        continue
    try:
        d = s.recv(65536)
    except OSError:
        d = b""
    if b"busy:" in d: busy += 1
    elif b"exceeds the limit" in d: limit += 1
    else: other += 1
print("busy=%d limit=%d other=%d" % (busy, limit, other), flush=True)
time.sleep(hold)
PY
chmod 644 "$P/call.py" "$P/hold.py"

# ------------------------------------------- (1) 40 connections of A mid-frame
# hold TAG N ANNOUNCE SEND SECONDS — A's hold.py in the background until its
# connections are open (its report in $T_TMP/TAG.out); sets HOLD to its pid
hold() {
  as_a /usr/bin/python3 "$P/hold.py" "$ADDR" "$2" "$3" "$4" "$5" >"$T_TMP/$1.out" 2>&1 &
  HOLD=$!
  bg_register $HOLD
  wait_for 30 "A's $2 connections announcing $3 bytes are open" grep -q busy= "$T_TMP/$1.out"
}
hold hold1 40 1000 10 6
t0=$(date +%s.%N)
REPLY=$(as_b /usr/bin/python3 "$P/call.py" "$ADDR" '{"op":"status"}' 2>&1)
dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{print b-a}')
assert_contains "$REPLY" '"apps"' "B is served while A holds 40 connections ($REPLY)"
assert_le "$dt" 2 "and promptly (${dt} s)"
wait "$HOLD"
HOLD1=$(cat "$T_TMP/hold1.out")
assert_match 'busy=([89]|1[0-9])' "$HOLD1" "A's connections over its per-uid cap are refused with busy: ($HOLD1)"
assert_contains "$(cat "$C/controller.log")" "from uid $A" "the controller logs whose connections it refused"

# ------------------------------------------- (2) memory
RSS0=$(rss_mib)
hold hold2 40 $((64 << 20)) 65536 3
RSS1=$(rss_mib)
wait "$HOLD"
HOLD2=$(cat "$T_TMP/hold2.out")
assert_match 'limit=(2[0-9]|3[0-9]|40)' "$HOLD2" "64 MiB requests are refused from their announced length ($HOLD2)"
hold hold3 30 $((1 << 20)) 4096 3
RSS2=$(rss_mib)
wait "$HOLD"
t_log "controller RSS: ${RSS0} MiB idle, ${RSS1} MiB with 40 x 64 MiB announced, ${RSS2} MiB with 30 x 1 MiB announced"
assert_le "$RSS1" $((RSS0 + 64)) "40 announced 64 MiB frames add < 64 MiB to the controller's RSS (${RSS0} -> ${RSS1} MiB)"
assert_le "$RSS2" $((RSS0 + 64)) "30 connections mid-frame add < 64 MiB (${RSS0} -> ${RSS2} MiB)"

# ------------------------------------------- (3) register
agents_of() {
  sq "SELECT COUNT(*) FROM icheck_agents g JOIN icheck_apps p ON g.app_id = p.id WHERE p.uid = $1 AND g.state = 'up'"
}
mapfile -t R < <(as_a /usr/bin/python3 "$P/call.py" "$ADDR" \
  "{\"op\":\"register\",\"app\":\"big\",\"uid\":$A,\"nodes\":1000000,\"procs\":1000000000}" \
  "{\"op\":\"register\",\"app\":\"wrap\",\"uid\":$A,\"nodes\":2147483648,\"procs\":1}" \
  "{\"op\":\"register\",\"app\":\"\",\"uid\":$A,\"nodes\":1,\"procs\":1}" \
  "{\"op\":\"register\",\"app\":\"..\",\"uid\":$A,\"nodes\":1,\"procs\":1}" \
  "{\"op\":\"register\",\"app\":\"a\\nb\",\"uid\":$A,\"nodes\":1,\"procs\":1}")
assert_match '^\{"error":"invalid: .*nodes' "${R[0]:-}" "register with nodes 1000000 is refused (${R[0]:-})"
assert_match '^\{"error":"invalid: .*nodes' "${R[1]:-}" "register with nodes 2^31 is refused (${R[1]:-})"
for i in 2 3 4; do
  assert_match '^\{"error":"invalid: .*application name' "${R[$i]:-}" "a bad application name is refused (${R[$i]:-})"
done
assert_eq 0 "$(agents_of "$A")" "no agent was started for A"
assert_eq 0 "$(sq "SELECT COUNT(*) FROM icheck_apps WHERE uid = $A")" "nothing was recorded for A"
# A's legitimate applications: agents capped at max_agents_user (3) in all
mapfile -t R < <(as_a /usr/bin/python3 "$P/call.py" "$ADDR" \
  "{\"op\":\"register\",\"app\":\"a1\",\"uid\":$A,\"nodes\":4,\"procs\":4}" \
  "{\"op\":\"register\",\"app\":\"a2\",\"uid\":$A,\"nodes\":4,\"procs\":4}")
assert_contains "${R[0]:-}" '"app_id"' "A's first application is registered (${R[0]:-})"
assert_le "$(agents_of "$A")" 3 "A holds at most max_agents_user agents"
assert_match '^\{"error":"busy: .*max_agents_user' "${R[1]:-}" "A's second application is refused: its agents are used up (${R[1]:-})"
APP=$(sq "SELECT id FROM icheck_apps WHERE uid = $A AND name = 'a1'")
TOK=$(sq "SELECT token FROM icheck_apps WHERE id = $APP")
REPLY=$(as_a /usr/bin/python3 "$P/call.py" "$ADDR" \
  "{\"op\":\"version\",\"app_id\":$APP,\"app_token\":\"$TOK\",\"v\":1,\"bytes\":-5}")
assert_match '^\{"error":"invalid: .*bytes' "$REPLY" "a version of -5 bytes is refused ($REPLY)"
# B's application still gets agents
t_run as_b env ICHECK_CONFIG="$P/icheck.yaml" timeout 60 ictest bapp 50000 20 5
assert_eq 0 "$T_RC" "B's ictest exits 0 (stderr: $T_ERR)"
assert_contains "$T_OUT" "FINAL 4 rdma" "B's application commits through agents, not direct writes"

t_done
