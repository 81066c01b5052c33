#!/bin/bash
# shrink.sh — what a node failure costs a job, shrunk in place versus
# requeued from the start. nqueens (N = 14, 1364 tasks, --task-sleep-ms 10,
# a coordinator and one worker per node) on 3 nodes of a 4-node local cluster
# with node agents; --kill-after seconds after its 3 workers connected, its
# second node is crashed (vcluster-fail; revived and resumed after the run).
# Modes:
#   none     no failure (the same-run baseline)
#   shrink   malleable: shrunk away from the lost node, runs on in place
#   requeue  rigid: stopped, requeued, rerun from the start on 3 up nodes
# Per run: runtime_s (first start -> end), detect_s (kill -> DOWN event),
# react_s (DOWN -> shrink committed, or -> the rerun's start), and the count
# (must be 365596). Prints medians per mode and runtime ratios to none.
#
#   bench/ft/shrink.sh [--reps 3] [--kill-after 3] [--dir DIR]
set -uo pipefail
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN=${DYNRES_BUILD:-$SRC/build}/bin
export PATH=$BIN:$SRC/share/dynres:$PATH
. "$SRC/bench/ft/lib.sh"
REPS=3 KILL_AFTER=3 DIR=""
while (($#)); do
  case $1 in
    --reps) REPS=$2; shift 2 ;;
    --kill-after) KILL_AFTER=$2; shift 2 ;;
    --dir) DIR=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "shrink.sh: unknown option '$1'" >&2; exit 1 ;;
  esac
done
[[ -x $BIN/nqueens ]] || { echo "shrink.sh: nqueens is not built" >&2; exit 1; }
DIR=${DIR:-$(mktemp -d "${TMPDIR:-/tmp}/dynres-ftshrink-XXXXXX")}
ft_boot "$DIR" 4 --local 4 --tick 0.2 --kill-wait 1
W=$DIR/work; mkdir -p "$W"
declare -A R
for rep in $(seq "$REPS"); do
  for mode in none shrink requeue; do
    out=$W/$mode.$rep.out
    printf '#!/bin/bash\nexec %s -n 14 --task-sleep-ms 10 -v\n' "$BIN/nqueens" >"$W/nq.sh"
    if [[ $mode == requeue ]]; then
      id=$(cd "$W" && mjsub --parsable -N 3 -o "$out" nq.sh)
    else
      id=$(cd "$W" && mjsub --parsable -N 3 --min-nodes 1 --max-nodes 3 --malleable -o "$out" nq.sh)
    fi
    for _ in $(seq 400); do (($(grep -c connected "$out" 2>/dev/null; true) + 0 >= 3)) && break; sleep 0.05; done
    tk=""
    if [[ $mode != none ]]; then
      sleep "$KILL_AFTER"
      victim=$(q "SELECT name FROM nodes WHERE job_id=$id ORDER BY id LIMIT 1 OFFSET 1")
      tk=$(date +%s.%N)
      vcluster-fail "$victim" >/dev/null
    fi
    for _ in $(seq 1200); do [[ $(q "SELECT state FROM jobs WHERE id=$id") == COMPLETED ]] && break; sleep 0.1; done
    st=$(q "SELECT state FROM jobs WHERE id=$id")
    first=$(q "SELECT MIN(time) FROM events WHERE job_id=$id AND kind='start'")
    end=$(q "SELECT end_time FROM jobs WHERE id=$id")
    count=$(grep -oE 'solutions=[0-9]+' "$out" | tail -1 | cut -d= -f2)
    line="run mode=$mode rep=$rep state=$st solutions=$count runtime_s=$(awk -v a="$first" -v b="$end" 'BEGIN { printf "%.2f", b - a }')"
    R[$mode.rt]+="$(awk -v a="$first" -v b="$end" 'BEGIN { printf "%.3f", b - a }') "
    if [[ -n $tk ]]; then
      td=$(q "SELECT MAX(time) FROM events WHERE kind='node' AND detail LIKE '$victim up->down%'")
      if [[ $mode == shrink ]]; then
        tr=$(q "SELECT settled FROM resize_orders WHERE job_id=$id ORDER BY id DESC LIMIT 1")
      else
        tr=$(q "SELECT MAX(time) FROM events WHERE job_id=$id AND kind='start'")
      fi
      d=$(awk -v a="$tk" -v b="$td" 'BEGIN { printf "%.3f", b - a }')
      r=$(awk -v a="$td" -v b="$tr" 'BEGIN { printf "%.3f", b - a }')
      R[$mode.det]+="$d " R[$mode.react]+="$r "
      line+=" detect_s=$d react_s=$r"
      ft_revive "$DIR" "$victim"
    fi
    echo "$line"
  done
done
med() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { printf "%.3f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
base=$(med <<<"${R[none.rt]}")
for mode in none shrink requeue; do
  m=$(med <<<"${R[$mode.rt]}")
  extra=""
  [[ $mode != none ]] && extra=" detect_s=$(med <<<"${R[$mode.det]}") react_s=$(med <<<"${R[$mode.react]}")"
  echo "shrink: mode=$mode reps=$REPS median_runtime_s=$m ratio_to_none=$(awk -v a="$m" -v b="$base" 'BEGIN { printf "%.3f", a / b }')$extra"
done
