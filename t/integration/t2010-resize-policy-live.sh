#!/bin/bash
# The malleable policies drive live jobs: mjsched runs minagree and
# perf on a local virtual cluster and their Decisions reach running jobs as
# orders over the resize protocol.
#   minagree — a malleable job holding every node is shrunk so a rigid job
#              can start (the start waits for the commit), and grows back
#              when the rigid job ends;
#   perf     — idle nodes go to the malleable job with the lowest reported
#              MTCT; the one above the threshold is never grown.
. "${DYNRES_SRC:-$(dirname "$0")/../..}/t/lib.sh"
t_begin 120

# restart_with_policy DIR POLICY — rewrite dynres.yaml (no resize guards, so
# the test runs in seconds) and restart the cluster's scheduler
restart_with_policy() {
  local dir=$1 pol=$2 pid
  cat >"$dir/dynres.yaml" <<EOF
scheduler:
  policy: $pol
  tick: 0.2
  malleable:
    min_remaining: 0
    min_resize_interval: 0
    grow_cost: 0
  resize:
    timeout: 5
    backoff: 2
EOF
  pid=$(sched_pid "$dir")
  kill "$pid"
  wait_for 10 "old mjsched gone" pids_gone "$pid"
  t_run mjsched --home "$dir" --daemon
  assert_eq 0 "$T_RC" "mjsched --policy $pol starts ($T_ERR)"
  wait_for 10 "mjsched ($pol) serving" test -S "$dir/mjsched.sock"
}
held() { job_col "$C" "$1" num_nodes; }
registered() { grep -q '^registered' "$C/out-$1.txt" 2>/dev/null; }
ev() { sq "$C" "SELECT kind || ':' || IFNULL(job_id,'') FROM events WHERE kind IN ('start','expand','shrink') ORDER BY id" | tr '\n' ' '; }

# ---- minagree --------------------------------------------------------------
C=$T_TMP/m
boot_cluster "$C" 4 --tick 0.2
restart_with_policy "$C" minagree
write_script "$T_TMP/m.sh" '#!/bin/bash' 'mjtest serve 25'
write_script "$T_TMP/r.sh" '#!/bin/bash' 'sleep 3'
M=$(mjsub --parsable --malleable -N 4 --min-nodes 1 --max-nodes 4 -t 5 -o "$C/out-%j.txt" "$T_TMP/m.sh")
wait_state 10 "$C" "$M" RUNNING
wait_for 10 "job $M registered" registered "$M"
# minagree starts a malleable job at its minimum and grows it with idle nodes
wait_for 10 "job $M grown to 4 nodes" eval "[[ \$(held $M) == 4 ]]"
X=$(mjsub --parsable -N 2 -t 1 -o "$C/out-%j.txt" "$T_TMP/r.sh")
wait_state 10 "$C" "$X" RUNNING
assert_eq 2 "$(held "$M")" "minagree shrank the malleable job to admit the rigid one"
E=$(ev)
assert_match "shrink:$M start:$X" "$E" "the rigid job started after the shrink was committed ($E)"
wait_state 15 "$C" "$X" COMPLETED
wait_for 10 "job $M grown back to 4 nodes" eval "[[ \$(held $M) == 4 ]]"
assert_match "'?committed'?" "$(sq "$C" "SELECT GROUP_CONCAT(DISTINCT state) FROM resize_orders WHERE job_id=$M")" \
  "every order of job $M was committed"
mjcancel "$M" >/dev/null
wait_for 10 "minagree jobs ended" no_active_jobs "$C"
check_allocations_disjoint "$C"

# ---- perf ----------------------------------------------------------------------
C=$T_TMP/p
boot_cluster "$C" 6 --tick 0.2
restart_with_policy "$C" perf
# each job reports its MTCT before it registers ([John24 §4.1]; threshold 4)
write_script "$T_TMP/hi.sh" '#!/bin/bash' 'mjtest perf 10 1 >/dev/null' 'mjtest serve 20'
write_script "$T_TMP/lo.sh" '#!/bin/bash' 'mjtest perf 0.1 1 >/dev/null' 'mjtest serve 20'
write_script "$T_TMP/hold.sh" '#!/bin/bash' 'sleep 2'
# a rigid job holds 2 nodes while both malleable jobs start at their -N 2
H=$(mjsub --parsable -N 2 -t 1 -o "$C/out-%j.txt" "$T_TMP/hold.sh")
wait_state 10 "$C" "$H" RUNNING
HI=$(mjsub --parsable --malleable -N 2 --min-nodes 1 --max-nodes 4 -t 5 -o "$C/out-%j.txt" "$T_TMP/hi.sh")
LO=$(mjsub --parsable --malleable -N 2 --min-nodes 1 --max-nodes 4 -t 5 -o "$C/out-%j.txt" "$T_TMP/lo.sh")
wait_state 10 "$C" "$HI" RUNNING
wait_state 10 "$C" "$LO" RUNNING
wait_for 10 "jobs registered" eval "registered $HI && registered $LO"
wait_state 10 "$C" "$H" COMPLETED
wait_for 10 "the low-MTCT job $LO grown to 4 nodes" eval "[[ \$(held $LO) == 4 ]]"
assert_eq 2 "$(held "$HI")" "the job above the MTCT threshold was not grown"
assert_contains "$(mjstat -j "$HI")" "MTCT=10.000" "mjstat shows the MTCT the policy used"
assert_eq 0 "$(sq "$C" "SELECT COUNT(*) FROM resize_orders WHERE job_id=$HI AND kind='expand'")" "no expand was ever ordered for job $HI"
for j in $HI $LO; do mjcancel "$j" >/dev/null; done
wait_for 10 "perf jobs ended" no_active_jobs "$C"
check_allocations_disjoint "$C"
t_done
