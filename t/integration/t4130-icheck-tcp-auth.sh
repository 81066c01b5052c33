#!/usr/bin/env bash
# iCheck's control channel over TCP, authenticated with MUNGE (lib/proto,
# dynres/proto_socket.hpp), end to end with the real munged:
#   (1) clients with a credential are served: `icheckd --status` over TCP, and
#       an application (ictest) that registers with the controller, whose
#       agents are started through a manager, commits through them, all on
#       TCP; nothing is refused on the way;
#   (2) a raw TCP client without a credential gets a "perm:" refusal and its
#       heartbeat changes nothing;
#   (3) a credential captured with `munge -n` works once; replayed, it is
#       refused and changes nothing;
#   (4) the uid is the one MUNGE verified, not the one a message claims: a
#       client running as nobody that claims uid 0 is refused;
#   (5) with ICHECK_TCP_AUTH=none on the server, the unauthenticated client
#       is accepted.
# munged is made to work with t/fixtures/munge (started if needed, which
# needs root; otherwise the test is skipped) and stopped again if it started it.
. "${DYNRES_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/t/lib.sh"

for t in icheckd icagent ictest; do
  [[ -x $DYNRES_BIN/$t ]] || t_skip "$DYNRES_BIN/$t is not built"
done
command -v python3 >/dev/null || t_skip "python3 is not installed"
t_begin 180

MUNGE_FIXTURE=$DYNRES_SRC/t/fixtures/munge
"$MUNGE_FIXTURE" start "$T_TMP"
case $? in
  0) ;;
  77) t_skip "munged does not work and cannot be started here (see above)" ;;
  *) t_fatal "t/fixtures/munge start failed" ;;
esac
# stop munged again if the fixture started it, then lib.sh's cleanup (which
# needs the test's exit status in $?)
trap 'rc=$?; "$MUNGE_FIXTURE" stop "$T_TMP" >&2 || true; (exit $rc); _t_cleanup' EXIT
unset ICHECK_CONFIG ICHECK_TRANSFER ICHECK_TCP_AUTH

# rawtcp ADDR FRAME... — a client that speaks the frame format by hand (no
# auth frame unless given one): sends each JSON FRAME, prints the one reply
# (compact JSON) or EOF when the server closes without one.
rawtcp() {
  python3 - "$@" <<'EOF'
import json, socket, struct, sys
host, port = sys.argv[1].rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=10)
for f in sys.argv[2:]:
    b = json.dumps(json.loads(f)).encode()
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
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# start_controller DIR [VAR=VALUE...] — controller on a fresh TCP port with its
# own configuration and state in DIR, environment VAR=VALUE...; its address
# goes to CTL_ADDR. The fake nodes of the raw heartbeats below must not be
# declared lost (and relaunched) while the test runs: long lease, no relaunch.
start_controller() {
  local dir=$1 port
  shift
  mkdir -p "$dir/icheck" "$dir/pfs"
  chmod 700 "$dir" "$dir/icheck"
  port=$(free_port)
  cat >"$dir/icheck.yaml" <<EOF
controller: 127.0.0.1:$port
managers: [n1]
heartbeat_interval: 1
status_interval: 1
heartbeat_misses: 60
manager_relaunch_attempts: 0
state_file: $dir/state.db
pfs_dir: $dir/pfs
run_dir: $dir/icheck
dynamic_config: $dir/icheck-dynamic.yaml
transport: {provider: "auto", node: 127.0.0.1}
connect_retries: 2
connect_timeout_ms: 1000
EOF
  echo "read_interval: 30" >"$dir/icheck-dynamic.yaml"
  env "$@" icheckd --role controller --config "$dir/icheck.yaml" >"$dir/controller.log" 2>&1 &
  bg_register $!; disown $!
  for _ in $(seq 100); do grep -q '^READY' "$dir/controller.log" && break; sleep 0.1; done
  grep -q "^READY 127.0.0.1:$port" "$dir/controller.log" || { cat "$dir/controller.log" >&2; t_fatal "controller in $dir did not start"; }
  CTL_ADDR=127.0.0.1:$port
}
status_of() { icheckd --status --config "$1/icheck.yaml" 2>&1; }
# node_known DIR NODE — the controller's state file has a heartbeat of NODE
node_known() { [[ $(sqlite3 -batch -cmd '.timeout 5000' "$1/state.db" "SELECT COUNT(*) FROM icheck_nodes WHERE node = '$2'") == 1 ]]; }
# expect_node DIR NODE yes|no WHAT — check that NODE is (not) in DIR's state
expect_node() {
  local known=no
  node_known "$1" "$2" && known=yes
  if [[ $known == "$3" ]]; then t_pass "$4"; else t_fail "$4: node $2 in the state file: $known"; fi
}

# ------------------------------------------------ (1) authenticated clients
C=$T_TMP/c
start_controller "$C"
ADDR=$CTL_ADDR
t_log "controller on $ADDR (MUNGE required)"
icheckd --role manager --node n1 --listen 127.0.0.1:0 --config "$C/icheck.yaml" >"$C/manager.log" 2>&1 &
bg_register $!; disown $!
manager_up() { status_of "$C" | grep -q '"state": "up"'; }
wait_for 20 "manager n1 registered over TCP" manager_up ||
  { cat "$C/manager.log" "$C/controller.log" >&2; t_fatal "no manager"; }
t_run status_of "$C"
assert_eq 0 "$T_RC" "icheckd --status over TCP exits 0"
assert_contains "$T_OUT" '"node": "n1"' "status over TCP lists the manager's node"
assert_match '127\.0\.0\.1:[0-9]+' "$(sqlite3 "$C/state.db" "SELECT address FROM icheck_nodes WHERE node = 'n1'")" \
  "the manager serves on TCP"

t_run env ICHECK_CONFIG="$C/icheck.yaml" timeout 60 ictest tcpapp 50000 20 5 --persist
assert_eq 0 "$T_RC" "ictest over TCP exits 0 (stderr: $T_ERR)"
assert_contains "$T_OUT" "FINAL 4 rdma" "ictest committed through agents placed over TCP"
t_run status_of "$C"
assert_contains "$T_OUT" '"name": "tcpapp"' "the controller registered the application"
assert_contains "$T_OUT" '"version": 4' "the controller recorded version 4"
AGENT_ADDR=$(sqlite3 "$C/state.db" "SELECT address FROM icheck_agents LIMIT 1" 2>/dev/null)
assert_match '^127\.0\.0\.1:[0-9]+$' "$AGENT_ADDR" "the agents serve on TCP"
assert_not_contains "$(cat "$C"/*.log "$C"/icheck/*.log 2>/dev/null)" "refused TCP connection" \
  "no authenticated connection was refused"

# ------------------------------------------------ (2) no credential
NODES_BEFORE=$(sqlite3 "$C/state.db" "SELECT COUNT(*) FROM icheck_nodes")
REPLY=$(rawtcp "$ADDR" '{"op":"heartbeat","node":"evil","address":"127.0.0.1:9"}')
assert_match '^\{"error":"perm: TCP control connection without a valid MUNGE credential' "$REPLY" \
  "a client without a credential is refused with perm:"
REPLY=$(rawtcp "$ADDR" '{"op":"auth"}' '{"op":"heartbeat","node":"evil","address":"127.0.0.1:9"}')
assert_contains "$REPLY" '"error":"perm: ' "an auth frame without a credential is refused"
expect_node "$C" evil no "the refused heartbeat changed nothing"
assert_eq "$NODES_BEFORE" "$(sqlite3 "$C/state.db" "SELECT COUNT(*) FROM icheck_nodes")" "node count unchanged"
assert_contains "$(cat "$C/controller.log")" "refused TCP connection from 127.0.0.1" "the controller logs the refusal"
t_run status_of "$C"
assert_contains "$T_OUT" '"node": "n1"' "the controller still serves authenticated clients"

# ------------------------------------------------ (3) replayed credential
CRED=$(munge -n) || t_fatal "munge -n failed"
REPLY=$(rawtcp "$ADDR" "{\"op\":\"auth\",\"munge\":\"$CRED\"}" '{"op":"heartbeat","node":"once","address":"127.0.0.1:9"}')
assert_contains "$REPLY" '"ok":true' "a fresh credential is accepted"
expect_node "$C" once yes "the authenticated heartbeat registered node once"
REPLY=$(rawtcp "$ADDR" "{\"op\":\"auth\",\"munge\":\"$CRED\"}" '{"op":"heartbeat","node":"twice","address":"127.0.0.1:9"}')
assert_match '^\{"error":"perm: .*Replayed credential' "$REPLY" "the same credential replayed is refused"
expect_node "$C" twice no "the replayed credential changed nothing"

# ------------------------------------------------ (4) the verified uid wins
if ((EUID == 0)) && id nobody >/dev/null 2>&1; then
  NCRED=$(su -s /bin/sh nobody -c 'munge -n') || t_fatal "munge -n as nobody failed"
  REPLY=$(rawtcp "$ADDR" "{\"op\":\"auth\",\"munge\":\"$NCRED\"}" '{"op":"heartbeat","node":"spoof","uid":0}')
  assert_contains "$REPLY" '"error":"perm: uid mismatch' "nobody claiming uid 0 over TCP is refused"
  expect_node "$C" spoof no "the spoofed uid changed nothing"
  NCRED=$(su -s /bin/sh nobody -c 'munge -n')
  REPLY=$(rawtcp "$ADDR" "{\"op\":\"auth\",\"munge\":\"$NCRED\"}" "{\"op\":\"heartbeat\",\"node\":\"honest\",\"uid\":$(id -u nobody)}")
  assert_contains "$REPLY" '"error":"perm: only the iCheck managers' "nobody's heartbeat is refused: only managers may send it"
  expect_node "$C" honest no "the refused heartbeat changed nothing"
else
  t_log "part (4) needs root and the user nobody: not run"
fi

# ------------------------------------------------ (5) ICHECK_TCP_AUTH=none
N=$T_TMP/n
start_controller "$N" ICHECK_TCP_AUTH=none
NADDR=$CTL_ADDR
t_log "controller on $NADDR (ICHECK_TCP_AUTH=none)"
REPLY=$(rawtcp "$NADDR" '{"op":"heartbeat","node":"trusted","address":"127.0.0.1:9"}')
assert_contains "$REPLY" '"ok":true' "ICHECK_TCP_AUTH=none: a client without a credential is served"
expect_node "$N" trusted yes "its heartbeat registered node trusted"
REPLY=$(rawtcp "$NADDR" '{"op":"auth"}' '{"op":"heartbeat","node":"trusted2","address":"127.0.0.1:9"}')
assert_contains "$REPLY" '"ok":true' "ICHECK_TCP_AUTH=none: a leading auth frame is skipped"
t_run status_of "$N"
assert_contains "$T_OUT" '"node": "trusted2"' "ICHECK_TCP_AUTH=none: a MUNGE client is served too"
# without identities, the application's token is what
# keeps others from acting on it: app ids are small integers
# (no real manager here: the registration records the app, then fails to
# place agents; its id and token are taken from the state file)
rawtcp "$NADDR" '{"op":"register","app":"tok","uid":0,"nodes":1,"procs":1}' >/dev/null
TAPP=$(sqlite3 "$N/state.db" "SELECT id FROM icheck_apps WHERE name = 'tok'")
TTOK=$(sqlite3 "$N/state.db" "SELECT token FROM icheck_apps WHERE name = 'tok'")
assert_match '^[0-9a-f]{32}$' "$TTOK" "registration gives the application a 128-bit app_token"
REPLY=$(rawtcp "$NADDR" "{\"op\":\"finalize\",\"app_id\":$TAPP,\"persist\":true}")
assert_contains "$REPLY" '"error":"perm: finalize of application' "finalize without the app_token is refused"
REPLY=$(rawtcp "$NADDR" "{\"op\":\"version\",\"app_id\":$TAPP,\"app_token\":\"0123456789abcdef0123456789abcdef\",\"v\":99}")
assert_contains "$REPLY" '"error":"perm: version of application' "a wrong app_token is refused"
assert_eq 0 "$(sqlite3 "$N/state.db" "SELECT version FROM icheck_apps WHERE id = $TAPP")" "the version counter is unchanged"
REPLY=$(rawtcp "$NADDR" "{\"op\":\"finalize\",\"app_id\":$TAPP,\"app_token\":\"$TTOK\",\"persist\":true}")
assert_contains "$REPLY" '"ok":true' "finalize with the app_token is served"
# the first controller still insists
REPLY=$(rawtcp "$ADDR" '{"op":"heartbeat","node":"evil2","address":"127.0.0.1:9"}')
assert_contains "$REPLY" '"error":"perm: ' "the setting is per process: the first controller still refuses"

t_done
