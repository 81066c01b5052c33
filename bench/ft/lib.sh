# bench/ft/lib.sh — what the node-failure benchmarks share (sourced).

# ft_revive DIR NODE — bring a crashed NODE back between runs: wait until
# mjsched has set it DOWN (a resume before that is refused and the node
# would go down later and stay so), start its agent again, wait for the
# agent to connect, then resume it.
ft_revive() {
  local dir=$1 node=$2 n0
  for _ in $(seq 500); do
    [[ $(sqlite3 -cmd '.timeout 5000' "$dir/state.db" "SELECT state FROM nodes WHERE name='$node'") == down ]] && break
    sleep 0.02
  done
  n0=$(grep -c connected "$dir/nodes/mjnoded.log" 2>/dev/null)
  vcluster-fail --dir "$dir" --revive "$node" >/dev/null
  for _ in $(seq 200); do
    (($(grep -c connected "$dir/nodes/mjnoded.log" 2>/dev/null) > ${n0:-0})) && break
    sleep 0.05
  done
  mjcontrol update node "$node" state=resume >/dev/null
}

# ft_boot DIR AGENTS VCLUSTER-BOOT-OPTIONS... — a local cluster in DIR, torn
# down at exit, DYNRES_HOME set, q SQL (a query of its state file), and
# AGENTS node agents connected before it returns.
ft_boot() {
  local dir=$1 want=$2
  shift 2
  trap "vcluster-down --dir '$dir' >/dev/null 2>&1" EXIT
  vcluster-boot --dir "$dir" "$@" >/dev/null || exit 1
  export DYNRES_HOME=$dir
  for _ in $(seq 200); do
    (($(grep -c connected "$dir/nodes/mjnoded.log" 2>/dev/null) >= want)) && break
    sleep 0.05
  done
}
q() { sqlite3 -cmd '.timeout 5000' "$DYNRES_HOME/state.db" "$1"; }
