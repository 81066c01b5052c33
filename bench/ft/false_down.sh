#!/bin/bash
# false_down.sh — false DOWNs under load: a local virtual cluster with node
# agents (mjnoded) runs while stress-ng saturates every core (--load workers,
# default 2 x nproc) for --duration seconds, with a job on every node; counts
# the nodes mjsched set DOWN meanwhile (state-file events "->down"; target
# 0). Prints
# "false_down: duration_s=D load=L node_timeout=T nodes=N false_downs=K" and
# exits 1 when K > 0.
#
#   bench/ft/false_down.sh [--duration 600] [--nodes 4] [--node-timeout 10] [--load 2xnproc] [--dir DIR]
set -uo pipefail
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN=${DYNRES_BUILD:-$SRC/build}/bin
export PATH=$BIN:$SRC/share/dynres:$PATH
DURATION=600 NODES=4 TIMEOUT=10 LOAD=$((2 * $(nproc))) DIR=""
while (($#)); do
  case $1 in
    --duration) DURATION=$2; shift 2 ;;
    --nodes) NODES=$2; shift 2 ;;
    --node-timeout) TIMEOUT=$2; shift 2 ;;
    --load) LOAD=$2; shift 2 ;;
    --dir) DIR=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "false_down.sh: unknown option '$1'" >&2; exit 1 ;;
  esac
done
command -v stress-ng >/dev/null || { echo "false_down.sh: stress-ng is not installed (Debian package stress-ng)" >&2; exit 1; }
DIR=${DIR:-$(mktemp -d "${TMPDIR:-/tmp}/dynres-ftload-XXXXXX")}
STRESS=""
cleanup() {
  [[ -n $STRESS ]] && kill "$STRESS" 2>/dev/null
  vcluster-down --dir "$DIR" >/dev/null 2>&1
}
trap cleanup EXIT
vcluster-boot --local "$NODES" --dir "$DIR" --tick 0.5 --node-timeout "$TIMEOUT" >/dev/null || exit 1
export DYNRES_HOME=$DIR
for _ in $(seq 200); do (($(grep -c connected "$DIR/nodes/mjnoded.log" 2>/dev/null; true) + 0 >= NODES)) && break; sleep 0.05; done
echo 'while :; do :; done' >"$DIR/spin.sh"
for _ in $(seq "$NODES"); do mjsub --parsable -N 1 -o /dev/null "$DIR/spin.sh" >/dev/null; done
stress-ng --cpu "$LOAD" --timeout "$DURATION" >/dev/null 2>&1 &
STRESS=$!
wait "$STRESS"
STRESS=""
n=$(sqlite3 -cmd '.timeout 5000' "$DIR/state.db" "SELECT COUNT(*) FROM events WHERE kind='node' AND detail LIKE '%->down%'")
echo "false_down: duration_s=$DURATION load=$LOAD node_timeout=$TIMEOUT nodes=$NODES false_downs=$n"
((n == 0))
