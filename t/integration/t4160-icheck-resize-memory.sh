#!/bin/bash
# ctest-cost: 40
# A restart-based resize of an MPI job reads the checkpoint from the agents'
# memory, never from or through files [John24 §7.4.4]: heat --malleable
# (share/dynres/examples/heat/heat-malleable.sh, one rank per node) on a
# local virtual cluster of 4 compute nodes and 1 iCheck node.
#   1. every heat process runs under strace -f; the job starts on all 4
#      nodes, is shrunk 4 -> 2 and grown 2 -> 3: no heat process opens,
#      writes, fsyncs or renames a file of
#      the second level, and none asks an agent to flush (the "flush"
#      request of the old path); the new ranks report restoring from the
#      old rank count without falling back to the second level; the final
#      checksum equals a fixed-size run without iCheck.
#   2. the application's agents are killed (SIGKILL) right after the old
#      ranks stopped for a resize: the restore falls back to the second
#      level (the agents wrote it in the background) and the job still ends
#      with the fixed-size checksum.
# About 40 s.
. "${DYNRES_SRC:-$(dirname "$0")/../..}/t/lib.sh"
t_begin 150
command -v mpiexec >/dev/null || t_skip "mpiexec (Debian package mpich) is not installed"
command -v strace >/dev/null || t_skip "strace is not installed"
for t in heat icheckd icagent mjcontrol; do [[ -x $DYNRES_BIN/$t ]] || t_skip "$DYNRES_BIN/$t is not built"; done
[[ $(ldd "$DYNRES_BIN/heat") == *libmj* ]] || t_skip "heat is built without libmj"

C=$T_TMP/c
W=$T_TMP/work
mkdir -p "$W/st"
cd "$W" || t_fatal "cd $W"
boot_cluster "$C" 5 --tick 0.2 --kill-wait 1 --icheck-nodes 1 --resize-timeout 30
PFS=$(sed -n 's/^pfs_dir: *//p' "$C/icheck.yaml")
[[ -n $PFS ]] || t_fatal "no pfs_dir in $C/icheck.yaml"

out() { cat "$W/heat-$1.out" 2>/dev/null; }
registered_times() { [[ $(out "$1" | grep -c '^heat: malleable job=') -ge $2 && $(sq "$C" "SELECT phase FROM mj_jobs WHERE job_id=$1") == accepting ]]; }
ck() { sed -n 's/^heat: checksum=\([0-9a-f]*\).*/\1/p' | tail -1; }
ARGS=(--nx 96 --ny 90 --iters 240 --iter-seconds 0.05 --print-every 40)
ref=$("$DYNRES_BIN/heat" --nx 96 --ny 90 --iters 240 --no-icheck | ck)
[[ -n $ref ]] || t_fatal "the fixed-size reference run printed no checksum"

# ---- 1. under strace: no file on the resize path ---------------------------
write_script "$W/heat-traced" '#!/bin/bash' \
  "exec strace -f -y -s 200 -o \"$W/st/heat.\$\$\" -e trace=openat,creat,write,writev,pwrite64,sendto,sendmsg,fsync,fdatasync,sync_file_range,rename,renameat,renameat2 $DYNRES_BIN/heat \"\$@\""
J=$(HEAT=$W/heat-traced mjsub --parsable -o "$W/heat-%j.out" \
  "$DYNRES_SRC/share/dynres/examples/heat/heat-malleable.sh" "${ARGS[@]}") || t_fatal "mjsub failed"
wait_state 15 "$C" "$J" RUNNING
wait_for 30 "heat registered as malleable" registered_times "$J" 1
t_run mjcontrol resize "$J" 2 --wait 40
assert_eq 0 "$T_RC" "shrink 4 -> 2 committed ($T_OUT $T_ERR)"
wait_for 30 "heat registered again after the shrink" registered_times "$J" 2
t_run mjcontrol resize "$J" 3 --wait 40
assert_eq 0 "$T_RC" "expand 2 -> 3 committed ($T_OUT $T_ERR)"
wait_state 60 "$C" "$J" COMPLETED FAILED
assert_eq COMPLETED "$(job_state "$C" "$J")" "the traced job completed"
O=$(out "$J")
assert_match 'heat: restart version=[0-9]+ iteration=[0-9]+ seconds=[0-9.]+ from_ranks=4 ranks=2' "$O" "2 ranks restored 4 ranks' grid"
assert_match 'heat: restart version=[0-9]+ iteration=[0-9]+ seconds=[0-9.]+ from_ranks=2 ranks=3' "$O" "3 ranks restored 2 ranks' grid"
assert_not_contains "$O" "second level" "no rank fell back to (or waited for) the second level"
assert_eq "$ref" "$(ck <<<"$O")" "grown and shrunk from agent memory, heat ends with the fixed-size checksum"
n=$(find "$W/st" -name 'heat.*' | wc -l)
assert_le 6 "$n" "strace followed every heat process of the three runs ($n traces)"
files=$(cat "$W"/st/heat.* | grep -F "<$PFS" | grep -E '^[0-9]+ +(openat|creat|write|writev|pwrite64|fsync|fdatasync|sync_file_range|rename)' |
  grep -vE 'openat\(.*O_RDONLY' | head -3)
assert_eq "" "$files" "no heat process wrote a second-level file"
renames=$(cat "$W"/st/heat.* | grep -E '^[0-9]+ +rename' | grep -F "$PFS" | head -3)
assert_eq "" "$renames" "no heat process renamed a second-level file"
# Only the last run's 3 ranks ask their agents to flush: at the end of the
# job (heat-malleable.sh runs heat --no-persist), after the last commit. The
# old path flushed on every resize too (4 + 2 more requests before those 3).
flushes=$(cat "$W"/st/heat.* | grep -E '^[0-9]+ +(write|sendto|sendmsg|writev)' | grep -cF '\"op\":\"flush\"' || true)
assert_le "$flushes" 3 "no flush request on the resize path ($flushes in all, the job's end included)"
sent=$(cat "$W"/st/heat.* | grep -cF -e '\"op\":\"held\"' -e '\"op\":\"rbegin\"' || true)
assert_le 1 "$sent" "the new ranks read the old ranks' pieces from the agents (held/rbegin sent)"

# ---- 2. agents killed mid-resize: the second level ---------------------------
J2=$(HEAT=$DYNRES_BIN/heat mjsub --parsable -o "$W/heat-%j.out" \
  "$DYNRES_SRC/share/dynres/examples/heat/heat-malleable.sh" "${ARGS[@]}" --ckpt-every 5) || t_fatal "mjsub failed"
wait_state 15 "$C" "$J2" RUNNING
wait_for 30 "heat registered as malleable" registered_times "$J2" 1
sleep 1  # a few background second-level versions
mjcontrol resize "$J2" 2 --wait 60 >"$W/resize2.log" 2>&1 &
rpid=$!
bg_register $rpid
wait_for 30 "the old ranks stopped for the resize" eval "out $J2 | grep -q '^heat: stopped for resize'"
killed=0
for p in $(procs_matching "heat-$J2"); do
  [[ $(cat "/proc/$p/comm" 2>/dev/null) == icagent ]] && kill -9 "$p" && killed=$((killed + 1))
done
assert_le 1 "$killed" "the application's agents were killed mid-resize ($killed)"
wait "$rpid"
assert_eq 0 "$?" "the resize committed without the agents ($(cat "$W/resize2.log"))"
wait_state 90 "$C" "$J2" COMPLETED FAILED
assert_eq COMPLETED "$(job_state "$C" "$J2")" "the job completed after losing its agents"
O=$(out "$J2")
assert_match 'heat: restart version=[0-9]+ iteration=[0-9]+ seconds=[0-9.]+ from_ranks=4 ranks=2' "$O" "2 ranks restored 4 ranks' grid from the second level"
assert_eq "$ref" "$(ck <<<"$O")" "and the job ends with the fixed-size checksum"
t_done
