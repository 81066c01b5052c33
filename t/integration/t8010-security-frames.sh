#!/usr/bin/env bash
# t8010-security-frames.sh — no peer can stall or exhaust mjsched (mjsched(8), LIMITS), with a real
# second user as the attacker:
#   (1) slow frames: 100 connections of user B and 100 of root (the
#       socket's owner) each send half a frame and wait; root's ping is
#       answered, and a 1-node job on free nodes starts, within one scheduler
#       tick (1 s);
#   (2) oversized frames (from B and from root): 40 connections announce 64 MiB (refused from
#       the announced size), 40 announce 5 MiB and send 2 MiB of it (cut off
#       at B's cap of 32 waiting connections and 16 MiB buffered): the
#       daemon's RSS stays bounded (16 MiB per attacking uid) and it still
#       answers within a tick;
#   (3) a job script over 4 MiB (Slurm's max_script_size) is refused with a
#       clear message and nothing is recorded;
#   (4) refused messages are logged at a limited rate.
# Prints the ping and job-start figures under attack (the closing table of
# dynres(7) SECURITY quotes them). Needs root.
. "${DYNRES_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/t/lib.sh"

((EUID == 0)) || t_skip "needs root (creates a throw-away user)"
for c in useradd userdel setpriv; do command -v $c >/dev/null || t_skip "$c is not installed"; done
PY=/usr/bin/python3
[[ -x $PY ]] || t_skip "needs /usr/bin/python3 for the attacking user"
t_begin 120

UB=dytf$$
trap 'rc=$?; ( (exit $rc); _t_cleanup ); rc=$?; userdel "$UB" >/dev/null 2>&1; exit $rc' EXIT
useradd -M -U -d /nonexistent -s /bin/sh "$UB" || t_fatal "useradd $UB failed"
as_b() { setpriv --reuid="$UB" --regid="$UB" --init-groups env -u DYNRES_HOME HOME=/nonexistent "$@"; }

chmod 711 "$T_TMP"
C=$T_TMP/c
T_CLUSTERS+=("$C")
vcluster-boot --local 2 --dir "$C" --tick 1.0 --shared >"$T_TMP/boot.log" 2>&1 ||
  vcluster-boot --local 2 --dir "$C" --tick 1.0 >"$T_TMP/boot.log" 2>&1 || t_fatal "vcluster-boot failed"
export DYNRES_HOME=$C
chmod 711 "$C"   # B may reach the socket (what --shared does; an older build has no --shared)
cd "$T_TMP" || t_fatal "cd $T_TMP"
SOCK=$C/mjsched.sock

cat >"$T_TMP/hostile.py" <<'EOF'
# hostile.py SOCK MODE N SECONDS — N connections that never finish a frame
import socket, struct, sys, time
path, mode, n, hold = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
conns = []
for _ in range(n):
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(path)
        if mode == "half":
            s.send(struct.pack(">I", 200)[:2])
        elif mode == "huge":
            s.send(struct.pack(">I", 64 << 20) + b"{" * 1000)
        elif mode == "big":
            s.settimeout(3)
            s.send(struct.pack(">I", 5 << 20))
            try:
                s.sendall(b" " * (2 << 20))
            except OSError:
                pass
        conns.append(s)
    except OSError:
        pass
print(len(conns), flush=True)
time.sleep(hold)
EOF
cat >"$T_TMP/ping.py" <<'EOF'
# ping.py SOCK — seconds for one ping round trip (or "timeout")
import json, socket, struct, sys, time
t0 = time.time()
s = socket.socket(socket.AF_UNIX); s.settimeout(60); s.connect(sys.argv[1])
b = json.dumps({"op": "ping"}).encode(); s.sendall(struct.pack(">I", len(b)) + b)
try:
    h = s.recv(4); n = struct.unpack(">I", h)[0]; d = b""
    while len(d) < n: d += s.recv(n - len(d))
    json.loads(d); print("%.3f" % (time.time() - t0))
except Exception:
    print("timeout")
EOF
rss() { awk '/VmRSS/ {print $2}' "/proc/$(sched_pid "$C")/status"; }
RSS0=$(rss)
ping_before=$(python3 "$T_TMP/ping.py" "$SOCK")
t_log "ping before the attack: $ping_before s, mjsched RSS $RSS0 kB"

# ------------------------------------------------------------------ (1)
# from B (who reaches the socket through the directory's mode) and from the
# socket's owner itself (who always reaches it)
as_b "$PY" "$T_TMP/hostile.py" "$SOCK" half 100 40 >"$T_TMP/half-b.n" &
bg_register $!
"$PY" "$T_TMP/hostile.py" "$SOCK" half 100 40 >"$T_TMP/half-root.n" &
bg_register $!
sleep 1.5
# a ping and a submission at the same moment, each timed from its start
timeout 70 python3 "$T_TMP/ping.py" "$SOCK" >"$T_TMP/ping.out" &
PING=$!
t0=$(date +%s.%N)
J=$(timeout 70 mjsub --home "$C" --parsable -o /dev/null --wrap 'sleep 0.2')
wait_for 70 "job $J started" state_is "$C" "$J" RUNNING COMPLETED
wait "$PING"
ping_under=$(cat "$T_TMP/ping.out")
start_lag=$(sq "$C" "SELECT printf('%.3f', start_time - $t0) FROM jobs WHERE id=$J")
t_log "under 100 half-frame connections of $UB ($(cat "$T_TMP/half-b.n") connected) and 100 of root ($(cat "$T_TMP/half-root.n") connected): ping $ping_under s, job $J started $start_lag s after mjsub was run"
assert_eq 100 "$(cat "$T_TMP/half-root.n")" "(1) the owner's 100 hostile connections were made"
[[ $ping_under != timeout ]] && assert_lt "$ping_under" 1.0 "(1) a ping is answered within one tick under 100 half frames" ||
  t_fail "(1) no ping answer under 100 half frames"
assert_lt "$start_lag" 1.0 "(1) a 1-node job on free nodes starts within one tick of mjsub under attack"

# ------------------------------------------------------------------ (2)
for who in b root; do
  run=("$PY"); [[ $who == b ]] && run=(as_b "$PY")
  "${run[@]}" "$T_TMP/hostile.py" "$SOCK" huge 40 20 >"$T_TMP/huge-$who.n" &
  bg_register $!
  "${run[@]}" "$T_TMP/hostile.py" "$SOCK" big 40 20 >"$T_TMP/big-$who.n" &
  bg_register $!
done
sleep 3
RSS1=$(rss)
t_log "mjsched RSS under 64 MiB/5 MiB announcements: $RSS1 kB (before: $RSS0 kB)"
# bound: 16 MiB buffered per attacking uid (two here), strings up to twice their size
assert_lt "$RSS1" $((RSS0 + 80000)) "(2) the daemon's memory stays bounded (under +80 MB for two attacking uids)"
ping_big=$(timeout 70 python3 "$T_TMP/ping.py" "$SOCK")
[[ $ping_big != timeout ]] && assert_lt "$ping_big" 1.0 "(2) a ping is answered within one tick" ||
  t_fail "(2) no ping answer under oversized frames"

# ------------------------------------------------------------------ (3)
n0=$(count_jobs "$C")
head -c $((4 * 1024 * 1024 + 1)) /dev/zero | tr '\0' '#' >"$T_TMP/big.sh"
sed -i '1s/^##/#!/' "$T_TMP/big.sh"
t_run mjsub --home "$C" "$T_TMP/big.sh"
assert_ne 0 "$T_RC" "(3) a job script over 4 MiB is refused"
assert_contains "$T_ERR" "4 MiB" "(3) the message names the limit"
assert_eq "$n0" "$(count_jobs "$C")" "(3) nothing recorded"

# ------------------------------------------------------------------ (4)
refused=$(grep -c "refused\|closed a connection" "$C/mjsched.log")
t_log "mjsched.log: $refused lines about refused connections after ~180 hostile ones"
assert_lt "$refused" 80 "(4) refused messages are logged at a limited rate"
t_done
