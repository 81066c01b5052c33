#!/usr/bin/env bash
# A restore checks the bytes an agent returns against the checksums the
# library sent with the version: a damaged agent copy is
# never handed to the application. The damage is done inside a real agent
# with its test operation "test_corrupt" (one byte flipped in the middle of
# every piece of a version), enabled by ICHECK_AGENT_TEST_OPS=1 in the
# service's environment -- a test-only switch (icagent(8)).
#   (1) in-place restore (restart_all, zero copy): the agent copy of the
#       newest version is damaged -> refused, the same version is restored
#       from the second level, and the run ends with the uninterrupted result;
#   (2) the same through the library's restore buffer (ICHECK_ZERO_COPY=0);
#   (3) no second-level copy either -> icheck_restart_all fails with
#       ICHECK_ECORRUPT, nothing is restored;
#   (3b) SHMR with two ranks: the damaged byte lies in rank 1's part of the
#       node piece; rank 1 refuses it, all ranks restore the second level;
#   (4) control: an intact agent copy is restored from the agent, silently;
#   (5) an agent whose copy was damaged before its second-level write refuses
#       to write it (flush error, no manifest for that version).
. "${DYNRES_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/t/lib.sh"

for t in icheckd icagent ictest; do
  [[ -x $DYNRES_BIN/$t ]] || t_skip "$DYNRES_BIN/$t is not built"
done
command -v python3 >/dev/null || t_skip "python3 is not installed"
t_begin 90
unset ICHECK_CONFIG ICHECK_TRANSFER ICHECK_TCP_AUTH ICHECK_ZERO_COPY ICHECK_STRATEGY
W=$T_TMP/home
mkdir -p "$W"
chmod 700 "$W"
trap 'rc=$?; "$DYNRES_SRC/share/dynres/icheck-down" --home "$W" >/dev/null 2>&1; (exit $rc); _t_cleanup' EXIT
export ICHECK_AGENT_TEST_OPS=1
boot() {
  timeout 30 "$DYNRES_SRC/share/dynres/icheck-boot" --home "$W" --heartbeat 1 --misses 3 --no-standby n1 >/dev/null ||
    t_fatal "icheck-boot failed"
}
boot
export ICHECK_CONFIG=$W/icheck.yaml
sqw() { sqlite3 -batch -cmd '.timeout 5000' "$W/state.db" "$1"; }
PFS=$W/pfs/$(id -u)

# agent_op APP JSON — send one request to the (single) up agent of APP, print the reply
agent_op() {
  local addr
  addr=$(sqw "SELECT a.address FROM icheck_agents a JOIN icheck_apps p ON p.id = a.app_id
              WHERE p.name = '$1' AND a.state = 'up'")
  [[ $addr == unix:* ]] || { echo "no agent for $1"; return 1; }
  python3 - "${addr#unix:}" "$2" <<'EOF'
import json, socket, struct, sys
s = socket.socket(socket.AF_UNIX); s.settimeout(30); s.connect(sys.argv[1])
b = sys.argv[2].encode()
s.sendall(struct.pack(">I", len(b)) + b)
n = struct.unpack(">I", s.recv(4, socket.MSG_WAITALL))[0]
print(s.recv(n, socket.MSG_WAITALL).decode())
EOF
}
ref() {  # APP N ITERS EVERY -> RESULT of an uninterrupted direct run
  printf 'direct: true\npfs_dir: %s/ref\n' "$W" >"$W/direct.yaml"
  timeout 60 ictest "ref_$1" "$2" "$3" "$4" --config "$W/direct.yaml" | awk '/^RESULT/ {print $2}'
}
first_run() {  # APP: versions 1..4 (iterations 5..20), kept by the agent
  t_run timeout 60 ictest "$1" 50000 20 5 --persist
  assert_contains "$T_OUT" "FINAL 4 rdma" "$1: version 4 committed through the agent ($T_ERR)"
}
manifest_v4() { [[ -f $PFS/$1/v0000000004/MANIFEST.json ]]; }

# the reruns stop at iteration 20, where they restart: RESULT is then a
# checksum of the restored grid itself, so any damaged byte shows
R=$(ref cv 50000 20 5)
[[ -n $R ]] || t_fatal "no reference result"

# ------------------------------------------------ (1) in place
first_run cv
wait_for 15 "cv: version 4 on the second level" manifest_v4 cv || t_fatal "no second-level v4 of cv"
assert_contains "$(agent_op cv '{"op":"test_corrupt","v":4}')" '"pieces":1' "cv: the agent's copy of v4 damaged"
t_run timeout 60 ictest cv 50000 20 5
assert_eq 0 "$T_RC" "cv: the rerun succeeds ($T_ERR)"
assert_contains "$T_ERR" "does not match its checksum" "cv: the damaged agent copy is refused"
assert_contains "$T_OUT" "RESTORED 20 4" "cv: version 4 restored from the second level"
assert_contains "$T_OUT" "RESULT $R" "cv: with the uninterrupted result"

# ------------------------------------------------ (2) through the restore buffer
first_run cz
wait_for 15 "cz: version 4 on the second level" manifest_v4 cz || t_fatal "no second-level v4 of cz"
assert_contains "$(agent_op cz '{"op":"test_corrupt","v":4}')" '"pieces":1' "cz: the agent's copy of v4 damaged"
ICHECK_ZERO_COPY=0 t_run timeout 60 ictest cz 50000 20 5
assert_contains "$T_ERR" "does not match its checksum" "cz: the damaged agent copy is refused (no zero copy)"
assert_contains "$T_OUT" "RESTORED 20 4" "cz: version 4 restored from the second level"
assert_contains "$T_OUT" "RESULT $R" "cz: with the uninterrupted result"

# ------------------------------------------------ (3) no intact copy anywhere
first_run cn
wait_for 15 "cn: version 4 on the second level" manifest_v4 cn
rm -rf "${PFS:?}/cn"
assert_contains "$(agent_op cn '{"op":"test_corrupt","v":4}')" '"pieces":1' "cn: the agent's copy of v4 damaged"
t_run timeout 60 ictest cn 50000 40 5
assert_eq 4 "$T_RC" "cn: ictest stops at the failed restart"
assert_contains "$T_ERR" "icheck_restart_all: checksum mismatch: data refused" "cn: icheck_restart_all fails with ICHECK_ECORRUPT"
assert_contains "$T_ERR" "does not match its checksum" "cn: because the agent copy is damaged"
assert_not_contains "$T_OUT" "RESTORED" "cn: nothing is restored"

# ------------------------------------------------ (3b) SHMR, two ranks
# one node piece holds both ranks' regions; the flipped byte lies in rank 1's
# grid: rank 1 refuses it, and every rank takes the second level
if command -v mpiexec >/dev/null && [[ -x $DYNRES_BIN/ictest_mpi ]]; then
  RS=$(timeout 60 mpiexec -n 2 ictest_mpi ref_cs 50000 20 5 --config "$W/direct.yaml" | awk '/^RESULT/ {print $2}')
  ICHECK_STRATEGY=shmr t_run timeout 60 mpiexec -n 2 ictest_mpi cs 50000 20 5 --persist
  assert_contains "$T_OUT" "FINAL 4 rdma" "cs: SHMR version 4 committed through the agent ($T_ERR)"
  wait_for 15 "cs: version 4 on the second level" manifest_v4 cs
  assert_contains "$(agent_op cs '{"op":"test_corrupt","v":4}')" '"pieces":1' "cs: the agent's node piece of v4 damaged"
  ICHECK_STRATEGY=shmr t_run timeout 60 mpiexec -n 2 ictest_mpi cs 50000 20 5
  assert_contains "$T_ERR" "rank 1: corrupt: region 'grid' of version 4 from the agent does not match its checksum" \
    "cs: rank 1 refuses its damaged region"
  assert_contains "$T_OUT" "RESTORED 20 4" "cs: version 4 restored from the second level"
  assert_contains "$T_OUT" "RESULT $RS" "cs: with the uninterrupted two-rank result"
else
  t_log "no mpiexec/ictest_mpi: SHMR case skipped"
fi

# ------------------------------------------------ (4) control: intact copy
first_run ok
t_run timeout 60 ictest ok 50000 20 5
assert_contains "$T_OUT" "RESTORED 20 4" "ok: version 4 restored"
assert_not_contains "$T_ERR" "checksum" "ok: from the agent, without a checksum complaint"
assert_contains "$T_OUT" "RESULT $R" "ok: with the uninterrupted result"

# ------------------------------------------------ (5) no second-level write of a damaged copy
"$DYNRES_SRC/share/dynres/icheck-down" --home "$W" >/dev/null 2>&1
sed -e 's/^pfs_every:.*/pfs_every: 1000/' "$DYNRES_SRC/etc/icheck-dynamic.yaml" >"$W/icheck-dynamic.yaml"
boot
first_run late
assert_contains "$(agent_op late '{"op":"test_corrupt","v":4}')" '"pieces":1' "late: the agent's copy of v4 damaged"
FL=$(agent_op late '{"op":"flush","timeout_ms":20000}')
assert_contains "$FL" "does not match the application's checksum" "late: the flush refuses to write the damaged copy"
manifest_v4 late && t_fail "late: a manifest of the damaged v4 was written" || t_pass "late: no manifest of v4"
t_done
