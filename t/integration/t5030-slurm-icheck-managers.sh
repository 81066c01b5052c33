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
SELF=$(readlink -f "$0")
. "${DYNRES_SRC:-$(dirname "$SELF")/../..}/t/lib.sh"
BIN=$DYNRES_BIN
FIXTURE=$DYNRES_SRC/t/fixtures/outer-slurm

inside() {
  local D=$1 W=$1/home
  echo "$SLURM_JOB_ID" >"$D/alloc.jobid"
  unset ICHECK_CONFIG ICHECK_TRANSFER ICHECK_TCP_AUTH DYNRES_HOME
  mkdir -p "$W"; chmod 700 "$W"
  sed -e 's/^init_agent_count:.*/init_agent_count: 2/' "$DYNRES_SRC/etc/icheck-dynamic.yaml" >"$W/icheck-dynamic.yaml"
  timeout 60 icheck-boot --home "$W" --heartbeat 1 --misses 3 n1 n2 >"$D/boot.out" 2>&1 ||
    { t_fail "icheck-boot inside the allocation: $(cat "$D/boot.out")"; for f in "$W"/icheck/*.log; do echo "== $f"; tail -5 "$f"; done; return; }
  export ICHECK_CONFIG=$W/icheck.yaml
  grep -qE '^controller: [0-9.]+:[0-9]+$' "$W/icheck.yaml" && t_pass "controller on TCP" ||
    t_fail "controller not on TCP: $(grep controller "$W/icheck.yaml")"
  grep -q '^transport:.*127\.0\.0\.1' "$W/icheck.yaml" &&
    t_fail "agents on other hosts could not be reached: $(grep '^transport:' "$W/icheck.yaml")" ||
    t_pass "no loopback tcp source address for agents on other hosts"
  local steps
  steps=$(squeue -s -h -j "$SLURM_JOB_ID" -o '%i %j %N')
  local n sid pid env
  for n in n1 n2; do
    sid=$(awk -v j="icheck-mgr-$n" '$2 == j {print $1}' <<<"$steps")
    [[ $(awk -v j="icheck-mgr-$n" '$2 == j {print $3}' <<<"$steps") == "$n" ]] &&
      t_pass "squeue: step $sid (icheck-mgr-$n) runs on $n" || t_fail "no manager step on $n: $steps"
    pid=$(pgrep -f "^[^ ]*icheckd --role manager --node $n --config $W/" | head -1)
    [[ -n $pid ]] || { t_fail "no manager process for $n"; continue; }
    env=$(tr '\0' '\n' <"/proc/$pid/environ")
    grep -qx "SLURMD_NODENAME=$n" <<<"$env" && grep -qx "SLURM_STEP_ID=${sid#*.}" <<<"$env" &&
      t_pass "manager of $n (pid $pid) runs in step $sid on $n" ||
      t_fail "manager of $n: $(grep -E '^SLURM(D_NODENAME|_STEP_ID)=' <<<"$env" | tr '\n' ' ')"
  done
  local st
  st=$(icheckd --status --config "$W/icheck.yaml")
  for n in n1 n2; do
    python3 -c 'import json,sys; d=json.load(sys.stdin); n=[x for x in d["nodes"] if x["node"]==sys.argv[1]][0]; a=n.get("address",""); sys.exit(0 if n["state"]=="up" and not a.startswith("unix:") else 1)' "$n" <<<"$st" &&
      t_pass "manager of $n is up on a TCP address" || t_fail "manager of $n: $(python3 -c 'import json,sys; print([x for x in json.load(sys.stdin)["nodes"]])' <<<"$st")"
  done

  local ARGS="--nx 64 --ny 64 --iters 120" ref out
  ref=$(heat $ARGS --no-icheck | sed -n 's/^heat: checksum=\([0-9a-f]*\).*/\1/p')
  cd "$D" || return
  timeout 60 mpiexec -n 2 heat $ARGS --ckpt-every 20 --app hs --config "$W/icheck.yaml" --fault-at 50 >"$D/heat1.out" 2>&1
  # rank 0's "fault injected" line may be lost: the srun step that forwards
  # its output is torn down with the job once a rank dies (seen every time
  # after heat's ranks began to wait for each other before the SIGKILL), so
  # the SIGKILL reported by mpiexec after the commit of iteration 40 counts too
  { grep -q "fault injected" "$D/heat1.out" ||
    { grep -q "^heat: commit iteration=40 " "$D/heat1.out" && grep -q "Killed (signal 9)" "$D/heat1.out"; }; } &&
    t_pass "heat committed and was killed after iteration 50" ||
    t_fail "first heat run: $(tail -5 "$D/heat1.out")"
  grep -q "mode=rdma" "$D/heat1.out" && t_pass "heat committed through agents (rdma)" || t_fail "heat not on agents: $(grep mode= "$D/heat1.out" | head -3)"
  sqlite3 -batch -cmd '.timeout 5000' -separator ' ' "$W/state.db" \
    "SELECT a.node, a.pid, a.address FROM icheck_agents a JOIN icheck_apps p ON p.id = a.app_id
     WHERE p.name = 'hs' AND a.state = 'up'" >"$D/agents.txt"
  [[ -s $D/agents.txt ]] || t_fail "no agents of hs in the state file"
  local seen="" node apid addr aenv
  while read -r node apid addr; do
    aenv=$(tr '\0' '\n' <"/proc/$apid/environ" 2>/dev/null)
    grep -qx "SLURMD_NODENAME=$node" <<<"$aenv" && [[ $addr != unix:* ]] &&
      t_pass "agent on $node (pid $apid, $addr) runs inside $node's manager step" ||
      t_fail "agent on $node (pid $apid, $addr): $(grep -E '^SLURMD_NODENAME=' <<<"$aenv")"
    seen="$seen $node"
  done <"$D/agents.txt"
  [[ $seen == *n1* && $seen == *n2* ]] && t_pass "agents on both nodes ($seen)" || t_fail "agents not on both nodes:$seen"
  # the second level goes: the rerun can only restart from the agents' memory
  rm -rf "$W/pfs/$(id -u)/hs"
  timeout 60 mpiexec -n 2 heat $ARGS --ckpt-every 20 --app hs --config "$W/icheck.yaml" >"$D/heat2.out" 2>&1
  grep -q "heat: icheck mode=rdma status=restart" "$D/heat2.out" && t_pass "the rerun restarts through the agents" ||
    t_fail "rerun not from the agents: $(head -3 "$D/heat2.out")"
  grep -qE "heat: restart version=[0-9]+ iteration=40" "$D/heat2.out" && t_pass "the rerun restarted from iteration 40" ||
    t_fail "rerun: $(head -5 "$D/heat2.out")"
  out=$(sed -n 's/^heat: checksum=\([0-9a-f]*\).*/\1/p' "$D/heat2.out" | tail -1)
  [[ -n $ref && $out == "$ref" ]] && t_pass "checksum after kill + restart equals the uninterrupted run" ||
    t_fail "checksum $out, expected $ref"

  icheck-down --home "$W"
  for _ in $(seq 20); do
    [[ -z $(squeue -s -h -j "$SLURM_JOB_ID" -o '%j' | grep icheck-mgr) ]] && break
    sleep 0.5
  done
  [[ -z $(squeue -s -h -j "$SLURM_JOB_ID" -o '%j' | grep icheck-mgr) ]] && t_pass "icheck-down ended the manager steps" ||
    t_fail "manager steps left: $(squeue -s -h -j "$SLURM_JOB_ID" -o '%i %j %N')"
  pgrep -f "icagent .*--app hs " >/dev/null && t_fail "agents of hs survive icheck-down" || t_pass "no agent left"
  echo "$T_FAILS" >"$D/inside.fails"
}

if [[ ${1:-} == --inside ]]; then
  inside "$2"
  exit 0
fi

((EUID == 0)) || t_skip "needs root (it runs a real Slurm cluster)"
t_require icheckd icagent heat mpiexec
t_begin 240
unset "${!SLURM_@}" DYNRES_HOME
D=$T_TMP
chmod 755 "$D"
outer_slurm_start 2
stop_icheck() { [[ -f $D/home/icheck.yaml ]] && icheck-down --home "$D/home" >/dev/null 2>&1; }
t_on_exit stop_icheck
outer_slurm_inside 120 2 icheck-sis "$SELF"
[[ -f $D/inside.fails ]] || t_fatal "the inside part did not finish"
inside_fails=$(cat "$D/inside.fails")
t_log "outer steps of the allocation (slurmd logs):"
"$FIXTURE" steps "$D/outer" "$(cat "$D/alloc.jobid")" | sed 's/^/  /'
((inside_fails == 0)) || t_fail "$inside_fails check(s) of the part inside the allocation FAILED (above)"
t_done
