#!/usr/bin/env bash
# restart_check.sh — interrupt + restart check of the example applications
# with iCheck [John24 §6.1.3, §6.2.5]: heat and synth are killed by their
# own fault injection after a few checkpoints, rerun, restored from the
# newest checkpoint, and must print the same checksum line as an
# uninterrupted run. Without a controller libicheck writes checkpoints
# directly to the second level (ckstore) under $ICHECK_PFS_DIR, which this
# script points at a temporary directory; DYNRES_HOME/ICHECK_CONFIG are unset
# so no running cluster is touched.
#
# Usage: restart_check.sh [RANKS]     (heat, synth and mpiexec on PATH)
# Exit: 0 ok, 1 failure, 77 skipped (built without iCheck, or no mpiexec).
set -euo pipefail
N=${1:-2}
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v mpiexec >/dev/null || { echo "SKIP: no mpiexec"; exit 77; }
for b in heat synth; do command -v $b >/dev/null || fail "$b not on PATH"; done
if heat --nx 8 --ny 8 --iters 1 --no-mpi 2>&1 | grep -q "built without iCheck"; then
  echo "SKIP: examples built without iCheck"; exit 77
fi
SRC=${DYNRES_SRC:-$(cd "$(dirname "$0")/../../../.." && pwd)}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
unset DYNRES_HOME ICHECK_CONFIG
export ICHECK_PFS_DIR=$WORK/pfs
T="timeout 120"
sum() { grep -E "^$1: checksum=" <<<"$2" | tail -n1; }

H=(--nx 64 --ny 41 --iters 200 --ckpt-every 40)
ref=$(sum heat "$($T mpiexec -n "$N" heat "${H[@]}" --app heat-ref -q)")
[ -n "$ref" ] || fail "heat reference run printed no checksum"
set +e
$T mpiexec -n "$N" heat "${H[@]}" --app heat-rs --fault-at 130 >"$WORK/h1.log" 2>&1
set -e
grep -q "fault injected after iteration 130" "$WORK/h1.log" || fail "heat fault not injected: $(cat "$WORK/h1.log")"
grep -q "checksum=" "$WORK/h1.log" && fail "interrupted heat run finished anyway"
out=$($T mpiexec -n "$N" heat "${H[@]}" --app heat-rs --fault-at 130 2>&1) || fail "heat restart failed: $out"
grep -q "restart version=.* iteration=120" <<<"$out" || fail "heat did not restart at iteration 120: $out"
[ "$(sum heat "$out")" = "$ref" ] || fail "heat after restart: $(sum heat "$out") != $ref"
echo "heat ($N ranks): restart ok: $ref"

CFG=$SRC/share/dynres/examples/synth/synth.yaml
S=(-s cp_count=200 -s cp_interval=30it -s cp_size=20000 -s probe_interval=50it -s cp_type=double)
ref=$(sum synth "$($T mpiexec -n "$N" synth "$CFG" "${S[@]}" -s app_name=synth-ref -q)")
[ -n "$ref" ] || fail "synth reference run printed no checksum"
set +e
$T mpiexec -n "$N" synth "$CFG" "${S[@]}" -s app_name=synth-rs -s fault_inject=100it >"$WORK/s1.log" 2>&1
set -e
grep -q "fault_inject at iteration=100" "$WORK/s1.log" || fail "synth fault not injected: $(cat "$WORK/s1.log")"
out=$($T mpiexec -n "$N" synth "$CFG" "${S[@]}" -s app_name=synth-rs -s fault_inject=100it 2>&1) ||
  fail "synth restart failed: $out"
grep -q "restart version=.* iteration=90" <<<"$out" || fail "synth did not restart at iteration 90: $out"
[ "$(sum synth "$out")" = "$ref" ] || fail "synth after restart: $(sum synth "$out") != $ref"
echo "synth ($N ranks): restart ok: $ref"
echo OK
