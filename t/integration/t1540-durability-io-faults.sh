#!/usr/bin/env bash
# I/O faults injected with libfiu (Debian fiu-utils: fiu-run preloads
# fiu_posix_preload.so):
#   - an application writing its checkpoints directly (iCheck direct mode):
#     fsync -> EIO, write -> ENOSPC during a commit (ckstore writes with
#     write(2), not pwrite). The commit must
#     fail with a clear error that reaches the application, the previous
#     version must stay restorable, no partial version may be restored, and a
#     clean rerun must end with the same result as an uninterrupted run;
#   - an agent whose second-level writes fail (fsync -> EIO, write -> ENOSPC):
#     the commits to agent memory succeed, the failed second level reaches the
#     application at icheck_finalize (ICHECK_EIO, named), the agent keeps
#     running, and a rerun restores the newest version from agent memory and
#     ends with the uninterrupted result;
#   - mjsub when the state file's disk is full (mjsched's pwrite -> ENOSPC): refused with
#     a message, the state file unchanged.
# Not covered: rename faults (ckstore renames with renameat2, which libfiu
# does not wrap) and open faults (they also fail the program's own start-up).
. "${DYNRES_SRC:-$(dirname "$0")/../..}/t/lib.sh"
t_begin 120
command -v fiu-run >/dev/null || t_skip "fiu-run (Debian package fiu-utils) is not installed"
[[ -x $DYNRES_BIN/ictest ]] || t_skip "ictest is not built"

result() { grep '^RESULT' <<<"$1" | awk '{print $2}'; }

W=$T_TMP/app
mkdir -p "$W"
printf 'direct: true\npfs_dir: %s/pfs\n' "$W" >"$W/ref.yaml"
t_run ictest ref 50000 8 2 --config "$W/ref.yaml"
assert_eq 0 "$T_RC" "uninterrupted reference run"
REF=$(result "$T_OUT")
[[ -n $REF ]] || t_fatal "no RESULT from the reference run: $T_OUT"

n=0
while read -r fault; do
  n=$((n + 1))
  D=$W/f$n
  mkdir -p "$D"
  printf 'direct: true\npfs_dir: %s/pfs\n' "$D" >"$D/c.yaml"
  t_run ictest app 50000 4 2 --config "$D/c.yaml"   # versions 1, 2 (iterations 2, 4)
  assert_eq 0 "$T_RC" "[$fault] first half commits"
  t_run fiu-run -x -c "$fault" ictest app 50000 8 2 --config "$D/c.yaml"
  assert_ne 0 "$T_RC" "[$fault] the application sees the failed commit (exit status)"
  assert_contains "$T_OUT" "COMMIT 6 2 direct -9" "[$fault] icheck_commit returns the I/O error code"
  assert_contains "$T_ERR" "second-level file I/O failed" "[$fault] the error is named"
  # the failed version never became valid: it has no manifest (a directory
  # without one may be left behind; restart and retention skip it)
  committed=$(find "$D/pfs" -name MANIFEST.json | sed 's|.*/v0*\([0-9]*\)/MANIFEST.json|\1|' | sort -n | paste -sd, -)
  assert_eq "1,2" "$committed" "[$fault] only versions 1 and 2 have a manifest"
  t_run ictest app 50000 8 2 --config "$D/c.yaml"
  assert_eq 0 "$T_RC" "[$fault] a clean rerun succeeds"
  assert_contains "$T_OUT" "RESTORED 4" "[$fault] the rerun restores the last committed iteration (4)"
  assert_eq "$REF" "$(result "$T_OUT")" "[$fault] the rerun ends with the uninterrupted result"
done <<'EOF2'
enable name=posix/io/sync/fsync,failinfo=5
enable name=posix/io/rw/write,failinfo=28
EOF2

# an agent whose second level fails
[[ -x $DYNRES_BIN/icagent ]] || t_skip "icagent is not built"
t_run ictest ref2 50000 40 5 --config "$W/ref.yaml"
REF2=$(result "$T_OUT")
n=0
while read -r fault; do
  n=$((n + 1))
  A=$T_TMP/agent$n
  mkdir -p "$A"
  chmod 700 "$A"
  fiu-run -x -c "$fault" icagent --listen "unix:$A/a0.sock" --app ag --pfs-dir "$A/pfs" >"$A/agent.log" 2>&1 &
  AP=$!
  bg_register "$AP"
  wait_for 20 "[$fault] the agent listens" test -S "$A/a0.sock" || continue
  printf 'agents: [ "unix:%s/a0.sock" ]\npfs_dir: %s/pfs\n' "$A" "$A" >"$A/one.yaml"
  t_run timeout 60 ictest ag 50000 20 5 --config "$A/one.yaml"
  assert_contains "$T_OUT" "FINAL 4 rdma" "[agent, $fault] four versions committed to agent memory"
  assert_contains "$T_OUT" "FINALIZE -9" "[agent, $fault] icheck_finalize returns the I/O error"
  assert_contains "$T_ERR" "second-level file I/O failed" "[agent, $fault] the error is named to the application"
  assert_ne 0 "$T_RC" "[agent, $fault] the application exits with an error"
  pid_alive "$AP" && t_pass "[agent, $fault] the agent keeps running" || t_fail "[agent, $fault] the agent died"
  t_run timeout 60 ictest ag 50000 40 5 --config "$A/one.yaml"
  assert_contains "$T_OUT" "RESTORED 20 4" "[agent, $fault] the rerun restores version 4 from agent memory"
  assert_eq "$REF2" "$(result "$T_OUT")" "[agent, $fault] the rerun ends with the uninterrupted result"
  kill -TERM "$AP" 2>/dev/null
done <<'EOF3'
enable name=posix/io/sync/fsync,failinfo=5
enable name=posix/io/rw/write,failinfo=28
EOF3

# mjsub on a full disk: the scheduler records submissions, so its writes fail
# (mjsched under fiu-run; the fault is switched on and off with fiu-ctrl)
C=$T_TMP/c
boot_cluster "$C" 2 --tick 5
kill -TERM "$(sched_pid "$C")"
wait_for 10 "the booted scheduler stopped" test ! -S "$C/mjsched.sock"
fiu-run -x -f "$T_TMP/fiu" mjsched --home "$C" >>"$C/mjsched.log" 2>&1 &
SP=$!
bg_register $SP
wait_for 10 "mjsched under fiu-run is up" test -S "$C/mjsched.sock"
write_script "$T_TMP/job.sh" '#!/bin/bash' 'true'
before=$(state_digest "$C")
fiu-ctrl -f "$T_TMP/fiu" -c 'enable name=posix/io/rw/pwrite,failinfo=28' "$SP" || t_fatal "fiu-ctrl enable failed"
t_run mjsub -o "$T_TMP/%j.out" "$T_TMP/job.sh"
fiu-ctrl -f "$T_TMP/fiu" -c 'disable name=posix/io/rw/pwrite' "$SP"
assert_eq 1 "$T_RC" "mjsub on a full disk exits 1"
assert_contains "$T_ERR" "database or disk is full" "mjsub says the disk is full"
assert_eq "$before" "$(state_digest "$C")" "the state file is unchanged"
t_run mjsub -o "$T_TMP/%j.out" "$T_TMP/job.sh"
assert_eq 0 "$T_RC" "mjsub works again once the disk has room ($T_ERR)"
t_done
