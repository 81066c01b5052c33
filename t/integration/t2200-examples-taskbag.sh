#!/usr/bin/env bash
# The in-place malleable task-parallel examples run fixed-size
# outside a job (--workers N) with exact results:
#   - nqueens N = 10..14 counts the well-known 724, 2680, 14200, 73712,
#     365596 solutions, with 1..4 workers and prefix depths 2 and 3;
#   - pi's hit count equals an independent SplitMix64 implementation (perl)
#     and does not depend on the worker count; the estimate is near pi;
#   - a worker killed mid-run hands its task back: same count, and a
#     connection speaking garbage to the coordinator's socket is dropped
#     without changing the result;
#   - bad options exit non-zero with a message naming the problem.
# No cluster; about 10 s.
. "${DYNRES_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/t/lib.sh"
t_begin 60
for b in nqueens pi; do [[ -x $DYNRES_BIN/$b ]] || t_skip "$b is not built (needs libmj)"; done
cd "$T_TMP" || t_fatal "cd $T_TMP"

# field KEY TEXT — the value of KEY=... in TEXT's first line that has it
field() { grep -oE "(^| )$1=[^ ]+" <<<"$2" | head -n1 | sed 's/.*=//'; }

declare -A KNOWN=([10]=724 [11]=2680 [12]=14200 [13]=73712 [14]=365596)
w=1
for n in 10 11 12 13 14; do
  for d in 2 3; do
    t_run nqueens -n "$n" --prefix-depth "$d" --workers "$w"
    assert_eq 0 "$T_RC" "nqueens -n $n --prefix-depth $d --workers $w exits 0 ($T_ERR)"
    assert_eq "${KNOWN[$n]}" "$(field solutions "$T_OUT")" "nqueens N=$n depth $d with $w worker(s)"
    w=$((w % 4 + 1))
  done
done

# pi: an independent implementation of the per-chunk streams
cat >"$T_TMP/pi.pl" <<'PERL'
use strict; use warnings; no warnings 'portable';
my ($chunks, $samples, $seed) = @ARGV;
sub lsr { use integer; my ($v, $n) = @_; return ($v >> $n) & ((1 << (64 - $n)) - 1); }
sub sm { use integer; my $r = $_[0]; $$r += 0x9e3779b97f4a7c15; my $z = $$r;
  $z = ($z ^ lsr($z, 30)) * 0xbf58476d1ce4e5b9; $z = ($z ^ lsr($z, 27)) * 0x94d049bb133111eb;
  return $z ^ lsr($z, 31); }
my $hits = 0;
for my $k (0 .. $chunks - 1) {
  my $s = $seed; my $st;
  { use integer; my $t = sm(\$s); $s ^= $t + $k; $st = sm(\$s); }
  for (1 .. $samples) {
    my $x = lsr(sm(\$st), 11) / 9007199254740992.0; my $y = lsr(sm(\$st), 11) / 9007199254740992.0;
    $hits++ if $x * $x + $y * $y < 1.0;
  }
}
print "$hits\n";
PERL
want=$(perl "$T_TMP/pi.pl" 24 5000 7)
for w in 1 3 5; do
  t_run pi --chunks 24 --chunk-samples 5000 --seed 7 --workers "$w"
  assert_eq 0 "$T_RC" "pi --workers $w exits 0 ($T_ERR)"
  assert_eq "$want" "$(field hits "$T_OUT")" "pi hits with $w worker(s) equal the reference implementation"
done
t_run pi --chunks 400 --chunk-samples 50000 --seed 3 --workers 2
est=$(field estimate "$T_OUT")
assert_lt "$(awk -v e="$est" 'BEGIN { d = e - 3.14159265358979; print d < 0 ? -d : d }')" 0.01 "pi estimate $est is within 0.01 of pi"
t_run pi --chunks 400 --chunk-samples 50000 --seed 3 --workers 4
assert_eq "$est" "$(field estimate "$T_OUT")" "pi estimate identical with 2 and 4 workers"

# a worker killed mid-run, and a stranger on the socket
nqueens -n 12 --workers 3 --task-sleep-ms 5 >"$T_TMP/kill.out" 2>"$T_TMP/kill.err" &
coord=$!
bg_register "$coord"
sleep 1
victim=$(pgrep -P "$coord" | head -n1)
[[ -n $victim ]] && kill -KILL "$victim"
sock=$(ls -d "$T_TMP"/.nqueens-taskbag.*/s 2>/dev/null | head -n1)
[[ -S $sock ]] && perl -MIO::Socket::UNIX -e '
  my $s = IO::Socket::UNIX->new(Peer => $ARGV[0]) or exit 0;
  print $s "\x00\x00\x00\x05hello"; print $s "\x7f\xff\xff\xffjunk"; sleep 1;' "$sock"
wait "$coord"
rc=$?
assert_eq 0 "$rc" "nqueens with a killed worker exits 0 ($(tail -n3 "$T_TMP/kill.err"))"
assert_eq 14200 "$(field solutions "$(cat "$T_TMP/kill.out")")" "nqueens N=12: a killed worker's task is handed back"
assert_contains "$(cat "$T_TMP/kill.err")" "back in the bag" "the killed worker's task went back to the bag"
assert_contains "$(cat "$T_TMP/kill.err")" "dropped a connection before its hello" "the stranger's garbage was dropped"
assert_eq "" "$(ls -d "$T_TMP"/.nqueens-taskbag.* 2>/dev/null)" "the socket directory is removed at the end"

# bad input
t_run nqueens -n 3
assert_ne 0 "$T_RC" "nqueens -n 3 is refused"
assert_contains "$T_ERR" "--size: Value 3 not in range" "the message names the option and the range"
t_run nqueens -n 8 --prefix-depth 8
assert_ne 0 "$T_RC" "nqueens --prefix-depth 8 is refused"
t_run pi --chunks 0
assert_ne 0 "$T_RC" "pi --chunks 0 is refused"
t_run pi --workers 0
assert_ne 0 "$T_RC" "pi --workers 0 is refused"
t_run nqueens --taskbag-worker "$T_TMP/nowhere.sock" n1
assert_ne 0 "$T_RC" "a worker without a coordinator exits non-zero"
assert_contains "$T_ERR" "cannot connect" "and says why"
t_done
