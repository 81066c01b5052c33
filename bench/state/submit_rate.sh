#!/usr/bin/env bash
# submit_rate — how fast can 8 concurrent mjsub processes submit jobs to a
# dynres cluster, and where does a submission's time go?
#
#   bench/state/submit_rate.sh [-n JOBS] [-p PROCS] [-r REPEATS] [--nodes N]
#
# For each repetition, on fresh 8-node local clusters:
#   daemon up   — mjsched running (tick 0.2 s) and starting the trivial jobs
#                 (`true`, 1 node) while they are submitted;
#   daemon down — the same with mjsched stopped: each mjsub records its job
#                 in the state file itself (the owner's fallback; jobs stay
#                 PENDING);
#   daemon busy — mjsched running, but one job holds every node, so every
#                 pass starts nothing (a submission storm on a busy cluster);
#   baselines   — the same number of single-row INSERT transactions into a
#                 scratch WAL database (busy_timeout, synchronous=NORMAL, as
#                 the state file) from PROCS concurrent sqlite3 CLI processes:
#                   (a) one long-lived sqlite3 per process, one transaction
#                       per row: the bare database;
#                   (b) one sqlite3 process per row: process start-up + open
#                       + one transaction, like one mjsub per job.
# Wall time -> rows/s; the median of the repetitions is reported, with the
# ratio mjsub / baseline. Target: >= 500 submissions/s with the daemon up.
#
# Breakdown (daemon up and busy, per submission, medians): CPU of the mjsub
# processes (bash `times` of the submitting loops: process start, option
# parsing, the request), CPU of mjsched (/proc/PID/stat; job starts
# included when up), the wall time mjsched spent recording and answering
# submissions (group commits) and in scheduling passes, passes per 100
# submissions and the mean group size (mjsched's ping stats); and, once, the
# CPU of a bare process start (mjsub --version, sqlite3 -version, /bin/true).
#
# Environment: DYNRES_BUILD (default <repo>/build), DYNRES_SRC.
SELF_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
: "${DYNRES_SRC:=$(cd "$SELF_DIR/../.." && pwd)}"
. "$DYNRES_SRC/t/lib.sh"
T_NAME=submit_rate

JOBS=400 PROCS=8 REPS=5 NODES=8
while (($#)); do
  case $1 in
    -n) JOBS=$2; shift 2 ;;
    -p) PROCS=$2; shift 2 ;;
    -r) REPS=$2; shift 2 ;;
    --nodes) NODES=$2; shift 2 ;;
    -h|--help) sed -n '2,33p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "submit_rate: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
((JOBS % PROCS == 0)) || { echo "submit_rate: -n ($JOBS) must be a multiple of -p ($PROCS)" >&2; exit 2; }
PER=$((JOBS / PROCS))
t_begin 3000
[[ -n $(command -v sqlite3) ]] || { echo "submit_rate: needs sqlite3" >&2; exit 1; }

now() { date +%s.%N; }
rate() { awk -v n="$1" -v a="$2" -v b="$3" 'BEGIN{printf "%.1f", n/(b-a)}'; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.3f", b-a}'; }
median() { sort -g | awk '{v[NR]=$1} END{print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }

W=$T_TMP/work
mkdir -p "$W"
cd "$W" || exit 1
write_script "$W/true.sh" '#!/bin/sh' '#SBATCH -N 1' '#SBATCH -o /dev/null' 'true'
SCRIPT_TEXT=$(cat "$W/true.sh")

# children_cpu FILE — user+sys seconds of the children in bash `times` output
children_cpu() { awk 'NR == 2 { t = 0; for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); t += a[1] * 60 + a[2] } print t }' "$1"; }
# sched_cpu PID — user+sys seconds of mjsched itself (not its children)
sched_cpu() { awk -v hz="$(getconf CLK_TCK)" '{ sub(/.*\) /, ""); print ($12 + $13) / hz }' "/proc/$1/stat"; }
# sched_stats DIR — "passes submissions groups pass_seconds submit_seconds" of a running mjsched
sched_stats() {
  DYNRES_HOME=$1 mjstat --summary --json | perl -MJSON::PP -0777 -ne \
    'my $s = decode_json($_)->{scheduler}{stats} // {}; print join(" ", map { $s->{$_} // 0 }
       qw(passes submissions submit_groups pass_seconds submit_seconds)), "\n"'
}

# mjsub_run DIR [JOBS_ALREADY_THERE] -> "seconds failures"; the mjsub CPU
# seconds go to $W/cpu.mjsub, mjsched's (when running) to $W/cpu.sched and
# its stats deltas to $W/stats
mjsub_run() {
  local dir=$1 before=${2:-0} k t0 t1 fails sp c0 s0
  rm -f "$W"/rc.* "$W"/err.* "$W"/times.* "$W/cpu.sched" "$W/stats"
  sp=$(sched_pid "$dir")
  if [[ -n $sp ]]; then c0=$(sched_cpu "$sp"); s0=$(sched_stats "$dir"); fi
  t0=$(now)
  for k in $(seq "$PROCS"); do
    (
      export DYNRES_HOME=$dir
      for _ in $(seq "$PER"); do
        mjsub --parsable true.sh >/dev/null 2>>"$W/err.$k"
        echo $? >>"$W/rc.$k"
      done
      times >"$W/times.$k"
    ) &
  done
  wait
  t1=$(now)
  for k in $(seq "$PROCS"); do children_cpu "$W/times.$k"; done | awk '{t += $1} END {print t}' >"$W/cpu.mjsub"
  if [[ -n $sp ]]; then
    awk -v a="$c0" -v b="$(sched_cpu "$sp")" 'BEGIN{print b - a}' >"$W/cpu.sched"
    paste -d' ' <(echo "$s0") <(sched_stats "$dir") |
      awk '{print $6-$1, $7-$2, $8-$3, $9-$4, $10-$5}' >"$W/stats"
  fi
  fails=$(cat "$W"/rc.* | grep -vc '^0$')
  if grep -qi locked "$W"/err.* 2>/dev/null; then fails="$fails (locked!)"; fi
  [[ $(count_jobs "$dir") == $((JOBS + before)) ]] || fails="$fails (jobs recorded: $(count_jobs "$dir"))"
  echo "$(secs "$t0" "$t1") $fails"
}
# breakdown -> "mjsub_ms sched_ms submit_ms pass_ms passes_per_100 group" per submission
breakdown() {
  read -r passes subs groups pass_s submit_s <"$W/stats"
  awk -v n="$JOBS" -v m="$(cat "$W/cpu.mjsub")" -v d="$(cat "$W/cpu.sched")" -v p="$passes" -v g="$groups" \
    -v ps="$pass_s" -v ss="$submit_s" \
    'BEGIN{printf "%.2f %.2f %.2f %.2f %.1f %.2f", 1000*m/n, 1000*d/n, 1000*ss/n, 1000*ps/n, 100*p/n, (g ? n/g : 0)}'
}
# startup_cpu CMD... -> CPU ms of one run of CMD (median-free: mean of 50)
startup_cpu() {
  local f=$W/times.start
  ( for _ in $(seq 50); do "$@" >/dev/null 2>&1; done; times >"$f" )
  awk -v t="$(children_cpu "$f")" 'BEGIN{printf "%.2f", 1000 * t / 50}'
}

# baseline_db FILE — scratch database shaped like the jobs table
baseline_db() {
  rm -f "$1" "$1"-wal "$1"-shm
  sqlite3 "$1" "PRAGMA journal_mode=WAL;" \
    "CREATE TABLE jobs(id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL, state TEXT NOT NULL,
       req_nodes INTEGER NOT NULL, script TEXT NOT NULL, stdout_path TEXT NOT NULL, submit_time REAL NOT NULL);
     CREATE INDEX jobs_by_state ON jobs(state, submit_time, id);
     CREATE TABLE events(id INTEGER PRIMARY KEY, time REAL NOT NULL, job_id INTEGER, kind TEXT NOT NULL,
       detail TEXT NOT NULL DEFAULT '');" >/dev/null
}
INSERT="BEGIN IMMEDIATE; INSERT INTO jobs(name,state,req_nodes,script,stdout_path,submit_time)
  VALUES('true.sh','PENDING',1,'${SCRIPT_TEXT//\'/\'\'}','/dev/null',julianday('now'));
  INSERT INTO events(time,job_id,kind) VALUES(julianday('now'),last_insert_rowid(),'submit'); COMMIT;"

# baseline_long DB -> seconds: PROCS sqlite3 processes, PER transactions each
baseline_long() {
  local db=$1 k t0 t1
  baseline_db "$db"
  for k in $(seq "$PROCS"); do
    { echo ".timeout 30000"; echo "PRAGMA synchronous=NORMAL;"; for _ in $(seq "$PER"); do echo "$INSERT"; done; } \
      >"$W/sql.$k"
  done
  t0=$(now)
  for k in $(seq "$PROCS"); do sqlite3 -batch "$db" <"$W/sql.$k" >/dev/null 2>>"$W/berr" & done
  wait
  t1=$(now)
  [[ $(sqlite3 "$db" "SELECT COUNT(*) FROM jobs") == "$JOBS" ]] || echo "baseline: rows missing" >&2
  secs "$t0" "$t1"
}
# baseline_proc DB -> seconds: one sqlite3 process per row, PROCS loops
baseline_proc() {
  local db=$1 k t0 t1
  baseline_db "$db"
  t0=$(now)
  for k in $(seq "$PROCS"); do
    (for _ in $(seq "$PER"); do sqlite3 -batch -cmd ".timeout 30000" -cmd "PRAGMA synchronous=NORMAL" "$db" "$INSERT" >/dev/null 2>>"$W/berr"; done) &
  done
  wait
  t1=$(now)
  [[ $(sqlite3 "$db" "SELECT COUNT(*) FROM jobs") == "$JOBS" ]] || echo "baseline: rows missing" >&2
  secs "$t0" "$t1"
}

echo "submit_rate: $PROCS procs, $JOBS jobs, $NODES-node local cluster, $REPS repetitions, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
UP=() DOWN=() BUSY=() BL=() BP=() BDU=() BDB=()
for r in $(seq "$REPS"); do
  c=$T_TMP/up$r
  boot_cluster "$c" "$NODES" --tick 0.2 --kill-wait 1
  read -r up upfail < <(mjsub_run "$c")
  bdu=$(breakdown)
  wait_for 120 "rep $r: all jobs ended" no_active_jobs "$c" >/dev/null
  notdone=$(count_jobs "$c" "state != 'COMPLETED'")
  vcluster-down --dir "$c" >/dev/null 2>&1

  c=$T_TMP/down$r
  boot_cluster "$c" "$NODES" --tick 0.2 --kill-wait 1
  sp=$(sched_pid "$c")
  kill -TERM "$sp"
  wait_for 10 "mjsched stopped" pids_gone "$sp" >/dev/null
  read -r down downfail < <(mjsub_run "$c")
  vcluster-down --dir "$c" >/dev/null 2>&1

  c=$T_TMP/busy$r
  boot_cluster "$c" "$NODES" --tick 0.2 --kill-wait 1
  printf '#!/bin/bash\nsleep 300\n' >"$W/hold.sh"
  DYNRES_HOME=$c mjsub --parsable -N "$NODES" "$W/hold.sh" >/dev/null
  wait_for 20 "rep $r: the holding job runs" state_is "$c" 1 RUNNING >/dev/null
  read -r busy busyfail < <(mjsub_run "$c" 1)
  bdb=$(breakdown)
  vcluster-down --dir "$c" >/dev/null 2>&1

  bl=$(baseline_long "$T_TMP/base.db")
  bp=$(baseline_proc "$T_TMP/base.db")
  UP+=("$up") DOWN+=("$down") BUSY+=("$busy") BL+=("$bl") BP+=("$bp") BDU+=("$bdu") BDB+=("$bdb")
  printf 'rep %d: daemon up %6.3f s (%s/s, failed %s, not COMPLETED %s) | daemon down %6.3f s (%s/s, failed %s) | daemon busy %6.3f s (%s/s, failed %s) | sqlite3 %6.3f s (%s/s) | sqlite3 per row %6.3f s (%s/s)\n' \
    "$r" "$up" "$(rate "$JOBS" 0 "$up")" "$upfail" "$notdone" "$down" "$(rate "$JOBS" 0 "$down")" "$downfail" \
    "$busy" "$(rate "$JOBS" 0 "$busy")" "$busyfail" \
    "$bl" "$(rate "$JOBS" 0 "$bl")" "$bp" "$(rate "$JOBS" 0 "$bp")"
done
[[ -s $W/berr ]] && { echo "baseline errors:"; sort "$W/berr" | uniq -c | head; }

mu=$(printf '%s\n' "${UP[@]}" | median)
md=$(printf '%s\n' "${DOWN[@]}" | median)
mb=$(printf '%s\n' "${BUSY[@]}" | median)
ml=$(printf '%s\n' "${BL[@]}" | median)
mp=$(printf '%s\n' "${BP[@]}" | median)
ru=$(rate "$JOBS" 0 "$mu") rd=$(rate "$JOBS" 0 "$md") rb=$(rate "$JOBS" 0 "$mb") rl=$(rate "$JOBS" 0 "$ml") rp=$(rate "$JOBS" 0 "$mp")
echo "median of $REPS:"
echo "mjsub (daemon up):   $PROCS procs, $JOBS jobs, $mu s, $ru submissions/s (target >= 500/s)$(awk -v r="$ru" 'BEGIN{if (r < 500) print "  BELOW TARGET"}')"
echo "mjsub (daemon down): $PROCS procs, $JOBS jobs, $md s, $rd submissions/s"
echo "mjsub (daemon busy): $PROCS procs, $JOBS jobs, $mb s, $rb submissions/s (scheduler up, cluster full; ratio to daemon down $(awk -v a="$rb" -v b="$rd" 'BEGIN{printf "%.2f", a/b}'))"
echo "baseline sqlite3 inserts ($PROCS long-lived sqlite3, 1 tx per row): $ml s, $rl /s; ratio mjsub(up)/baseline $(awk -v a="$ru" -v b="$rl" 'BEGIN{printf "%.3f", a/b}'), mjsub(down)/baseline $(awk -v a="$rd" -v b="$rl" 'BEGIN{printf "%.3f", a/b}')"
echo "baseline sqlite3 inserts (one sqlite3 process per row):            $mp s, $rp /s; ratio mjsub(up)/baseline $(awk -v a="$ru" -v b="$rp" 'BEGIN{printf "%.3f", a/b}'), mjsub(down)/baseline $(awk -v a="$rd" -v b="$rp" 'BEGIN{printf "%.3f", a/b}')"
# medians of each breakdown column
colmed() { local col=$1; shift; printf '%s\n' "$@" | awk -v c="$col" '{print $c}' | median; }
echo "where a submission's time goes (per submission, median of $REPS):"
printf '  %-12s %10s %12s %14s %12s %14s %11s\n' case "mjsub CPU" "mjsched CPU" "record+answer" "pass wall" "passes/100" "group size"
for kind in up busy; do
  if [[ $kind == up ]]; then set -- "${BDU[@]}"; else set -- "${BDB[@]}"; fi
  printf '  %-12s %7s ms %9s ms %11s ms %9s ms %14s %11s\n' "daemon $kind" "$(colmed 1 "$@")" "$(colmed 2 "$@")" \
    "$(colmed 3 "$@")" "$(colmed 4 "$@")" "$(colmed 5 "$@")" "$(colmed 6 "$@")"
done
echo "  process start alone (CPU per run, mean of 50): mjsub --version $(startup_cpu mjsub --version) ms," \
  "sqlite3 -version $(startup_cpu sqlite3 -version) ms, /bin/true $(startup_cpu /bin/true) ms"
echo "  (mjsched CPU includes starting the jobs when up; 'record+answer' and 'pass wall' are mjsched's wall time)"
t_done >/dev/null
