#!/usr/bin/env bash
# An agent authenticates its peers off the accept loop:
# silent TCP clients that connect and never send their MUNGE auth frame
# (each would hold a serial accept loop for kAuthTimeoutMs = 2 s) keep
# arriving while a real application (ictest, static TCP agent, MUNGE) commits
# through the same agent: the application is served at once, in RDMA mode,
# and the silent clients are dropped at their authentication timeout. A
# flood from one host beyond the pre-authentication cap is refused "busy".
# munged via t/fixtures/munge (skipped when it cannot run here).
. "${DYNRES_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/t/lib.sh"

for t in icagent ictest; do
  [[ -x $DYNRES_BIN/$t ]] || t_skip "$DYNRES_BIN/$t is not built"
done
command -v python3 >/dev/null || t_skip "python3 is not installed"
t_begin 60

MUNGE_FIXTURE=$DYNRES_SRC/t/fixtures/munge
"$MUNGE_FIXTURE" start "$T_TMP"
case $? in
  0) ;;
  77) t_skip "munged does not work and cannot be started here (see above)" ;;
  *) t_fatal "t/fixtures/munge start failed" ;;
esac
trap 'rc=$?; "$MUNGE_FIXTURE" stop "$T_TMP" >&2 || true; (exit $rc); _t_cleanup' EXIT
unset ICHECK_CONFIG ICHECK_TRANSFER ICHECK_TCP_AUTH

W=$T_TMP/w
mkdir -p "$W/pfs"
chmod 700 "$W"
icagent --listen 127.0.0.1:0 --app acc --pfs-dir "$W/pfs" --provider tcp --fabric-node 127.0.0.1 \
  --ready-file "$W/ready" >"$W/agent.out" 2>"$W/agent.err" &
APID=$!
bg_register "$APID"
wait_for 15 "the agent is ready" test -s "$W/ready" || t_fatal "agent not ready: $(cat "$W/agent.err")"
ADDR=$(cat "$W/ready")
printf 'agents: [%s]\npfs_dir: %s/pfs\nrequest_timeout_ms: 20000\n' "$ADDR" "$W" >"$W/static.yaml"

# silent ADDR SECONDS EVERY — open a connection every EVERY s for SECONDS s
# and hold each one open without sending anything
silent() {
  python3 - "$@" <<'EOF'
import socket, sys, time
host, port = sys.argv[1].rsplit(":", 1)
end = time.time() + float(sys.argv[2])
held = []
while time.time() < end:
    try:
        held.append(socket.create_connection((host, int(port)), timeout=5))
    except OSError:
        pass
    time.sleep(float(sys.argv[3]))
EOF
}

# ------------------------------------------------ a commit while silent clients arrive
silent "$ADDR" 12 0.25 &
SIL=$!
bg_register "$SIL"
sleep 1  # four silent connections are waiting for authentication by now
T0=$(date +%s.%N)
t_run timeout 40 ictest acc 20000 10 1 --config "$W/static.yaml"
T1=$(date +%s.%N)
assert_eq 0 "$T_RC" "ictest ran (stderr: $T_ERR)"
assert_contains "$T_OUT" "COMMIT 10 10 rdma 0" "all ten commits went through the agent"
assert_contains "$T_OUT" "FINAL 10 rdma" "and the run ended on the agent"
ELAPSED=$(awk -v a="$T0" -v b="$T1" 'BEGIN{print b-a}')
assert_le "$ELAPSED" 4 "the application was not held up by the silent clients (${ELAPSED} s)"
wait "$SIL" 2>/dev/null
wait_for 5 "the silent clients' authentication timed out" grep -q "refused\|auth" "$W/agent.err" ||
  t_fail "no refusal of the silent clients logged: $(tail -3 "$W/agent.err")"

# ------------------------------------------------ pre-authentication cap per host
# 40 connections at once from 127.0.0.1: 16 wait for their credential, the
# rest are answered "busy" at once
BUSY=$(python3 - "$ADDR" <<'EOF'
import socket, sys, time
host, port = sys.argv[1].rsplit(":", 1)
cs = [socket.create_connection((host, int(port)), timeout=5) for _ in range(40)]
time.sleep(0.8)
busy = 0
for c in cs:
    c.setblocking(False)
    try:
        if b"busy" in c.recv(4096):
            busy += 1
    except OSError:
        pass
print(busy)
EOF
)
assert_le 20 "$BUSY" "connections over the pre-authentication cap answered busy ($BUSY of 40)"
t_run timeout 30 ictest acc2 20000 3 1 --config "$W/static.yaml"
assert_contains "$T_OUT" "STATUS" "the agent still serves afterwards"
kill "$APID" 2>/dev/null
t_done
