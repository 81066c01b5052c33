#!/usr/bin/env bash
# bench/icsched/kill_campaign.sh [KILLS] — SIGKILL the iCheck controller, a
# manager or mjsched in the middle of a NEW_NODES or REMOVE_NODES exchange
# [John24 §7.3.1], KILLS times (default 20), rotating through the six
# (daemon, exchange) pairs, on a live local cluster with an application
# committing versions all along. It is the integration test
# t4230-icsched-kill-exchange run with ICSCHED_KILLS=KILLS (the test runs 3);
# after each kill the killed daemon is restarted and the test checks that no
# node is both a job's and iCheck's and that the exchange settles with every
# node a job's, iCheck's (manager up) or idle. Prints the test's log and the
# campaign's line
#   kills N lost_versions V double_owned D unowned U
# (targets: V = D = U = 0). About 8 s per kill.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
KILLS=${1:-20}
[[ $KILLS =~ ^[1-9][0-9]*$ ]] || { echo "kill_campaign: KILLS must be a positive count, got '$KILLS'" >&2; exit 2; }
export DYNRES_SRC=$SRC DYNRES_BUILD=${DYNRES_BUILD:-$SRC/build}
T_VERBOSE=1 ICSCHED_KILLS=$KILLS bash "$SRC/t/integration/t4230-icsched-kill-exchange.sh" 2>&1 | tee "${TMPDIR:-/tmp}/icsched-kill-campaign.log"
