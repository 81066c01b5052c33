#!/bin/bash
# restart_resize.sh — the cost of a restart-based resize of an MPI job
# ([John24 §7.4.4] "malleability through checkpoint-restart"): heat
# --malleable (share/dynres/examples/heat/heat-malleable.sh, one rank per
# node) on a local virtual cluster of 4
# compute nodes and 1 iCheck node, with S MiB of grid state, is shrunk 4 -> 2
# and grown 2 -> 4 by `mjcontrol resize`, REPS times per size.
#
# For each resize, from the scheduler's record (resize_orders.sent/settled)
# and heat's time stamps (rank 0, Unix time):
#   detect    order sent -> heat's rank 0 sees it and begins (one iteration at most)
#   commit    iCheck commit + flush to the second level on the old ranks, = ckpt + flush:
#     ckpt    icheck_commit (the agents hold the new version)
#     flush   icheck_finalize: the version written to the second level
#   relaunch  flushed -> restore begins on the new ranks, = exec + init:
#     exec    flushed -> heat's main() on the new rank 0: MPI_Finalize, exit,
#             mpiexec ends, mjstepd runs the script again, mpiexec starts heat
#     init    main() -> restore begins: MPI_Init, mj_init_adapt, grid set-up,
#             icheck_init (registration with the controller, agents); of it
#       mpi     MPI_Init
#       grid    heat allocating and filling its two grids (2x the state:
#               fresh memory the kernel faults in); = the icinit column of
#               earlier versions of this script minus icheck_init
#       icinit  icheck_init (rank 0's ICHECK_TIMING=1 line), of it
#       reg     the registration with the controller (its reply)
#   restore   icheck_restart_all redistributing the grid over the new rank count
#   ack       mj_adapt_commit of the order
#   total     order sent -> committed (RESUMED commit), the scheduler's clock
# Also the cost of probing for orders once per iteration: rank 0's
# mj_probe_adapt (probe_us) and the probe plus the broadcast of its answer
# to every rank (poll_us, which includes waiting for the slowest rank), from
# heat's counters.
# Medians over REPS; the same-run baselines are a plain write of the same
# bytes (dd conv=fsync into the iCheck second level directory; commit/write
# is the ratio), the time to fault in S MiB of fresh memory (dd bs=S of
# /dev/zero to /dev/null: what agents and new ranks pay to allocate, "fresh")
# and [Finnerty24 Table 2]'s in-place resize, 14.55 s grow / 7.41 s shrink
# (total/inpl).
#
# Usage: bench/mj/restart_resize.sh [--sizes "64 1024"] [--reps 3] [--keep]
# (from the source tree, after building heat, mj*, icheckd and icagent in
# build/; DYNRES_BUILD selects another build tree). About 2 min for the
# defaults on 2 cores.
set -u
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${DYNRES_BUILD:-$SRC/build}
export DYNRES_BIN=$BUILD/bin
export PATH=$DYNRES_BIN:$SRC/share/dynres:$PATH
SIZES="64 1024" REPS=3 KEEP=0
while (($#)); do
  case $1 in
    --sizes) SIZES=${2:?--sizes needs MiB values}; shift 2 ;;
    --reps) REPS=${2:?--reps needs a count}; shift 2 ;;
    --keep) KEEP=1; shift ;;
    -h|--help) awk 'NR > 1 && !/^#/ {exit} NR > 1' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "restart_resize.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[[ $REPS =~ ^[1-9][0-9]?$ ]] || { echo "restart_resize.sh: --reps wants 1..99, got '$REPS'" >&2; exit 2; }
for s in $SIZES; do
  [[ $s =~ ^[1-9][0-9]*$ && $s -le 8192 ]] || { echo "restart_resize.sh: sizes are MiB in 1..8192, got '$s'" >&2; exit 2; }
done
for t in heat mjsub mjsched mjstepd mjcontrol mjcancel icheckd icagent; do
  [[ -x $DYNRES_BIN/$t ]] || { echo "restart_resize.sh: $DYNRES_BIN/$t is not built" >&2; exit 2; }
done
command -v mpiexec >/dev/null || { echo "restart_resize.sh: mpiexec (Debian package mpich) is not installed" >&2; exit 2; }

W=$(mktemp -d "${TMPDIR:-/tmp}/restart_resize.XXXXXX")
C=$W/c
cleanup() {
  vcluster-down --dir "$C" >/dev/null 2>&1
  if ((KEEP)); then echo "kept $W"; else rm -rf "$W"; fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM
vcluster-boot --local 5 --dir "$C" --tick 0.2 --kill-wait 1 --icheck-nodes 1 >"$W/boot.log" 2>&1 ||
  { cat "$W/boot.log" >&2; exit 1; }
export DYNRES_HOME=$C
export ICHECK_TIMING=1  # heat's rank 0 prints where icheck_init's time goes
sq() { sqlite3 -batch -cmd '.timeout 10000' "$C/state.db" "$1"; }
PFS=$(sed -n 's/^pfs_dir: *//p' "$C/icheck.yaml")
mkdir -p "$PFS"

wait_until() {  # SECONDS CMD...: poll every 0.05 s
  local end=$((SECONDS + $1))
  shift
  until "$@"; do
    ((SECONDS < end)) || return 1
    sleep 0.05
  done
}
job_is() { [[ $(sq "SELECT state FROM jobs WHERE id=$1") == "$2" ]]; }
accepting() { [[ $(sq "SELECT phase FROM mj_jobs WHERE job_id=$1") == accepting && $(grep -c '^heat: malleable' "$W/heat-$1.out") -ge $2 ]]; }
median() { sort -g | awk '{a[NR]=$1} END {if (NR == 0) print "nan"; else if (NR % 2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

# one line per resize: size kind detect commit relaunch restore ack total write exec init probe_us poll_us ckpt flush mpi icinit grid reg fresh
R=$W/results
: >"$R"
for S in $SIZES; do
  nx=1024
  ny=$((S * 1024 * 1024 / (8 * nx)))  # S MiB of doubles in rows of 1024 cells
  for ((rep = 1; rep <= REPS; rep++)); do
    J=$(HEAT=$DYNRES_BIN/heat mjsub --parsable -N 4 --min-nodes 2 -o "$W/heat-%j.out" \
      "$SRC/share/dynres/examples/heat/heat-malleable.sh" --nx $nx --ny $ny --iters 1000000) || exit 1
    wait_until 60 accepting "$J" 1 || { cat "$W/heat-$J.out" >&2; echo "job $J did not start" >&2; exit 1; }
    n=1
    for to in 2 4; do
      mjcontrol resize "$J" $to --wait 600 >"$W/resize.log" 2>&1 ||
        { cat "$W/resize.log" "$W/heat-$J.out" >&2; echo "resize of job $J to $to failed" >&2; exit 1; }
      n=$((n + 1))
      wait_until 60 accepting "$J" $n || { cat "$W/heat-$J.out" >&2; echo "job $J did not resume" >&2; exit 1; }
      # same-run baseline: a plain write of the same bytes where iCheck flushes
      w0=$(date +%s.%N)
      dd if=/dev/zero of="$PFS/baseline.bin" bs=1M count="$S" conv=fsync status=none
      w1=$(date +%s.%N)
      rm -f "$PFS/baseline.bin"
      f0=$(date +%s.%N)
      dd if=/dev/zero of=/dev/null bs="${S}M" count=1 status=none
      f1=$(date +%s.%N)
      o=$(sq "SELECT id, kind, sent, settled FROM resize_orders WHERE job_id=$J ORDER BY id DESC LIMIT 1")
      IFS='|' read -r oid kind sent settled <<<"$o"
      st=$(grep "^heat: stopped for resize order=$oid " "$W/heat-$J.out")
      re=$(grep "^heat: resumed order=$oid " "$W/heat-$J.out")
      val() { sed -n "s/.* $1=\([0-9.]*\).*/\1/p" <<<"$2"; }
      # rank 0's "icheck: init timing: register R s, agents A s, discover D s" of the run that resumed
      it=$(awk -v o="heat: resumed order=$oid " '/^icheck: init timing:/ {t = $0} index($0, o) == 1 {print t; exit}' "$W/heat-$J.out")
      ireg=$(sed -n 's/.*register \([0-9.]*\) s.*/\1/p' <<<"$it") iag=$(sed -n 's/.*agents \([0-9.]*\) s.*/\1/p' <<<"$it") idi=$(sed -n 's/.*discover \([0-9.]*\) s.*/\1/p' <<<"$it")
      awk -v s="$S" -v k="$kind" -v sent="$sent" -v settled="$settled" -v seen="$(val t_seen "$st")" \
        -v fl="$(val t_flushed "$st")" -v mn="$(val t_main "$re")" -v r0="$(val t_restore_begin "$re")" -v r1="$(val t_restore_end "$re")" \
        -v cm="$(val t_committed "$re")" -v tm="$(val t_mpi "$re")" -v tg="$(val t_grid "$re")" -v ti="$(val t_icinit "$re")" -v np="$(val probes "$st")" -v ps="$(val probe_seconds "$st")" -v pl="$(val poll_seconds "$st")" -v ck="$(val icheck_commit_seconds "$st")" -v w0="$w0" -v w1="$w1" -v f0="$f0" -v f1="$f1" -v ireg="${ireg:--1}" -v iag="${iag:-0}" -v idi="${idi:-0}" \
        'BEGIN {ic = (ireg >= 0 ? ireg + iag + idi : -1); gr = (ti > 0 && ic >= 0 ? ti - tg - ic : -1)
                printf "%s %s %.3f %.3f %.3f %.3f %.3f %.3f %.3f %.3f %.3f %.1f %.1f %.3f %.3f %.3f %.3f %.3f %.3f %.3f\n", s, k, seen-sent, fl-seen, r0-fl, r1-r0, cm-r1, settled-sent, w1-w0, mn-fl, r0-mn, (np > 0 ? 1e6*ps/np : 0), (np > 0 ? 1e6*pl/np : 0), ck, fl-seen-ck, (tm > 0 ? tm-mn : -1), ic, gr, ireg, f1-f0}' >>"$R"
      tail -1 "$R" | sed "s/^/  rep $rep job $J order $oid: /"
    done
    mjcancel "$J" >/dev/null
    wait_until 30 job_is "$J" CANCELLED
    rm -rf "${PFS:?}"/heat-"$J"*
  done
done

echo
echo "restart-based resize of heat (1 rank per node, 4 compute nodes + 1 iCheck node), medians of $REPS, seconds"
printf '%-9s %-7s %7s %7s %6s %6s %8s %6s %6s %6s %6s %6s %6s %7s %6s %7s | %7s %8s %6s %9s | %8s %8s\n' state kind detect commit ckpt flush relaunch exec init mpi grid icinit reg restore ack total write commit/write fresh total/inpl probe_us poll_us
for S in $SIZES; do
  for k in shrink expand; do
    col() { awk -v s="$S" -v k="$k" -v c="$1" '$1 == s && $2 == k {print $c}' "$R" | median; }
    d=$(col 3) c=$(col 4) l=$(col 5) r=$(col 6) a=$(col 7) t=$(col 8) w=$(col 9) x=$(col 10) i=$(col 11) p=$(col 12) q=$(col 13)
    cp=$(col 14) fs=$(col 15) mp=$(col 16) ii=$(col 17) gr=$(col 18) rg=$(col 19) fr=$(col 20)
    inpl=$([[ $k == expand ]] && echo 14.55 || echo 7.41)  # [Finnerty24 Table 2] in-place grow / shrink
    printf '%-9s %-7s %7.3f %7.3f %6.3f %6.3f %8.3f %6.3f %6.3f %6.3f %6.3f %6.3f %6.3f %7.3f %6.3f %7.3f | %7.3f %8.2f %6.3f %9.2f | %8.1f %8.1f\n' \
      "${S}MiB" "$k" "$d" "$c" "$cp" "$fs" "$l" "$x" "$i" "$mp" "$gr" "$ii" "$rg" "$r" "$a" "$t" "$w" \
      "$(awk -v c="$c" -v w="$w" 'BEGIN {print (w > 0 ? c / w : 0)}')" "$fr" "$(awk -v t="$t" -v f="$inpl" 'BEGIN {print t / f}')" "$p" "$q"
  done
done
