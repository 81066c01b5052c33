#!/usr/bin/env bash
# CLI integration: every bad input to mjsub (and mjcancel/mjstat) fails with
# a non-zero exit code, a message naming the option or directive, and leaves
# the state file exactly as it was; good input (options overriding
# directives, stdin scripts, --parsable, --json, %j/%x output names) works.
#
# Boots a 4-node local cluster (tick 0.2 s); about 10 s.
. "${DYNRES_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/t/lib.sh"
t_begin 90

C=$T_TMP/cluster
W=$T_TMP/work
mkdir -p "$W"
cd "$W" || t_fatal "cd $W"
boot_cluster "$C" 4 --tick 0.2 --kill-wait 1
t_log "cluster up: mjsched pid $(sched_pid "$C")"

write_script "$W/ok.sh" '#!/bin/sh' 'echo ok'

# ------------------------------------------------------------------ bad input
# bad DESCRIPTION NEEDLE[|NEEDLE...] -- CMD...   (CMD runs with </dev/null)
# bad_stdin FILE DESCRIPTION NEEDLES -- CMD...  (CMD reads FILE on stdin)
_bad_check() {
  local what=$1 needles=$2 before=$3 n
  if ((T_RC == 0)); then
    t_fail "$what: exit code 0 (stdout: $T_OUT)"
  else
    t_pass "$what: exit code $T_RC"
  fi
  IFS='|' read -r -a arr <<<"$needles"
  for n in "${arr[@]}"; do assert_contains "$T_ERR" "$n" "$what: stderr names '$n'"; done
  assert_eq "" "$T_OUT" "$what: nothing on stdout"
  assert_eq "$before" "$(state_digest "$C")" "$what: state file unchanged"
}
bad() {
  local what=$1 needles=$2 before
  shift 3  # DESCRIPTION NEEDLES --
  before=$(state_digest "$C")
  t_run "$@"
  _bad_check "$what" "$needles" "$before"
}
bad_stdin() {
  local in=$1 what=$2 needles=$3 before
  shift 4  # FILE DESCRIPTION NEEDLES --
  before=$(state_digest "$C")
  t_run_stdin "$in" "$@"
  _bad_check "$what" "$needles" "$before"
}

# node counts and ranges
bad "min > max" "--min-nodes|--max-nodes" -- mjsub --min-nodes 3 --max-nodes 2 ok.sh
bad "-N MIN-MAX with min > max" "--min-nodes" -- mjsub -N 3-2 ok.sh
bad "--nodes above [min,max]" "--nodes|outside" -- mjsub --min-nodes 1 --max-nodes 2 --nodes 3 ok.sh
bad "--nodes below [min,max]" "--nodes|outside" -- mjsub --min-nodes 2 --max-nodes 3 -N 1 ok.sh
bad "more nodes than the cluster has" "--nodes|cluster has (4)" -- mjsub -N 5 ok.sh
bad "range above the cluster" "--min-nodes|cluster" -- mjsub --min-nodes 5 --max-nodes 8 ok.sh
bad "constraint without admissible size" "--node-constraint|[3, 3]" -- \
  mjsub --min-nodes 3 --max-nodes 3 --node-constraint even ok.sh
bad "rigid size not admissible" "--node-constraint" -- mjsub -N 3 --node-constraint pof2 ok.sh
bad "unknown constraint" "--node-constraint|prime" -- mjsub --node-constraint prime ok.sh
bad "--rigid with a range" "--rigid" -- mjsub --rigid -N 2-3 ok.sh
bad "zero nodes" "--nodes" -- mjsub -N 0 ok.sh
bad "non-numeric nodes" "--nodes|four" -- mjsub -N four ok.sh
bad "alias --min-nodes-invasic bad" "--min-nodes" -- mjsub --min-nodes-invasic x ok.sh

# time limits
bad "malformed time 1:9x" "--time|1:9x" -- mjsub -t 1:9x ok.sh
bad "malformed time abc" "--time|abc" -- mjsub -t abc ok.sh
bad "malformed time 1:2:3:4" "--time|1:2:3:4" -- mjsub --time=1:2:3:4 ok.sh
bad "negative time" "--time" -- mjsub -t=-5 ok.sh

# power
bad "bad --export variable" "--export|1BAD" -- mjsub --export=1BAD ok.sh
bad "negative power" "--min-power|negative" -- mjsub --min-power -5 ok.sh
bad "negative power (=)" "--max-power|negative" -- mjsub --max-power=-1 ok.sh
bad "non-numeric power" "--max-power|abc" -- mjsub --max-power abc ok.sh
bad "power with a unit" "--min-power|100W" -- mjsub --min-power 100W ok.sh
bad "min power > max power" "--min-power|--max-power" -- mjsub --min-power 200 --max-power 100 ok.sh

# scripts
write_script "$W/bogus.sh" '#!/bin/bash' '#SBATCH -N 1' '#SBATCH --bogus' 'echo never'
bad "unknown directive" "line 3|--bogus" -- mjsub bogus.sh
write_script "$W/badval.sh" '#!/bin/bash' '# a comment' '' '#SBATCH --nodes=abc' 'echo never'
bad "bad directive value" "line 4|--nodes|abc" -- mjsub badval.sh
write_script "$W/badtime.sh" '#!/bin/bash' '#MJ -t 1:9x' 'true'
bad "bad #MJ time" "line 2|--time|1:9x" -- mjsub badtime.sh
write_script "$W/range.sh" '#!/bin/bash' '#SBATCH --min-nodes=3 --max-nodes=2' 'true'
bad "min > max from directives" "--min-nodes|--max-nodes" -- mjsub range.sh
write_script "$W/quote.sh" '#!/bin/bash' '#SBATCH -J "unterminated' 'true'
bad "unterminated quote" "line 2|quote" -- mjsub quote.sh
write_script "$W/noval.sh" '#!/bin/bash' '#SBATCH -N' 'true'
bad "directive without value" "line 2|-N|needs a value" -- mjsub noval.sh
write_script "$W/word.sh" '#!/bin/bash' '#SBATCH nodes=2' 'true'
bad "directive that is not an option" "line 2|nodes=2" -- mjsub word.sh
write_script "$W/power.sh" '#!/bin/bash' '#MJ --min-power=-10' 'true'
bad "negative power directive" "line 2|--min-power" -- mjsub power.sh
write_script "$W/alias.sh" '#!/bin/bash' '#MJ --node-constraints=even' '#MJ --min-nodes-invasic 3 --max-nodes-invasic 3' 'true'
bad "constraint from alias directives" "--node-constraint" -- mjsub alias.sh
bad_stdin "$W/bogus.sh" "unknown directive on stdin" "line 3|--bogus" -- mjsub
bad "missing script" "cannot read job script|$W/missing.sh" -- mjsub "$W/missing.sh"
bad "directory as script" "cannot read job script" -- mjsub "$W"
: >"$W/empty.sh"
bad "empty script" "empty" -- mjsub empty.sh
bad_stdin /dev/null "empty stdin" "empty" -- mjsub
printf '#!/bin/sh\n\0\0binary' >"$W/binary.sh"
bad "binary script" "binary" -- mjsub binary.sh
if [[ $(id -u) -ne 0 ]]; then
  write_script "$W/secret.sh" '#!/bin/sh' 'true'
  chmod 000 "$W/secret.sh"
  bad "unreadable script" "cannot read job script|secret.sh" -- mjsub secret.sh
else
  t_log "running as root: an unreadable file cannot be made; the missing-script case stands in for it"
fi

# command line
bad "unknown option" "--bogus" -- mjsub --bogus ok.sh
bad "option without value" "--time" -- mjsub --time
bad "wrong cluster" "no state file|$T_TMP/nowhere" -- mjsub --home "$T_TMP/nowhere" ok.sh

# the other tools
bad "mjcancel of an unknown id" "invalid job id 9999" -- mjcancel 9999
bad "mjcancel without ids" "no job id" -- mjcancel
bad "mjstat -j unknown" "invalid job id 9999" -- mjstat -j 9999
bad "mjstat bad column" "--format|bogus" -- mjstat -o jobid,bogus
for tool in "mjsub ok.sh" "mjstat" "mjcancel 1" "mjstat -j 1"; do
  # shellcheck disable=SC2086
  bad "$tool without DYNRES_HOME" "DYNRES_HOME is not set|vcluster-boot" -- env -u DYNRES_HOME $tool
done
assert_eq 0 "$(count_jobs "$C")" "no job was recorded by any bad input"

# ------------------------------------------------------------------ good input
# options on the command line override the script's directives
write_script "$W/over.sh" '#!/bin/bash' \
  '#SBATCH -J fromscript' '#SBATCH --time=10' '#SBATCH -N 1' '#MJ --max-power 90  # watts' \
  '#SBATCH -o over-%j.out' 'echo "name=$MJ_JOB_NAME nodes=$MJ_JOB_NUM_NODES list=$MJ_JOB_NODELIST"'
t_run mjsub -J fromcli -t 0:30 -N 2 over.sh
assert_eq 0 "$T_RC" "override: mjsub exit code (stderr: $T_ERR)"
assert_match '^Submitted batch job [0-9]+$' "$T_OUT" "override: default output"
OVER=${T_OUT##* }
t_run mjstat -j "$OVER" --json
assert_eq 0 "$T_RC" "mjstat -j $OVER --json"
J=$T_OUT
assert_eq fromcli "$(json_get name <<<"$J")" "override: name from the command line"
assert_eq 60 "$(json_get time_limit_s <<<"$J")" "override: time limit from the command line (0:30 rounds up to a minute, as Slurm)"
assert_eq 2 "$(json_get nodes_requested <<<"$J")" "override: nodes from the command line"
assert_eq rigid "$(json_get kind <<<"$J")" "override: kind"
assert_eq 90 "$(json_get max_power_w <<<"$J")" "override: directive not overridden stays"
assert_eq "$W/over-$OVER.out" "$(json_get stdout <<<"$J")" "override: output path from the directive, %j expanded"

# --parsable, stdin, the default name "sbatch"
printf '#!/bin/sh\n#SBATCH -N 1\necho "from stdin $MJ_JOB_ID"\n' >"$W/stdin.txt"
t_run_stdin "$W/stdin.txt" mjsub --parsable
assert_eq 0 "$T_RC" "stdin: exit code (stderr: $T_ERR)"
assert_match '^[0-9]+$' "$T_OUT" "--parsable prints only the id"
STDIN_ID=$T_OUT
assert_eq sbatch "$(job_col "$C" "$STDIN_ID" name)" "stdin job gets the name sbatch"
t_run_stdin "$W/stdin.txt" mjsub --parsable -
assert_match '^[0-9]+$' "$T_OUT" "'-' reads the script from stdin"
DASH_ID=$T_OUT

# --json and -o/-e with %j and %x
t_run mjsub --json -J expand -o 'out-%j-%x.txt' -e 'err-%j.txt' "$W/over.sh"
assert_eq 0 "$T_RC" "--json: exit code (stderr: $T_ERR)"
JSON_ID=$(json_get job_id <<<"$T_OUT")
assert_match '^[0-9]+$' "$JSON_ID" "--json has a numeric job_id"
assert_eq expand "$(json_get name <<<"$T_OUT")" "--json: name"
assert_eq "$W/out-$JSON_ID-expand.txt" "$(json_get stdout <<<"$T_OUT")" "--json: %j and %x expanded in stdout"
assert_eq "$W/err-$JSON_ID.txt" "$(json_get stderr <<<"$T_OUT")" "--json: %j expanded in stderr"
assert_match '^(PENDING|RUNNING|COMPLETED)$' "$(json_get state <<<"$T_OUT")" "--json: state"

for id in "$OVER" "$STDIN_ID" "$DASH_ID" "$JSON_ID"; do wait_state 30 "$C" "$id" COMPLETED; done

# a moldable job from aliases, in a working directory; alone on the cluster
# it gets the largest even size
mkdir -p "$W/sub"
write_script "$W/mold.sh" '#!/bin/bash' '#MJ --min-nodes-invasic=2 --max-nodes-invasic=4' \
  '#MJ --node-constraints=even' 'pwd; echo "n=$MJ_JOB_NUM_NODES"'
t_run mjsub --parsable -D sub -o mold.out mold.sh
assert_eq 0 "$T_RC" "moldable: exit code (stderr: $T_ERR)"
MOLD_ID=$T_OUT
assert_eq "moldable|2|4|even" "$(sq "$C" "SELECT kind||'|'||min_nodes||'|'||max_nodes||'|'||node_constraint FROM jobs WHERE id=$MOLD_ID")" \
  "moldable job recorded from aliases"

wait_state 30 "$C" "$MOLD_ID" COMPLETED
assert_file_content "$W/over-$OVER.out" "name=fromcli nodes=2 list=$(job_col "$C" "$OVER" nodelist)" \
  "override job output"
assert_file_content "$W/slurm-$STDIN_ID.out" "from stdin $STDIN_ID" "stdin job output (default slurm-%j.out)"
assert_file_content "$W/slurm-$DASH_ID.out" "from stdin $DASH_ID" "stdin ('-') job output"
assert_file_content "$W/out-$JSON_ID-expand.txt" "name=expand nodes=1 list=$(job_col "$C" "$JSON_ID" nodelist)" \
  "-o out-%j-%x.txt expanded"
assert_file_content "$W/err-$JSON_ID.txt" "" "-e file exists, empty"
assert_file_content "$W/sub/mold.out" "$W/sub
n=4" "moldable job ran in -D sub on the largest even size"

# --export=ALL (default) gives the job the submitter's environment (its PATH,
# its variables; SLURM_* stay the scheduler's); --export=NONE the scheduler's
write_script "$W/env.sh" '#!/bin/bash' 'echo "DYNRES_T_MARK=${DYNRES_T_MARK:-unset}"'
ENV_ALL=$(DYNRES_T_MARK=from-submitter mjsub --parsable -o env-all.out env.sh)
ENV_NONE=$(DYNRES_T_MARK=from-submitter mjsub --parsable --export=NONE -o env-none.out env.sh)
wait_state 30 "$C" "$ENV_ALL" COMPLETED
wait_state 30 "$C" "$ENV_NONE" COMPLETED
assert_file_content "$W/env-all.out" "DYNRES_T_MARK=from-submitter" "--export=ALL: the submitter's environment reaches the job"
assert_file_content "$W/env-none.out" "DYNRES_T_MARK=unset" "--export=NONE: the job runs in the scheduler's environment"

# after a completed workload, bad input still changes nothing
bad "min > max after jobs ran" "--min-nodes" -- mjsub --min-nodes 4 --max-nodes 1 ok.sh
bad "mjstat -j unknown after jobs ran" "invalid job id" -- mjstat -j 424242
t_run mjcancel "$OVER"
assert_eq 0 "$T_RC" "mjcancel of an ended job succeeds"
assert_contains "$T_ERR" "already ended" "mjcancel of an ended job says so"
check_started_once "$C"
check_allocations_disjoint "$C"
t_done
