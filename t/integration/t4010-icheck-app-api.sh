#!/usr/bin/env bash
# iCheck library + agents without a controller [John24 §6.1.3, §6.2]:
# pull and push, blocking and async, restart from agent memory, second level
# written by the agents, MPI with 2 ranks and 2 agents, direct mode, and the
# uninterrupted/restarted results being identical.
. "${DYNRES_SRC:-$(dirname "$0")/../..}/t/lib.sh"
t_begin 180
t_require icagent ictest
W=$T_TMP
PIDS=()
T="timeout 60"
start_agent() { # name app
  icagent --listen "unix:$W/$1.sock" --app "$2" --pfs-dir "$W/pfs" >"$W/$1.log" 2>&1 &
  PIDS+=($!); bg_register $!
  for _ in $(seq 50); do [ -S "$W/$1.sock" ] && return 0; sleep 0.1; done
  t_fatal "agent $1 did not start"
}
result() { grep '^RESULT' "$1" | awk '{print $2}'; }

printf 'agents: [ "unix:%s/a0.sock" ]\npfs_dir: %s/pfs\n' "$W" "$W" >"$W/one.yaml"
printf 'direct: true\npfs_dir: %s/pfs\n' "$W" >"$W/direct.yaml"

# Reference: uninterrupted run in direct mode.
$T ictest ref 50000 40 5 --config "$W/direct.yaml" >"$W/ref.out" || t_fatal "reference run"
grep -q "FINAL 8 direct" "$W/ref.out" || t_fatal "direct mode versions: $(cat $W/ref.out)"
REF=$(result "$W/ref.out")

for mode in pull push; do
  for async in "" --async; do
    app="app_${mode}${async:+_async}"
    start_agent "a0" "$app"
    export ICHECK_TRANSFER=$mode
    $T ictest "$app" 50000 20 5 --config "$W/one.yaml" $async >"$W/$app.1" || t_fatal "$app first half"
    grep -q "STATUS new mode rdma" "$W/$app.1" || t_fatal "$app: not rdma: $(cat $W/$app.1)"
    grep -q "FINAL 4 rdma" "$W/$app.1" || t_fatal "$app: versions $(cat $W/$app.1)"
    $T ictest "$app" 50000 40 5 --config "$W/one.yaml" $async >"$W/$app.2" || t_fatal "$app second half"
    grep -q "STATUS restart mode rdma" "$W/$app.2" || t_fatal "$app: no restart"
    grep -q "RESTORED 20 4" "$W/$app.2" || t_fatal "$app: restored wrong version: $(cat $W/$app.2)"
    [ "$(result $W/$app.2)" = "$REF" ] || t_fatal "$app: result $(result $W/$app.2) != $REF"
    kill "${PIDS[-1]}"; wait "${PIDS[-1]}" 2>/dev/null; unset 'PIDS[-1]'
    # the agent wrote the second level (finalize without IC_PERSIST flushes)
    ls "$W/pfs/$(id -u)/$app"/v*/MANIFEST.json >/dev/null 2>&1 || t_fatal "$app: no second level"
    t_pass "$app"
  done
done
unset ICHECK_TRANSFER

# MPI: 2 ranks, 2 agents, restart from agent memory.
if command -v mpiexec >/dev/null && command -v ictest_mpi >/dev/null; then
  start_agent m0 mpiapp; start_agent m1 mpiapp
  printf 'agents: [ "unix:%s/m0.sock", "unix:%s/m1.sock" ]\npfs_dir: %s/pfs\n' "$W" "$W" "$W" >"$W/two.yaml"
  $T mpiexec -n 2 ictest_mpi mpiref 50000 40 5 --config "$W/direct.yaml" >"$W/mref.out" || t_fatal "mpi reference"
  $T mpiexec -n 2 ictest_mpi mpiapp 50000 20 5 --config "$W/two.yaml" --persist >"$W/mpi.1" || t_fatal "mpi first half"
  grep -q "FINAL 4 rdma" "$W/mpi.1" || t_fatal "mpi: $(cat $W/mpi.1)"
  $T mpiexec -n 2 ictest_mpi mpiapp 50000 40 5 --config "$W/two.yaml" --async >"$W/mpi.2" || t_fatal "mpi second half"
  grep -q "RESTORED 20 4" "$W/mpi.2" || t_fatal "mpi restore: $(cat $W/mpi.2)"
  [ "$(result $W/mpi.2)" = "$(result $W/mref.out)" ] || t_fatal "mpi result differs"
  # No second-level wait ended by its timeout: agent 1's part of a version
  # agent 0 skipped must be answered at once (a finalize hung ~60 s on it).
  ! grep -h 'timeout:' "$W/m0.log" "$W/m1.log" || t_fatal "an agent waited for a timeout (see above)"
  t_pass "mpi"
fi
t_done
