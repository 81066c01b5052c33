#!/usr/bin/env bash
# ctest-cost: 35
# ctest-processors: 2
# t0020-docs-readme-esp-run.sh — the README's main command as a newcomer runs it: the esp-run line of the
# README's "The two commands" block, exactly as written, from the repository
# root, with only a smaller workload appended (--count 20 --scale 0.005), and
# DYNRES_BUILD pointing at an empty directory, so esp-run's own setup has to
# configure and build everything the run executes (a partial build once left
# mjcontrol unbuilt and vcluster-boot failed). Checks: exit 0; both default
# runs (rigid easy, malleable minagree) had every job COMPLETED; the one
# table with live and mjsim columns for each run; the malleable run resized
# jobs; a Gantt chart (PNG) per run. Then what stops a run instead of
# changing it: esp without the esp-app binary submits nothing and names it,
# and the esp-app script without a binary exits 127 naming it (no quiet
# fallback to a job that never resizes).
# The empty build directory is made beside the suite's own build
# ($DYNRES_BUILD), at the same depth under the source tree: CMake configures
# and builds every target esp-run needs from nothing, and ccache (which
# CMakeLists.txt uses when installed) replays the compiler's output for the
# sources the suite's build already compiled, so the test costs a configure,
# the links and the two runs (about 1.5 minutes) instead of a second
# 5-minute compile. Without ccache, or when the parent of $DYNRES_BUILD is
# not writable (then a directory under the test's own), the same build runs
# uncached. On a loaded machine the wall time grows many-fold, so the bound
# below only stops a hang.
. "${DYNRES_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/t/lib.sh"
t_begin 2400
cd "$DYNRES_SRC" || t_fatal "cd $DYNRES_SRC"

cmd=$(awk '/^## The two commands/ { s = 1 } s && /^share\/dynres\/esp-run([ \t]|$)/ { sub(/[ \t]*#.*/, ""); print; exit }' README.md)
[[ -n $cmd ]] || t_fatal "README.md has no share/dynres/esp-run line under '## The two commands'"
read -r -a argv <<<"$cmd"
if FRESH=$(mktemp -d "$(dirname "$DYNRES_BUILD")/.t0020-build.XXXXXX" 2>/dev/null); then
  remove_fresh() { rm -rf -- "$FRESH" "$FRESH.configure.log" "$FRESH.build.log"; }
  t_on_exit remove_fresh
else
  FRESH=$T_TMP/build
  mkdir -p "$FRESH"
fi
mkdir -p "$T_TMP/tmp"
t_log "running the README's '$cmd' with --count 20 --scale 0.005 on an empty build directory $FRESH"
t0=$(date +%s)
# TMPDIR: esp-run's default --dir is under it (kept inside this test)
t_run env DYNRES_BUILD="$FRESH" TMPDIR="$T_TMP/tmp" "${argv[@]}" --count 20 --scale 0.005
t_log "esp-run took $(( $(date +%s) - t0 )) s (exit $T_RC)"
assert_eq 0 "$T_RC" "esp-run exits 0 on a fresh build directory"
((T_RC == 0)) || { echo "$T_OUT" | tail -20 >&2; echo "$T_ERR" | tail -20 >&2; }
for b in mjsub mjstat mjcancel mjcontrol mjsched mjstepd mjnoded mjworkload mjsim esp-app; do
  [[ -x $FRESH/bin/$b ]] || t_fail "the fresh build has no bin/$b"
done

D=$T_TMP/tmp/dynres-esp-$(id -un)
for run in rigid-easy malleable-minagree; do
  C=$D/$run
  [[ -f $C/state.db ]] || { t_fail "$run: no state file $C/state.db"; continue; }
  assert_eq 20 "$(count_jobs "$C")" "$run: 20 jobs submitted"
  assert_eq 20 "$(count_jobs "$C" "state='COMPLETED'")" "$run: every job COMPLETED"
  check_allocations_disjoint "$C"
  png=$D/$run-gantt.png
  assert_eq "89504e47" "$(head -c4 "$png" 2>/dev/null | od -An -tx1 | tr -d ' \n')" "$run: Gantt chart $png is a PNG"
done
assert_eq 20 "$(count_jobs "$D/malleable-minagree" "kind='malleable'")" "the second run's jobs are all malleable"
assert_eq 0 "$(count_jobs "$D/rigid-easy" "kind='malleable'")" "the first run's jobs are rigid"
resized=$(sq "$D/malleable-minagree" "SELECT COUNT(*) FROM resize_orders WHERE state='committed'")
assert_lt 0 "$resized" "minagree resized malleable jobs live ($resized orders committed)"

# The table: a header naming both runs, live and mjsim columns, and a number
# in every cell of each metric row.
table=$(sed -n '/^== ESP results/,$p' <<<"$T_OUT")
assert_contains "$table" "== ESP results: 34 nodes, 20 jobs, seed 1" "the results table is printed"
assert_match 'rigid-easy +malleable-minagree' "$table" "one column pair per run"
assert_match '(live +mjsim +){1}live +mjsim' "$table" "live beside mjsim for each run"
for m in "makespan \[s\]" "utilisation \[%\]" "avg wait \[s\]" "avg response \[s\]" "avg bounded slowdown" expands shrinks; do
  assert_match "^$m( +[0-9]+(\.[0-9]+)?){4}\$" "$(grep -E "^$m" <<<"$table")" "row '$m' has four figures"
done
assert_match '^jobs finished +20 +20 +20 +20$' "$(grep '^jobs finished' <<<"$table")" "20 jobs finished live and simulated in both runs"
live_exp=$(awk '/^expands/ { print $4 }' <<<"$table")
assert_lt 0 "$live_exp" "the malleable run's live column shows expands ($live_exp)"
rig_exp=$(awk '/^expands/ { print $2 }' <<<"$table")
assert_eq 0 "$rig_exp" "the rigid run shows no expands"

# A run that cannot be what it says stops before it starts.
mkdir -p "$T_TMP/partial"
for b in mjworkload mjsub; do ln -s "$FRESH/bin/$b" "$T_TMP/partial/$b"; done
boot_cluster "$T_TMP/c" 2 --tick 0.2
t_run env DYNRES_BIN="$T_TMP/partial" share/dynres/esp --count 2 --scale 0.005 --malleable-fraction 1
assert_eq 1 "$T_RC" "esp without esp-app exits 1"
assert_contains "$T_ERR" "$T_TMP/partial/esp-app is not built" "and names the missing esp-app"
assert_eq 0 "$(count_jobs "$T_TMP/c")" "and submitted nothing"
mkdir -p "$T_TMP/lonely/a/b/c/d"
cp share/dynres/examples/esp-app/esp-app "$T_TMP/lonely/a/b/c/d/esp-app"
t_run env -u DYNRES_BIN -u DYNRES_BUILD bash "$T_TMP/lonely/a/b/c/d/esp-app" 1 2 0.05
assert_eq 127 "$T_RC" "the esp-app script without a binary exits 127"
assert_contains "$T_ERR" "the esp-app binary is not built" "and says so"
t_done
