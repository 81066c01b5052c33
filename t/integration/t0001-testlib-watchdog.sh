#!/usr/bin/env bash
# t/lib.sh's time bound (t_begin SECONDS) ends a test whose command hangs:
# inside t_run (which waits in the background, so the TERM trap runs at
# once) and in a plain foreground command substitution (the watchdog kills
# the test shell's children). Each inner test is bounded at 2 s and runs a
# 30 s sleep; it must fail within a few seconds, saying the bound was
# exceeded, and leave no sleep behind.
. "${DYNRES_SRC:-$(dirname "$0")/../..}/t/lib.sh"
t_begin 60
inner() {  # NAME BODY: run a test script with a 2 s bound; prints "rc seconds"
  local f=$T_TMP/$1.sh s e rc
  printf '%s\n' '#!/usr/bin/env bash' ". \"$DYNRES_SRC/t/lib.sh\"" 't_begin 2' "$2" 't_done' >"$f"
  s=$(date +%s.%N)
  bash "$f" >"$T_TMP/$1.out" 2>&1; rc=$?
  e=$(date +%s.%N)
  echo "$rc $(awk -v s="$s" -v e="$e" 'BEGIN { printf "%d", e - s }')"
}
for c in "run:t_run sleep 30.5" "subst:x=\$(sleep 30.6)"; do
  name=${c%%:*}
  read -r rc secs < <(inner "$name" "${c#*:}")
  assert_eq 1 "$rc" "$name: a hung command fails the test"
  assert_lt "$secs" 12 "$name: ended within 12 s of a 2 s bound (took $secs s)"
  grep -q "time bound of 2 s exceeded" "$T_TMP/$name.out" && t_pass "$name: the failure names the time bound" ||
    t_fail "$name: no time-bound message: $(cat "$T_TMP/$name.out")"
done
pgrep -f "sleep 30\.[56]" >/dev/null && t_fail "a sleep of an inner test survived" || t_pass "no inner command left running"
t_done
