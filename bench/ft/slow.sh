#!/bin/bash
# slow.sh — what migration off a slow node [HoG14 §5.5] gains. heat
# --malleable (iCheck, one MPI rank per node, each with its own MJ_NODE through
# mjstepd's node launcher mj-node-exec; libmjprof
# reporting every 0.3 s) on 3 of the 4 compute nodes of a local cluster
# (5 nodes, the last one iCheck's); --throttle-after seconds after heat
# registered, the job's second node is put under a CPU quota of --percent %
# of one core (vcluster-throttle; released after the run). Two clusters
# run side by side: slow-node migration on (scheduler.slow_nodes window 2 s,
# windows 3, factor 1.5, cooldown 60 s) and off (enabled: false); the runs
# take turns, never at the same time. Modes:
#   plain     unthrottled, migration on (the same-run baseline; must not migrate)
#   loaded    unthrottled, migration on, with `stress-ng --cpu 2` (nice 19)
#             loading the whole machine meanwhile: every rank gets less CPU
#             alike, so no node may be found slow (must not migrate); runs
#             --loaded-iters iterations (longer: more windows to err in)
#   stay      throttled, migration off (the job stays on the slow node)
#   migrate   throttled, migration on (swapped onto the idle node)
# Per run: runtime_s (start -> end), detect_s (throttle -> slow_node event;
# median and p95 over the migrate runs),
# the migrate event's break_even and cost (seconds), migrations, and the
# checksum (must equal the fixed-size run). Prints medians per mode, the
# migrations of the plain and loaded runs,
# runtime ratios to plain and migrate/stay, the median detection time and
# the break-even remaining time: the restart cost measured in the migrate
# runs (two resizes per swap) over 1 - 1/ratio.
#
#   bench/ft/slow.sh [--reps 5] [--percent 2] [--throttle-after 1]
#                    [--iters 1600] [--loaded-iters 4000] [--nx 800] [--ny 600]
set -uo pipefail
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${DYNRES_BUILD:-$SRC/build}
BIN=$BUILD/bin
export PATH=$BIN:$SRC/share/dynres:$PATH
REPS=5 PCT=2 AFTER=1 ITERS=1600 LITERS=4000 NX=800 NY=600
while (($#)); do
  case $1 in
    --reps) REPS=$2; shift 2 ;;
    --percent) PCT=$2; shift 2 ;;
    --throttle-after) AFTER=$2; shift 2 ;;
    --iters) ITERS=$2; shift 2 ;;
    --loaded-iters) LITERS=$2; shift 2 ;;
    --nx) NX=$2; shift 2 ;;
    --ny) NY=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "slow.sh: unknown option '$1'" >&2; exit 1 ;;
  esac
done
die() { echo "slow.sh: $*" >&2; exit 1; }
for v in REPS PCT ITERS LITERS NX NY; do [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "--${v,,} must be a positive integer"; done
[[ $AFTER =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "--throttle-after must be seconds"
LIB=$BUILD/lib/libmjprof.so
[[ -x $BIN/heat && -f $LIB ]] || die "heat and libmjprof.so must be built"
[[ $(id -u) == 0 ]] || die "vcluster-throttle needs root (cgroups)"
command -v stress-ng >/dev/null || die "stress-ng (Debian package stress-ng) is needed for the loaded runs"
TOP=$(mktemp -d "${TMPDIR:-/tmp}/dynres-ftslow-XXXXXX")
SP=""
cleanup() {
  [[ -n $SP ]] && kill "$SP" 2>/dev/null
  for c in on off; do
    for n in n1 n2 n3 n4; do vcluster-throttle --dir "$TOP/$c" --release "$n" >/dev/null 2>&1; done
    vcluster-down --dir "$TOP/$c" >/dev/null 2>&1
  done
  rm -rf "$TOP"
}
trap cleanup EXIT
boot() {  # DIR ENABLED
  vcluster-boot --local 5 --dir "$1" --tick 0.2 --kill-wait 1 --icheck-nodes 1 --resize-timeout 30 >/dev/null ||
    die "vcluster-boot $1 failed"
  sed -i "s/^scheduler:\$/scheduler:\n  slow_nodes:\n    enabled: $2\n    window: 2\n    windows: 3\n    factor: 1.5\n    cooldown: 60/" \
    "$1/dynres.yaml"
  kill "$(cat "$1/mjsched.pid")"
  for _ in $(seq 100); do [[ -e $1/mjsched.pid ]] || break; sleep 0.1; done
  mjsched --home "$1" --daemon || die "mjsched did not start again in $1"
  for _ in $(seq 100); do [[ -S $1/mjsched.sock ]] && break; sleep 0.1; done
}
boot "$TOP/on" true
boot "$TOP/off" false
q() { sqlite3 -cmd '.timeout 5000' "$1/state.db" "$2"; }
ARGS="--nx $NX --ny $NY --iters $ITERS -q"
# shellcheck disable=SC2086
ref=$(heat $ARGS --no-icheck | sed -n 's/^heat: checksum=\([0-9a-f]*\).*/\1/p')
# shellcheck disable=SC2086
lref=$(heat $ARGS --iters "$LITERS" --no-icheck | sed -n 's/^heat: checksum=\([0-9a-f]*\).*/\1/p')
echo "# slow.sh: heat $ARGS on 3 of 4 nodes; throttle n2 to $PCT % of one core ${AFTER} s after heat registered;" \
  "loaded runs: $LITERS iterations beside stress-ng --cpu 2 (nice 19); $REPS reps;" \
  "load average $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores"
printf '%-8s %4s %10s %9s %11s %7s %5s %s\n' mode rep runtime_s detect_s break_even_s cost_s migr checksum
declare -A RT DT BE CO
NP=0 NL=0  # migrations in the unthrottled runs, without and with load
for rep in $(seq "$REPS"); do
  for mode in plain loaded stay migrate; do
    C=$TOP/on
    [[ $mode == stay ]] && C=$TOP/off
    W=$C/work; mkdir -p "$W"
    printf '%s\n' '#!/bin/bash' '#SBATCH --malleable' '#SBATCH --min-nodes 1' '#SBATCH --max-nodes 3' \
      "exec mpiexec -f \"\$MJ_NODEFILE\" -n \"\$MJ_JOB_NUM_NODES\" env LD_PRELOAD=$LIB MJPROF_INTERVAL=0.3 \\" \
      "  $BIN/heat --malleable --app heat-\$MJ_JOB_ID --no-persist --config $C/icheck.yaml $ARGS \"\$@\"" >"$W/job.sh"
    more=()
    [[ $mode == loaded ]] && more=(--iters "$LITERS")
    if [[ $mode == loaded ]]; then
      nice -n 19 stress-ng --cpu 2 -q &
      SP=$!
    fi
    id=$(cd "$W" && DYNRES_HOME=$C mjsub --parsable -N 3 -t 30 -o "$W/heat-%j.out" job.sh "${more[@]}") || die "mjsub failed"
    for _ in $(seq 600); do [[ $(q "$C" "SELECT phase FROM mj_jobs WHERE job_id=$id") == accepting ]] && break; sleep 0.1; done
    t0=""
    if [[ $mode == stay || $mode == migrate ]]; then
      sleep "$AFTER"
      vcluster-throttle --dir "$C" n2 "$PCT" >/dev/null || echo "# throttle failed ($mode $rep)" >&2
      t0=$(date +%s.%N)
    fi
    for _ in $(seq 36000); do
      s=$(q "$C" "SELECT state FROM jobs WHERE id=$id")
      [[ $s == RUNNING || $s == PENDING ]] || break
      sleep 0.1
    done
    vcluster-throttle --dir "$C" --release n2 >/dev/null 2>&1
    if [[ -n $SP ]]; then kill "$SP"; wait "$SP" 2>/dev/null; SP=""; fi
    rt=$(q "$C" "SELECT printf('%.2f', end_time - start_time) FROM jobs WHERE id=$id")
    ck=$(sed -n 's/^heat: checksum=\([0-9a-f]*\).*/\1/p' "$W/heat-$id.out" | tail -1)
    want=$ref
    [[ $mode == loaded ]] && want=$lref
    [[ $ck == "$want" ]] && ck=ok || ck="BAD($ck) state=$s"
    ds=$(q "$C" "SELECT MIN(time) FROM events WHERE job_id=$id AND kind='slow_node'")
    dt=-
    [[ -n $t0 && -n $ds ]] && dt=$(awk -v a="$t0" -v b="$ds" 'BEGIN { printf "%.2f", b - a }')
    mg=$(q "$C" "SELECT detail FROM events WHERE job_id=$id AND kind='migrate' ORDER BY id LIMIT 1")
    nm=$(q "$C" "SELECT COUNT(*) FROM events WHERE job_id=$id AND kind='migrate'")
    be=$(sed -n 's/.* break_even=\([0-9.]*\).*/\1/p' <<<"$mg")
    # measured pause of the migration: both restart-based resizes, adapt-begin -> commit
    co=$(q "$C" "SELECT printf('%.2f', SUM(settled - begun)) FROM resize_orders WHERE job_id=$id AND state='committed' AND begun IS NOT NULL")
    printf '%-8s %4s %10s %9s %11s %7s %5s %s\n' "$mode" "$rep" "$rt" "$dt" "${be:--}" "${co:--}" "$nm" "$ck"
    [[ $mode == plain ]] && NP=$((NP + nm))
    [[ $mode == loaded ]] && NL=$((NL + nm))
    RT[$mode]+="$rt "
    [[ $dt != - ]] && DT[$mode]+="$dt "
    [[ -n $be ]] && BE[$mode]+="$be "
    [[ -n $co && $nm -gt 0 ]] && CO[$mode]+="$co "  # the pause of a migration: runs without one have none
  done
done
med() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{ v[NR] = $1 } END { if (!NR) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.2f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo
echo "# medians over $REPS reps"
p=$(med "${RT[plain]}") s=$(med "${RT[stay]}") m=$(med "${RT[migrate]}")
printf 'runtime_s      plain %s  loaded %s  stay %s  migrate %s\n' "$p" "$(med "${RT[loaded]}")" "$s" "$m"
awk -v p="$p" -v s="$s" -v m="$m" 'BEGIN { printf "ratio          stay/plain %.2f  migrate/plain %.2f  migrate/stay %.2f\n", s / p, m / p, m / s }'
# p95: nearest rank (the largest of up to 19 runs)
p95() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{ v[NR] = $1 } END { if (!NR) print "-"; else { k = int(0.95 * NR + 0.999999); print v[k < 1 ? 1 : k] } }'; }
printf 'detect_s       migrate median %s  p95 %s (throttle -> slow_node event; stay: detection off)\n' \
  "$(med "${DT[migrate]:-}")" "$(p95 "${DT[migrate]:-}")"
printf 'migrations     plain %s  loaded %s (unthrottled: must be 0; loaded: stress-ng --cpu 2 beside)\n' "$NP" "$NL"
cost=$(med "${CO[migrate]:-}")
r=$(awk -v p="$p" -v s="$s" 'BEGIN { printf "%.2f", s / p }')
printf 'migration      measured pause %s s (two restart-based resizes); policy break-even (its estimate) %s s\n' \
  "$cost" "$(med "${BE[migrate]:-}")"
awk -v c="$cost" -v r="$r" 'BEGIN { if (c == "-" || r <= 1) print "break-even     -"; else
  printf "break-even     remaining time above %.1f s pays (measured pause %.2f s / (1 - 1/%.2f), slowdown stay/plain)\n", c / (1 - 1 / r), c, r }'
echo "# load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
