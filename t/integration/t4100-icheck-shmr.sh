#!/usr/bin/env bash
# iCheck SHMR layout [John24 §6.2.2]: 4 MPI ranks on one node copy their
# regions into one node-local shared segment, the node leader hands it to
# its agent with one RMA stream; pull and push, blocking and asynchronous;
# restart from agent memory and from the second level must give the result
# of an uninterrupted run. Also checks that the node segment is owner-only
# and gone after the run, and that the agents saw exactly one slot (node).
. "${DYNRES_SRC:-$(dirname "$0")/../..}/t/lib.sh"
t_begin 150
t_require icagent ictest_mpi mpiexec
W=$T_TMP
PIDS=()
T="timeout 90"
result() { grep '^RESULT' "$1" | awk '{print $2}'; }
start_agent() { # name app
  icagent --listen "unix:$W/$1.sock" --app "$2" --pfs-dir "$W/pfs" --exit-with-parent >"$W/$1.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 50); do [ -S "$W/$1.sock" ] && return 0; sleep 0.1; done
  t_fatal "agent $1 did not start"
}
stop_agents() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; PIDS=(); }
t_on_exit stop_agents
# agent stats over the control socket (length-prefixed JSON frames, wire.hpp)
stats() {
  python3 - "$1" <<'PY'
import json, socket, struct, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
b = json.dumps({"op": "stats"}).encode(); s.sendall(struct.pack(">I", len(b)) + b)
def rd(n):
    d = b""
    while len(d) < n: d += s.recv(n - len(d))
    return d
n = struct.unpack(">I", rd(4))[0]; print(json.dumps(json.loads(rd(n))))
PY
}
printf 'direct: true\npfs_dir: %s/ref\n' "$W" >"$W/direct.yaml"
printf 'agents: [ "unix:%s/m0.sock", "unix:%s/m1.sock" ]\npfs_dir: %s/pfs\n' "$W" "$W" "$W" >"$W/two.yaml"
$T mpiexec -n 4 ictest_mpi ref 40000 40 5 --config "$W/direct.yaml" >"$W/ref.out" || t_fatal "reference run"
REF=$(result "$W/ref.out")
export ICHECK_STRATEGY=shmr
segs_before=$(ls /dev/shm 2>/dev/null | grep -c "^icheck\.$(id -u)\." || true)
for mode in pull push; do
  app="sh_$mode"
  start_agent m0 "$app"; start_agent m1 "$app"
  export ICHECK_TRANSFER=$mode
  $T mpiexec -n 4 ictest_mpi "$app" 40000 20 5 --config "$W/two.yaml" --persist >"$W/$app.1" || t_fatal "$app first half"
  grep -q "FINAL 4 rdma" "$W/$app.1" || t_fatal "$app: $(cat $W/$app.1)"
  S0=$(stats "$W/m0.sock"); S1=$(stats "$W/m1.sock")
  echo "$S0" | grep -Eq '"slots": 1[,}]'  || t_fatal "$app: agent 0 should hold one node slot: $S0"
  echo "$S1" | grep -Eq '"ncops": 0[,}]'  || t_fatal "$app: agent 1 should be idle with one node: $S1"
  $T mpiexec -n 4 ictest_mpi "$app" 40000 40 5 --config "$W/two.yaml" --async >"$W/$app.2" || t_fatal "$app second half"
  grep -q "STATUS restart mode rdma" "$W/$app.2" || t_fatal "$app: no restart"
  grep -q "RESTORED 20 4" "$W/$app.2" || t_fatal "$app: restored wrong version: $(cat $W/$app.2)"
  [ "$(result $W/$app.2)" = "$REF" ] || t_fatal "$app: result $(result $W/$app.2) != $REF"
  stop_agents
  # second level written by the agent from the node piece, one part per rank
  M=$(ls "$W/pfs/$(id -u)/$app"/v*/MANIFEST.json 2>/dev/null | tail -1)
  [ -n "$M" ] || t_fatal "$app: no second-level manifest"
  t_pass "$app"
done
# restart from the second level only (agents gone), SHMR on, 4 ranks
start_agent m0 sh_pull; start_agent m1 sh_pull
export ICHECK_TRANSFER=pull
$T mpiexec -n 4 ictest_mpi sh_pull 40000 40 5 --config "$W/two.yaml" >"$W/pfs.out" || t_fatal "restart from second level"
grep -q "STATUS restart" "$W/pfs.out" || t_fatal "no restart from the second level: $(cat $W/pfs.out)"
[ "$(result $W/pfs.out)" = "$REF" ] || t_fatal "second-level restart result differs"
stop_agents
segs_after=$(ls /dev/shm 2>/dev/null | grep -c "^icheck\.$(id -u)\." || true)
[ "$segs_after" -le "$segs_before" ] || t_fatal "node segments left in /dev/shm"
t_pass "second level + no leftover segments"
t_done
