#!/bin/bash
# run.sh — build dynres's libFuzzer targets and fuzz each for a while.
#
#   bench/fuzz/run.sh [SECONDS] [TARGET...]
#
# SECONDS per target (default 60); TARGETs among frame_reader resize_msg
# icheck_wire jobspec swf config (default: all, in that order). The targets
# are the entry functions of lib/fuzz (dynres/fuzz.hpp), built with clang
# and -fsanitize=fuzzer,address,undefined in their own build directory
# ($DYNRES_FUZZ_BUILD, default <repo>/build-fuzz; the normal build and the
# test suite never need clang). Each target starts from the inputs kept in
# t/fuzz/<target>/ and keeps what it learns in <build>/corpus/<target>;
# inputs that crash, hang (> 10 s) or break a contract are saved in
# <build>/found/<target>-<time>/ and fuzzing goes on (libFuzzer -fork=1).
# Targets run one after another at nice 19 (DYNRES_FUZZ_PARALLEL=N runs N
# at once). Per target it prints executions, executions per second and the
# crashes / timeouts / out-of-memory inputs found; exit 1 when any was found.
#
# To keep a bug found as a regression test: fix it, copy the input to
# t/fuzz/<target>/ (unit_fuzz replays every file there in the normal build).
#
# Needs clang and libFuzzer (Debian: apt-get install clang libclang-rt-14-dev).
set -uo pipefail
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${DYNRES_FUZZ_BUILD:-$SRC/build-fuzz}
ALL=(frame_reader resize_msg icheck_wire jobspec swf config)

SECONDS_PER=60
if [[ $# -gt 0 && $1 =~ ^[0-9]+$ ]]; then SECONDS_PER=$1; shift; fi
if [[ $# -gt 0 && $1 == -* ]]; then sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
if ((SECONDS_PER < 1)); then echo "run.sh: SECONDS must be >= 1" >&2; exit 2; fi
TARGETS=("$@")
((${#TARGETS[@]})) || TARGETS=("${ALL[@]}")
for t in "${TARGETS[@]}"; do
  [[ " ${ALL[*]} " == *" $t "* ]] || { echo "run.sh: unknown target '$t' (known: ${ALL[*]})" >&2; exit 2; }
done

if ! command -v clang++ >/dev/null; then
  echo "run.sh: clang++ not found; install it with: apt-get install -y clang libclang-rt-14-dev" >&2
  exit 1
fi
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }\n' >"$probe/p.cpp"
if ! clang++ -fsanitize=fuzzer,address,undefined "$probe/p.cpp" -o "$probe/p" 2>"$probe/err"; then
  echo "run.sh: clang cannot link libFuzzer programs; install: apt-get install -y libclang-rt-14-dev" >&2
  cat "$probe/err" >&2
  exit 1
fi

mkdir -p "$BUILD"
echo "run.sh: building the fuzz targets in $BUILD (clang, ASan+UBSan; log $BUILD/build.log)" >&2
if [[ ! -f $BUILD/CMakeCache.txt ]]; then
  # -O1 with line tables: the usual fuzzing build (fast to build, readable stacks)
  CC=clang CXX=clang++ cmake -S "$SRC" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDYNRES_FUZZ=ON \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
    >"$BUILD/configure.log" 2>&1 || { tail -30 "$BUILD/configure.log" >&2; exit 1; }
fi
build_args=()
for t in "${TARGETS[@]}"; do build_args+=(--target "fuzz_$t"); done
nice -n 10 cmake --build "$BUILD" -j"$(nproc)" "${build_args[@]}" >"$BUILD/build.log" 2>&1 || {
  tail -40 "$BUILD/build.log" >&2; exit 1; }
# the targets' input files and state files: in memory where possible (not the disk's fsync)
[[ -d /dev/shm && -w /dev/shm ]] && export TMPDIR=/dev/shm

# one target: fuzz it for SECONDS_PER seconds; its summary line on stdout
run_one() {
  local t=$1 corpus=$BUILD/corpus/$1 found=$BUILD/found/$1-$STAMP log=$BUILD/log/$1.log
  mkdir -p "$corpus" "$found"
  cp -n "$SRC/t/fuzz/$t"/* "$corpus"/ 2>/dev/null || true
  (cd "$found" && exec nice -n 19 "$BUILD/fuzz/fuzz_$t" -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
    -max_total_time="$SECONDS_PER" -timeout=10 -rss_limit_mb=2048 -max_len=16384 -close_fd_mask=3 \
    -artifact_prefix="$found/" "$corpus") >"$log" 2>&1
  # fork mode's status lines: "#N: cov: C ft: F corp: K exec/s E oom/timeout/crash: O/T/X time: Ss ..."
  local last
  last=$(grep -E '^#[0-9]+: cov:' "$log" | tail -1)
  local execs rate oom to crash
  execs=$(sed -nE 's/^#([0-9]+): .*/\1/p' <<<"$last")
  # the average over the run (a status line's exec/s is its last job's)
  rate=$(awk -v e="${execs:-0}" -v s="$SECONDS_PER" 'BEGIN { printf "%d", e / s }')
  read -r oom to crash < <(sed -nE 's/.*oom\/timeout\/crash: ([0-9]+)\/([0-9]+)\/([0-9]+).*/\1 \2 \3/p' <<<"$last")
  printf 'fuzz %-13s seconds=%-5s executions=%-10s exec/s=%-7s crashes=%-3s timeouts=%-3s ooms=%-3s found=%s\n' \
    "$t" "$SECONDS_PER" "${execs:-?}" "${rate:-?}" "${crash:-?}" "${to:-?}" "${oom:-?}" \
    "$(find "$found" -type f | wc -l) file(s) in $found"
}

STAMP=$(date -u +%Y%m%dT%H%M%S)
mkdir -p "$BUILD/log"
par=${DYNRES_FUZZ_PARALLEL:-1}
pids=()
for t in "${TARGETS[@]}"; do
  echo "run.sh: fuzzing $t for $SECONDS_PER s" >&2
  run_one "$t" >"$BUILD/log/$t.summary" &
  pids+=($!)
  if ((${#pids[@]} >= par)); then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
done
wait
rc=0
for t in "${TARGETS[@]}"; do
  cat "$BUILD/log/$t.summary"
  [[ $(find "$BUILD/found/$t-$STAMP" -type f | wc -l) -eq 0 ]] || rc=1
done
exit $rc
