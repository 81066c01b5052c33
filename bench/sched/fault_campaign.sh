#!/bin/bash
# fault_campaign.sh — the scheduler's fault-injection campaign:
# a mixed workload runs on a local virtual cluster while a driver SIGKILLs
# mjsched at random moments (and restarts it with vcluster-boot) and SIGKILLs
# random mjstepd supervisors; a quarter of the jobs are cancelled at random, a
# tenth fail, some are malleable and get resize orders. Afterwards it counts:
#   lost         jobs without exactly one final record (target 0)
#   twice        jobs that started more than once (each job appends its id to
#                a ledger when it starts; target 0)
#   misreported  final state not what happened: a job left alone must be
#                COMPLETED (or FAILED with exit 3 when it fails on purpose), a
#                cancelled one CANCELLED unless it had ended before, a job
#                whose supervisor was killed FAILED (target 0)
#   held         nodes held by a finished job (target 0)
#   leftover     processes of the cluster after vcluster-down (target 0)
#
#   bench/sched/fault_campaign.sh [--jobs 200] [--sched-kills 20] [--stepd-kills 10]
#                                 [--nodes 8] [--seed 1] [--dir DIR] [--full-disk]
#
# --full-disk: the same campaign with the cluster directory (state file,
# spool) on a 16 MiB tmpfs (root only) that a filler file makes full from
# 3 s to 9 s into the run: submissions meanwhile must be refused with a clear
# error, and once space is back nothing recorded before may be lost (jobs
# that ended while the disk was full are recorded late, not lost).
# Prints the counts as "campaign: key=value ..." and exits 1 when any target is
# missed. Needs a built tree (DYNRES_BUILD, default build/).
set -uo pipefail
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN=${DYNRES_BUILD:-$SRC/build}/bin
export PATH=$BIN:$SRC/share/dynres:$PATH
JOBS=200 SKILLS=20 DKILLS=10 NODES=8 SEED=1 DIR="" FULL=0
while (($#)); do
  case $1 in
    --jobs) JOBS=$2; shift 2 ;;
    --sched-kills) SKILLS=$2; shift 2 ;;
    --stepd-kills) DKILLS=$2; shift 2 ;;
    --nodes) NODES=$2; shift 2 ;;
    --seed) SEED=$2; shift 2 ;;
    --dir) DIR=$2; shift 2 ;;
    --full-disk) FULL=1; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "fault_campaign: unknown option $1" >&2; exit 2 ;;
  esac
done
DIR=${DIR:-$(mktemp -d "${TMPDIR:-/tmp}/dynres-campaign-XXXXXX")}
C=$DIR/cluster
mkdir -p "$DIR"
RANDOM=$SEED
if ((FULL)); then
  [[ $(id -u) == 0 ]] || { echo "fault_campaign: --full-disk needs root (tmpfs mount)" >&2; exit 77; }
  mkdir -p "$C"
  mount -t tmpfs -o size=16m,mode=700 tmpfs "$C" || { echo "fault_campaign: cannot mount a tmpfs" >&2; exit 77; }
fi
cleanup() {
  vcluster-down --dir "$C" >/dev/null 2>&1
  ((FULL)) && umount "$C" 2>/dev/null
  return 0
}
trap cleanup EXIT
sq() { sqlite3 -batch -cmd '.timeout 10000' "$C/state.db" "$1"; }
boot() { vcluster-boot --local "$NODES" --dir "$C" --tick 0.2 --kill-wait 1 --resize-timeout 2 --resize-backoff 1 >"$DIR/boot.log" 2>&1; }
boot || { cat "$DIR/boot.log" >&2; exit 1; }
export DYNRES_HOME=$C
LEDGER=$DIR/ledger
: >"$LEDGER"
: >"$DIR/cancelled" ; : >"$DIR/stepd-killed"; : >"$DIR/submit-refused"

# ---- the workload: sizes 1-4, 0.3-2.3 s, a tenth fail, some malleable -------
submitter() {
  local i n t fail mall id script
  for ((i = 0; i < JOBS; ++i)); do
    n=$((RANDOM % 4 + 1)); t=$(awk -v r=$RANDOM 'BEGIN { printf "%.1f", 0.3 + (r % 21) / 10 }')
    fail=$((RANDOM % 10 == 0)); mall=$((RANDOM % 8 == 0))
    script="#!/bin/bash
echo \$MJ_JOB_ID >>$LEDGER"
    if ((mall)); then
      script+="
mjtest serve $t >/dev/null"
    else
      script+="
sleep $t"
    fi
    ((fail)) && script+="
exit 3"
    if id=$(printf '%s\n' "$script" | mjsub --parsable -J "c$i-f$fail-m$mall" -N "$n" \
              $( ((mall)) && echo "--malleable --min-nodes 1 --max-nodes 4") -o /dev/null 2>>"$DIR/submit.err"); then
      echo "$id" >>"$DIR/submitted"
    else
      echo "$i" >>"$DIR/submit-refused"
    fi
    sleep 0.0$((RANDOM % 10))
  done
}
: >"$DIR/submitted"
submitter &
SUB=$!

# ---- the faults ----------------------------------------------------------------
sched_kills=0 stepd_kills=0 cancels=0 resizes=0 filled=0
want_cancel=$((JOBS / 4))
start=$(date +%s)
while kill -0 "$SUB" 2>/dev/null || [[ $(sq "SELECT COUNT(*) FROM jobs WHERE state IN ('PENDING','RUNNING')") != 0 ]]; do
  sleep 0.$((RANDOM % 5 + 1))
  if ((FULL)); then
    el=$(($(date +%s) - start))
    if ((filled == 0 && el >= 3)); then
      dd if=/dev/zero of="$C/filler" bs=64k 2>/dev/null; filled=1   # until ENOSPC
      echo "disk full at ${el}s: $(df -h "$C" | tail -1)" >>"$DIR/disk.log"
    elif ((filled == 1 && el >= 9)); then
      rm -f "$C/filler"; filled=2
      echo "space back at ${el}s" >>"$DIR/disk.log"
    fi
  fi
  # like an admin's cron job: a cluster without a scheduler is booted again
  # (a reboot can fail while the disk is full)
  p=$(cat "$C/mjsched.pid" 2>/dev/null)
  [[ -n $p ]] && kill -0 "$p" 2>/dev/null || boot
  r=$((RANDOM % 100))
  if ((r < 12 && sched_kills < SKILLS)); then
    p=$(cat "$C/mjsched.pid" 2>/dev/null)
    if [[ -n $p ]] && kill -9 "$p" 2>/dev/null; then
      sched_kills=$((sched_kills + 1))
      sleep 0.$((RANDOM % 5))
      for _ in 1 2 3 4 5; do boot && break; sleep 0.5; done
    fi
  elif ((r < 20 && stepd_kills < DKILLS)); then
    row=$(sq "SELECT id || ' ' || supervisor_pid FROM jobs WHERE state='RUNNING' ORDER BY RANDOM() LIMIT 1")
    if [[ -n $row ]] && kill -9 "${row#* }" 2>/dev/null; then
      echo "${row% *}" >>"$DIR/stepd-killed"
      stepd_kills=$((stepd_kills + 1))
    fi
  elif ((r < 45 && cancels < want_cancel)); then
    id=$(sq "SELECT id FROM jobs WHERE state IN ('PENDING','RUNNING') ORDER BY RANDOM() LIMIT 1")
    if [[ -n $id ]] && mjcancel "$id" >/dev/null 2>&1; then
      echo "$id $(date +%s.%N)" >>"$DIR/cancelled"
      cancels=$((cancels + 1))
    fi
  elif ((r < 55)); then
    row=$(sq "SELECT id || ' ' || num_nodes FROM jobs WHERE state='RUNNING' AND kind='malleable' ORDER BY RANDOM() LIMIT 1")
    if [[ -n $row ]]; then
      mjcontrol resize "${row% *}" $((RANDOM % 4 + 1)) >/dev/null 2>&1 && resizes=$((resizes + 1))
    fi
  fi
  if (($(date +%s) - start > 600)); then echo "fault_campaign: still running after 600 s" >&2; break; fi
done
wait "$SUB" 2>/dev/null
# a scheduler must be up to settle the last jobs of killed supervisors
[[ -n $(cat "$C/mjsched.pid" 2>/dev/null) ]] && kill -0 "$(cat "$C/mjsched.pid")" 2>/dev/null || boot
for _ in $(seq 150); do
  [[ $(sq "SELECT COUNT(*) FROM jobs WHERE state IN ('PENDING','RUNNING')") == 0 ]] && break
  sleep 0.2
done

# ---- the counts ----------------------------------------------------------------
submitted=$(wc -l <"$DIR/submitted")
lost=$(sq "SELECT COUNT(*) FROM jobs j WHERE j.state IN ('PENDING','RUNNING')
           OR (SELECT COUNT(*) FROM events e WHERE e.job_id = j.id AND e.kind IN ('end','cancel')) != 1")
recorded=$(sq "SELECT COUNT(*) FROM jobs")
lost=$((lost + submitted - recorded))
twice=$(sort "$LEDGER" | uniq -d | wc -l)
ids=$(sort -u "$LEDGER" | paste -sd, -)
never=$(sq "SELECT COUNT(*) FROM jobs WHERE id IN (${ids:-0}) AND start_time IS NULL")  # ran but no start recorded
held=$(sq "SELECT COUNT(*) FROM nodes n JOIN jobs j ON j.id = n.job_id WHERE j.state != 'RUNNING'")
mis=0
while IFS='|' read -r id name state code reason endt; do
  cancelled_at=$(awk -v id="$id" '$1 == id { print $2; exit }' "$DIR/cancelled")
  if grep -qx "$id" "$DIR/stepd-killed"; then
    [[ $state == FAILED || $state == CANCELLED || $state == COMPLETED ]] || { mis=$((mis + 1)); echo "misreported $id ($name): $state after its supervisor was killed"; }
  elif [[ -n $cancelled_at ]]; then
    if [[ $state != CANCELLED ]] && awk -v e="$endt" -v c="$cancelled_at" 'BEGIN { exit !(e == "" || e + 0 > c + 0.5) }'; then
      mis=$((mis + 1)); echo "misreported $id ($name): $state, cancelled at $cancelled_at, ended $endt"
    fi
  elif [[ $name == *-f1-* ]]; then
    [[ $state == FAILED && $code == 3 ]] || { mis=$((mis + 1)); echo "misreported $id ($name): $state exit=$code ($reason)"; }
  else
    [[ $state == COMPLETED ]] || { mis=$((mis + 1)); echo "misreported $id ($name): $state exit=$code ($reason)"; }
  fi
done < <(sq "SELECT id, name, state, IFNULL(exit_code,''), reason, IFNULL(end_time,'') FROM jobs")
vcluster-down --dir "$C" >/dev/null 2>&1
sleep 1
leftover=$(pgrep -f -- "$C" | grep -vx "$$" | wc -l)
refused=$(wc -l <"$DIR/submit-refused")
echo "campaign: elapsed_s=$(( $(date +%s) - start )) jobs=$submitted refused=$refused sched_kills=$sched_kills stepd_kills=$stepd_kills cancels=$cancels" \
     "resizes=$resizes lost=$lost twice=$twice never_recorded_start=$never misreported=$mis held=$held leftover=$leftover"
if ((FULL)); then
  rm -f "$C/filler"
  # refusals for the full disk apart from those of an mjsched killed mid-request
  # (a kill can land before, during or after the disk is full)
  full=$(grep -c 'disk is full' "$DIR/submit.err" || true)
  first=$(grep -m1 'disk is full' "$DIR/submit.err" || head -1 "$DIR/submit.err")
  echo "campaign: refused submissions while the disk was full: $full (first error: $first); other refusals: $((refused - full))"
fi
((lost == 0 && twice == 0 && never == 0 && mis == 0 && held == 0 && leftover == 0))
