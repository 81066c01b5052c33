#!/bin/bash
# live.sh — the power-corridor experiments of [John24 §9.2] run LIVE
# on the local virtual cluster, time-scaled, each beside mjsim's figures for
# the very same jobs (mjsim --print-jobs gives them; each job runs esp-app,
# the emulated application that follows mjsim's runtime model and resizes in
# place). The corridor is changed at run time with `pcorridor set` from a
# background loop standing for cron. Violations are counted by both sides
# with the same function (lib/power violations.hpp; mjsim --grace,
# pcorridor show --grace): episodes outside the corridor longer than the
# grace, over the same window (first submission to last job end).
#
#   1. §9.2.2 upper and lower enforcement (power-upper, power-lower)
#   2. §9.2.3 dynamic corridor (power-dynamic: one malleable Pi job)
#   3. §9.2.4 / Table 9.2 (power-mix: 20 jobs, 14 nodes): static backfill
#      (rigid jobs) / runtime-only / power-aware
#
#   bench/power/live.sh [--out DIR] [--grace S] [--only NAME[,NAME]]
#                       [--scale-runtime F] [--scale-mix F]
#   bench/power/live.sh --run NAME WORKLOAD POLICY MODE SCALE [--corridor FILE]
#                       [--malleable-fraction F] [--grace S] [--out DIR]
#
# NAME of --only: upper, lower, dynamic, mix. Defaults: grace max(1 s, 40 s x
# scale) in scaled seconds (a correction by mjsched takes a pass, and an
# expansion commits only after esp-app's grow pause of 14.55 s x scale, which
# mjsim carries out at once: 1 s at 0.01-0.025, 2 s at 0.05), scale 0.01 for
# §9.2.2/§9.2.3 (1800-9000 s runs -> 18-90 s), 0.05 for Table 9.2. Prints one table row per run:
#   name policy/mode violations live/sim, makespan live/sim (scaled s),
#   watt-seconds outside live/sim.
# --run does one run and prints its row (t/integration/t3030-power-live-vs-sim.sh).
# Needs a build with mjsim, mjsched, esp-app (share/dynres/setup). About 6 min.
set -euo pipefail
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${DYNRES_BUILD:-$SRC/build}
BIN=${DYNRES_BIN:-$BUILD/bin}
export PATH=$BIN:$SRC/share/dynres:$PATH
APP=$BIN/esp-app   # the built ESP application (the script beside its source only runs it)
OUT="" GRACE=auto ONLY="upper,lower,dynamic,mix" SRUN=0.01 SMIX=0.05 RUN=()
CORR="" FRAC=""
die() { echo "live.sh: error: $*" >&2; exit 1; }
while (($#)); do
  case $1 in
    --out) OUT=$2; shift 2 ;;
    --grace) GRACE=$2; shift 2 ;;
    --only) ONLY=$2; shift 2 ;;
    --scale-runtime) SRUN=$2; shift 2 ;;
    --scale-mix) SMIX=$2; shift 2 ;;
    --run) RUN=("$2" "$3" "$4" "$5" "$6"); shift 6 ;;
    --corridor) CORR=$2; shift 2 ;;
    --malleable-fraction) FRAC=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) die "unknown option '$1'" ;;
  esac
done
num='^[0-9]*\.?[0-9]+$'
[[ ($GRACE == auto || $GRACE =~ $num) && $SRUN =~ $num && $SMIX =~ $num ]] ||
  die "--grace and the scales must be non-negative numbers"
GRACE_OPT=$GRACE
for x in mjsim mjsched mjsub pcorridor vcluster-boot; do command -v "$x" >/dev/null || die "$x not found (build first)"; done
[[ -x $APP ]] || die "$APP is not built (share/dynres/setup esp-app)"
[[ -n $OUT ]] || OUT=$(mktemp -d /tmp/dynres-power-live-XXXXXX)
mkdir -p "$OUT"
CLUSTERS=()
BGPIDS=()
cleanup() {
  local p c
  for p in "${BGPIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for c in "${CLUSTERS[@]}"; do vcluster-down --dir "$c" >/dev/null 2>&1 || true; done
}
trap cleanup EXIT

now() { date +%s.%N; }
sleep_until() {  # sleep_until EPOCH
  local d
  d=$(awk -v a="$1" -v n="$(now)" 'BEGIN { d = a - n; if (d < 0) d = 0; printf "%.3f", d }')
  [[ $d == 0.000 ]] || sleep "$d"
}
sq() { sqlite3 -batch -cmd '.timeout 10000' "$1/state.db" "$2"; }
hms() { local s=$1; printf '%d:%02d:%02d' $((s / 3600)) $((s % 3600 / 60)) $((s % 60)); }

# run_one NAME WORKLOAD POLICY MODE SCALE — prints one row; figures also in $OUT/NAME.json
run_one() {
  local name=$1 wl=$2 pol=$3 mode=$4 scale=$5
  local GRACE=$GRACE_OPT
  [[ $GRACE == auto ]] && GRACE=$(awk -v s="$scale" 'BEGIN { g = 40 * s; if (g < 1) g = 1; print g }')
  local dir=$OUT/$name simargs=(-w "$wl" --time-scale "$scale")
  [[ -n $FRAC ]] && simargs+=(-m "$FRAC")
  [[ -n $CORR ]] && simargs+=(--corridor "$CORR")
  mjsim "${simargs[@]}" --print-jobs >"$OUT/$name.jobs.tsv" || die "mjsim --print-jobs failed for $wl"
  local nodes idle
  read -r nodes idle < <(awk -F'\t' '$1 == "# nodes" { print $2, $4 }' "$OUT/$name.jobs.tsv")
  rm -rf "$dir"
  CLUSTERS+=("$dir")
  vcluster-boot --local "$nodes" --dir "$dir" --tick 0.1 --kill-wait 1 --policy "$pol" --time-scale "$scale" \
    >"$OUT/$name.boot.log" 2>&1 || { cat "$OUT/$name.boot.log" >&2; die "vcluster-boot failed"; }
  export DYNRES_HOME=$dir
  # the power model and mode, then a scheduler that reads them
  sed -i "s/^  kill_wait: .*/&\n  power:\n    mode: $mode/" "$dir/dynres.yaml"
  printf 'power:\n  idle_watts: %s\n  node_max_watts: 400\n  record_samples: true\n' "$idle" >>"$dir/dynres.yaml"
  local pid
  pid=$(cat "$dir/mjsched.pid")
  kill "$pid"
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  mjsched --home "$dir" --daemon || die "mjsched did not restart (see $dir/mjsched.log)"
  for _ in $(seq 100); do [[ -S $dir/mjsched.sock ]] && break; sleep 0.1; done
  # t0 = the simulated time 0: the corridor of time 0, then the submissions
  # and the later corridor changes at t0 + their (scaled) times
  local t0
  t0=$(now)
  (
    while IFS=$'\t' read -r tag t lo up; do
      [[ $tag == corridor ]] || continue
      sleep_until "$(awk -v a="$t0" -v o="$t" 'BEGIN { printf "%.6f", a + o }')"
      pcorridor set "$lo" "$up" --force --reason "live.sh cron at ${t} s" >/dev/null || echo "live.sh: pcorridor set failed" >&2
    done <"$OUT/$name.jobs.tsv"
  ) &
  BGPIDS+=($!)
  local cron=$!
  local n=0
  while IFS=$'\t' read -r tag id jname submit kind req mn mx runtime serial limit pmin pmax; do
    [[ $tag == job ]] || continue
    sleep_until "$(awk -v a="$t0" -v o="$submit" 'BEGIN { printf "%.6f", a + o }')"
    local args=(--parsable -J "$jname" --time-exact "$(hms "${limit%.*}")" -o "$dir/%j-%x.out" -N "$req"
      --min-power "$pmin" --max-power "$pmax")
    local script="#!/bin/bash
exec $APP $runtime $req $serial"
    if [[ $kind == malleable ]]; then
      args+=(--malleable --min-nodes "$mn" --max-nodes "$mx")
      script="#!/bin/bash
exec $APP $runtime $req $serial --malleable --scale $scale --report-interval 0.1"
    else
      args+=(--rigid)
    fi
    printf '%s\n' "$script" | mjsub "${args[@]}" >/dev/null || die "mjsub failed for job $id"
    n=$((n + 1))
  done <"$OUT/$name.jobs.tsv"
  # every job ended
  local limit_s
  limit_s=$(awk -F'\t' '$1 == "job" { s += $9 } END { printf "%d", 60 + 3 * s }' "$OUT/$name.jobs.tsv")
  local deadline=$((SECONDS + limit_s))
  while (($(sq "$dir" "SELECT COUNT(*) FROM jobs WHERE state IN ('PENDING','RUNNING')") > 0)); do
    ((SECONDS < deadline)) || die "$name: jobs still active after ${limit_s} s (see $dir)"
    sleep 0.2
  done
  kill "$cron" 2>/dev/null || true
  wait "$cron" 2>/dev/null || true
  local tend lv lmk sv smk done_n
  done_n=$(sq "$dir" "SELECT COUNT(*) FROM jobs WHERE state='COMPLETED'")
  tend=$(sq "$dir" "SELECT printf('%.6f', MAX(end_time)) FROM jobs")
  pcorridor show --json --since "$(printf '%.6f' "$t0")" --until "$tend" --grace "$GRACE" >"$OUT/$name.live.json"
  lmk=$(sq "$dir" "SELECT printf('%.2f', MAX(end_time) - MIN(submit_time)) FROM jobs")
  lv=$(perl -MJSON::PP -0777 -ne 'my $v = decode_json($_)->{violations};
        printf "%d %.0f", $v->{count}, $v->{above_watt_seconds} + $v->{below_watt_seconds}' "$OUT/$name.live.json")
  mjsim "${simargs[@]}" -p "$pol" --power-mode "$mode" --grace "$GRACE" --json -q >"$OUT/$name.sim.json" ||
    die "mjsim failed"
  sv=$(perl -MJSON::PP -0777 -ne 'my $j = decode_json($_); my $p = $j->{power};
        printf "%d %.2f %.0f", $p->{violations}, $j->{makespan_s}, $p->{above_ws} + $p->{below_ws}' "$OUT/$name.sim.json")
  local lviol lws sviol smk sws
  read -r lviol lws <<<"$lv"
  read -r sviol smk sws <<<"$sv"
  printf '%-14s %-18s %5s %5s   %8s %8s   %9s %9s   %s/%s done, scale %s, grace %s s\n' "$name" "$pol/$mode" \
    "$lviol" "$sviol" "$lmk" "$smk" "$lws" "$sws" "$done_n" "$n" "$scale" "$GRACE"
  printf '{"name":"%s","policy":"%s","mode":"%s","scale":%s,"grace":%s,"live":{"violations":%s,"makespan_s":%s,"outside_ws":%s},"sim":{"violations":%s,"makespan_s":%s,"outside_ws":%s},"completed":%s,"jobs":%s}\n' \
    "$name" "$pol" "$mode" "$scale" "$GRACE" "$lviol" "$lmk" "$lws" "$sviol" "$smk" "$sws" "$done_n" "$n" >"$OUT/$name.json"
  vcluster-down --dir "$dir" >/dev/null 2>&1 || true
}

header() {
  printf '%-14s %-18s %5s %5s   %8s %8s   %9s %9s\n' name policy/mode viol. "" makespan_s "" outside_Ws ""
  printf '%-14s %-18s %5s %5s   %8s %8s   %9s %9s\n' "" "" live sim live sim live sim
}

if ((${#RUN[@]})); then
  header
  run_one "${RUN[@]}"
  exit 0
fi
echo "== bench/power/live.sh: live vs mjsim, grace ${GRACE} (scaled s; auto = max(1, 40 x scale)), out $OUT"
header
want() { [[ ,$ONLY, == *,$1,* ]]; }
if want upper; then
  run_one upper-runtime power-upper power runtime "$SRUN"
  run_one upper-aware power-upper power aware "$SRUN"
fi
if want lower; then
  run_one lower-runtime power-lower power runtime "$SRUN"
  run_one lower-aware power-lower power aware "$SRUN"
fi
want dynamic && run_one dynamic power-dynamic power aware "$SRUN"
if want mix; then
  FRAC=0 run_one mix-static power-mix backfill aware "$SMIX"
  run_one mix-runtime power-mix power runtime "$SMIX"
  run_one mix-aware power-mix power aware "$SMIX"
fi
