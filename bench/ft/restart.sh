#!/bin/bash
# restart.sh — what a node failure costs an MPI job that resizes by
# checkpoint-restart: heat (96 x 90, 200 iterations of >= 0.05 s, a commit
# every 20) on 3 nodes of a local cluster of 4 compute nodes and 1 iCheck
# node, node agents. After iteration 70 + a random 0..19 its third node is
# crashed (vcluster-fail; revived and resumed after the run). Modes:
#   none     no failure (the same-run baseline of the runtime)
#   agents   malleable: run again on 2 nodes, restored from the agents' memory
#   second   the same with iCheck in direct mode (direct: true): restored
#            from the second level
#   requeue  rigid, without checkpoints: requeued, rerun from the start on 3
#            up nodes (Slurm's behaviour)
# Per run: detect_s (vcluster-fail started -> the DOWN event), restore_s (DOWN -> the data restored:
# relaunch, MPI start, iCheck restore; requeue: DOWN -> rerun started),
# resume_s (restored -> the order committed), total_s (kill -> running
# again), lost (iterations recomputed: the last one reached before the
# failure minus the one restored; requeue: all of them), runtime_s, and the
# checksum (must be the fixed-size run's). Prints median and p95 (nearest
# rank) per mode, and runtimes as ratios to none.
#
#   bench/ft/restart.sh [--trials 10] [--modes "none agents second requeue"] [--dir DIR]
set -uo pipefail
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN=${DYNRES_BUILD:-$SRC/build}/bin
export PATH=$BIN:$SRC/share/dynres:$PATH
. "$SRC/bench/ft/lib.sh"
TRIALS=10 MODES="none agents second requeue" DIR=""
while (($#)); do
  case $1 in
    --trials) TRIALS=$2; shift 2 ;;
    --modes) MODES=$2; shift 2 ;;
    --dir) DIR=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "restart.sh: unknown option '$1'" >&2; exit 1 ;;
  esac
done
[[ $TRIALS =~ ^[1-9][0-9]*$ ]] || { echo "restart.sh: --trials needs a positive count" >&2; exit 1; }
[[ -x $BIN/heat ]] || { echo "restart.sh: heat is not built" >&2; exit 1; }
DIR=${DIR:-$(mktemp -d "${TMPDIR:-/tmp}/dynres-ftrestart-XXXXXX")}
ft_boot "$DIR" 4 --local 5 --icheck-nodes 1 --tick 0.2 --kill-wait 1 --resize-timeout 30
W=$DIR/work; mkdir -p "$W"
printf 'direct: true\npfs_dir: %s/pfs-direct\n' "$DIR" >"$DIR/direct.yaml"
ARGS=(--nx 96 --ny 90 --iters 200 --iter-seconds 0.05 --ckpt-every 20 --print-every 1)
ref=$(heat --nx 96 --ny 90 --iters 200 --no-icheck | sed -n 's/^heat: checksum=\([0-9a-f]*\).*/\1/p')
f() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
declare -A R
for t in $(seq "$TRIALS"); do
  for mode in $MODES; do
    out=$W/$mode.$t.out
    case $mode in
      requeue) printf '#!/bin/bash\nexec mpiexec -f "$MJ_NODEFILE" -n "$MJ_JOB_NUM_NODES" %s --no-icheck %s\n' \
                 "$BIN/heat" "${ARGS[*]}" >"$W/rq.sh"
               id=$(cd "$W" && mjsub --parsable -N 3 --requeue -o "$out" rq.sh) ;;
      second) id=$(cd "$W" && ICHECK_CONFIG=$DIR/direct.yaml HEAT=$BIN/heat mjsub --parsable -N 3 --min-nodes 1 --max-nodes 3 \
                 -o "$out" "$SRC/share/dynres/examples/heat/heat-malleable.sh" "${ARGS[@]}") ;;
      *) id=$(cd "$W" && HEAT=$BIN/heat mjsub --parsable -N 3 --min-nodes 1 --max-nodes 3 \
            -o "$out" "$SRC/share/dynres/examples/heat/heat-malleable.sh" "${ARGS[@]}") ;;
    esac
    at=$((70 + RANDOM % 20)) tk="" victim=""
    if [[ $mode != none ]]; then
      for _ in $(seq 1200); do grep -q "^heat: iteration=$at " "$out" 2>/dev/null && break; sleep 0.02; done
      victim=$(q "SELECT name FROM nodes WHERE job_id=$id ORDER BY id DESC LIMIT 1")
      tk=$(date +%s.%N)
      vcluster-fail "$victim" >/dev/null
      before=$(sed -n 's/^heat: iteration=\([0-9]*\).*/\1/p' "$out" | tail -n1)
      for _ in $(seq 500); do [[ $(q "SELECT state FROM nodes WHERE name='$victim'") == down ]] && break; sleep 0.01; done
      td=$(q "SELECT MAX(time) FROM events WHERE kind='node' AND detail LIKE '$victim up->down%'")
    fi
    for _ in $(seq 1800); do [[ $(q "SELECT state FROM jobs WHERE id=$id") =~ COMPLETED|FAILED|NODE_FAIL|CANCELLED ]] && break; sleep 0.1; done
    st=$(q "SELECT state FROM jobs WHERE id=$id")
    first=$(q "SELECT MIN(time) FROM events WHERE job_id=$id AND kind='start'")
    end=$(q "SELECT end_time FROM jobs WHERE id=$id")
    sum=$(sed -n 's/^heat: checksum=\([0-9a-f]*\).*/\1/p' "$out" | tail -n1)
    ok=$([[ $sum == "$ref" && $st == COMPLETED ]] && echo ok || echo BAD)
    line="run mode=$mode trial=$t state=$st checksum=$ok runtime_s=$(f "$first" "$end")"
    R[$mode.runtime]+="$(f "$first" "$end") "
    if [[ -n $tk ]]; then
      if [[ $mode == requeue ]]; then
        back=$(q "SELECT MAX(time) FROM events WHERE job_id=$id AND kind='start'")
        d=$(f "$tk" "$td") rs=$(f "$td" "$back") rm=0 tot=$(f "$tk" "$back") lost=$before
      else
        line2=$(grep '^heat: resumed order=' "$out" | tail -n1)
        r0=$(sed -n 's/.*t_restore_end=\([0-9.]*\).*/\1/p' <<<"$line2") c0=$(sed -n 's/.*t_committed=\([0-9.]*\).*/\1/p' <<<"$line2")
        restored=$(sed -n 's/^heat: restart version=[0-9]* iteration=\([0-9]*\).*/\1/p' "$out" | tail -n1)
        d=$(f "$tk" "$td") rs=$(f "$td" "$r0") rm=$(f "$r0" "$c0") tot=$(f "$tk" "$c0") lost=$((before - ${restored:-0}))
      fi
      R[$mode.detect]+="$d " R[$mode.restore]+="$rs " R[$mode.resume]+="$rm " R[$mode.total]+="$tot " R[$mode.lost]+="$lost "
      line+=" killed_after=$before detect_s=$d restore_s=$rs resume_s=$rm total_s=$tot lost=$lost"
      ft_revive "$DIR" "$victim"
    fi
    echo "$line"
  done
done
stat() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { if (!NR) { printf "-"; exit }
  m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; p = int(0.95 * NR); if (p < 0.95 * NR) p++
  printf "%.3f/%.3f", m, v[p] }'; }
base=$(stat <<<"${R[none.runtime]:-}" | cut -d/ -f1)
echo "# median/p95 over $TRIALS trial(s); ratio = median runtime / median runtime of none"
for mode in $MODES; do
  rt=$(stat <<<"${R[$mode.runtime]}")
  line="restart: mode=$mode runtime_s=$rt"
  [[ $base != - && -n $base ]] && line+=" ratio_to_none=$(awk -v a="${rt%/*}" -v b="$base" 'BEGIN { printf "%.3f", a / b }')"
  [[ $mode != none ]] && for k in detect restore resume total lost; do line+=" ${k}=$(stat <<<"${R[$mode.$k]}")"; done
  echo "$line"
done
