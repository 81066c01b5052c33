#!/usr/bin/env bash
# heat resized through iCheck checkpoint/restart with data redistribution
# [John24 §7.4.1, §7.4.4]: an MPI heat run stops after iteration 30 on 4
# ranks (commit, finalize, exit 0), is relaunched on 2 ranks (stop at 70), on
# 5 (stop at 95) and finishes on 3; each relaunch redistributes the grid's
# block rows to the new rank count. The final checksum equals a fixed-size
# run's; also from agent memory (2 agents) for 4 -> 4 -> 2. The same chain with
# the hand-written MPI-IO redistribution (--hand-redist) gives the same
# checksum; the lines each needs are counted ([John24 Table 9.4]: 1 vs > 3).
# synth with one global array (cp_global) killed on 4 ranks and restarted on
# 3 ends with the fixed-size checksum too. About 15 s.
. "${DYNRES_SRC:-$(dirname "$0")/../..}/t/lib.sh"
t_begin 180
t_require mpiexec heat synth icagent
W=$T_TMP
printf 'direct: true\npfs_dir: %s/pfs\n' "$W" >"$W/direct.yaml"
A=(--nx 64 --ny 50 --iters 120 --ckpt-every 20)
ck() { sed -n 's/^heat: checksum=\([0-9a-f]*\).*/\1/p' <<<"$1" | tail -1; }
ref=$(heat "${A[@]}" --no-icheck -q)
ref=$(ck "$ref")
[[ -n $ref ]] || t_fatal "reference run printed no checksum"
fixed=$(timeout 60 mpiexec -n 4 heat "${A[@]}" --no-icheck -q)
assert_eq "$ref" "$(ck "$fixed")" "4-rank fixed-size run equals the 1-process run"

chain() {  # label config-or-hand-args...
  local label=$1; shift
  local out
  out=$(timeout 60 mpiexec -n 4 heat "${A[@]}" "$@" --stop-at 30 2>&1) || t_fail "$label: 4 ranks: $out"
  assert_contains "$out" "heat: stopped iteration=30 ranks=4" "$label: stopped on 4 ranks"
  out=$(timeout 60 mpiexec -n 2 heat "${A[@]}" "$@" --stop-at 70 2>&1) || t_fail "$label: 2 ranks: $out"
  assert_contains "$out" "heat: stopped iteration=70 ranks=2" "$label: 4 -> 2 continued"
  out=$(timeout 60 mpiexec -n 5 heat "${A[@]}" "$@" --stop-at 95 2>&1) || t_fail "$label: 5 ranks: $out"
  assert_contains "$out" "heat: stopped iteration=95 ranks=5" "$label: 2 -> 5 continued"
  out=$(timeout 60 mpiexec -n 3 heat "${A[@]}" "$@" 2>&1) || t_fail "$label: 3 ranks: $out"
  assert_eq "$ref" "$(ck "$out")" "$label: 4 -> 2 -> 5 -> 3 ends with the fixed-size checksum"
  LAST=$out
}
chain icheck --app hr --config "$W/direct.yaml"
assert_match 'heat: restart version=[0-9]+ iteration=95 .* from_ranks=5 ranks=3' "$LAST" "restored from 5 ranks on 3"
chain hand --hand-redist "$W/hand.bin" -q

# From agent memory: 4 -> 4 (agents, IC_PERSIST) -> 2 (the agents' version).
for a in m0 m1; do
  icagent --listen "unix:$W/$a.sock" --app hagent --pfs-dir "$W/pfs" >"$W/$a.log" 2>&1 &
  bg_register $!
done
for _ in $(seq 100); do [[ -S $W/m0.sock && -S $W/m1.sock ]] && break; sleep 0.1; done
printf 'agents: [ "unix:%s/m0.sock", "unix:%s/m1.sock" ]\npfs_dir: %s/pfs\n' "$W" "$W" "$W" >"$W/two.yaml"
out=$(timeout 60 mpiexec -n 4 heat "${A[@]}" --app hagent --config "$W/two.yaml" --fault-at 50 2>&1)
assert_contains "$out" "mode=rdma" "heat used the agents"
out=$(timeout 60 mpiexec -n 2 heat "${A[@]}" --app hagent --config "$W/two.yaml" 2>&1) || t_fail "agents 4 -> 2: $out"
assert_match 'heat: restart version=[0-9]+ iteration=(40|50) .* from_ranks=4 ranks=2' "$out" "agents: restored 4 -> 2"
assert_eq "$ref" "$(ck "$out")" "agents: killed on 4 ranks, finished on 2, fixed-size checksum"

# synth: one BLOCK-distributed global array, 4 ranks killed at iteration 35, 3 finish.
S=(-s cp_global=10007 -s cp_type=double -s cp_count=60 -s cp_interval=10it -q)
sref=$(synth "${S[@]}" -s enable_ichk=false --no-mpi | sed -n 's/^synth: checksum=\([0-9a-f]*\).*/\1/p')
[[ -n $sref ]] || t_fatal "synth reference printed no checksum"
timeout 60 mpiexec -n 4 synth "${S[@]}" -s icheck_config="$W/direct.yaml" -s app_name=sy -s fault_inject=35it >"$W/sy.1" 2>&1
out=$(timeout 60 mpiexec -n 3 synth "${S[@]::${#S[@]}-1}" -s icheck_config="$W/direct.yaml" -s app_name=sy 2>&1) || t_fail "synth on 3: $out"
assert_match 'synth: restart version=[0-9]+ iteration=30 .* from_ranks=4 ranks=3' "$out" "synth: restored 4 -> 3"
assert_eq "$sref" "$(sed -n 's/^synth: checksum=\([0-9a-f]*\).*/\1/p' <<<"$out")" "synth: killed on 4 ranks, finished on 3, fixed-size checksum"

# Lines of code of the redistribution [John24 Table 9.4].
H=$DYNRES_SRC/share/dynres/examples/heat/heat.c
n_ic=$(grep -c 'check_ic(icheck_add_adapt_global' "$H")
n_hand=$(( $(sed -n '/HAND-REDIST BEGIN/,/HAND-REDIST END/p' "$H" | grep -v 'HAND-REDIST' | grep -cv '^\s*$') + $(grep -c 'hand_\(save\|load\)(hand,' "$H") ))
echo "LINES heat: icheck=$n_ic hand-written(MPI-IO)=$n_hand"
n_sy=$(grep -c 'check_ic(par, icheck_add_adapt_global' "$DYNRES_SRC/share/dynres/examples/synth/synth.cpp")
echo "LINES synth: icheck=$n_sy"
assert_eq 1 "$n_sy" "synth needs one iCheck line for its redistribution"
assert_eq 1 "$n_ic" "heat needs one iCheck line for its redistribution"
(( n_hand > 3 )) || t_fail "the hand-written redistribution needs only $n_hand lines"
t_done
