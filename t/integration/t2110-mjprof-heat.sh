#!/usr/bin/env bash
# libmjprof: the PMPI profiling library measures the time heat
# (share/dynres/examples/heat) spends in MPI without any code in heat.
# heat runs under mpiexec -n 2 with LD_PRELOAD=libmjprof.so and
# MJPROF_SUMMARY=1 outside a job: each rank prints one mjprof line whose MTCT
# is positive and finite and whose mpi_s + compute_s is its wall time; the
# checksum is that of a run without the library; a bad MJPROF_INTERVAL is
# named and replaced by the default. A few seconds.
. "${DYNRES_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/t/lib.sh"
t_begin 60
LIB=$DYNRES_BUILD/lib/libmjprof.so
[[ -f $LIB ]] || t_skip "libmjprof.so is not built (needs MPI and libmj)"
[[ -x $DYNRES_BIN/heat ]] || t_skip "heat is not built"
command -v mpiexec >/dev/null || t_skip "mpiexec is not installed"
cd "$T_TMP" || t_fatal "cd"
ARGS=(--nx 160 --ny 160 --iters 200 --no-icheck -q)

t_run timeout 60 mpiexec -n 2 heat "${ARGS[@]}"
assert_eq 0 "$T_RC" "heat without mjprof ($T_ERR)"
ref=$(grep -oE 'checksum=[0-9a-f]+' <<<"$T_OUT")

t_run env LD_PRELOAD="$LIB" MJPROF_SUMMARY=1 timeout 60 mpiexec -n 2 heat "${ARGS[@]}"
assert_eq 0 "$T_RC" "heat under LD_PRELOAD=libmjprof.so"
assert_eq "$ref" "$(grep -oE 'checksum=[0-9a-f]+' <<<"$T_OUT")" "same checksum with the profiler"
lines=$(grep -E '^mjprof: rank [0-9]+ ' <<<"$T_ERR")
assert_eq 2 "$(grep -c . <<<"$lines")" "one mjprof summary line per rank"
for r in 0 1; do
  l=$(grep -E "^mjprof: rank $r " <<<"$lines")
  mtct=$(grep -oE 'mtct=[^ ]+' <<<"$l" | cut -d= -f2)
  if awk -v m="$mtct" 'BEGIN { exit !(m + 0 > 0 && m + 0 < 1e9 && m != "inf" && m != "nan") }'; then
    t_pass "rank $r: MTCT $mtct is positive and finite"
  else
    t_fail "rank $r: MTCT '$mtct' is not positive and finite: $l"
  fi
  # mpi_s + compute_s = wall_s (to the printed precision)
  if awk -v l="$l" 'BEGIN { n = split(l, f, /[ =]/); for (i = 1; i < n; i++) v[f[i]] = f[i + 1];
                            d = v["mpi_s"] + v["compute_s"] - v["wall_s"]; exit !(v["mpi_s"] > 0 && d < 1e-5 && d > -1e-5) }'; then
    t_pass "rank $r: mpi_s > 0 and mpi_s + compute_s = wall_s"
  else
    t_fail "rank $r: inconsistent times: $l"
  fi
done
assert_contains "$lines" "reports=0 report_errors=0" "outside a job nothing is reported and nothing fails"

t_run env LD_PRELOAD="$LIB" MJPROF_INTERVAL=soon timeout 60 mpiexec -n 1 heat "${ARGS[@]}"
assert_eq 0 "$T_RC" "a bad MJPROF_INTERVAL does not stop the application"
assert_contains "$T_ERR" "MJPROF_INTERVAL='soon'" "the bad MJPROF_INTERVAL is named"
assert_not_contains "$T_ERR" "mjprof: rank" "no summary without MJPROF_SUMMARY=1"
t_done
