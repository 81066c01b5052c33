#!/usr/bin/env bash
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
set -euo pipefail

SELF=$(readlink -f "${BASH_SOURCE[0]}")
: "${DYNRES_SRC:=$(cd "$(dirname "$SELF")/../.." && pwd)}"
FIXTURE=$DYNRES_SRC/t/fixtures/outer-slurm
BOOT=$DYNRES_SRC/share/dynres/vcluster-boot
DOWN=$DYNRES_SRC/share/dynres/vcluster-down
if [[ -n ${DYNRES_BUILD:-} ]]; then
    export DYNRES_BIN=${DYNRES_BIN:-$DYNRES_BUILD/bin}
fi
: "${DYNRES_BIN:=$DYNRES_SRC/build/bin}"
export DYNRES_BIN
ALLOC_LIMIT=120

log() { echo "[rhs $(date +%T)] $*"; }
fail() { echo "[rhs] FAIL: $*" >&2; exit 1; }
ok() { echo "[rhs] ok: $*"; }

# sq SQL — the dynres state file
sq() { sqlite3 -batch -cmd '.timeout 10000' "$CL/state.db" "$1"; }
wait_until() {  # SECONDS WHAT CMD...
    local end=$((SECONDS + $1)) what=$2
    shift 2
    until "$@"; do
        ((SECONDS < end)) || fail "timed out after ${end}s waiting for: $what"
        sleep 0.1
    done
}
state_is() { [[ $(sq "SELECT state FROM jobs WHERE id=$1") == "$2" ]]; }
hostnames() { scontrol show hostnames "$1" | tr '\n' ' ' | sed 's/ $//'; }
nodes_consistent() {
    local bad
    bad=$(sq "SELECT 'node ' || n.name || ' held by job ' || n.job_id FROM nodes n LEFT JOIN jobs j ON j.id = n.job_id
              WHERE n.job_id IS NOT NULL AND IFNULL(j.state,'') != 'RUNNING'
              UNION ALL
              SELECT 'job ' || j.id || ' num_nodes=' || j.num_nodes || ' holds ' || COUNT(n.id)
              FROM jobs j LEFT JOIN nodes n ON n.job_id = j.id WHERE j.state = 'RUNNING'
              GROUP BY j.id HAVING COUNT(n.id) != j.num_nodes")
    [[ -z $bad ]] || fail "node states inconsistent ($1): $bad"
    ok "node states consistent ($1)"
}

# ------------------------------------------------------------ inside
inside() {
    D=$1
    CL=$D/cluster
    local fix=$D/outer W=$D/work
    mkdir -p "$W"
    cd "$W"
    echo "$SLURM_JOB_ID" >"$D/alloc.jobid"
    log "inside allocation $SLURM_JOB_ID: SLURM_JOB_NODELIST=$SLURM_JOB_NODELIST"
    timeout 30 "$BOOT" --dir "$CL" --tick 0.2 --kill-wait 1 --icheck-nodes 1 --resize-timeout 30 >"$D/boot.log" 2>&1 ||
        { sed 's/^/  boot| /' "$D/boot.log" >&2; fail "vcluster-boot failed"; }
    # shellcheck disable=SC1091
    source "$CL/env"
    [[ $(sq "SELECT group_concat(name, ' ') FROM (SELECT name FROM nodes ORDER BY name)") == "n1 n2 n3 n4" ]] ||
        fail "the dynres cluster's nodes are not n1-n4"

    local ARGS=(--nx 96 --ny 90 --iters 240 --iter-seconds 0.05 --print-every 40) ref
    ref=$("$DYNRES_BIN/heat" --nx 96 --ny 90 --iters 240 --no-icheck | sed -n 's/^heat: checksum=\([0-9a-f]*\).*/\1/p')
    [[ -n $ref ]] || fail "the reference run printed no checksum"

    printf '#!/bin/bash\nsleep 300\n' >"$W/block.sh"
    local B J
    B=$(mjsub --parsable -N 3 -o /dev/null "$W/block.sh") || fail "mjsub of the blocker failed"
    wait_until 20 "blocker running" state_is "$B" RUNNING
    J=$(HEAT=$DYNRES_BIN/heat mjsub --parsable -o "$W/heat.out" \
        "$DYNRES_SRC/share/dynres/examples/heat/heat-malleable.sh" "${ARGS[@]}") || fail "mjsub of heat failed"
    wait_until 20 "heat job running" state_is "$J" RUNNING
    registered() { [[ $(grep -c '^heat: malleable job=' "$W/heat.out" 2>/dev/null) -ge $1 &&
                      $(sq "SELECT phase FROM mj_jobs WHERE job_id=$J") == accepting ]]; }
    local n0
    n0=$(sq "SELECT nodelist FROM jobs WHERE id=$J")
    [[ $(sq "SELECT num_nodes FROM jobs WHERE id=$J") == 1 ]] || fail "heat did not start on 1 node ($n0)"
    mjcancel "$B" >/dev/null
    wait_until 20 "blocker cancelled" state_is "$B" CANCELLED
    wait_until 20 "3 idle nodes" eval "[[ \$(sq 'SELECT COUNT(*) FROM nodes WHERE job_id IS NULL') == 3 ]]"
    wait_until 30 "heat registered" registered 1

    mjcontrol resize "$J" 4 --wait 40 || { cat "$W/heat.out" >&2; fail "expand 1 -> 4 not committed"; }
    local n1
    n1=$(sq "SELECT nodelist FROM jobs WHERE id=$J")
    nodes_consistent "after the expand to $n1"
    wait_until 30 "heat registered after the expand" registered 2
    mjcontrol resize "$J" 2 --wait 40 || { cat "$W/heat.out" >&2; fail "shrink 4 -> 2 not committed"; }
    local n2
    n2=$(sq "SELECT nodelist FROM jobs WHERE id=$J")
    nodes_consistent "after the shrink to $n2"
    wait_until 60 "heat job ended" eval "state_is $J COMPLETED || state_is $J FAILED"
    sed 's/^/  job| /' "$W/heat.out"
    state_is "$J" COMPLETED || fail "the heat job ended $(sq "SELECT state FROM jobs WHERE id=$J")"
    [[ $(sed -n 's/^heat: checksum=\([0-9a-f]*\).*/\1/p' "$W/heat.out") == "$ref" ]] ||
        fail "grown and shrunk inside Slurm, heat did not end with the fixed-size checksum $ref"
    ok "grown 1 -> 4 and shrunk 4 -> 2 inside Slurm, heat ends with the fixed-size checksum"
    grep -q 'from_ranks=1 ranks=4' "$W/heat.out" && grep -q 'from_ranks=4 ranks=2' "$W/heat.out" ||
        fail "heat did not restore 1 -> 4 and 4 -> 2 ranks"
    [[ $(sq "SELECT restart_count FROM mj_jobs WHERE job_id=$J") == 2 ]] || fail "restart count is not 2"
    [[ $(sq "SELECT group_concat(kind || ':' || state, ' ') FROM resize_orders WHERE job_id=$J") == "expand:committed shrink:committed" ]] ||
        fail "orders: $(sq "SELECT group_concat(kind || ':' || state, ' ') FROM resize_orders WHERE job_id=$J")"

    # The outer Slurm's records. Steps of the allocation in launch order, with
    # the nodes each was launched on (the slurmd logs) and its name (squeue -s).
    local steps want got i s name nodes
    sleep 1  # last squeue snapshot
    steps=$("$FIXTURE" steps "$fix" "$SLURM_JOB_ID" |
        awk '{split($1, a, "."); if (a[2] ~ /^[0-9]+$/) n[a[2]] = (a[2] in n ? n[a[2]] " " : "") $2}
             END {for (s in n) print s, n[s]}' | sort -n)
    log "outer steps of allocation $SLURM_JOB_ID (step: nodes):"
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
    log "heat's outer steps: $got"
    [[ $got == "$want" ]] ||
        fail "the outer Slurm ran the heat job's steps as '$got', expected '$want' (node lists $n0, $n1, $n2)"
    ok "outer Slurm: each run of the script and its MPI step ran on the job's nodes of the moment ($n0, $n1, $n2)"
    timeout 30 "$DOWN" --dir "$CL" >/dev/null || fail "vcluster-down failed"
    log "inside: all checks passed"
}

if [[ ${1:-} == --inside ]]; then
    inside "$2"
    exit 0
fi

# ------------------------------------------------------------ outside
if ((EUID != 0)); then
    echo "SKIP: needs root (it runs a real Slurm cluster)"
    exit 77
fi
command -v mpiexec >/dev/null || { echo "SKIP: mpiexec (Debian package mpich) is not installed"; exit 77; }
for t in heat mjsub mjstat mjsched mjcontrol icheckd icagent; do
    [[ -x $DYNRES_BIN/$t ]] || fail "$DYNRES_BIN/$t is not built"
done
[[ $(ldd "$DYNRES_BIN/heat") == *libmj* ]] || { echo "SKIP: heat is built without libmj"; exit 77; }
unset "${!SLURM_@}" "${!MJ_@}" DYNRES_HOME
export PATH=$DYNRES_BIN:$DYNRES_SRC/share/dynres:$PATH
T0=$SECONDS
D=$(mktemp -d "${TMPDIR:-/tmp}/dynres-rhs.XXXXXX")
POLLER=""
cleanup() {
    local rc=$?
    set +e
    [[ -n $POLLER ]] && kill "$POLLER" 2>/dev/null && wait "$POLLER" 2>/dev/null
    [[ -f $D/cluster/mjsched.pid ]] && timeout 30 "$DOWN" --dir "$D/cluster" >/dev/null 2>&1
    if [[ -f $D/outer/slurm.conf ]]; then
        [[ -f $D/alloc.jobid ]] && SLURM_CONF=$D/outer/slurm.conf scancel "$(cat "$D/alloc.jobid")" 2>/dev/null
        if ((rc != 0)); then
            echo "---- outer steps (slurmd logs)" >&2
            "$FIXTURE" steps "$D/outer" >&2
        fi
        "$FIXTURE" stop "$D/outer" || rc=1
    fi
    if ((rc != 0)) || [[ ${DYNRES_KEEP_TMP:-0} == 1 ]]; then
        echo "[rhs] keeping $D for inspection" >&2
    else
        rm -rf "$D"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log "starting outer Slurm (5 nodes) in $D/outer"
"$FIXTURE" start "$D/outer" --nodes 5 --timeout 30
eval "$("$FIXTURE" env "$D/outer")"
(
    while :; do
        squeue -s -h -o '%i %j %N' 2>/dev/null | sed "s/^/$(date +%T.%N | cut -c1-12) /"
        sleep 0.2
    done
) >"$D/squeue-steps.log" 2>&1 &
POLLER=$!
cd "$D"
rc=0
timeout "$ALLOC_LIMIT" salloc -N5 -J dynres-rhs -t 5 bash "$SELF" --inside "$D" || rc=$?
((rc != 124)) || fail "inside part did not finish within ${ALLOC_LIMIT}s"
((rc == 0)) || fail "inside part failed (exit $rc)"
log "PASS in $((SECONDS - T0))s"
