#!/usr/bin/env bash
# iCheck managers on their own hosts inside Slurm, with a real outer Slurm (t/fixtures/outer-slurm, 2 nodes
# on this machine, MUNGE):
#   1. `salloc -N2` runs this script again (--inside); there icheck-boot n1 n2
#      detects the allocation and starts each node's manager as its own job
#      step, `srun --overlap -N1 -n1 -w NODE -J icheck-mgr-NODE ...
#      --listen auto`, the controller and standby on TCP (MUNGE);
#   2. the outer Slurm places them: `squeue -s` shows step icheck-mgr-nI on
#      node nI, and each manager process carries that step's SLURM_STEP_ID and
#      SLURMD_NODENAME=nI (set by the node's slurmd); managers listen on TCP;
#   3. heat (2 MPI ranks, init_agent_count 2) commits through agents on both
#      nodes: each agent is a child of its node's manager in that step
#      (SLURMD_NODENAME of the agent = its node in the controller's status),
#      on TCP; heat is killed after iteration 50 (--fault-at), its second
#      level is removed, and the rerun restarts from the agents' version
#      (iteration 40) and ends with the checksum of an uninterrupted run;
#   4. icheck-down ends the manager steps (squeue -s shows none) and agents.
# Root only (it runs a real Slurm cluster); exit 77 otherwise.
set -uo pipefail
: "${DYNRES_SRC:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${DYNRES_BUILD:=$DYNRES_SRC/build}"
BIN=$DYNRES_BUILD/bin
export PATH=$BIN:$DYNRES_SRC/share/dynres:$PATH
FIXTURE=$DYNRES_SRC/t/fixtures/outer-slurm
SELF=$(readlink -f "$0")
FAILS=0
log() { echo "[icheck_slurm_managers] $*"; }
fail() { log "FAIL: $*"; FAILS=$((FAILS + 1)); }
ok() { log "ok: $*"; }

inside() {
  local D=$1 W=$1/home
  echo "$SLURM_JOB_ID" >"$D/alloc.jobid"
  unset ICHECK_CONFIG ICHECK_TRANSFER ICHECK_TCP_AUTH DYNRES_HOME
  mkdir -p "$W"; chmod 700 "$W"
  sed -e 's/^init_agent_count:.*/init_agent_count: 2/' "$DYNRES_SRC/etc/icheck-dynamic.yaml" >"$W/icheck-dynamic.yaml"
  timeout 60 icheck-boot --home "$W" --heartbeat 1 --misses 3 n1 n2 >"$D/boot.out" 2>&1 ||
    { fail "icheck-boot inside the allocation: $(cat "$D/boot.out")"; for f in "$W"/icheck/*.log; do echo "== $f"; tail -5 "$f"; done; return; }
  export ICHECK_CONFIG=$W/icheck.yaml
  grep -qE '^controller: [0-9.]+:[0-9]+$' "$W/icheck.yaml" && ok "controller on TCP" ||
    fail "controller not on TCP: $(grep controller "$W/icheck.yaml")"
  grep -q '^transport:.*127\.0\.0\.1' "$W/icheck.yaml" &&
    fail "agents on other hosts could not be reached: $(grep '^transport:' "$W/icheck.yaml")" ||
    ok "no loopback tcp source address for agents on other hosts"
  local steps
  steps=$(squeue -s -h -j "$SLURM_JOB_ID" -o '%i %j %N')
  local n sid pid env
  for n in n1 n2; do
    sid=$(awk -v j="icheck-mgr-$n" '$2 == j {print $1}' <<<"$steps")
    [[ $(awk -v j="icheck-mgr-$n" '$2 == j {print $3}' <<<"$steps") == "$n" ]] &&
      ok "squeue: step $sid (icheck-mgr-$n) runs on $n" || fail "no manager step on $n: $steps"
    pid=$(pgrep -f "^[^ ]*icheckd --role manager --node $n --config $W/" | head -1)
    [[ -n $pid ]] || { fail "no manager process for $n"; continue; }
    env=$(tr '\0' '\n' <"/proc/$pid/environ")
    grep -qx "SLURMD_NODENAME=$n" <<<"$env" && grep -qx "SLURM_STEP_ID=${sid#*.}" <<<"$env" &&
      ok "manager of $n (pid $pid) runs in step $sid on $n" ||
      fail "manager of $n: $(grep -E '^SLURM(D_NODENAME|_STEP_ID)=' <<<"$env" | tr '\n' ' ')"
  done
  local st
  st=$(icheckd --status --config "$W/icheck.yaml")
  for n in n1 n2; do
    python3 -c 'import json,sys; d=json.load(sys.stdin); n=[x for x in d["nodes"] if x["node"]==sys.argv[1]][0]; a=n.get("address",""); sys.exit(0 if n["state"]=="up" and not a.startswith("unix:") else 1)' "$n" <<<"$st" &&
      ok "manager of $n is up on a TCP address" || fail "manager of $n: $(python3 -c 'import json,sys; print([x for x in json.load(sys.stdin)["nodes"]])' <<<"$st")"
  done

  local ARGS="--nx 64 --ny 64 --iters 120" ref out
  ref=$(heat $ARGS --no-icheck | sed -n 's/^heat: checksum=\([0-9a-f]*\).*/\1/p')
  cd "$D" || return
  timeout 60 mpiexec -n 2 heat $ARGS --ckpt-every 20 --app hs --config "$W/icheck.yaml" --fault-at 50 >"$D/heat1.out" 2>&1
  grep -q "fault injected" "$D/heat1.out" && ok "heat committed and was killed after iteration 50" ||
    fail "first heat run: $(tail -5 "$D/heat1.out")"
  grep -q "mode=rdma" "$D/heat1.out" && ok "heat committed through agents (rdma)" || fail "heat not on agents: $(grep mode= "$D/heat1.out" | head -3)"
  sqlite3 -batch -cmd '.timeout 5000' -separator ' ' "$W/state.db" \
    "SELECT a.node, a.pid, a.address FROM icheck_agents a JOIN icheck_apps p ON p.id = a.app_id
     WHERE p.name = 'hs' AND a.state = 'up'" >"$D/agents.txt"
  [[ -s $D/agents.txt ]] || fail "no agents of hs in the state file"
  local seen="" node apid addr aenv
  while read -r node apid addr; do
    aenv=$(tr '\0' '\n' <"/proc/$apid/environ" 2>/dev/null)
    grep -qx "SLURMD_NODENAME=$node" <<<"$aenv" && [[ $addr != unix:* ]] &&
      ok "agent on $node (pid $apid, $addr) runs inside $node's manager step" ||
      fail "agent on $node (pid $apid, $addr): $(grep -E '^SLURMD_NODENAME=' <<<"$aenv")"
    seen="$seen $node"
  done <"$D/agents.txt"
  [[ $seen == *n1* && $seen == *n2* ]] && ok "agents on both nodes ($seen)" || fail "agents not on both nodes:$seen"
  # the second level goes: the rerun can only restart from the agents' memory
  rm -rf "$W/pfs/$(id -u)/hs"
  timeout 60 mpiexec -n 2 heat $ARGS --ckpt-every 20 --app hs --config "$W/icheck.yaml" >"$D/heat2.out" 2>&1
  grep -q "heat: icheck mode=rdma status=restart" "$D/heat2.out" && ok "the rerun restarts through the agents" ||
    fail "rerun not from the agents: $(head -3 "$D/heat2.out")"
  grep -qE "heat: restart version=[0-9]+ iteration=40" "$D/heat2.out" && ok "the rerun restarted from iteration 40" ||
    fail "rerun: $(head -5 "$D/heat2.out")"
  out=$(sed -n 's/^heat: checksum=\([0-9a-f]*\).*/\1/p' "$D/heat2.out" | tail -1)
  [[ -n $ref && $out == "$ref" ]] && ok "checksum after kill + restart equals the uninterrupted run" ||
    fail "checksum $out, expected $ref"

  icheck-down --home "$W"
  for _ in $(seq 20); do
    [[ -z $(squeue -s -h -j "$SLURM_JOB_ID" -o '%j' | grep icheck-mgr) ]] && break
    sleep 0.5
  done
  [[ -z $(squeue -s -h -j "$SLURM_JOB_ID" -o '%j' | grep icheck-mgr) ]] && ok "icheck-down ended the manager steps" ||
    fail "manager steps left: $(squeue -s -h -j "$SLURM_JOB_ID" -o '%i %j %N')"
  pgrep -f "icagent .*--app hs " >/dev/null && fail "agents of hs survive icheck-down" || ok "no agent left"
  echo "$FAILS" >"$D/inside.fails"
}

if [[ ${1:-} == --inside ]]; then
  inside "$2"
  exit 0
fi

((EUID == 0)) || { echo "SKIP: needs root (it runs a real Slurm cluster)"; exit 77; }
for t in icheckd icagent heat; do
  [[ -x $BIN/$t ]] || { echo "SKIP: $BIN/$t is not built"; exit 77; }
done
command -v mpiexec >/dev/null || { echo "SKIP: mpiexec is not installed"; exit 77; }
unset "${!SLURM_@}" DYNRES_HOME
D=$(mktemp -d "${TMPDIR:-/tmp}/dynres-icslurm.XXXXXX")
chmod 755 "$D"
cleanup() {
  local rc=$?
  set +e
  [[ -f $D/home/icheck.yaml ]] && icheck-down --home "$D/home" >/dev/null 2>&1
  [[ -f $D/outer/slurm.conf && -f $D/alloc.jobid ]] && SLURM_CONF=$D/outer/slurm.conf scancel "$(cat "$D/alloc.jobid")" 2>/dev/null
  [[ -f $D/outer/slurm.conf ]] && { "$FIXTURE" stop "$D/outer" || rc=1; }
  if ((rc != 0)) || [[ ${DYNRES_KEEP_TMP:-0} == 1 ]]; then echo "[icheck_slurm_managers] keeping $D" >&2; else rm -rf "$D"; fi
  exit "$rc"
}
trap cleanup EXIT
T0=$SECONDS
"$FIXTURE" start "$D/outer" --nodes 2 --timeout 30 || { echo "outer Slurm did not start"; exit 1; }
eval "$("$FIXTURE" env "$D/outer")"
cd "$D" || exit 1
timeout 120 salloc -N2 -J icheck-sis -t 5 bash "$SELF" --inside "$D"
rc=$?
[[ -f $D/inside.fails ]] || { log "FAIL: the inside part did not finish (salloc exit $rc)"; exit 1; }
FAILS=$(cat "$D/inside.fails")
log "outer steps of the allocation (slurmd logs):"
"$FIXTURE" steps "$D/outer" "$(cat "$D/alloc.jobid")" | sed 's/^/  /'
((FAILS == 0)) || { log "$FAILS check(s) FAILED"; exit 1; }
log "PASS in $((SECONDS - T0))s"
