#!/usr/bin/env bash
# ctest-cost: 20
# An MPI job resized by checkpoint-restart inside a real (outer) Slurm
# allocation: the outer Slurm confirms
# that the relaunched steps ran on the job's new nodes.
#
#  1. A 5-node outer Slurm cluster (t/fixtures/outer-slurm); `salloc -N5`
#     runs this script again (--inside) in the allocation; there
#     vcluster-boot --icheck-nodes 1 makes a dynres cluster of 4 compute
#     nodes (n1-n4, srun launcher) and puts the iCheck service on n5.
#  2. heat-malleable.sh (heat --malleable, one MPI rank per node) starts on 1
#     node (a rigid job holds the 3 others until then), is grown to 4 and
#     shrunk to 2 by `mjcontrol resize`; it ends with the checksum of a
#     fixed-size run.
#  3. The outer Slurm's records (`outer-slurm steps`: every slurmd's own
#     "launch task StepId=J.S" lines; `squeue -s` snapshots for the step
#     names): each run of the job script is an outer step mj<ID> on the first
#     node of the job's node list at that time, and each run's mpiexec starts
#     its MPI processes in one outer step (hydra through the dynres srun)
#     launched on exactly the job's nodes of that run: 1 node, then the 4
#     nodes of the expand, then the 2 nodes left by the shrink.
# Exit 77 (skip) when not root (the outer Slurm needs it) or without mpiexec.
# DYNRES_KEEP_TMP=1 keeps the temporary directory. About 25 s.
SELF=$(readlink -f "${BASH_SOURCE[0]}")
. "${DYNRES_SRC:-$(dirname "$SELF")/../..}/t/lib.sh"
set -e
FIXTURE=$DYNRES_SRC/t/fixtures/outer-slurm
BOOT=$DYNRES_SRC/share/dynres/vcluster-boot
DOWN=$DYNRES_SRC/share/dynres/vcluster-down
ALLOC_LIMIT=120

hostnames() { scontrol show hostnames "$1" | tr '\n' ' ' | sed 's/ $//'; }

# ------------------------------------------------------------ inside
inside() {
    D=$1
    CL=$D/cluster
    local fix=$D/outer W=$D/work
    mkdir -p "$W"
    cd "$W"
    echo "$SLURM_JOB_ID" >"$D/alloc.jobid"
    t_log "inside allocation $SLURM_JOB_ID: SLURM_JOB_NODELIST=$SLURM_JOB_NODELIST"
    timeout 30 "$BOOT" --dir "$CL" --tick 0.2 --kill-wait 1 --icheck-nodes 1 --resize-timeout 30 >"$D/boot.log" 2>&1 ||
        { sed 's/^/  boot| /' "$D/boot.log" >&2; t_fatal "vcluster-boot failed"; }
    # shellcheck disable=SC1091
    source "$CL/env"
    [[ $(sq "$CL" "SELECT group_concat(name, ' ') FROM (SELECT name FROM nodes ORDER BY name)") == "n1 n2 n3 n4" ]] ||
        t_fatal "the dynres cluster's nodes are not n1-n4"

    local ARGS=(--nx 96 --ny 90 --iters 240 --iter-seconds 0.05 --print-every 40) ref
    ref=$("$DYNRES_BIN/heat" --nx 96 --ny 90 --iters 240 --no-icheck | sed -n 's/^heat: checksum=\([0-9a-f]*\).*/\1/p')
    [[ -n $ref ]] || t_fatal "the reference run printed no checksum"

    printf '#!/bin/bash\nsleep 300\n' >"$W/block.sh"
    local B J
    B=$(mjsub --parsable -N 3 -o /dev/null "$W/block.sh") || t_fatal "mjsub of the blocker failed"
    wait_for 20 "blocker running" state_is "$CL" "$B" RUNNING
    J=$(HEAT=$DYNRES_BIN/heat mjsub --parsable -o "$W/heat.out" \
        "$DYNRES_SRC/share/dynres/examples/heat/heat-malleable.sh" "${ARGS[@]}") || t_fatal "mjsub of heat failed"
    wait_for 20 "heat job running" state_is "$CL" "$J" RUNNING
    registered() { [[ $(grep -c '^heat: malleable job=' "$W/heat.out" 2>/dev/null) -ge $1 &&
                      $(sq "$CL" "SELECT phase FROM mj_jobs WHERE job_id=$J") == accepting ]]; }
    local n0
    n0=$(sq "$CL" "SELECT nodelist FROM jobs WHERE id=$J")
    [[ $(sq "$CL" "SELECT num_nodes FROM jobs WHERE id=$J") == 1 ]] || t_fatal "heat did not start on 1 node ($n0)"
    mjcancel "$B" >/dev/null
    wait_for 20 "blocker cancelled" state_is "$CL" "$B" CANCELLED
    wait_for 20 "3 idle nodes" eval "[[ \$(sq \"\$CL\" 'SELECT COUNT(*) FROM nodes WHERE job_id IS NULL') == 3 ]]"
    wait_for 30 "heat registered" registered 1

    mjcontrol resize "$J" 4 --wait 40 || { cat "$W/heat.out" >&2; t_fatal "expand 1 -> 4 not committed"; }
    local n1
    n1=$(sq "$CL" "SELECT nodelist FROM jobs WHERE id=$J")
    check_nodes_consistent "$CL" "after the expand to $n1"
    wait_for 30 "heat registered after the expand" registered 2
    mjcontrol resize "$J" 2 --wait 40 || { cat "$W/heat.out" >&2; t_fatal "shrink 4 -> 2 not committed"; }
    local n2
    n2=$(sq "$CL" "SELECT nodelist FROM jobs WHERE id=$J")
    check_nodes_consistent "$CL" "after the shrink to $n2"
    wait_for 60 "heat job ended" eval "state_is \"\$CL\" $J COMPLETED || state_is \"\$CL\" $J FAILED"
    sed 's/^/  job| /' "$W/heat.out"
    state_is "$CL" "$J" COMPLETED || t_fatal "the heat job ended $(sq "$CL" "SELECT state FROM jobs WHERE id=$J")"
    [[ $(sed -n 's/^heat: checksum=\([0-9a-f]*\).*/\1/p' "$W/heat.out") == "$ref" ]] ||
        t_fatal "grown and shrunk inside Slurm, heat did not end with the fixed-size checksum $ref"
    t_pass "grown 1 -> 4 and shrunk 4 -> 2 inside Slurm, heat ends with the fixed-size checksum"
    grep -q 'from_ranks=1 ranks=4' "$W/heat.out" && grep -q 'from_ranks=4 ranks=2' "$W/heat.out" ||
        t_fatal "heat did not restore 1 -> 4 and 4 -> 2 ranks"
    [[ $(sq "$CL" "SELECT restart_count FROM mj_jobs WHERE job_id=$J") == 2 ]] || t_fatal "restart count is not 2"
    [[ $(sq "$CL" "SELECT group_concat(kind || ':' || state, ' ') FROM resize_orders WHERE job_id=$J") == "expand:committed shrink:committed" ]] ||
        t_fatal "orders: $(sq "$CL" "SELECT group_concat(kind || ':' || state, ' ') FROM resize_orders WHERE job_id=$J")"

    # The outer Slurm's records. Steps of the allocation in launch order, with
    # the nodes each was launched on (the slurmd logs) and its name (squeue -s).
    local steps want got i s name nodes
    sleep 1  # last squeue snapshot
    steps=$("$FIXTURE" steps "$fix" "$SLURM_JOB_ID" |
        awk '{split($1, a, "."); if (a[2] ~ /^[0-9]+$/) n[a[2]] = (a[2] in n ? n[a[2]] " " : "") $2}
             END {for (s in n) print s, n[s]}' | sort -n)
    t_log "outer steps of allocation $SLURM_JOB_ID (step: nodes):"
    sed 's/^/  /' <<<"$steps"
    name_of() { awk -v id="$SLURM_JOB_ID.$1" '$2 == id {print $3; exit}' "$D/squeue-steps.log"; }
    # the steps of the heat job: its script (named mj<J>) and, after each, the
    # MPI processes of its mpiexec (the next step that is not a script step)
    want="mj$J=$(hostnames "$n0" | cut -d' ' -f1) mpi=$(hostnames "$n0") mj$J=$(hostnames "$n1" | cut -d' ' -f1) mpi=$(hostnames "$n1") mj$J=$(hostnames "$n2" | cut -d' ' -f1) mpi=$(hostnames "$n2")"
    got=""
    local after=0
    while read -r s nodes; do
        [[ -n $s ]] || continue
        name=$(name_of "$s")
        nodes=$(tr ' ' '\n' <<<"$nodes" | sort -V | tr '\n' ' ' | sed 's/ $//')
        if [[ $name == "mj$J" ]]; then
            got+="mj$J=$nodes "
            after=1
        elif ((after)) && [[ -n $name && $name != mj* ]]; then
            got+="mpi=$nodes "
            after=0
        fi
    done <<<"$steps"
    got=${got% }
    t_log "heat's outer steps: $got"
    [[ $got == "$want" ]] ||
        t_fatal "the outer Slurm ran the heat job's steps as '$got', expected '$want' (node lists $n0, $n1, $n2)"
    t_pass "outer Slurm: each run of the script and its MPI step ran on the job's nodes of the moment ($n0, $n1, $n2)"
    timeout 30 "$DOWN" --dir "$CL" >/dev/null || t_fatal "vcluster-down failed"
    t_log "inside: all checks passed"
}

if [[ ${1:-} == --inside ]]; then
    inside "$2"
    exit 0
fi

# ------------------------------------------------------------ outside
((EUID == 0)) || t_skip "needs root (it runs a real Slurm cluster)"
t_require mpiexec heat mjsub mjstat mjsched mjcontrol icheckd icagent
[[ $(ldd "$DYNRES_BIN/heat") == *libmj* ]] || t_skip "heat is built without libmj"
t_begin 240
unset "${!SLURM_@}" "${!MJ_@}" DYNRES_HOME
D=$T_TMP
outer_slurm_start 5 --poll
stop_cluster() { [[ -f $D/cluster/mjsched.pid ]] && timeout 30 "$DOWN" --dir "$D/cluster" >/dev/null 2>&1; }
t_on_exit stop_cluster
outer_slurm_inside "$ALLOC_LIMIT" 5 dynres-rhs "$SELF"
t_done
