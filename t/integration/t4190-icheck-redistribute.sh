#!/usr/bin/env bash
# icheck_redistribute [John24 §7.4.2, Listing 7.2]: one call per label after
# an adaptation, every attribute and distribution (icadapt's objects, each
# element checked against its new layout, a checksum per global array equal
# to the committing run's).
#  - A process set that persists across the adaptation (one mpiexec of 5
#    processes): old set {0,1,2} -> new set {1,2,3,4} (1 and 2 stay, 0
#    leaves, 3 and 4 join), {0..4} -> {0,2} (three leave), {0,1} -> {0..4}
#    (three join); the old set commits to the agents (IC_PERSIST) and the
#    new set pulls its parts from the agents' memory by RMA.
#  - Restart on another process count (4 -> 3) from the agents.
#  - No agent holds the version (one agent killed): from the second level.
#  - Bad calls: unknown label ENOENT, wrong count EMISMATCH, ranks naming
#    different labels EINVAL (inside icadapt).
# About 20 s (2 cores, loaded).
. "${DYNRES_SRC:-$(dirname "$0")/../..}/t/lib.sh"
t_begin 120
t_require mpiexec icadapt icagent
W=$T_TMP
T="timeout 60"
sums() { grep '^CHECKSUM' "$1"; }
# the checksums printed by the old set (before "PHASE new") and the new set
old_sums() { sed -n '/^PHASE old/,/^PHASE new/p' "$1" | grep '^CHECKSUM'; }
new_sums() { sed -n '/^PHASE new/,$p' "$1" | grep '^CHECKSUM'; }

for a in m0 m1; do
  icagent --listen "unix:$W/$a.sock" --app rdapp --pfs-dir "$W/pfs" >"$W/$a.log" 2>&1 &
  bg_register $!
  echo $! >"$W/$a.pid"
done
for a in m0 m1; do wait_for 10 "agent $a listening" test -S "$W/$a.sock" || t_fatal "agent $a did not start"; done
printf 'agents: [ "unix:%s/m0.sock", "unix:%s/m1.sock" ]\npfs_dir: %s/pfs\n' "$W" "$W" "$W" >"$W/two.yaml"

# Persisting process sets: ranks that stay, join and leave.
k=0
for sets in "0,1,2 1,2,3,4 3 4" "0,1,2,3,4 0,2 5 2" "0,1 0,1,2,3,4 2 5"; do
  set -- $sets
  k=$((k + 1))
  out=$W/pset$k.out
  $T mpiexec -n 5 icadapt rdapp pset --old "$1" --new "$2" --config "$W/two.yaml" --persist >"$out" 2>&1 ||
    t_fatal "pset $1 -> $2: $(cat "$out")"
  grep -q "^RESTORED $3 $4" "$out" || t_fatal "pset $1 -> $2: not redistributed from $3 to $4 processes: $(cat "$out")"
  [ "$(grep -c '^OK' "$out")" = 2 ] || t_fatal "pset $1 -> $2: $(cat "$out")"
  [ "$(grep -c '^MODE rdma' "$out")" = 2 ] || t_fatal "pset $1 -> $2: agents not used: $(cat "$out")"
  assert_not_contains "$(cat "$out")" "second level" "pset $1 -> $2: from the agents' memory, not the second level"
  [ "$(old_sums "$out" | wc -l)" = 5 ] || t_fatal "pset $1 -> $2: checksums missing: $(cat "$out")"
  assert_eq "$(old_sums "$out")" "$(new_sums "$out")" "pset $1 -> $2: global checksums after icheck_redistribute"
  t_pass "persisting set $1 -> $2"
  t_log "persisting set $1 -> $2 done"
done

# Restart on another process count: one icheck_redistribute per label.
$T mpiexec -n 4 icadapt rdapp commit --config "$W/two.yaml" --persist >"$W/c4.out" 2>&1 || t_fatal "commit on 4: $(cat "$W/c4.out")"
$T mpiexec -n 3 icadapt rdapp restore --redistribute --config "$W/two.yaml" --persist >"$W/r3.out" 2>&1 || t_fatal "4 -> 3: $(cat "$W/r3.out")"
grep -q '^RESTORED 4 3' "$W/r3.out" && grep -q '^OK' "$W/r3.out" || t_fatal "4 -> 3: $(cat "$W/r3.out")"
assert_not_contains "$(cat "$W/r3.out")" "second level" "4 -> 3 from the agents"
assert_eq "$(sums "$W/c4.out")" "$(sums "$W/r3.out")" "4 -> 3 checksums"

t_log "restart 4 -> 3 done"
# No agent holds every old part (m1 killed): the second level.
kill "$(cat "$W/m1.pid")"
wait_for 10 "agent m1 gone" bash -c "! kill -0 $(cat "$W/m1.pid") 2>/dev/null"
$T mpiexec -n 5 icadapt rdapp restore --redistribute --config "$W/two.yaml" >"$W/r5.out" 2>&1 || t_fatal "4 -> 5 without m1: $(cat "$W/r5.out")"
grep -q '^RESTORED 4 5' "$W/r5.out" && grep -q '^OK' "$W/r5.out" || t_fatal "4 -> 5 without m1: $(cat "$W/r5.out")"
assert_eq "$(sums "$W/c4.out")" "$(sums "$W/r5.out")" "4 -> 5 from the second level checksums"

t_done
