#!/usr/bin/env bash
# The controller epoch is checked inside every write transaction
# (controller liveness): a primary that checked its epoch at the start of a request, then
# stalled while a standby took over, must not write when it resumes.
# Real daemons (icheck-boot: primary + standby, heartbeat 1 s, lease 2 s):
#   a registration makes the primary ask the manager of n1 to start an agent;
#   the manager is stalled (SIGSTOP), so the primary waits for it without its
#   lock; the primary is then stalled too and the standby takes over (epoch 2);
#   the manager resumes and starts the agent, then the old primary resumes
#   and gets the manager's answer: recording the agent is refused (fenced),
#   the registration is answered with that error, no agent of the
#   application is in the state file, the agent it had started is stopped,
#   and the old primary exits.
. "${DYNRES_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/t/lib.sh"

for t in icheckd icagent; do
  [[ -x $DYNRES_BIN/$t ]] || t_skip "$DYNRES_BIN/$t is not built"
done
command -v python3 >/dev/null || t_skip "python3 is not installed"
t_begin 100
unset ICHECK_CONFIG ICHECK_TRANSFER ICHECK_TCP_AUTH
W=$T_TMP/home
mkdir -p "$W"
chmod 700 "$W"
STOPPED=()
trap 'rc=$?; for p in "${STOPPED[@]}"; do kill -CONT "$p" 2>/dev/null; done; "$DYNRES_SRC/share/dynres/icheck-down" --home "$W" >/dev/null 2>&1; (exit $rc); _t_cleanup' EXIT
timeout 30 "$DYNRES_SRC/share/dynres/icheck-boot" --home "$W" --heartbeat 1 --misses 2 --no-relaunch n1 >/dev/null ||
  t_fatal "icheck-boot failed"
pid_of() { awk -v n="$1" '$1==n {print $2}' "$W/icheck/pids" | tail -1; }
sqw() { sqlite3 -batch -cmd '.timeout 5000' "$W/state.db" "$1"; }
CPID=$(pid_of controller)
MPID=$(pid_of manager-n1)
[[ -n $CPID && -n $MPID ]] || t_fatal "no controller/manager pid in $W/icheck/pids"

# The registration is sent the moment the manager stalls ("go"), not after
# python's start: beside other tests that took longer than the 2 s window,
# the node was lost first and the primary answered "no checkpoint node is up".
python3 - "$W/icheck/controller.sock" "$W/go" "$W/ready" >"$W/reg.out" 2>&1 <<'EOF' &
import json, os, socket, struct, sys, time
b = json.dumps({"op": "register", "app": "stale", "uid": os.getuid(), "nodes": 1, "procs": 1}).encode()
open(sys.argv[3], "w").close()
while not os.path.exists(sys.argv[2]):
    time.sleep(0.005)
s = socket.socket(socket.AF_UNIX); s.settimeout(50); s.connect(sys.argv[1])
s.sendall(struct.pack(">I", len(b)) + b)
h = s.recv(4, socket.MSG_WAITALL)
print(s.recv(struct.unpack(">I", h)[0], socket.MSG_WAITALL).decode() if len(h) == 4 else "EOF")
EOF
REG=$!
bg_register "$REG"
wait_for 20 "the registering client is up" test -e "$W/ready" || t_fatal "python did not start: $(cat "$W/reg.out")"
kill -STOP "$MPID"; STOPPED+=("$MPID")
touch "$W/go"
app_known() { [[ $(sqw "SELECT COUNT(*) FROM icheck_apps WHERE name = 'stale'") == 1 ]]; }
wait_for 10 "the primary registered the application and waits for the manager" app_known ||
  t_fatal "registration not recorded: $(cat "$W/reg.out")"
sleep 0.5
kill -STOP "$CPID"; STOPPED+=("$CPID")
standby_active() { [[ $(sqw "SELECT epoch FROM icheck_controller WHERE id = 1") == 2 ]]; }
wait_for 15 "the standby takes over (epoch 2)" standby_active || t_fatal "no takeover"
kill -CONT "$MPID"
agent_running() { pgrep -f "icagent .*--app stale " >/dev/null; }
wait_for 10 "the resumed manager starts the agent the old primary asked for" agent_running ||
  t_fail "no agent started: $(tail -3 "$W/icheck/manager-n1.log")"
kill -CONT "$CPID"; STOPPED=()
# the old primary first stops the agent through the manager (up to 30 s),
# then answers: beside other tests (load 16) that took more than 15 s
wait_for 40 "the registration is answered" eval '! pid_alive "$REG"'
assert_contains "$(cat "$W/reg.out")" "fenced" "the old primary answers the registration with its fencing"
assert_eq 0 "$(sqw "SELECT COUNT(*) FROM icheck_agents a JOIN icheck_apps p ON p.id = a.app_id WHERE p.name = 'stale'")" \
  "the old primary recorded no agent after the takeover"
assert_eq 2 "$(sqw "SELECT epoch FROM icheck_controller WHERE id = 1")" "the standby still holds epoch 2"
wait_for 20 "the old primary exits" eval '! pid_alive "$CPID"' || t_fail "the old primary still runs"
wait_for 10 "the agent started for the fenced registration is stopped" eval '! agent_running' ||
  t_fail "the orphan agent still runs"
assert_contains "$(cat "$W/icheck/controller.log")" "fenced" "the old primary logs that it was fenced"
t_done
