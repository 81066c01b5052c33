#!/usr/bin/env bash
# sbatch habits of mjsub, and mjcontrol hold/release/show, on a
# real local cluster of 4 nodes:
#   precedence: `mjsub -N 4` over `#SBATCH -N 2-8` is a rigid 4-node job, the
#     script's other fields stay; -t 0 is no limit;
#   --wrap: the command runs as the job (name "wrap"); refused with a script;
#   --hold: stays PENDING (JobHeldUser) on an idle cluster until
#     `mjcontrol release`, then completes; mjcontrol hold of a pending job,
#     of a running job (refused), show job; cross-user hold refused (root only);
#   --begin now+2: PENDING (BeginTime), starts no earlier than 2 s after
#     submission; bad --begin refused;
#   --dependency: after, afterok, afternotok (never satisfied once the job
#     completed: DependencyNeverSatisfied, stays pending), afterany,
#     singleton; unknown job, unknown type and '?' refused;
#   --array=1-7:2%2: four tasks, never more than two running (reason
#     JobArrayTaskLimit), SLURM_ARRAY_* and %A_%a, mjstat ids A_T, mjcancel
#     of A_T, A_[x-y] and A; bad arrays and unknown tasks refused;
#   --test-only: the expected start behind a running job, nothing recorded;
#   tasks (nodes of 4 CPUs): -n 6 -> 2 nodes, -n 6 -c 2 -> 3 nodes,
#     --ntasks-per-node 2 -N 3 -> 6 tasks; SLURM_NTASKS reaches the job and
#     `srun cmd` runs that many tasks; impossible combinations refused;
#   script arguments, -W (exit status of the job), --export=VAR,VAR=value,
#     SBATCH_* input variables (over the script, under the command line),
#     output patterns %u %A %a %5j %N;
#   job environment: SLURM_JOB_ID, SLURM_JOB_NAME, SLURM_SUBMIT_DIR,
#     SLURM_JOB_NUM_NODES, SLURM_JOB_NODELIST, SLURM_NTASKS describe the dynres
#     job; `srun -n 3 cmd` runs 3 local copies with SLURM_PROCID 0..2, plain
#     `srun cmd` one per task of the job (the srun shim of mjstepd(8)).
# About 10 s.
. "${DYNRES_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/t/lib.sh"
t_begin 90

C=$T_TMP/cluster
W=$T_TMP/work
mkdir -p "$W"
cd "$W" || t_fatal "cd $W"
boot_cluster "$C" 4 --tick 0.2 --kill-wait 1 --cpus-per-node 4

# ---- precedence, -t 0
write_script "$W/range.sh" '#!/bin/bash' '#SBATCH -N 2-8' '#SBATCH -J fromscript -t 10' '#SBATCH -o range-%j.out' \
  'echo "nodes=$MJ_JOB_NUM_NODES"'
t_run mjsub --parsable -N 4 -t 0 range.sh
assert_eq 0 "$T_RC" "mjsub -N 4 -t 0 over #SBATCH -N 2-8 ($T_ERR)"
R=$T_OUT
t_run mjstat -j "$R" --json
assert_eq rigid "$(json_get kind <<<"$T_OUT")" "-N 4 over #SBATCH -N 2-8: rigid"
assert_eq 4 "$(json_get nodes_requested <<<"$T_OUT")" "-N 4 over #SBATCH -N 2-8: 4 nodes"
assert_eq 4 "$(json_get max_nodes <<<"$T_OUT")" "-N 4 over #SBATCH -N 2-8: no range left"
assert_eq fromscript "$(json_get name <<<"$T_OUT")" "the script's name stays"
assert_eq -1 "$(json_get time_limit_s <<<"$T_OUT")" "-t 0 over #SBATCH -t 10: no limit"
wait_state 20 "$C" "$R" COMPLETED
assert_file_content "$W/range-$R.out" "nodes=4" "the job ran on 4 nodes"

# ---- --wrap
t_run mjsub --parsable -o wrap-%j.out --wrap 'echo "wrapped $((20 + 22)) $MJ_JOB_NAME"'
assert_eq 0 "$T_RC" "mjsub --wrap ($T_ERR)"
WR=$T_OUT
wait_state 20 "$C" "$WR" COMPLETED
assert_file_content "$W/wrap-$WR.out" "wrapped 42 wrap" "--wrap runs the command with /bin/sh, job name wrap"
t_run mjsub --wrap true range.sh
assert_ne 0 "$T_RC" "--wrap with a script is refused"
assert_contains "$T_ERR" "--wrap" "the message names --wrap"

# ---- --hold, mjcontrol
write_script "$W/quick.sh" '#!/bin/bash' 'echo ran'
H=$(mjsub --parsable --hold quick.sh) || t_fatal "mjsub --hold"
sleep 1   # five ticks on an idle cluster
assert_eq "PENDING JobHeldUser" "$(sq "$C" "SELECT state, reason FROM jobs WHERE id=$H" | tr '|' ' ')" \
  "a held job stays pending on an idle cluster"
t_run mjcontrol show job "$H"
assert_contains "$T_OUT" "JobId=$H" "mjcontrol show job"
assert_contains "$T_OUT" "Held=yes" "mjcontrol show job says it is held"
if ((EUID == 0)) && command -v runuser >/dev/null; then
  chmod 755 "$T_TMP" && chmod 777 "$C" && chmod 666 "$C"/state.db*
  before=$(state_digest "$C")
  t_run runuser -u nobody -- env DYNRES_HOME="$C" "$DYNRES_BIN/mjcontrol" release "$H"
  assert_eq 1 "$T_RC" "release of root's job as nobody exits 1"
  assert_contains "$T_ERR" "Access/permission denied" "release as nobody: permission denied"
  assert_eq "$before" "$(state_digest "$C")" "refused release changes nothing"
else
  t_log "not root (or no runuser): cross-user release not checked here"
fi
t_run mjcontrol release "$H"
assert_eq 0 "$T_RC" "mjcontrol release ($T_ERR)"
wait_state 20 "$C" "$H" COMPLETED
write_script "$W/long.sh" '#!/bin/bash' 'sleep 30'
L=$(mjsub --parsable -N 4 long.sh) || t_fatal "mjsub long"
wait_state 20 "$C" "$L" RUNNING || t_fatal "long job did not start"
P=$(mjsub --parsable quick.sh) || t_fatal "mjsub quick"
t_run mjcontrol hold "$P"
assert_eq 0 "$T_RC" "mjcontrol hold of a pending job ($T_ERR)"
t_run mjcontrol hold "$L"
assert_eq 1 "$T_RC" "mjcontrol hold of a running job fails"
assert_contains "$T_ERR" "not pending" "... and says why"
t_run mjcontrol hold 99999
assert_contains "$T_ERR" "invalid job id 99999" "mjcontrol hold of an unknown job"
mjcancel "$L"
wait_state 20 "$C" "$L" CANCELLED
sleep 0.6
assert_eq "PENDING JobHeldUser" "$(sq "$C" "SELECT state, reason FROM jobs WHERE id=$P" | tr '|' ' ')" \
  "held by mjcontrol: still pending on a free cluster"
mjcontrol release "$P"
wait_state 20 "$C" "$P" COMPLETED

# ---- --begin
t_run mjsub --begin=2026-13-01 quick.sh
assert_ne 0 "$T_RC" "a bad --begin is refused"
assert_contains "$T_ERR" "--begin: invalid time '2026-13-01'" "the message names the value"
B=$(mjsub --parsable --begin now+2 quick.sh) || t_fatal "mjsub --begin"
assert_eq "PENDING BeginTime" "$(sq "$C" "SELECT state, reason FROM jobs WHERE id=$B" | tr '|' ' ')" "--begin now+2: waits"
wait_state 20 "$C" "$B" COMPLETED
assert_le 2 "$(sq "$C" "SELECT start_time - submit_time FROM jobs WHERE id=$B")" "started at least 2 s after submission"

# ---- SLURM_* of the job, srun shim with the local launcher
write_script "$W/env.sh" '#!/bin/bash' '#SBATCH -N 2 -J envjob' \
  'echo "id=$SLURM_JOB_ID name=$SLURM_JOB_NAME nodes=$SLURM_JOB_NUM_NODES list=$SLURM_JOB_NODELIST ntasks=$SLURM_NTASKS"' \
  'echo "submit=$SLURM_SUBMIT_DIR"' \
  'srun -n 3 bash -c '"'"'echo "p$SLURM_PROCID/$SLURM_NTASKS"'"'"' | sort | tr "\n" " "; echo' \
  'srun --overlap bash -c '"'"'echo "d$SLURM_PROCID"'"'"' | sort | tr "\n" " "; echo'
EJ=$(mjsub --parsable -o env.out env.sh) || t_fatal "mjsub env.sh"
wait_state 20 "$C" "$EJ" COMPLETED
NL=$(job_col "$C" "$EJ" nodelist)
assert_file_content "$W/env.out" "id=$EJ name=envjob nodes=2 list=$NL ntasks=2
submit=$W
p0/3 p1/3 p2/3 
d0 d1 " "SLURM_* describe the dynres job; srun -n 3 and plain srun run local tasks"

# ---- tasks and CPUs
assert_eq "4 4 4 4" "$(sq "$C" "SELECT cpus FROM nodes ORDER BY id" | xargs)" "vcluster-boot --cpus-per-node 4"
write_script "$W/tasks.sh" '#!/bin/bash' 'echo "$SLURM_JOB_NUM_NODES $SLURM_NTASKS $MJ_NTASKS $SLURM_CPUS_PER_TASK $SLURM_CPUS_ON_NODE"' \
  'srun bash -c '"'"'echo "t$SLURM_PROCID"'"'"' | wc -l'
tasks_case() {  # OPTIONS... -> "kind nodes ntasks" and the job's output
  local id
  id=$(mjsub --parsable -o "tasks-%j.out" "$@" tasks.sh) || { echo "mjsub $* failed"; return; }
  wait_state 20 "$C" "$id" COMPLETED >/dev/null
  echo "$(sq "$C" "SELECT kind, req_nodes, ntasks FROM jobs WHERE id=$id" | tr '|' ' ') / $(tr '\n' ' ' <"$W/tasks-$id.out")"
}
assert_eq "rigid 2 6 / 2 6 6 1 4 6 " "$(tasks_case -n 6)" "-n 6 on 4-CPU nodes: 2 nodes, 6 tasks, srun runs 6"
assert_eq "rigid 3 6 / 3 6 6 2 4 6 " "$(tasks_case -n 6 -c 2)" "-n 6 -c 2: 3 nodes"
assert_eq "rigid 3 6 / 3 6 6 1 4 6 " "$(tasks_case --ntasks-per-node 2 -N 3)" "--ntasks-per-node 2 -N 3: 6 tasks"
assert_eq "rigid 2 0 / 2 2 2 1 4 2 " "$(tasks_case -N 2)" "-N 2 alone: one task per node"
t_run mjsub --parsable --hold -n 2 -N 3 tasks.sh   # Slurm: warns and uses 2 nodes
assert_contains "$T_ERR" "can't run 2 processes on 3 nodes, setting nnodes to 2" "-n 2 -N 3: Slurm's warning"
assert_eq "rigid 2 2" "$(sq "$C" "SELECT kind, req_nodes, ntasks FROM jobs WHERE id=$T_OUT" | tr '|' ' ')" "-n 2 -N 3: 2 nodes"
t_run mjsub --parsable --hold -n 6 -N 1-4 tasks.sh  # a node range with tasks: narrowed to 2-4 nodes
assert_eq "moldable 2 4 6" "$(sq "$C" "SELECT kind, min_nodes, max_nodes, ntasks FROM jobs WHERE id=$T_OUT" | tr '|' ' ')" \
  "-n 6 -N 1-4 on 4-CPU nodes: a moldable job of 2 to 4 nodes"
for id in $(sq "$C" "SELECT id FROM jobs WHERE state='PENDING'"); do mjcancel "$id"; done
before=$(state_digest "$C")
for args in "-c 5|--cpus-per-task (5) is more than the CPUs of a node (4)" \
  "-n 9 -N 2|--ntasks (9) does not fit on --nodes (2)" "-n 20 -N 1-2|does not fit on at most 2 nodes" \
  "--ntasks-per-node 3 -c 2|--ntasks-per-node (3) x --cpus-per-task (2)" \
  "-n 17|needs 5 nodes of 4 CPUs" "-n 0|--ntasks: invalid task count '0'" "-c x|--cpus-per-task: invalid CPU count 'x'"; do
  # shellcheck disable=SC2086
  t_run mjsub ${args%%|*} tasks.sh
  assert_ne 0 "$T_RC" "mjsub ${args%%|*} refused"
  assert_contains "$T_ERR" "${args#*|}" "mjsub ${args%%|*} says why"
done
t_run mjcontrol update node n9 cpus=2
assert_contains "$T_ERR" "no node named 'n9'" "update of an unknown node"
t_run mjcontrol update node ALL cpus=0
assert_contains "$T_ERR" "invalid CPU count '0'" "update with 0 CPUs"
assert_eq "$before" "$(state_digest "$C")" "refused task requests and node updates changed nothing"

# ---- script arguments, -W, --export lists, SBATCH_*, output patterns
write_script "$W/args.sh" '#!/bin/bash' '#SBATCH -J scriptname' \
  'echo "$# [$1] [$2] FOO=${FOO:-unset} BAR=${BAR:-unset} HOME=${HOME:-unset}"' 'exit ${EXIT:-0}'
t_run env FOO=1 BAR=2 EXIT=3 mjsub -W -o args-%j.out --export=FOO,BAR=7,EXIT args.sh "x y" -N 2
assert_eq 3 "$T_RC" "mjsub -W exits with the job's exit code"
AR=${T_OUT##* }
assert_file_content "$W/args-$AR.out" "3 [x y] [-N] FOO=1 BAR=7 HOME=unset" \
  "script arguments (options after the script are its own); --export=FOO,BAR=7 passes only those"
t_run env SBATCH_JOB_NAME=envname SBATCH_TIMELIMIT=7 mjsub --parsable -t 9 args.sh
EN=$T_OUT
assert_eq "envname 540" "$(sq "$C" "SELECT name, time_limit FROM jobs WHERE id=$EN" | tr '|' ' ')" \
  "SBATCH_JOB_NAME over #SBATCH -J; -t over SBATCH_TIMELIMIT"
t_run env SBATCH_TIMELIMIT=bogus mjsub args.sh
assert_contains "$T_ERR" "SBATCH_TIMELIMIT" "a bad SBATCH_* value names the variable"
t_run mjsub -W -o 'pat-%u-%A-%a-%5j-%N.out' args.sh
PJ=${T_OUT##* }
assert_eq 0 "$T_RC" "mjsub -W of a job that exits 0"
PN=$(job_col "$C" "$PJ" nodelist)
assert_eq 1 "$(ls "$W/pat-$(id -un)-$PJ-4294967294-$(printf '%05d' "$PJ")-$PN.out" 2>/dev/null | wc -l)" \
  "output pattern %u-%A-%a-%5j-%N"

# ---- --array
write_script "$W/arr.sh" '#!/bin/bash' \
  'echo "$SLURM_ARRAY_JOB_ID $SLURM_ARRAY_TASK_ID $SLURM_ARRAY_TASK_COUNT $SLURM_ARRAY_TASK_MIN $SLURM_ARRAY_TASK_MAX"' 'sleep 0.6'
AA=$(mjsub --parsable --array=1-7:2%2 -o 'arr-%A_%a.out' arr.sh) || t_fatal "mjsub --array"
assert_eq "1 3 5 7" "$(sq "$C" "SELECT array_task_id FROM jobs WHERE array_job_id=$AA ORDER BY array_task_id" | xargs)" \
  "--array=1-7:2: tasks 1 3 5 7 of array $AA"
seen_limit=0 max_running=0
for _ in $(seq 60); do
  r=$(count_jobs "$C" "array_job_id=$AA AND state='RUNNING'")
  ((r > max_running)) && max_running=$r
  [[ $(count_jobs "$C" "array_job_id=$AA AND reason='JobArrayTaskLimit'") -gt 0 ]] && seen_limit=1
  [[ $(count_jobs "$C" "array_job_id=$AA AND state IN ('PENDING','RUNNING')") == 0 ]] && break
  sleep 0.1
done
wait_for 20 "all array tasks completed" eval '[[ $(count_jobs "$C" "array_job_id=$AA AND state='"'"'COMPLETED'"'"'") == 4 ]]'
assert_le "$max_running" 2 "%2: at most 2 tasks ran at once (seen $max_running)"
assert_eq 1 "$seen_limit" "waiting tasks showed reason JobArrayTaskLimit"
assert_le "$(sq "$C" "SELECT MAX(n) FROM (SELECT (SELECT COUNT(*) FROM jobs b WHERE b.array_job_id=$AA AND
  b.start_time <= a.start_time AND b.end_time > a.start_time) AS n FROM jobs a WHERE a.array_job_id=$AA)")" 2 \
  "%2 from the recorded start and end times"
assert_file_content "$W/arr-${AA}_5.out" "$AA 5 4 1 7" "SLURM_ARRAY_JOB_ID/TASK_ID/COUNT/MIN/MAX and %A_%a"
t_run mjstat -t all -j "$AA" -o %i -h
assert_eq "${AA}_1 ${AA}_3 ${AA}_5 ${AA}_7" "$(echo $T_OUT)" "mjstat -j ARRAY lists its tasks as A_T"
BA=$(mjsub --parsable --array=0-3 --hold quick.sh) || t_fatal "mjsub --array --hold"
mjcancel "${BA}_1" && mjcancel "${BA}_[2-3]"
assert_eq "PENDING CANCELLED CANCELLED CANCELLED" \
  "$(sq "$C" "SELECT state FROM jobs WHERE array_job_id=$BA ORDER BY array_task_id" | xargs)" "mjcancel A_T and A_[x-y]"
t_run mjcancel "${BA}_9"
assert_contains "$T_ERR" "invalid job id ${BA}_9" "mjcancel of an unknown array task"
assert_ne 0 "$T_RC" "... exits non-zero, as scancel does"
t_run mjcancel "${BA}_[7-9]"
assert_ne 0 "$T_RC" "mjcancel of a task range naming no task exits non-zero"
assert_contains "$T_ERR" "${BA}_[7-9]" "... and names the range"
assert_eq PENDING "$(sq "$C" "SELECT state FROM jobs WHERE array_job_id=$BA AND array_task_id=0")" "... and cancels nothing"
mjcancel "$BA"
assert_eq 0 "$(count_jobs "$C" "array_job_id=$BA AND state='PENDING'")" "mjcancel A cancels the array's tasks"
for args in "5-1|goes backwards" "1-3%0|%0" "x|invalid number 'x'"; do
  t_run mjsub --array="${args%%|*}" quick.sh
  assert_ne 0 "$T_RC" "--array=${args%%|*} refused"
  assert_contains "$T_ERR" "${args#*|}" "--array=${args%%|*} says why"
done

# ---- --test-only: when the job would start (policy replayed on time limits), nothing recorded
write_script "$W/gate.sh" '#!/bin/bash' 'while [[ ! -e $MJ_SUBMIT_DIR/$MJ_JOB_NAME.go ]]; do sleep 0.05; done'
G=$(mjsub --parsable -N 4 -t 2 -J tgate gate.sh) || t_fatal "mjsub tgate"
wait_state 20 "$C" "$G" RUNNING || t_fatal "tgate did not start"
n_before=$(count_jobs "$C")
t_run mjsub --test-only -N 2 quick.sh
expected=$(date -d "@$(awk -v s="$(job_col "$C" "$G" start_time)" 'BEGIN{printf "%d", s + 120}')" +%Y-%m-%dT%H:%M:%S)
assert_eq "mjsub: Job to start at $expected using 2 node(s) (policy easy); not submitted" "$T_OUT" \
  "--test-only: start when the running job reaches its 2-minute limit"
t_run mjsub --test-only --hold quick.sh
assert_contains "$T_OUT" "could not start" "--test-only of a held job"
t_run mjsub --test-only -N 9 quick.sh
assert_ne 0 "$T_RC" "--test-only still checks the request"
assert_eq "$n_before" "$(count_jobs "$C")" "--test-only records nothing"
touch "$W/tgate.go"
wait_state 20 "$C" "$G" COMPLETED

# ---- --dependency
write_script "$W/gate.sh" '#!/bin/bash' 'while [[ ! -e $MJ_SUBMIT_DIR/$MJ_JOB_NAME.go ]]; do sleep 0.05; done'
A=$(mjsub --parsable -J ga gate.sh) || t_fatal "mjsub gate"
wait_state 20 "$C" "$A" RUNNING || t_fatal "gate job did not start"
OK=$(mjsub --parsable -d "afterok:$A" quick.sh) || t_fatal "mjsub afterok"
NOK=$(mjsub --parsable --dependency="afternotok:$A" quick.sh) || t_fatal "mjsub afternotok"
ANY=$(mjsub --parsable -d "afterany:$A" quick.sh) || t_fatal "mjsub afterany"
AFT=$(mjsub --parsable -d "after:$A" quick.sh) || t_fatal "mjsub after"
wait_state 20 "$C" "$AFT" COMPLETED
sleep 0.6
for j in $OK $NOK $ANY; do
  assert_eq "PENDING Dependency" "$(sq "$C" "SELECT state, reason FROM jobs WHERE id=$j" | tr '|' ' ')"     "job $j waits for $A (Dependency) on a free cluster"
done
touch "$W/ga.go"
wait_state 20 "$C" "$A" COMPLETED
wait_state 20 "$C" "$OK" COMPLETED
wait_state 20 "$C" "$ANY" COMPLETED
wait_for 10 "afternotok of a completed job: never satisfied" eval \
  '[[ $(sq "$C" "SELECT state || \" \" || reason FROM jobs WHERE id=$NOK") == "PENDING DependencyNeverSatisfied" ]]'
assert_le "$(job_col "$C" "$A" end_time)" "$(job_col "$C" "$OK" start_time)" "afterok job started after $A ended"
# afterok of a job that failed can never be satisfied: the job says so and never starts
write_script "$W/fails.sh" '#!/bin/bash' 'exit 3'
FA=$(mjsub --parsable -o /dev/null "$W/fails.sh") || t_fatal "mjsub of a failing job"
FOK=$(mjsub --parsable -d "afterok:$FA" quick.sh) || t_fatal "mjsub afterok of the failing job"
wait_state 20 "$C" "$FA" FAILED
wait_for 10 "afterok of a failed job: never satisfied" eval \
  '[[ $(sq "$C" "SELECT state || \" \" || reason FROM jobs WHERE id=$FOK") == "PENDING DependencyNeverSatisfied" ]]'
sleep 0.6
assert_eq null "$(mjstat -j "$FOK" --json | json_get start_time)" "a job whose afterok failed never starts"
t_run mjstat -j "$FOK"
assert_contains "$T_OUT" "DependencyNeverSatisfied" "mjstat shows DependencyNeverSatisfied"
mjcancel "$FOK"
S1=$(mjsub --parsable -J solo -d singleton gate.sh) || t_fatal "mjsub singleton 1"
wait_state 20 "$C" "$S1" RUNNING || t_fatal "first singleton did not start"
S2=$(mjsub --parsable -J solo -d singleton quick.sh) || t_fatal "mjsub singleton 2"
sleep 0.6
assert_eq "PENDING Dependency" "$(sq "$C" "SELECT state, reason FROM jobs WHERE id=$S2" | tr '|' ' ')"   "second singleton waits for the first"
touch "$W/solo.go"
wait_state 20 "$C" "$S2" COMPLETED
assert_le "$(job_col "$C" "$S1" end_time)" "$(job_col "$C" "$S2" start_time)" "singletons never overlap"
before=$(state_digest "$C")
for args in "afterok:99999|job 99999 does not exist" "bogus:$A|unknown type 'bogus'" "afterok:$A?afterok:$OK|'?'" \
  "afterok:x|invalid job id 'x'"; do
  t_run mjsub -d "${args%%|*}" quick.sh
  assert_ne 0 "$T_RC" "mjsub -d ${args%%|*} refused"
  assert_contains "$T_ERR" "${args#*|}" "mjsub -d ${args%%|*} names the problem"
done
assert_eq "$before" "$(state_digest "$C")" "refused dependencies recorded nothing"
mjcancel "$NOK"

# ---- -w/--nodelist and -x/--exclude -----------------------------------------
wait_for 30 "the cluster is idle" no_active_jobs "$C"
write_script "$W/hold.sh" '#!/bin/bash' 'sleep 2'
H=$(mjsub --parsable -N 1 -w n3 hold.sh)                 # n3 busy for 2 s
WJ=$(mjsub --parsable -N 2 -w n3 quick.sh)               # needs n3: waits, then gets n3 and one more
XJ=$(mjsub --parsable -N 2 -x 'n[1-2]' quick.sh)         # never n1 or n2
wait_state 20 "$C" "$WJ" COMPLETED
wait_state 20 "$C" "$XJ" COMPLETED
assert_eq n3 "$(job_col "$C" "$H" nodelist)" "-w n3: the job ran on n3"
assert_eq 'n[1,3]' "$(job_col "$C" "$WJ" nodelist)" "-w n3 -N 2: the job got n3 and the lowest idle node"
assert_eq 2 "$(job_col "$C" "$WJ" num_nodes)" "-w n3 -N 2: and one more node"
assert_le "$(job_col "$C" "$H" end_time)" "$(job_col "$C" "$WJ" start_time)" "-w waited for its node"
assert_eq "n[3-4]" "$(job_col "$C" "$XJ" nodelist)" "-x n[1-2]: the job ran on the other nodes"
assert_eq 3 "$(job_col "$C" "$(mjsub --parsable -N 1 -w 'n[1-3]' --hold quick.sh)" req_nodes)" "-w with 3 nodes raises -N 1 to 3"
before=$(state_digest "$C")
for args in "-w n9|no node 'n9' in this cluster" "-x n[1-4]|leaves at most 0 nodes" "-w n1 -x n1|both name n1" \
  "-w n[1|bad node list" "-w n1 --malleable|cannot be combined with --malleable" "-w n[1-5]|more than the cluster has"; do
  # shellcheck disable=SC2086
  t_run mjsub ${args%%|*} quick.sh
  assert_ne 0 "$T_RC" "mjsub ${args%%|*} refused"
  assert_contains "$T_ERR" "${args#*|}" "mjsub ${args%%|*} names the problem"
done
assert_eq "$before" "$(state_digest "$C")" "refused -w/-x recorded nothing"
check_started_once "$C"
check_allocations_disjoint "$C"
t_done
