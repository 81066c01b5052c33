#!/usr/bin/env bash
# Example applications without checkpointing ([John24 §2.2.2.2] heat,
# §8.2.3.1 synth): the heat checksum must not depend on the rank count
# (1 plain process, mpiexec -n 1/2/3/4) and synth must run with
# enable_ichk: false, as a plain process and under mpiexec, with and without
# its MPI-IO checkpoint. Exit 77 (skip) only when mpiexec is missing, after
# the single-process checks ran.
. "${DYNRES_SRC:-$(dirname "$0")/../..}/t/lib.sh"
t_begin 240
set -e   # a failed step (e.g. a checksum not found in $(...)) ends the test
t_require heat synth
SRC=$DYNRES_SRC
CFG=$SRC/share/dynres/examples/synth/synth.yaml
[ -f "$CFG" ] || t_fatal "missing $CFG"
WORK=$T_TMP
cd "$WORK"
T="timeout 120"

# extract the hex checksum of the "<app>: checksum=<hex> iterations=<n>" line
checksum() { # app iterations output
  local line
  line=$(grep -E "^$1: checksum=[0-9a-f]{16} iterations=$2\$" <<<"$3" | tail -n1) ||
    t_fatal "$1: no checksum line with iterations=$2 in output:\n$3"
  sed -E 's/.*checksum=([0-9a-f]{16}).*/\1/' <<<"$line"
}

HEAT_ARGS=(--nx 48 --ny 37 --iters 60 --no-icheck -q)
out=$($T heat "${HEAT_ARGS[@]}" --no-mpi 2>&1) || t_fatal "heat (plain) failed: $out"
ref=$(checksum heat 60 "$out")
echo "heat plain: $ref"
# a different size gives a different checksum (the checksum sees the grid)
out=$($T heat --nx 48 --ny 37 --iters 59 --no-icheck -q --no-mpi 2>&1) || t_fatal "heat failed: $out"
[ "$(checksum heat 59 "$out")" != "$ref" ] || t_fatal "heat checksum ignores the iteration count"
# bad arguments -> exit 2
set +e; heat --nx 1 >/dev/null 2>&1; rc=$?; set -e
[ "$rc" = 2 ] || t_fatal "heat --nx 1 should exit 2, got $rc"

SYN=(-s enable_ichk=false -s cp_count=120 -s cp_interval=40it -s cp_size=5000 -s probe_interval=0 -q)
out=$($T synth "$CFG" "${SYN[@]}" --no-mpi 2>&1) || t_fatal "synth (plain) failed: $out"
sref=$(checksum synth 120 "$out")
echo "synth plain: $sref"
out=$($T synth "$CFG" "${SYN[@]}" --no-mpi -s cp_mpiio=true -s mpiio_file="$WORK/plain.ck" 2>&1) ||
  t_fatal "synth (plain, cp_mpiio) failed: $out"
[ "$(checksum synth 120 "$out")" = "$sref" ] || t_fatal "synth checksum changes with cp_mpiio"
[ "$(stat -c %s "$WORK/plain.ck")" = 20000 ] || t_fatal "synth POSIX checkpoint has the wrong size"
for t in double int char binary; do
  out=$($T synth "$CFG" "${SYN[@]}" --no-mpi -s cp_type=$t 2>&1) || t_fatal "synth cp_type=$t failed: $out"
  checksum synth 120 "$out" >/dev/null
done
set +e; synth "$CFG" -s no_such_key=1 >/dev/null 2>&1; rc=$?; set -e
[ "$rc" = 2 ] || t_fatal "synth with an unknown key should exit 2, got $rc"

command -v mpiexec >/dev/null || t_skip "mpiexec not found (single-process checks passed)"

for n in 1 2 3 4; do
  out=$($T mpiexec -n $n heat "${HEAT_ARGS[@]}" 2>&1) || t_fatal "mpiexec -n $n heat failed: $out"
  got=$(checksum heat 60 "$out")
  echo "heat -n $n: $got"
  [ "$got" = "$ref" ] || t_fatal "heat checksum with $n ranks ($got) differs from 1 process ($ref)"
done

out=$($T mpiexec -n 1 synth "$CFG" "${SYN[@]}" 2>&1) || t_fatal "mpiexec -n 1 synth failed: $out"
[ "$(checksum synth 120 "$out")" = "$sref" ] || t_fatal "synth under mpiexec -n 1 differs from plain"
out=$($T mpiexec -n 2 synth "$CFG" "${SYN[@]}" -s cp_mpiio=true -s mpiio_file="$WORK/mpi.ck" 2>&1) ||
  t_fatal "mpiexec -n 2 synth (MPI-IO) failed: $out"
s2=$(checksum synth 120 "$out")
echo "synth -n 2: $s2"
[ "$(stat -c %s "$WORK/mpi.ck")" = 40000 ] || t_fatal "MPI-IO checkpoint of 2 ranks is not 2 x 20000 bytes"
out=$($T mpiexec -n 2 synth "$CFG" "${SYN[@]}" 2>&1) || t_fatal "mpiexec -n 2 synth failed: $out"
[ "$(checksum synth 120 "$out")" = "$s2" ] || t_fatal "synth -n 2 not deterministic"
# time-based intervals (Listing 8.1 units: seconds) keep ranks in step
out=$($T mpiexec -n 2 synth "$CFG" -s enable_ichk=false -s cp_count=60 -s cp_size=5000 \
      -s iter_passes=400 -s cp_interval=0.01 -s cp_mpiio=true -s mpiio_file="$WORK/t.ck" -s probe_interval=0.02 2>&1) ||
  t_fatal "synth with time-based intervals failed: $out"
grep -q "^synth: mpiio iteration=" <<<"$out" || t_fatal "no MPI-IO checkpoint with cp_interval=0.01 s"
[ "$(checksum synth 60 "$out")" != "" ]
t_done
