#!/usr/bin/env bash
# nqueens resized in place inside a real (outer) Slurm allocation:
# dynres booted in `salloc -N4` of the 4-node outer Slurm fixture
# (t/fixtures/outer-slurm) launches through srun; a malleable nqueens job
# (N = 13) starts on 2 nodes, is grown to 4 and shrunk to 3 with mjcontrol
# resize, and ends with the fixed-size count 73712. The workers started for
# the expand run as outer steps (srun --overlap -N1 -w NODE) on the added
# nodes, as the outer slurmd logs record; they reach the coordinator over its
# Unix socket in the job's working directory (all "nodes" share this machine).
# Needs root (it runs slurmd); skipped otherwise.
SELF=$(readlink -f "${BASH_SOURCE[0]}")
. "${DYNRES_SRC:-$(dirname "$SELF")/../..}/t/lib.sh"
set -e
FIXTURE=$DYNRES_SRC/t/fixtures/outer-slurm
BOOT=$DYNRES_SRC/share/dynres/vcluster-boot
DOWN=$DYNRES_SRC/share/dynres/vcluster-down
[[ -n ${DYNRES_BUILD:-} ]] && export DYNRES_BIN=${DYNRES_BIN:-$DYNRES_BUILD/bin}

inside() {
  D=$1
  local cl=$D/cluster
  echo "$SLURM_JOB_ID" >"$D/alloc.jobid"
  timeout 30 "$BOOT" --dir "$cl" --tick 0.2 --kill-wait 1 --resize-timeout 10 >"$D/boot.log" 2>&1 ||
    { cat "$D/boot.log" >&2; t_fatal "vcluster-boot failed"; }
  # shellcheck disable=SC1091
  source "$cl/env"
  mkdir -p "$D/w" && cd "$D/w"
  printf '#!/bin/bash\nsleep 120\n' >block.sh
  printf '#!/bin/bash\nexec %s -n 13 --task-sleep-ms 20 -v\n' "$DYNRES_BIN/nqueens" >nq.sh
  local blk id
  blk=$(mjsub --parsable -J block -N 2 --rigid -o block.out block.sh) || t_fatal "mjsub block: $blk"
  for _ in $(seq 100); do [[ $(mjstat -j "$blk" --json | grep -o '"state": *"[A-Z]*"' | head -1) == *RUNNING* ]] && break; sleep 0.1; done
  id=$(mjsub --parsable -J nq -N 2 --min-nodes 2 --max-nodes 4 --malleable -o nq.out nq.sh) || t_fatal "mjsub nq: $id"
  for _ in $(seq 100); do grep -q connected nq.out 2>/dev/null && [[ $(grep -c connected nq.out) -ge 2 ]] && break; sleep 0.1; done
  [[ $(grep -c connected nq.out) -ge 2 ]] || t_fatal "the two first workers did not connect: $(cat nq.out)"
  mjcancel "$blk"
  sleep 1
  mjcontrol resize "$id" 4 --wait 15 || t_fatal "expand to 4 not committed: $(tail -n 5 nq.out)"
  for _ in $(seq 50); do grep -q '^resize expand 2->4' nq.out && break; sleep 0.1; done
  grep -q '^resize expand 2->4' nq.out || t_fatal "no expand line: $(tail -n 5 nq.out)"
  mjcontrol resize "$id" 3 --wait 15 || t_fatal "shrink to 3 not committed: $(tail -n 5 nq.out)"
  for _ in $(seq 300); do grep -q '^taskbag ' nq.out && break; sleep 0.1; done
  sed 's/^/  nq| /' nq.out | grep -vE 'connected|started on'
  grep -q '^nqueens n=13 .* solutions=73712$' nq.out || t_fatal "wrong or missing count"
  grep -q 'expands=1 shrinks=1 rollbacks=0' nq.out || t_fatal "not one expand and one shrink"
  sqlite3 "$cl/state.db" "SELECT detail FROM events WHERE job_id=$id AND kind='resize_order' AND detail LIKE 'expand%'" |
    grep -oE 'nodes=[^ ]+' | cut -d= -f2 >"$D/added"
  date -d "@$(sqlite3 "$cl/state.db" "SELECT time FROM events WHERE job_id=$id AND kind='resize_order' AND detail LIKE 'expand%'")" \
    +%Y-%m-%dT%H:%M:%S.%3N >"$D/added_at"
  timeout 30 "$DOWN" --dir "$cl" >/dev/null 2>&1 || true
}

if [[ ${1:-} == --inside ]]; then
  inside "$2"
  exit 0
fi
((EUID == 0)) || t_skip "needs root (it runs a real Slurm cluster)"
t_require salloc
[[ -x $DYNRES_BIN/nqueens ]] || t_skip "nqueens is not built"
t_begin 240
unset "${!SLURM_@}" "${!MJ_@}" DYNRES_HOME
D=$T_TMP
outer_slurm_start 4
stop_cluster() { [[ -d $D/cluster ]] && timeout 30 "$DOWN" --dir "$D/cluster" >/dev/null 2>&1; }
t_on_exit stop_cluster
outer_slurm_inside 90 4 dynres-smq "$SELF"
# the outer slurmd logs: a step launched on every node the expand added,
# after the order was sent
added=$(cat "$D/added") at=$(cat "$D/added_at")
[[ -n $added && -n $at ]] || t_fatal "no expand order recorded"
steps=$("$FIXTURE" steps "$D/outer" "$(cat "$D/alloc.jobid")")
for n in $(scontrol show hostnames "$added"); do
  s=$(awk -v n="$n" -v at="$at" '$2 == n && $3 >= at { print $1 " at " $3 }' <<<"$steps" | head -n1)
  [[ -n $s ]] || t_fatal "no outer step launched on added node $n after the order ($at): $steps"
  t_pass "outer Slurm launched step $s on added node $n (order sent at $at)"
done
t_done
