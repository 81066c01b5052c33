#!/usr/bin/env bash
# mjstat --metrics as users see it, on a state file with hand-made jobs whose
# metrics are computed by hand (mjstat(1) METRICS): default tau, --tau,
# --time-scale, --json and the text table, resize counts from the events.
#
# 4 nodes; times in seconds:
#   job  submit start end   nodes state      wait resp  run  bsld(tau=10) bsld(tau=1)
#   1    1000   1000  1100  2     COMPLETED  0    100   100  1            1
#   2    1010   1100  1105  4     FAILED     90   95    5    9.5          19
#   3    1020   1105  1205  1     COMPLETED  85   185   100  1.85         1.85
#   4    1030   1110  -     1     RUNNING    (not finished: in utilisation only)
#   5    1040   -     -     -     PENDING
#   6    1050   -     -     -     CANCELLED  (cancelled while pending)
# makespan = 1205 - 1000 = 205; node-seconds = 200 + 20 + 100 + 95 (job 4
# until 1205) = 415; utilisation = 415 / (4 x 205) = 0.506098;
# wait = (0+90+85)/3 = 58.333; response = (100+95+185)/3 = 126.667;
# bsld = (1+9.5+1.85)/3 = 4.116667, with tau = 1: (1+19+1.85)/3 = 7.283333.
# --time-scale 0.5 doubles every duration: makespan 410, wait 116.667,
# response 253.333, bsld (tau 10) (1+19+1.85)/3 = 7.283333.
. "${DYNRES_SRC:-$(dirname "$0")/../..}/t/lib.sh"
t_begin 60
C=$T_TMP/c
boot_cluster "$C" 4 --tick 5
vcluster-down --dir "$C" >/dev/null 2>&1   # the state file stays; nothing runs
sq "$C" "
INSERT INTO jobs(id,name,uid,state,kind,req_nodes,min_nodes,max_nodes,node_constraint,time_limit,script,workdir,
                 stdout_path,stderr_path,submit_time,start_time,end_time,num_nodes,exit_code) VALUES
 (1,'a',0,'COMPLETED','rigid',2,2,2,'none',600,'','/','','',1000,1000,1100,2,0),
 (2,'b',0,'FAILED','rigid',4,4,4,'none',600,'','/','','',1010,1100,1105,4,3),
 (3,'c',0,'COMPLETED','rigid',1,1,1,'none',600,'','/','','',1020,1105,1205,1,0),
 (4,'d',0,'RUNNING','rigid',1,1,1,'none',600,'','/','','',1030,1110,NULL,1,NULL),
 (5,'e',0,'PENDING','rigid',1,1,1,'none',600,'','/','','',1040,NULL,NULL,0,NULL),
 (6,'f',0,'CANCELLED','rigid',1,1,1,'none',600,'','/','','',1050,NULL,1060,0,NULL);
INSERT INTO allocations(job_id,nodelist,num_nodes,start_time,end_time) VALUES
 (1,'n[1-2]',2,1000,1100),(2,'n[1-4]',4,1100,1105),(3,'n1',1,1105,1205),(4,'n2',1,1110,NULL);
INSERT INTO events(time,job_id,kind,detail) VALUES
 (1050,1,'expand','from=2 to=4 nodes=n[3-4]'),(1060,1,'shrink','from=4 to=2 nodes=n[3-4]');" ||
  t_fatal "cannot write the hand-made jobs"

# near EXPECTED ACTUAL WHAT — equal within 1e-3 (relative)
near() {
  if awk -v e="$1" -v a="$2" 'BEGIN { d = e - a; if (d < 0) d = -d; exit !(d <= 1e-3 * (e < 0 ? -e : e) + 1e-9) }'; then
    t_pass "$3"
  else
    t_fail "$3: expected $1, got $2"
  fi
}
export DYNRES_HOME=$C
t_run mjstat --metrics --json
assert_eq 0 "$T_RC" "mjstat --metrics --json"
J=$T_OUT
near 205 "$(json_get makespan_s <<<"$J")" "makespan"
near 0.506098 "$(json_get utilisation <<<"$J")" "utilisation (job 4 counted until the last end)"
near 58.333333 "$(json_get avg_wait_s <<<"$J")" "average wait over the finished jobs"
near 126.666667 "$(json_get avg_response_s <<<"$J")" "average response"
near 4.116667 "$(json_get avg_bounded_slowdown <<<"$J")" "average bounded slowdown, default tau 10 s"
assert_eq 10 "$(json_get bsld_tau_s <<<"$J")" "default tau is 10 s"
assert_eq 6 "$(json_get jobs <<<"$J")" "jobs"
assert_eq 3 "$(json_get finished <<<"$J")" "finished jobs"
states=$(perl -MJSON::PP -0777 -ne 'my $b = decode_json($_)->{by_state};
  print join(",", map { "$_=$b->{$_}" } sort keys %$b)' <<<"$J")
assert_eq "CANCELLED=1,COMPLETED=2,FAILED=1,PENDING=1,RUNNING=1" "$states" "jobs by state"
assert_eq 1 "$(json_get expands <<<"$J")" "expand events counted"
assert_eq 1 "$(json_get shrinks <<<"$J")" "shrink events counted"
assert_eq 1 "$(json_get resized_jobs <<<"$J")" "resized jobs"

t_run mjstat --metrics --json --tau 1
near 7.283333 "$(json_get avg_bounded_slowdown <<<"$T_OUT")" "bounded slowdown with --tau 1"
t_run mjstat --metrics --json --time-scale 0.5
near 410 "$(json_get makespan_s <<<"$T_OUT")" "--time-scale 0.5 doubles the makespan"
near 116.666667 "$(json_get avg_wait_s <<<"$T_OUT")" "--time-scale 0.5 doubles the wait"
near 253.333333 "$(json_get avg_response_s <<<"$T_OUT")" "--time-scale 0.5 doubles the response"
near 7.283333 "$(json_get avg_bounded_slowdown <<<"$T_OUT")" "--time-scale 0.5: slowdown with scaled run times"
near 0.506098 "$(json_get utilisation <<<"$T_OUT")" "--time-scale keeps the utilisation"

t_run mjstat --metrics
assert_eq 0 "$T_RC" "mjstat --metrics (text)"
assert_match "makespan +205\.0 s" "$T_OUT" "text: makespan"
assert_match "average utilisation +50\.6 %" "$T_OUT" "text: utilisation"
assert_match "average wait +58\.3 s" "$T_OUT" "text: wait"
assert_match "average response +126\.7 s" "$T_OUT" "text: response"
assert_match "average bounded slowdown +4\.12 \(tau = 10 s\)" "$T_OUT" "text: slowdown and tau"
assert_match "resizes +1 expands, 1 shrinks \(1 jobs resized\)" "$T_OUT" "text: resizes"
t_run mjstat --metrics --tau -1
assert_ne 0 "$T_RC" "a negative --tau is refused"
t_done
