#!/usr/bin/env bash
# Slurm-inside-Slurm: dynres booted inside a real (outer) Slurm allocation
# places each job's step on the node it assigned, as the outer Slurm records.
#
#  1. Start a 4-node outer Slurm cluster (t/fixtures/outer-slurm).
#  2. `salloc -N4` runs this script again (--inside) within the allocation
#     (SLURM_JOB_NODELIST=n[1-4]); there:
#     a. vcluster-boot --dir $D/cluster  (detects the allocation, srun launcher)
#     b. mjsub three jobs (-N 2, -N 1, -N 1); each job script prints what it
#        sees (MJ_JOB_NODELIST, hostname, SLURMD_NODENAME and the outer step
#        MJ_OUTER_SLURM_JOB_ID.MJ_OUTER_SLURM_STEP_ID, SLURM_JOB_ID /
#        SLURM_JOB_NODELIST / SLURM_JOB_NUM_NODES, which describe the dynres
#        job), runs a plain `srun` (the dynres shim: one task per node of the
#        job, as one outer step, checked against the outer slurmd logs) and
#        sleeps;
#     c. wait (bounded) until mjstat says all three are COMPLETED;
#     d. for each job J, with nodelist(J) from `mjstat -j J --json`: the job's
#        output names the outer step it ran in (SLURM_JOB_ID.SLURM_STEP_ID,
#        set by the outer Slurm); the outer slurmd logs (`outer-slurm steps`:
#        each node daemon's own "launch task StepId=..." record) must show
#        that step launched on exactly one node, first(nodelist(J)) — the srun
#        launcher runs the script there with `srun --overlap -N1 -n1 -w <node>`;
#     e. a fourth job (sleep 300) is left running; vcluster-down; then it is
#        CANCELLED, no step of the allocation may remain (squeue -s, and
#        every step's "done with job" record is in its node's slurmd log),
#        and no mjsched/mjstepd/srun/job process of ours may be alive; a second
#        vcluster-down must succeed too (idempotent).
#  3. The allocation is released, the fixture stopped, nothing left behind.
#
# All of it runs without cgroups: in a private mount namespace where
# /sys/fs/cgroup is an empty tmpfs (unless no mount namespace can be made).
#
# A second, independent link from the outer Slurm: the srun launcher names
# each step mj<dynres id> (-J), and a poller writes `squeue -s` snapshots
# (time, step id, name, nodes) to $D/squeue-steps.log; every snapshot of
# step mj<J> must show the same step id on first(nodelist(J)).
#
# Environment (set by ctest): DYNRES_SRC (repo root), DYNRES_BUILD, PATH with
# $DYNRES_BUILD/bin first.  Exit 77 (skip) only when not root; CI runs as root.
# DYNRES_KEEP_TMP=1 keeps the temporary directory for inspection.
SELF=$(readlink -f "${BASH_SOURCE[0]}")
. "${DYNRES_SRC:-$(dirname "$SELF")/../..}/t/lib.sh"
set -e
FIXTURE=$DYNRES_SRC/t/fixtures/outer-slurm
BOOT=$DYNRES_SRC/share/dynres/vcluster-boot
DOWN=$DYNRES_SRC/share/dynres/vcluster-down
NODES=4
JOB_SLEEP=4        # seconds each dynres job runs
WAIT_JOBS=45       # bound for the three jobs to complete (seconds)
ALLOC_LIMIT=100    # bound for the whole allocation (seconds)


# alive PID: exists and is not a zombie.
alive() {
    local s
    s=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
    [[ -n $s && $s != Z && $s != X ]]
}

# our_leftover_procs: live processes of this test's dynres cluster — mjsched,
# mjstepd, srun, or any job process (MJ_JOB_ID in its environment) — that
# carry our temporary directory in their command line or environment
# (SLURM_CONF and DYNRES_HOME point into it), so that dynres instances of
# other people on the machine are not counted.
our_leftover_procs() {
    local f pid comm
    # One grep over all processes; then look closer at the few that match.
    { grep -lzsF -- "$D" /proc/[0-9]*/environ /proc/[0-9]*/cmdline || true; } | while read -r f; do
        pid=${f#/proc/}
        pid=${pid%%/*}
        { read -r comm <"/proc/$pid/comm"; } 2>/dev/null || continue
        if [[ $comm != mjsched && $comm != mjstepd && $comm != srun ]]; then
            grep -qzs '^MJ_JOB_ID=' "/proc/$pid/environ" || continue
        fi
        if alive "$pid"; then echo "$pid $comm"; fi
    done | sort -un
}

# JSON helpers (perl JSON::PP ships with Debian's perl; no jq needed).
# job_states < mjstat --history --json   ->  "ID STATE" lines
job_states() {
    perl -MJSON::PP -0777 -ne '
        my $d = decode_json($_);
        print "$_->{job_id} $_->{state}\n" for @{ $d->{jobs} // [] };'
}
# job_field FIELD < mjstat -j ID --json   ->  the field of that one job
job_field() {
    FIELD=$1 perl -MJSON::PP -0777 -ne '
        my $d = decode_json($_);
        $d = $d->{jobs}[0] if ref $d eq "HASH" && exists $d->{jobs};
        my $v = $d->{ $ENV{FIELD} };
        print defined $v ? "$v\n" : "\n";'
}

hostnames() { scontrol show hostnames "$1" | tr '\n' ' ' | sed 's/ $//'; }

# ------------------------------------------------------------ inside
# Runs under salloc: SLURM_JOB_ID / SLURM_JOB_NODELIST describe the allocation.
inside() {
    D=$1
    local fix=$D/outer cl=$D/cluster
    echo "$SLURM_JOB_ID" >"$D/alloc.jobid"
    t_log "inside allocation $SLURM_JOB_ID: SLURM_JOB_NODELIST=$SLURM_JOB_NODELIST"
    [[ $(hostnames "$SLURM_JOB_NODELIST") == "n1 n2 n3 n4" ]] ||
        t_fatal "allocation has nodes '$SLURM_JOB_NODELIST', expected n[1-4]"

    # The job script: what the job sees of itself, then some work.
    cat >"$D/job.sh" <<EOF
#!/bin/bash
echo "MJ_JOB_NODELIST=\${MJ_JOB_NODELIST:-}"
echo "HOSTNAME=\$(hostname)"
echo "SLURMD_NODENAME=\${SLURMD_NODENAME:-}"
echo "OUTER_STEP=\${MJ_OUTER_SLURM_JOB_ID:-}.\${MJ_OUTER_SLURM_STEP_ID:-}"
echo "JOB_SLURM=\${SLURM_JOB_ID:-}:\${SLURM_JOB_NODELIST:-}:\${SLURM_JOB_NUM_NODES:-}"
srun bash -c 'echo "TASK \$SLURM_PROCID \$SLURMD_NODENAME \$SLURM_JOB_ID.\$SLURM_STEP_ID"'
sleep $JOB_SLEEP
echo "DONE"
EOF
    chmod +x "$D/job.sh"
    mkdir -p "$D/out"

    t_log "vcluster-boot --dir $cl"
    local rc=0
    timeout 30 "$BOOT" --dir "$cl" --tick 1 >"$D/boot.log" 2>&1 || rc=$?
    if ((rc != 0)); then
        sed 's/^/  boot| /' "$D/boot.log" >&2
        t_fatal "vcluster-boot exited $rc"
    fi
    sed 's/^/  boot| /' "$D/boot.log"
    [[ -f $cl/env ]] || t_fatal "vcluster-boot wrote no $cl/env"
    # shellcheck disable=SC1091
    source "$cl/env"
    t_log "DYNRES_HOME=${DYNRES_HOME:-unset}; mjsub=$(command -v mjsub)"

    # Three jobs: 2 + 1 + 1 nodes, all fit the 4 nodes at once.
    local -A want_n=([a]=2 [b]=1 [c]=1) id_of=()
    local n id out
    for n in a b c; do
        out=$(mjsub --parsable -N "${want_n[$n]}" -J "sis-$n" -t 2 -o "$D/out/$n.out" "$D/job.sh") ||
            t_fatal "mjsub -N ${want_n[$n]} failed: $out"
        id=$(tail -n1 <<<"$out" | tr -d '[:space:]')
        [[ $id =~ ^[0-9]+$ ]] || t_fatal "mjsub --parsable printed '$out', not a job id"
        id_of[$n]=$id
        t_log "submitted sis-$n (-N ${want_n[$n]}) as dynres job $id"
    done

    # Wait until all three are COMPLETED (bounded; stop early on a failure).
    local t0=$SECONDS states st done_n
    while :; do
        states=$(mjstat --history --json | job_states) || t_fatal "mjstat --history --json failed"
        done_n=0
        for n in a b c; do
            st=$(awk -v id="${id_of[$n]}" '$1 == id {print $2}' <<<"$states")
            case $st in
                COMPLETED) done_n=$((done_n + 1)) ;;
                FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | BOOT_FAIL)
                    cat "$D/out/$n.out" >&2 2>/dev/null || true
                    t_fatal "dynres job ${id_of[$n]} (sis-$n) ended $st" ;;
            esac
        done
        ((done_n == 3)) && break
        ((SECONDS - t0 < WAIT_JOBS)) || {
            mjstat --history --json >&2 || true
            t_fatal "jobs not all COMPLETED after ${WAIT_JOBS}s: $(tr '\n' ';' <<<"$states")"
        }
        sleep 0.5
    done
    t_log "all three jobs COMPLETED after $((SECONDS - t0))s"

    # Check each job's placement against the outer Slurm's records.
    local nl nodes first seen step node_from_job lines nlines
    for n in a b c; do
        id=${id_of[$n]}
        nl=$(mjstat -j "$id" --json | job_field nodelist) || t_fatal "mjstat -j $id --json failed"
        [[ -n $nl ]] || t_fatal "mjstat -j $id --json has no nodelist"
        nodes=$(hostnames "$nl")
        first=${nodes%% *}
        [[ $(wc -w <<<"$nodes") -eq ${want_n[$n]} ]] ||
            t_fatal "job $id asked for ${want_n[$n]} nodes, dynres gave '$nl'"
        for node in $nodes; do
            [[ " n1 n2 n3 n4 " == *" $node "* ]] || t_fatal "job $id got node $node outside the allocation"
        done

        out=$D/out/$n.out
        [[ -s $out ]] || t_fatal "job $id wrote no output to $out"
        sed "s/^/  job $id| /" "$out"
        grep -qx DONE "$out" || t_fatal "job $id output lacks DONE"
        seen=$(sed -n 's/^MJ_JOB_NODELIST=//p' "$out")
        [[ -n $seen && $(hostnames "$seen") == "$nodes" ]] ||
            t_fatal "job $id saw MJ_JOB_NODELIST='$seen', mjstat says '$nl'"
        # The outer step J.S the job ran in: SLURM_JOB_ID.SLURM_STEP_ID of its
        # environment, which the outer Slurm sets; this links dynres job and step.
        # SLURM_* of the job describe the dynres job, not the allocation
        seen=$(sed -n 's/^JOB_SLURM=//p' "$out")
        [[ $seen == "$id:$nl:${want_n[$n]}" ]] ||
            t_fatal "job $id saw SLURM_JOB_ID:SLURM_JOB_NODELIST:SLURM_JOB_NUM_NODES='$seen', expected '$id:$nl:${want_n[$n]}'"
        # A plain `srun` in the job (the dynres shim) ran one task on each of
        # the job's nodes, as one outer step; the node daemons confirm it.
        local tasks tstep tnodes
        tasks=$(awk '$1 == "TASK" {print $3}' "$out" | sort | tr '\n' ' ' | sed 's/ $//')
        [[ $tasks == "$nodes" ]] || t_fatal "srun in job $id ran tasks on '$tasks', the job's nodes are '$nodes'"
        tstep=$(awk '$1 == "TASK" {print $4}' "$out" | sort -u)
        [[ $tstep =~ ^$SLURM_JOB_ID\.[0-9]+$ ]] || t_fatal "srun in job $id: tasks in outer step(s) '$tstep'"
        tnodes=$("$FIXTURE" steps "$fix" "$SLURM_JOB_ID" | awk -v s="$tstep" '$1 == s {print $2}' | sort | tr '\n' ' ' | sed 's/ $//')
        [[ $tnodes == "$nodes" ]] ||
            t_fatal "outer slurmd logs: step $tstep (srun in job $id) launched on '$tnodes', expected '$nodes'"
        step=$(sed -n 's/^OUTER_STEP=//p' "$out")
        [[ $step =~ ^$SLURM_JOB_ID\.[0-9]+$ ]] ||
            t_fatal "job $id did not run in an outer step of allocation $SLURM_JOB_ID (OUTER_STEP='$step')"

        # Authoritative: the node daemons' own launch records for that step.
        lines=$("$FIXTURE" steps "$fix" "$SLURM_JOB_ID" | awk -v s="$step" '$1 == s')
        nlines=$(grep -c . <<<"$lines" || true)
        [[ $nlines -eq 1 ]] ||
            t_fatal "outer slurmd logs show step $step on $nlines nodes: '$lines'"
        read -r _ node _ _ <<<"$lines"
        [[ $node == "$first" ]] ||
            t_fatal "outer Slurm ran step $step of job $id on $node, dynres assigned $nl (first $first)"
        # Second, independent link: the launcher names the step mj<id>; the
        # squeue -s snapshots must show that name only as step $step on $first.
        seen=$(awk -v nm="mj$id" '$3 == nm {print $2, $4}' "$D/squeue-steps.log" | sort -u)
        [[ $seen == "$step $first" ]] ||
            t_fatal "squeue -s showed outer step(s) named mj$id as '$(tr '\n' ';' <<<"$seen")', expected '$step $first'"
        # Consistency: the step's own environment (set by the outer slurmstepd).
        node_from_job=$(sed -n 's/^SLURMD_NODENAME=//p' "$out")
        [[ $node_from_job == "$first" ]] ||
            t_fatal "job $id ran in an outer step on '$node_from_job', expected first(nodelist)=$first"
        t_log "job $id (sis-$n): dynres nodelist $nl -> outer step $step (mj$id) launched by slurmd of $node: OK"
    done

    # A job still running when the cluster goes down: vcluster-down must end
    # its outer step too (not only the daemon).
    cat >"$D/long.sh" <<'EOF'
#!/bin/bash
echo "OUTER_STEP=${MJ_OUTER_SLURM_JOB_ID:-}.${MJ_OUTER_SLURM_STEP_ID:-}"
sleep 300
EOF
    chmod +x "$D/long.sh"
    local long
    long=$(mjsub --parsable -N 1 -J sis-long -t 10 -o "$D/out/long.out" "$D/long.sh") ||
        t_fatal "mjsub of the long job failed: $long"
    long=$(tail -n1 <<<"$long" | tr -d '[:space:]')
    t0=$SECONDS
    until squeue -s -h -j "$SLURM_JOB_ID" -o '%j' | grep -qx "mj$long"; do
        ((SECONDS - t0 < 20)) || t_fatal "long job $long never showed up as outer step mj$long"
        sleep 0.25
    done
    t_log "long job $long runs as outer step: $(squeue -s -h -j "$SLURM_JOB_ID" -o '%i %j %N' | awk -v nm="mj$long" '$2 == nm')"

    # Tear down and check nothing is left.
    t_log "vcluster-down --dir $cl"
    timeout 30 "$DOWN" --dir "$cl" || t_fatal "vcluster-down exited $?"
    local left procs open
    t0=$SECONDS
    while :; do
        left=$(squeue -s -h -j "$SLURM_JOB_ID" -o '%i %j %N' |
               grep -Ev "^$SLURM_JOB_ID\.(extern|batch|interactive) " || true)
        procs=$(our_leftover_procs)
        # Every step launched in the allocation has its "done" record from
        # the node daemon (slurmstepd finished, not only gone from squeue).
        open=$("$FIXTURE" steps "$fix" "$SLURM_JOB_ID" | awk '$4 == "-" {print $1 "@" $2}')
        [[ -z $left && -z $procs && -z $open ]] && break
        ((SECONDS - t0 < 20)) ||
            t_fatal "after vcluster-down: steps left '${left}', processes left '${procs}', steps not done on their node '${open}'"
        sleep 0.5
    done
    t_log "after vcluster-down: no outer step (squeue -s; slurmd logs say every step is done), no dynres process left"
    st=$(mjstat --history --json | job_states | awk -v id="$long" '$1 == id {print $2}')
    [[ $st == CANCELLED ]] || t_fatal "long job $long is '$st' after vcluster-down, expected CANCELLED"
    timeout 30 "$DOWN" --dir "$cl" || t_fatal "second vcluster-down (idempotent) exited $?"
    t_log "inside: all checks passed"
}

if [[ ${1:-} == --inside ]]; then
    inside "$2"
    exit 0
fi

# ------------------------------------------------------------ outside

((EUID == 0)) || t_skip "needs root (it runs a real Slurm cluster)"
t_require mjsub mjstat mjsched
[[ -x $BOOT && -x $DOWN ]] || t_fatal "missing $BOOT or $DOWN"

# No cgroups: the whole test runs in a private mount namespace where
# /sys/fs/cgroup is an empty tmpfs (as in a container or chroot without
# cgroups), so the fixture must work without them (before this, slurmd
# failed with "Unable to initialize cgroup plugin"). Where a mount
# namespace cannot be made the test runs as it is, and says so.
if [[ -z ${DYNRES_SIS_NO_CGROUP:-} ]]; then
    if command -v unshare >/dev/null && unshare -m true 2>/dev/null; then
        exec env DYNRES_SIS_NO_CGROUP=1 unshare -m bash -c \
            'mount --make-rprivate / && mount -t tmpfs -o size=1m,mode=755 nocgroup /sys/fs/cgroup && exec bash "$0" "$@"' \
            "$SELF" "$@"
    fi
    t_log "cannot create a mount namespace: running with the machine's cgroups visible"
else
    [[ -z $(ls -A /sys/fs/cgroup) ]] || t_fatal "/sys/fs/cgroup is not hidden in the private mount namespace"
    t_log "running without cgroups (/sys/fs/cgroup is an empty tmpfs in a private mount namespace)"
fi

# This test makes its own clusters: nothing of an enclosing Slurm job or
# dynres job may leak in (and our leftover check keys on MJ_JOB_ID).
unset "${!SLURM_@}" "${!MJ_@}" DYNRES_HOME
t_begin 240
D=$T_TMP
outer_slurm_start "$NODES" --poll   # the step-name link checked inside, and a timeline for failure reports
stop_leftovers() {
    # Whatever dynres left behind (a failed test may not have reached, or
    # been failed by, vcluster-down): try it, then end the processes directly.
    [[ -n $(our_leftover_procs) ]] || return 0
    [[ -d $D/cluster ]] && timeout 30 "$DOWN" --dir "$D/cluster" >/dev/null 2>&1
    local sig pids
    for sig in TERM KILL; do
        pids=$(our_leftover_procs | awk '{print $1}')
        [[ -z $pids ]] && break
        t_log "cleanup: SIG$sig to leftover dynres processes: $(tr '\n' ' ' <<<"$pids")" >&2
        # shellcheck disable=SC2086
        kill -"$sig" $pids 2>/dev/null
        sleep 1
    done
}
t_on_exit stop_leftovers

t_log "salloc -N$NODES: running the inside part"
outer_slurm_inside "$ALLOC_LIMIT" "$NODES" dynres-sis "$SELF"

# The allocation must be gone, and with it every process of ours.
ALLOC=$(cat "$D/alloc.jobid")
for _ in $(seq 1 20); do
    [[ -z $(squeue -h -j "$ALLOC" -o %i 2>/dev/null) ]] && break
    sleep 0.5
done
[[ -z $(squeue -h -j "$ALLOC" -o %i 2>/dev/null) ]] || t_fatal "allocation $ALLOC still in the queue"
[[ -z $(our_leftover_procs) ]] || t_fatal "dynres processes survive the allocation: $(our_leftover_procs)"

t_log "outer steps of allocation $ALLOC, from the node daemons' logs:"
"$FIXTURE" steps "$D/outer" "$ALLOC" | sed 's/^/  /'
t_pass "no allocation, step or process of ours left"
t_done
