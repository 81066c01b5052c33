#!/usr/bin/env bash
# libmjprof inside a real dynres job: heat runs under mpiexec -n 2
# with LD_PRELOAD=libmjprof.so and MJPROF_INTERVAL=0.3 as a job of a 2-node
# local cluster; the profiler's periodic mj_report_perf calls reach mjsched,
# which shows a positive MTCT for the job in `mjstat -j ID --json`, and each
# rank's summary counts successful reports and no failed one.
. "${DYNRES_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/t/lib.sh"
t_begin 60
LIB=$DYNRES_BUILD/lib/libmjprof.so
[[ -f $LIB ]] || t_skip "libmjprof.so is not built (needs MPI and libmj)"
[[ -x $DYNRES_BIN/heat ]] || t_skip "heat is not built"
command -v mpiexec >/dev/null || t_skip "mpiexec is not installed"
C=$T_TMP/c W=$T_TMP/w
mkdir -p "$W"
boot_cluster "$C" 2 --tick 0.1 --kill-wait 1
write_script "$W/heat.sh" '#!/bin/bash' '#SBATCH -o heat.out' \
  "export LD_PRELOAD=$LIB MJPROF_INTERVAL=0.3 MJPROF_SUMMARY=1" \
  "mpiexec -n 2 $DYNRES_BIN/heat --nx 400 --ny 400 --iters 6000 --no-icheck -q"
id=$(cd "$W" && mjsub --parsable -J heat -N 2 heat.sh) || t_fatal "mjsub failed: $id"
wait_state 20 "$C" "$id" RUNNING || t_fatal "the job did not start"
mtct_of_job() {
  mjstat -j "$id" --json 2>/dev/null | perl -MJSON::PP -0777 -ne 'my $d = decode_json($_);
    $d = $d->{jobs}[0] if ref $d eq "HASH" && exists $d->{jobs}; my $v = ($d->{malleable} // {})->{mtct}; print defined $v ? $v : ""'
}
positive() { local m; m=$(mtct_of_job); [[ -n $m ]] && awk -v m="$m" 'BEGIN { exit !(m > 0 && m < 1e9) }'; }
wait_for 30 "mjsched holds a positive MTCT for job $id" positive
t_log "MTCT of job $id seen by the scheduler: $(mtct_of_job)"
wait_state 40 "$C" "$id" COMPLETED || t_fatal "$(cat "$W/heat.out")"
lines=$(grep -E '^mjprof: rank' "$W/heat.out")
assert_eq 2 "$(grep -c . <<<"$lines")" "one summary per rank"
assert_not_contains "$lines" "reports=0 " "every rank reported"
assert_contains "$lines" "report_errors=0" "no report failed"
t_done
