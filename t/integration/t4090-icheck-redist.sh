#!/usr/bin/env bash
# iCheck data redistribution [John24 §7.4.1]: a checkpoint committed by N
# MPI processes restored by M (4->2, 2->4, 3->5, 5->3, 1->8) with every
# attribute (CONSTANT, SIZE, RANK, DEFAULT, DEFAULT_JOINING, VOLATILE) and
# every distribution (BLOCK, CYCLIC, PREDEFINED explicit and process grid,
# MANUAL); icadapt checks each element against its own layout and prints a
# checksum of every global array, which must equal the committing run's.
# From the second level (direct mode) and from agents (N == M from agent
# memory; N != M through the second level). Bad input: refused with the
# right codes, nothing written. About 10 s.
. "${DYNRES_SRC:-$(dirname "$0")/../..}/t/lib.sh"
t_begin 120
t_require mpiexec icadapt icagent
W=$T_TMP
T="timeout 60"
sums() { grep '^CHECKSUM' "$1"; }
printf 'direct: true\npfs_dir: %s/pfs\n' "$W" >"$W/direct.yaml"

# Bad input: clear codes, no version written.
$T mpiexec -n 2 icadapt badapp bad --config "$W/direct.yaml" >"$W/bad.out" 2>&1 || t_fatal "bad input: $(cat "$W/bad.out")"
grep -q '^OK' "$W/bad.out" || t_fatal "bad input: $(cat "$W/bad.out")"
[ ! -e "$W/pfs/$(id -u)/badapp" ] || t_fatal "bad input wrote a checkpoint"
t_pass "bad input"

# Second level: N -> M both directions.
for nm in "4 2" "2 4" "3 5" "5 3" "1 8"; do
  set -- $nm
  app="d$1to$2"
  $T mpiexec -n "$1" icadapt "$app" commit --config "$W/direct.yaml" >"$W/$app.c" 2>&1 || t_fatal "$app commit: $(cat "$W/$app.c")"
  grep -q '^OK' "$W/$app.c" || t_fatal "$app commit: $(cat "$W/$app.c")"
  for how in "" --restart; do
    $T mpiexec -n "$2" icadapt "$app" restore --config "$W/direct.yaml" $how >"$W/$app.r" 2>&1 || t_fatal "$app restore $how: $(cat "$W/$app.r")"
    grep -q "^RESTORED $1 $2" "$W/$app.r" || t_fatal "$app: not restored from $1 processes: $(cat "$W/$app.r")"
    grep -q '^OK' "$W/$app.r" || t_fatal "$app restore $how: $(cat "$W/$app.r")"
    [ "$(sums "$W/$app.r")" = "$(sums "$W/$app.c")" ] || t_fatal "$app $how: checksums differ: $(sums "$W/$app.r") vs $(sums "$W/$app.c")"
  done
  t_pass "second level $1 -> $2"
done

# Agents: commit with IC_PERSIST (version in agent memory), restore on the same
# and on other process counts.
for a in m0 m1; do
  icagent --listen "unix:$W/$a.sock" --app agapp --pfs-dir "$W/pfs" >"$W/$a.log" 2>&1 &
  bg_register $!
done
for a in m0 m1; do for _ in $(seq 50); do [ -S "$W/$a.sock" ] && break; sleep 0.1; done; done
printf 'agents: [ "unix:%s/m0.sock", "unix:%s/m1.sock" ]\npfs_dir: %s/pfs\n' "$W" "$W" "$W" >"$W/two.yaml"
$T mpiexec -n 4 icadapt agapp commit --config "$W/two.yaml" --persist >"$W/ag.c" 2>&1 || t_fatal "agent commit: $(cat "$W/ag.c")"
grep -q '^MODE rdma' "$W/ag.c" || t_fatal "agents not used: $(cat "$W/ag.c")"
for m in 4 2 5; do
  $T mpiexec -n $m icadapt agapp restore --config "$W/two.yaml" --persist >"$W/ag.$m" 2>&1 || t_fatal "agent restore on $m: $(cat "$W/ag.$m")"
  grep -q "^RESTORED 4 $m" "$W/ag.$m" || t_fatal "agents $m: $(cat "$W/ag.$m")"
  grep -q '^OK' "$W/ag.$m" || t_fatal "agents $m: $(cat "$W/ag.$m")"
  [ "$(sums "$W/ag.$m")" = "$(sums "$W/ag.c")" ] || t_fatal "agents 4 -> $m: checksums differ"
  t_pass "agents 4 -> $m"
done
t_done
