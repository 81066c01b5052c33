#!/bin/bash
# detect.sh — node-failure detection time on a local virtual cluster with
# node agents (mjnoded): from the moment vcluster-fail is called to the
# moment the state file shows the node DOWN.
#   crash   vcluster-fail NODE (the agent dies: its connection closes)
#   freeze  vcluster-fail --freeze NODE (the agent stops: the heartbeat
#           timeout, --node-timeout, is what detects it; the same-run baseline
#           the crash figure is compared with)
# Each trial revives and resumes the node before the next. Prints every trial
# and "detect: mode=M trials=N median_s=... p95_s=... max_s=..." per mode, and
# the ratio crash/freeze of the medians. --load N runs N stress-ng CPU
# workers meanwhile.
#
#   bench/ft/detect.sh [--trials 10] [--node-timeout 3] [--load 0] [--dir DIR]
#
# Needs a built tree (DYNRES_BUILD, default build/) and sqlite3.
set -uo pipefail
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN=${DYNRES_BUILD:-$SRC/build}/bin
export PATH=$BIN:$SRC/share/dynres:$PATH
TRIALS=10 TIMEOUT=3 LOAD=0 DIR=""
while (($#)); do
  case $1 in
    --trials) TRIALS=$2; shift 2 ;;
    --node-timeout) TIMEOUT=$2; shift 2 ;;
    --load) LOAD=$2; shift 2 ;;
    --dir) DIR=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "detect.sh: unknown option '$1'" >&2; exit 1 ;;
  esac
done
[[ $TRIALS =~ ^[1-9][0-9]*$ && $LOAD =~ ^[0-9]+$ ]] || { echo "detect.sh: --trials and --load need whole numbers" >&2; exit 1; }
DIR=${DIR:-$(mktemp -d "${TMPDIR:-/tmp}/dynres-ftdetect-XXXXXX")}
STRESS=""
cleanup() {
  [[ -n $STRESS ]] && kill "$STRESS" 2>/dev/null
  vcluster-down --dir "$DIR" >/dev/null 2>&1
}
trap cleanup EXIT
vcluster-boot --local 3 --dir "$DIR" --tick 0.5 --node-timeout "$TIMEOUT" >/dev/null || exit 1
export DYNRES_HOME=$DIR
if ((LOAD > 0)); then
  command -v stress-ng >/dev/null || { echo "detect.sh: stress-ng is not installed" >&2; exit 1; }
  stress-ng --cpu "$LOAD" --timeout 0 >/dev/null 2>&1 &
  STRESS=$!
fi
now() { date +%s.%N; }
state() { sqlite3 -cmd '.timeout 5000' "$DIR/state.db" "SELECT state FROM nodes WHERE name='n2'"; }
agents() { local n; n=$(grep -c connected "$DIR/nodes/mjnoded.log" 2>/dev/null); echo "${n:-0}"; }
want=3
for _ in $(seq 200); do (($(agents) >= want)) && break; sleep 0.05; done
declare -A T
for mode in crash freeze; do
  T[$mode]=""
  for k in $(seq "$TRIALS"); do
    t0=$(now)
    if [[ $mode == crash ]]; then vcluster-fail n2 >/dev/null; else vcluster-fail --freeze n2 >/dev/null; fi
    until [[ $(state) == down ]]; do
      sleep 0.01
      awk -v a="$t0" -v b="$(now)" 'BEGIN { exit !(b - a > 120) }' && { echo "detect.sh: n2 not down after 120 s" >&2; exit 1; }
    done
    d=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }')
    echo "trial mode=$mode k=$k detect_s=$d"
    T[$mode]+="$d "
    if [[ $mode == crash ]]; then
      want=$((want + 1))
      vcluster-fail --revive n2 >/dev/null
    else
      vcluster-fail --thaw n2 >/dev/null  # its connection stayed open: it goes on with its heartbeats
    fi
    for _ in $(seq 200); do (($(agents) >= want)) && break; sleep 0.05; done
    mjcontrol update node n2 state=resume >/dev/null
    sleep 0.5
  done
done
stats() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END {
  m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; p = int(0.95 * NR + 0.999999); if (p < 1) p = 1
  printf "median_s=%.3f p95_s=%.3f max_s=%.3f", m, v[p], v[NR] }'; }
for mode in crash freeze; do
  echo "detect: mode=$mode trials=$TRIALS node_timeout=$TIMEOUT load=$LOAD $(stats <<<"${T[$mode]}")"
done
mc=$(stats <<<"${T[crash]}" | sed 's/.*median_s=\([^ ]*\).*/\1/')
mf=$(stats <<<"${T[freeze]}" | sed 's/.*median_s=\([^ ]*\).*/\1/')
echo "detect: ratio crash/freeze median = $(awk -v a="$mc" -v b="$mf" 'BEGIN { printf "%.3f", a / b }')"
