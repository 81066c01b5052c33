#!/usr/bin/env bash
# bench/icsched/run.sh — iCheck-aware scheduling on a live local cluster
# [John24 §7.3, Fig. 9.8]: the same synth workload against a dynamic iCheck
# (1 boot node, borrows up to --max-nodes from the batch pool, both
# scheduler.icheck.favour strategies) and against static 1-node and static
# 3-node iCheck services.
#
#   bench/icsched/run.sh [--runs R] [--out DIR] [--jobs N] [--mem-gb G]
#                        [--configs "dyn-icheck dyn-applications static-1 static-3"]
#
# Cluster: 9 local nodes (vcluster-boot --local 9): 8 compute nodes and 1
# checkpoint node (static-3: 6 + 3). Each checkpoint node offers --mem-gb GB
# of checkpoint memory (icheckd --mem-limit-gb: agents refuse pieces beyond
# it and the application writes that version to the second level itself,
# mode=direct). Workload: N jobs of 2 nodes (mpiexec -n 2 synth), job k
# checkpointing SIZE_BASE + k * SIZE_STEP MiB every 3 iterations, submitted
# STAGGER seconds apart, so the checkpoints in flight outgrow one node.
#
# Per configuration and run it prints: makespan (first submission to last end,
# mjstat --metrics), commits, median / 90th percentile / mean commit time
# (slowest rank, seconds), commits that fell back to the second level,
# the most iCheck nodes at once, node-seconds iCheck borrowed, the nodes it
# gave back on its own (idle, icheck_node_released) and those mjsched took
# back for a waiting job (REMOVE_NODES, icheck_node_returned), the ranks
# whose agents had been moved when they finalized, the seconds from the last
# job's end until iCheck held no borrowed node (it gives them back on its own;
# -1: not within RELEASE_AFTER + 30 s; lent node-seconds include that time),
# and the ratio
# of makespan and median commit time to the same run's static-1 and static-3.
# The table is the median over --runs. For every dynamic run it writes
# OUT/CONFIG-rRUN.png: (a) active iCheck nodes over time, (b) agents per
# iCheck node (numbered by arrival) over time, as [John24 Fig. 9.8], and a
# Gantt chart (mjstat --gantt, iCheck's nodes in red).
#
# Environment: DYNRES_BUILD (default build/), SIZE_BASE (MiB, 48),
# SIZE_STEP (MiB, 16), STAGGER (s, 3), COUNT (iterations per job, 30),
# THRESHOLDS (the scaler's lower,upper used fractions, 0.5,0.6), RELEASE_AFTER
# (s a borrowed node stays idle before iCheck gives it back on its own, 15).
# Needs mpiexec (mpich), gnuplot (gnuplot-nox), sqlite3. A run takes ~1-2 min
# per configuration.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
B=${DYNRES_BUILD:-$SRC/build}
export PATH=$B/bin:$SRC/share/dynres:$PATH
RUNS=1 OUT=${TMPDIR:-/tmp}/icsched-bench JOBS=10 MEMGB=0.5
CONFIGS="dyn-icheck dyn-applications static-1 static-3"
SIZE_BASE=${SIZE_BASE:-48} SIZE_STEP=${SIZE_STEP:-16} STAGGER=${STAGGER:-3} COUNT=${COUNT:-30}
# the scaler every second; a node counts as full at 60 % (flagged at 50 %): an
# agent refuses the piece that would overflow the node's budget, so the node's
# use stays below the limit by up to one piece and may never pass 90 %
SCALER="--icheck-scaler-interval 1 --icheck-scaler-thresholds ${THRESHOLDS:-0.5,0.6} --icheck-release-after ${RELEASE_AFTER:-15}"
die() { echo "bench/icsched: error: $*" >&2; exit 1; }
while (($#)); do
  case $1 in
    --runs) RUNS=${2:?}; shift 2 ;;
    --out) OUT=${2:?}; shift 2 ;;
    --jobs) JOBS=${2:?}; shift 2 ;;
    --mem-gb) MEMGB=${2:?}; shift 2 ;;
    --configs) CONFIGS=${2:?}; shift 2 ;;
    -h|--help) sed -n '2,40p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
[[ $RUNS =~ ^[1-9][0-9]*$ && $JOBS =~ ^[1-9][0-9]*$ ]] || die "--runs and --jobs need positive counts"
for t in synth mjsub mjstat mjsched icheckd icagent; do [[ -x $B/bin/$t ]] || die "$B/bin/$t is not built"; done
command -v mpiexec >/dev/null || die "mpiexec (Debian package mpich) is not installed"
command -v sqlite3 >/dev/null || die "sqlite3 is not installed"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

boot_args() {  # CONFIG
  case $1 in
    dyn-icheck) echo "--icheck-nodes 1 --icheck-max-nodes 3 --icheck-favour icheck $SCALER" ;;
    dyn-applications) echo "--icheck-nodes 1 --icheck-max-nodes 3 --icheck-favour applications $SCALER" ;;
    static-1) echo "--icheck-nodes 1" ;;
    static-3) echo "--icheck-nodes 3" ;;
    *) die "unknown configuration '$1'" ;;
  esac
}

# sample DIR FILE: every 0.5 s "t node agents" for each up iCheck node (t = s since the epoch)
sample() {
  local db=$1/state.db
  while [[ -f $1/mjsched.pid ]]; do
    sqlite3 -batch -separator ' ' -cmd '.timeout 2000' "$db" \
      "SELECT printf('%.2f', julianday('now') * 86400 - 210866760000), n.node,
              (SELECT COUNT(*) FROM icheck_agents a WHERE a.node = n.node AND a.state = 'up')
       FROM icheck_nodes n WHERE n.state = 'up'" 2>/dev/null || true
    sleep 0.5
  done
}

one_run() {  # CONFIG RUN -> prints one result line
  local cfg=$1 r=$2 d w
  d=$(mktemp -d "${TMPDIR:-/tmp}/icsb-XXXXXX")
  w=$d/work
  mkdir -p "$w"
  # shellcheck disable=SC2046
  vcluster-boot --local 9 --dir "$d/c" --tick 0.5 --kill-wait 1 --icheck-mem-gb "$MEMGB" $(boot_args "$cfg") \
    >"$d/boot.log" 2>&1 || { cat "$d/boot.log" >&2; die "vcluster-boot failed ($cfg)"; }
  export DYNRES_HOME=$d/c
  sample "$d/c" >"$d/samples" &
  local sp=$!
  local ids=() k size
  for ((k = 1; k <= JOBS; k++)); do
    size=$((SIZE_BASE + k * SIZE_STEP))
    cat >"$w/job$k.sh" <<EOF
#!/bin/bash
#SBATCH -N 2
#SBATCH -J synth$k
#SBATCH -t 10:00
#SBATCH -o $w/job$k.out
cd $w
exec mpiexec -f "\$MJ_NODEFILE" -n 2 $B/bin/synth -s cp_size=$((size / 2))MiB -s cp_type=binary \\
  -s cp_interval=3it -s cp_count=$COUNT -s probe_interval=0 -s persist=false -s app_name=synth$k-\$MJ_JOB_ID \\
  -s icheck_config=$d/c/icheck.yaml -s mpiio_file=$w/m$k
EOF
    ids+=("$(mjsub --parsable "$w/job$k.sh")")
    ((k < JOBS)) && sleep "$STAGGER"
  done
  local end=$((SECONDS + 900))
  while ((SECONDS < end)); do
    [[ $(sqlite3 -batch -cmd '.timeout 5000' "$d/c/state.db" "SELECT COUNT(*) FROM jobs WHERE state IN ('PENDING','RUNNING')") == 0 ]] && break
    sleep 1
  done
  local failed
  failed=$(sqlite3 -batch -cmd '.timeout 5000' "$d/c/state.db" "SELECT COUNT(*) FROM jobs WHERE state != 'COMPLETED'")
  local mk
  mk=$(mjstat --metrics --json | sed -n 's/.*"makespan_s": *\([0-9.e+-]*\).*/\1/p')
  # the workload is over and no job waits: iCheck gives its borrowed nodes
  # back on its own (release_after); seconds from the last job's end until
  # none is lent (-1: not within release_after + 30 s)
  local back=0 t_end
  t_end=$(sqlite3 -batch -cmd '.timeout 5000' "$d/c/state.db" "SELECT MAX(end_time) FROM jobs")
  if [[ $cfg == dyn-* ]]; then
    local until=$((SECONDS + ${RELEASE_AFTER:-15} + 30))
    back=-1
    while ((SECONDS < until)); do
      if [[ $(sqlite3 -batch -cmd '.timeout 5000' "$d/c/state.db" "SELECT COUNT(*) FROM icheck_lent") == 0 ]]; then
        back=$(sqlite3 -batch -cmd '.timeout 5000' "$d/c/state.db" \
          "SELECT printf('%.0f', MAX(0, IFNULL(MAX(end_time), $t_end) - $t_end)) FROM icheck_lent_history")
        break
      fi
      sleep 1
    done
  fi
  # node-seconds lent to iCheck, and the most nodes at once
  local lent maxn
  lent=$(sqlite3 -batch "$d/c/state.db" "SELECT printf('%.0f', IFNULL(SUM(IFNULL(end_time, julianday('now') * 86400 - 210866760000) - start_time), 0)) FROM icheck_lent_history" 2>/dev/null || echo 0)
  [[ -n $lent ]] || lent=0
  local rel ret
  rel=$(sqlite3 -batch "$d/c/state.db" "SELECT COUNT(*) FROM events WHERE kind = 'icheck_node_released'" 2>/dev/null || echo 0)
  ret=$(sqlite3 -batch "$d/c/state.db" "SELECT COUNT(*) FROM events WHERE kind = 'icheck_node_returned'" 2>/dev/null || echo 0)
  maxn=$(awk '{c[$1]++} END {m = 0; for (t in c) if (c[t] > m) m = c[t]; print m}' "$d/samples")
  # commit times (slowest rank) and the commits that went to the second level
  cat "$w"/job*.out 2>/dev/null | sed -n 's/^synth: commit .*seconds=\([0-9.]*\) .*mode=\([a-z]*\).*/\1 \2/p' >"$d/commits"
  local stats
  stats=$(sort -n "$d/commits" | awk '{v[NR] = $1; s += $1; if ($2 != "rdma") f++}
    END { if (NR == 0) { print "0 0 0 0 0"; exit }
          m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
          p = v[int(0.9 * NR + 0.999)]; printf "%d %.3f %.3f %.3f %d\n", NR, m, p, s / NR, f + 0 }')
  if [[ $cfg == dyn-* ]]; then
    mjstat --gantt "$OUT/$cfg-r$r-gantt.png" 2>/dev/null || true
    mjstat -N >"$OUT/$cfg-r$r-nodes.txt" 2>/dev/null || true
    sqlite3 -batch "$d/c/state.db" "SELECT printf('%.1f', time), kind, detail FROM events WHERE kind LIKE 'icheck%' ORDER BY id" \
      >"$OUT/$cfg-r$r-events.txt" 2>/dev/null || true
    plot "$d/samples" "$OUT/$cfg-r$r.png" "$cfg run $r: $JOBS synth jobs, ${MEMGB} GB per checkpoint node"
  fi
  for k in $(sqlite3 -batch "$d/c/state.db" "SELECT name FROM jobs WHERE state != 'COMPLETED'" 2>/dev/null | sed 's/^synth//'); do
    cp "$w/job$k.out" "$OUT/$cfg-r$r-failed-job$k.out" 2>/dev/null || true   # for the record
  done
  cp "$d/samples" "$OUT/$cfg-r$r-samples.txt"
  cp "$d/commits" "$OUT/$cfg-r$r-commits.txt"
  cp "$d/c/icheck/controller.log" "$OUT/$cfg-r$r-controller.log" 2>/dev/null || true
  vcluster-down --dir "$d/c" >/dev/null 2>&1 || true
  kill "$sp" 2>/dev/null || true
  wait "$sp" 2>/dev/null || true
  unset DYNRES_HOME
  rm -rf "$d"
  # ranks whose agents were moved before their finalize (icheck_finalize found the version durable)
  local fin
  fin=$(cat "$w"/job*.out 2>/dev/null | grep -c 'finalize goes on' || true)
  echo "$cfg $r ${mk:-0} $stats ${maxn:-0} $lent $failed ${rel:-0} ${ret:-0} ${fin:-0} $back"
}

# plot SAMPLES PNG TITLE — Fig. 9.8 (a) nodes over time, (b) agents per node
plot() {
  command -v gnuplot >/dev/null || return 0
  local s=$1 png=$2 title=$3 dat=${1}.dat
  # columns: t-t0, active nodes, agents on node 1..K (K = nodes by arrival)
  awk 'NR == FNR { if (!($2 in ord)) { ord[$2] = ++K }; next }
       { if (t0 == "") t0 = $1; t = $1 - t0; if (!(t in seen)) { seen[t] = 1; ts[++T] = t }
         n[t]++; a[t, ord[$2]] = $3 }
       END { for (i = 1; i <= T; i++) { t = ts[i]; printf "%.2f %d", t, n[t]
               for (k = 1; k <= K; k++) printf " %s", ((t, k) in a) ? a[t, k] : "NaN"; printf "\n" }
             print K > "/dev/stderr" }' "$s" "$s" >"$dat" 2>"$dat.k"
  local K
  K=$(cat "$dat.k")
  ((K > 0)) || return 0
  local cols="" k
  for ((k = 1; k <= K; k++)); do
    cols+="${cols:+, }'$dat' using 1:$((k + 2)) with steps lw 2 title 'iCheck node $k'"
  done
  gnuplot <<EOF
set terminal pngcairo size 1000,800 noenhanced
set output '$png'
set multiplot layout 2,1 title '$title'
set xlabel 'time (s)'
set ylabel 'active iCheck nodes'
set yrange [0:4]
set ytics 1
set grid
set title '(a) number of active iCheck nodes'
plot '$dat' using 1:2 with steps lw 2 lc rgb 'red' title 'nodes'
set ylabel 'agents'
set yrange [0:*]
set title '(b) agents per iCheck node (numbered by arrival)'
plot $cols
unset multiplot
EOF
}

echo "# bench/icsched: $JOBS synth jobs of 2 nodes, checkpoints $((SIZE_BASE + SIZE_STEP))..$((SIZE_BASE + JOBS * SIZE_STEP)) MiB,"
echo "# ${MEMGB} GB checkpoint memory per iCheck node, $RUNS run(s); results in $OUT"
echo "# config run makespan_s commits median_commit_s p90_commit_s mean_commit_s fallbacks max_ic_nodes lent_node_s failed_jobs released returned finalize_after_move all_back_s"
: >"$OUT/results.txt"
for ((r = 1; r <= RUNS; r++)); do
  for cfg in $CONFIGS; do
    line=$(one_run "$cfg" "$r")
    echo "$line" | tee -a "$OUT/results.txt"
  done
done

# the table: medians over the runs, ratios to static-1 and static-3
awk '
  function med(arr, n,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (arr[j] < arr[i]) { t = arr[i]; arr[i] = arr[j]; arr[j] = t }
                                   return (n % 2) ? arr[(n + 1) / 2] : (arr[n / 2] + arr[n / 2 + 1]) / 2 }
  { c = $1; if (!(c in n)) order[++K] = c; i = ++n[c]
    for (f = 3; f <= 15; f++) v[c, f, i] = $f }
  END {
    for (k = 1; k <= K; k++) { c = order[k]
      for (f = 3; f <= 15; f++) { delete a; for (i = 1; i <= n[c]; i++) a[i] = v[c, f, i]; M[c, f] = med(a, n[c]) } }
    printf "\n| configuration | makespan (s) | vs static-1 | vs static-3 | commits | median commit (s) | vs static-1 | vs static-3 | p90 commit (s) | fallbacks | max iCheck nodes | node-s lent | given back idle | reclaimed | all back after (s) | failed jobs |\n"
    printf "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    for (k = 1; k <= K; k++) { c = order[k]
      r1 = ("static-1" in n) && M["static-1", 3] > 0 ? sprintf("%.2f", M[c, 3] / M["static-1", 3]) : "-"
      r3 = ("static-3" in n) && M["static-3", 3] > 0 ? sprintf("%.2f", M[c, 3] / M["static-3", 3]) : "-"
      q1 = ("static-1" in n) && M["static-1", 5] > 0 ? sprintf("%.2f", M[c, 5] / M["static-1", 5]) : "-"
      q3 = ("static-3" in n) && M["static-3", 5] > 0 ? sprintf("%.2f", M[c, 5] / M["static-3", 5]) : "-"
      printf "| %s | %.1f | %s | %s | %d | %.3f | %s | %s | %.3f | %d | %d | %d | %d | %d | %s | %d |\n", c, M[c, 3], r1, r3, M[c, 4], M[c, 5], q1, q3, M[c, 6], M[c, 8], M[c, 9], M[c, 10], M[c, 12], M[c, 13], (c ~ /^dyn-/ ? sprintf("%d", M[c, 15]) : "-"), M[c, 11] }
    printf "(medians over %d run(s) of each configuration)\n", n[order[1]]
  }' "$OUT/results.txt" | tee "$OUT/table.md"
