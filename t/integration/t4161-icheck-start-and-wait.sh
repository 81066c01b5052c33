#!/bin/bash
# ctest-processors: 2
# What an iCheck rank costs the processes around it, on the relaunch path of
# a restart-based resize and when ranks outnumber cores:
#   1. no program links libfabric (libicheck loads it on first use): a rank
#      started with ICHECK_NO_PREINIT=1 runs none of the constructors of
#      libfabric's dependencies before main (libinfinipath's pins itself to
#      CPU 0 and calibrates its clock with sleeps: sched_setaffinity);
#      an agent starts libfabric when it starts, before any application's
#      first "hello" (which the library waits for hello_timeout_ms; two
#      iCheck applications starting at once exceeded the 10 s it once was
#      and fell back to direct writes); an agent whose pid a dead iCheck process had (its
#      libfabric shm region file left in /dev/shm) still serves (it refused
#      every hello: "fi_enable(ep_): Device or resource busy");
#   2. a rank that reaches a commit before a slower one (skewed by 1.5 s)
#      waits by napping, not by spinning in an MPI collective: its main
#      thread makes many voluntary context switches and uses little CPU;
#   3. pinned to one core beside two busy loops, 2 ranks commit to 2 agents
#      (pull: the agents fi_read) and restore from them, each step within
#      its bound (the "pinned-core stall" of bench/icheck/pinned_stall.sh).
# About 25 s.
. "${DYNRES_SRC:-$(dirname "$0")/../..}/t/lib.sh"
t_begin 120
LIB=$DYNRES_BUILD/lib/libicheck.so
[[ -f $LIB ]] || t_skip "libicheck.so not built (no libfabric)"
command -v mpiexec >/dev/null || t_skip "mpiexec (Debian package mpich) is not installed"
for t in ictest ictest_mpi icagent; do [[ -x $DYNRES_BIN/$t ]] || t_skip "$DYNRES_BIN/$t is not built"; done
W=$T_TMP/w
mkdir -p "$W"

# ---- 1. libfabric is not linked ---------------------------------------------
needed=$(readelf -d "$LIB" "$DYNRES_BIN/ictest" "$DYNRES_BIN/icagent" | grep -c 'NEEDED.*libfabric' || true)
assert_eq 0 "$needed" "libicheck.so, ictest and icagent do not link libfabric"
FAB=$(ldconfig -p | awk '/libfabric\.so\.1 / {print $NF; exit}')
if command -v strace >/dev/null && [[ -n $FAB ]] && ldd "$FAB" | grep -q infinipath; then
  strace -f -e trace=sched_setaffinity -o "$W/start.strace" env ICHECK_NO_PREINIT=1 "$DYNRES_BIN/ictest" >/dev/null 2>&1
  assert_eq 0 "$(grep -c sched_setaffinity "$W/start.strace")" "no libfabric dependency constructor ran before main"
  # the same program does load libfabric when it needs the transport
  printf 'agents: [ "unix:%s/none.sock" ]\npfs_dir: %s/pfs\n' "$W" "$W" >"$W/none.yaml"
  ICHECK_NO_PREINIT=1 strace -f -e trace=openat -o "$W/use.strace" "$DYNRES_BIN/ictest" use 100 1 1 --config "$W/none.yaml" >/dev/null 2>&1
  assert_match 'libfabric\.so\.1' "$(grep -o 'libfabric[^"]*' "$W/use.strace" | head -1)" "libfabric is loaded when iCheck needs its transport"
else
  t_log "libfabric.so.1 does not pull in libinfinipath here (or no strace): start-up check skipped"
fi

"$DYNRES_BIN/icagent" --listen "unix:$W/early.sock" --app early --pfs-dir "$W/pfs" >"$W/early.log" 2>&1 &
EARLY=$!
bg_register "$EARLY"
wait_for 10 "an agent nobody talked to yet has loaded libfabric" eval 'grep -q "libfabric\.so" "/proc/$EARLY/maps"'
kill "$EARLY" 2>/dev/null
# A process keeps its pid across exec() and leaves its libfabric shm region
# file (/dev/shm/PID:UID:0) behind with itself as the live owner: what an
# agent meets when it gets the pid of a SIGKILLed iCheck process. python3
# connects to agent r1 through libicheck, then execs agent r2; ictest must
# commit through r2.
if command -v python3 >/dev/null; then
  "$DYNRES_BIN/icagent" --listen "unix:$W/r1.sock" --app reuse --pfs-dir "$W/pfs" >"$W/r1.log" 2>&1 &
  bg_register $!
  R1=$!
  wait_for 10 "agent r1 listening" test -S "$W/r1.sock"
  for a in r1 r2; do printf 'agents: [ "unix:%s/%s.sock" ]\npfs_dir: %s/pfs\n' "$W" "$a" "$W" >"$W/$a.yaml"; done
  python3 - "$LIB" "$W/r1.yaml" "$DYNRES_BIN/icagent" "unix:$W/r2.sock" "$W/pfs" >"$W/r2.log" 2>&1 <<'EOF_PY' &
import ctypes, os, sys
lib = ctypes.CDLL(sys.argv[1])
lib.icheck_mode.restype = ctypes.c_char_p
st = ctypes.c_int(-1)
rc = lib.icheck_init(sys.argv[2].encode(), b"reuse", None, ctypes.byref(st))
left = [n for n in os.listdir("/dev/shm") if n.startswith("%d:" % os.getpid())]
print("FIRST rc=%d mode=%s regions=%d" % (rc, lib.icheck_mode().decode(), len(left)), flush=True)
os.execv(sys.argv[3], [sys.argv[3], "--listen", sys.argv[4], "--app", "reuse2", "--pfs-dir", sys.argv[5]])
EOF_PY
  R2=$!
  bg_register "$R2"
  wait_for 10 "agent r2 (the exec'd process) listening" test -S "$W/r2.sock"
  assert_match '^FIRST rc=0 mode=rdma regions=[1-9]' "$(grep '^FIRST' "$W/r2.log")" "the first image used agent r1 through shm"
  t_run timeout 30 "$DYNRES_BIN/ictest" reuse2 1000 10 5 --config "$W/r2.yaml"
  assert_contains "$T_OUT" "FINAL 2 rdma" "the agent with a dead process's pid serves ($(grep -m1 'refused hello' "$W/r2.log"))"
  kill "$R1" "$R2" 2>/dev/null
fi

# ---- 2. a waiting rank naps ---------------------------------------------------
printf 'direct: true\npfs_dir: %s/pfs\n' "$W" >"$W/direct.yaml"
t_run mpiexec -n 2 "$DYNRES_BIN/ictest_mpi" skew 1000 2 1 --config "$W/direct.yaml" --skew-ms 1500
assert_eq 0 "$T_RC" "skewed commits succeed"
line=$(grep '^WAITED 2 ' <<<"$T_OUT")
read -r _ _ wall cpu nvcsw <<<"$line"
t_log "rank 0 in the second commit: wall ${wall}s cpu ${cpu}s voluntary switches $nvcsw"
assert_le 1.2 "${wall:-0}" "rank 0 waited for rank 1 inside the commit"
assert_le 100 "${nvcsw:-0}" "the waiting rank naps (voluntary context switches)"
assert_le "${cpu:-9}" "$(awk -v w="${wall:-0}" 'BEGIN {print w / 4}')" "the waiting rank uses little CPU"

# ---- 3. pinned to one loaded core: pull commits and restore --------------------
HOGS=()
for _ in 1 2; do
  taskset -c 0 bash -c 'while :; do :; done' &
  HOGS+=($!)
  bg_register $!
done
for a in m0 m1; do
  taskset -c 0 "$DYNRES_BIN/icagent" --listen "unix:$W/$a.sock" --app pin --pfs-dir "$W/pfs" >"$W/$a.log" 2>&1 &
  bg_register $!
done
wait_for 10 "agents listening" test -S "$W/m0.sock" -a -S "$W/m1.sock"
printf 'agents: [ "unix:%s/m0.sock", "unix:%s/m1.sock" ]\npfs_dir: %s/pfs\n' "$W" "$W" "$W" >"$W/two.yaml"
t0=$(date +%s.%N)
ICHECK_TRANSFER=pull timeout 40 taskset -c 0 mpiexec -n 2 "$DYNRES_BIN/ictest_mpi" pin 50000 10 5 --config "$W/two.yaml" --persist >"$W/first.out" 2>&1
rc1=$?
t1=$(date +%s.%N)
ICHECK_TRANSFER=pull timeout 40 taskset -c 0 mpiexec -n 2 "$DYNRES_BIN/ictest_mpi" pin 50000 20 5 --config "$W/two.yaml" >"$W/second.out" 2>&1
rc2=$?
t2=$(date +%s.%N)
kill "${HOGS[@]}" 2>/dev/null
t_log "pinned: commits $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}') s, restore + commits $(awk -v a="$t1" -v b="$t2" 'BEGIN {printf "%.1f", b - a}') s"
assert_eq 0 "$rc1" "pinned run with pull commits to two agents ($(tail -2 "$W/first.out" | tr '\n' ' '))"
assert_eq 0 "$rc2" "pinned restart from the agents ($(tail -2 "$W/second.out" | tr '\n' ' '))"
assert_contains "$(cat "$W/first.out")" "COMMIT 10 2 rdma 0" "the commits went to the agents"
assert_contains "$(cat "$W/second.out")" "RESTORED 10 2" "the restart restored version 2 from the agents"
t_done
