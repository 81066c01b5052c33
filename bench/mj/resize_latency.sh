#!/usr/bin/env bash
# resize_latency — in-place resize latency of a malleable job
# ([Finnerty24] measured 14.55 s per grow and 7.41 s per shrink).
#
#   bench/mj/resize_latency.sh [-c CYCLES] [--nodes N] [--from F]
#
# On a fresh N-node local virtual cluster (default 8) one malleable nqueens
# job (N = 14, tasks slowed to 100 ms so it outlasts the cycles) starts on F
# nodes (default 2) and is ordered by hand (mjcontrol resize) CYCLES times
# (default 20) to grow to N and back to F. Each order waits until the
# previous one is committed. Latency per resize:
#   app   — order received by the coordinator (mj_probe_adapt) -> commit
#           acknowledged (its "resize ... latency_s=" line);
#   sched — order sent -> commit recorded, the duration of the scheduler's
#           expand/shrink event (the figure the target refers to).
# Prints the medians for grow and shrink, the [Finnerty24] baselines and the
# ratio median / baseline (target: under 0.5 s each). The job's count must
# still be 365596 (checked when it ends).
#
# Environment: DYNRES_BUILD (default <repo>/build), DYNRES_SRC.
SELF_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
: "${DYNRES_SRC:=$(cd "$SELF_DIR/../.." && pwd)}"
. "$DYNRES_SRC/t/lib.sh"
T_NAME=resize_latency
CYCLES=20 NODES=8 FROM=2
while (($#)); do
  case $1 in
    -c) CYCLES=$2; shift 2 ;;
    --nodes) NODES=$2; shift 2 ;;
    --from) FROM=$2; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "resize_latency: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ $CYCLES =~ ^[0-9]+$ && $CYCLES -ge 1 && $CYCLES -le 1000 ]] || { echo "resize_latency: -c must be in 1..1000" >&2; exit 2; }
[[ $NODES =~ ^[0-9]+$ && $FROM =~ ^[0-9]+$ && $FROM -ge 1 && $FROM -lt $NODES ]] ||
  { echo "resize_latency: need 1 <= --from < --nodes" >&2; exit 2; }
[[ -x $DYNRES_BIN/nqueens ]] || { echo "resize_latency: $DYNRES_BIN/nqueens is not built" >&2; exit 2; }
t_begin $((120 + CYCLES * 20))

C=$T_TMP/c W=$T_TMP/w
mkdir -p "$W"
boot_cluster "$C" "$NODES" --tick 0.1 --kill-wait 1
write_script "$W/nq.sh" '#!/bin/bash' '#SBATCH -o nq.out' \
  "exec $DYNRES_BIN/nqueens -n 14 --task-sleep-ms 100"
# a rigid job holds the other nodes so that the malleable one starts on FROM
write_script "$W/block.sh" '#!/bin/bash' 'sleep 300'
blk=$(cd "$W" && mjsub --parsable -J block -N $((NODES - FROM)) --rigid block.sh) || t_fatal "mjsub failed: $blk"
wait_state 30 "$C" "$blk" RUNNING >/dev/null || t_fatal "the blocker did not start"
id=$(cd "$W" && mjsub --parsable -J nq -N "$FROM" --min-nodes "$FROM" --max-nodes "$NODES" --malleable nq.sh) ||
  t_fatal "mjsub failed: $id"
wait_state 30 "$C" "$id" RUNNING >/dev/null || t_fatal "the job did not start"
mjcancel "$blk"
wait_state 10 "$C" "$blk" CANCELLED >/dev/null || t_fatal "the blocker was not cancelled"
out() { cat "$W/nq.out" 2>/dev/null; }
count() { out | grep -c "^resize $1 " ; }
atleast() { (($(count "$1") >= $2)); }
sleep 1
for ((i = 1; i <= CYCLES; i++)); do
  mjcontrol resize "$id" "$NODES" >/dev/null || t_fatal "mjcontrol resize $id $NODES failed"
  wait_for 30 "expand $i" atleast expand "$i" >/dev/null || t_fatal "expand $i not committed: $(out | tail -n 5)"
  mjcontrol resize "$id" "$FROM" >/dev/null || t_fatal "mjcontrol resize $id $FROM failed"
  wait_for 30 "shrink $i" atleast shrink "$i" >/dev/null || t_fatal "shrink $i not committed: $(out | tail -n 5)"
done
state=$(job_state "$C" "$id")
[[ $state == RUNNING ]] || echo "note: the job was $state before the last cycle ended: cycles may have overlapped its end" >&2

median() { sort -g | awk '{ a[NR] = $1 } END { if (NR == 0) { print "nan"; exit } print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
app_grow=$(out | grep '^resize expand ' | grep -oE 'latency_s=[0-9.]+' | cut -d= -f2 | median)
app_shrink=$(out | grep '^resize shrink ' | grep -oE 'latency_s=[0-9.]+' | cut -d= -f2 | median)
# scheduler side: the expand/shrink events ("from=N to=M order=ID duration=S",
# S = order sent -> commit recorded)
sched_latencies() {  # KIND (expand|shrink)
  sq "$C" "SELECT detail FROM events WHERE job_id = $id AND kind = '$1'" | grep -oE 'duration=[0-9.e+-]+' | cut -d= -f2
}
sched_grow=$(sched_latencies expand | median)
sched_shrink=$(sched_latencies shrink | median)

wait_state 120 "$C" "$id" COMPLETED >/dev/null
sol=$(out | grep -oE 'solutions=[0-9]+' | cut -d= -f2)
echo "nqueens N=14 on $FROM <-> $NODES nodes, $CYCLES grow/shrink cycles; count $sol (fixed-size: 365596)"
for k in grow shrink; do
  base=14.55
  [[ $k == shrink ]] && base=7.41
  a=app_$k s=sched_$k
  printf '%-6s median app %s s, sched %s s; [Finnerty24] %s s; ratio sched/Finnerty24 %s; target < 0.5 s\n' "$k" "${!a}" "${!s}" \
    "$base" "$(awk -v x="${!s}" -v b="$base" 'BEGIN { if (x == "nan" || x == "") print "n/a"; else printf "%.4f", x / b }')"
done
[[ $sol == 365596 ]] || { echo "resize_latency: wrong count $sol" >&2; exit 1; }
