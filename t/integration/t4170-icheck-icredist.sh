#!/usr/bin/env bash
# icredist(1) on real second-level checkpoints: heat (MPI, BLOCK rows of its
# grid + a CONSTANT iteration) stops on 4 ranks in direct mode; icredist
# lists, shows and verifies its versions (text and --json), rewrites the
# newest for 3 ranks, exports the grid of both versions (identical bytes,
# raw and .npy), finds a corrupted chunk of the old version (exit 1 naming
# the file), and heat continues on 3 ranks from the rewritten version to the
# fixed-size run's checksum. icadapt (BLOCK, CYCLIC, PREDEFINED explicit and
# process grid) rewritten 4 -> 2 with the PREDEFINED layouts given restores
# on 2 processes as its own 2-rank version (same checksums). Bad input
# (unknown application, --to 0, a MANUAL object, PREDEFINED without its
# layout, a damaged manifest) is refused with exit 2 and a clear message and
# changes no file. About 10 s.
. "${DYNRES_SRC:-$(dirname "$0")/../..}/t/lib.sh"
t_begin 120
t_require mpiexec heat icadapt icredist jq
W=$T_TMP
T="timeout 60"
P=$W/pfs
printf 'direct: true\npfs_dir: %s\n' "$P" >"$W/direct.yaml"
IC=(icredist --pfs-dir "$P")
tree_sum() { (cd "$P" && find . -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum); }
ck() { sed -n 's/^heat: checksum=\([0-9a-f]*\).*/\1/p' <<<"$1" | tail -1; }
A=(--nx 64 --ny 50 --iters 120 --ckpt-every 20)

ref=$(ck "$(heat "${A[@]}" --no-icheck -q)")
[[ -n $ref ]] || t_fatal "reference run printed no checksum"
t_run $T mpiexec -n 4 heat "${A[@]}" --config "$W/direct.yaml" --stop-at 30
assert_contains "$T_OUT" "heat: stopped iteration=30 ranks=4" "heat stopped on 4 ranks"

# ls / show / verify
t_run "${IC[@]}" ls
assert_eq 0 "$T_RC" "ls exits 0"
assert_match 'heat +2 +4 .* none' "$T_OUT" "ls: version 2, 4 ranks, uncompressed"
t_run "${IC[@]}" ls --json
assert_eq '"heat" 2 4 true' "$(jq -r '.[0] | "\"\(.app)\" \(.versions[0].version) \(.versions[0].nranks) \(.versions[0].complete)"' <<<"$T_OUT")" "ls --json"
t_run "${IC[@]}" show heat --json
assert_eq 'block 3200 64 832,832,768,768' "$(jq -r '.objects[] | select(.label=="grid") | "\(.dist) \(.global) \(.width) \(.counts|map(tostring)|join(","))"' <<<"$T_OUT")" "show: grid BLOCK rows over 4 ranks"
assert_eq 'constant' "$(jq -r '.objects[] | select(.label=="iteration") | .role' <<<"$T_OUT")" "show: iteration is CONSTANT"
t_run "${IC[@]}" show heat
assert_match 'grid +global +double +block +3200 +64 +832,832,768,768' "$T_OUT" "show: text table"
t_run "${IC[@]}" verify heat --json
assert_eq 0 "$T_RC" "verify exits 0: $T_ERR"
assert_eq 'true true' "$(jq -r 'map(.ok) | join(" ")' <<<"$T_OUT")" "verify --json: both versions ok"

# bad input: refused, nothing changed
before=$(tree_sum)
for bad in "redistribute nosuch --to 2|unknown application 'nosuch'" \
           "redistribute heat --to 0|--to 0: the new number of ranks must be >= 1" \
           "redistribute heat --to -3|--to -3" \
           "redistribute heat --version 9 --to 2|version 9 of 'heat' does not exist" \
           "show nosuch|unknown application 'nosuch'" \
           "export heat nolabel -o $W/x.raw|no object 'nolabel'"; do
  args=${bad%%|*} msg=${bad#*|}
  t_run "${IC[@]}" $args
  assert_eq 2 "$T_RC" "icredist $args: exit 2"
  assert_contains "$T_ERR" "$msg" "icredist $args: says why"
done
assert_eq "$before" "$(tree_sum)" "bad input changed nothing"
[[ ! -e $W/x.raw ]] || t_fail "a refused export wrote its output"

# redistribute 4 -> 3, export both versions, the same global grid
t_run "${IC[@]}" redistribute heat --to 3
assert_eq 0 "$T_RC" "redistribute --to 3: $T_ERR"
assert_contains "$T_OUT" "redistributed to 3 ranks: version 3" "new version 3"
t_run "${IC[@]}" show heat --version 3 --json
assert_eq '3 1088,1088,1024' "$(jq -r '"\(.nranks) \(.objects[] | select(.label=="grid") | .counts|map(tostring)|join(","))"' <<<"$T_OUT")" "version 3: grid rows over 3 ranks (17, 17, 16 rows of 64 cells)"
t_run "${IC[@]}" export heat grid --version 2 -o "$W/g2.raw"
assert_eq 0 "$T_RC" "export v2: $T_ERR"
t_run "${IC[@]}" export heat grid --version 3 -o "$W/g3.npy"
assert_eq 0 "$T_RC" "export v3 .npy: $T_ERR"
assert_eq 25600 "$(stat -c %s "$W/g2.raw")" "raw export: 3200 doubles"
hl=$(od -An -tu2 -j8 -N2 "$W/g3.npy" | tr -d ' ')
assert_eq $'\x93NUMPY' "$(head -c 6 "$W/g3.npy")" ".npy magic"
assert_contains "$(tail -c +11 "$W/g3.npy" | head -c "$hl")" "{'descr': '<f8', 'fortran_order': False, 'shape': (3200,), }" ".npy header"
cmp <(tail -c +$((11 + hl)) "$W/g3.npy") "$W/g2.raw" || t_fail "the grid of version 3 differs from version 2's"
t_pass "exported grids of versions 2 and 3 are identical"
t_run "${IC[@]}" export heat grid -o "$W/g2.raw"
assert_eq 2 "$T_RC" "export onto an existing file refused"

# a corrupted chunk of version 2: verify exits 1 naming it
f=$(ls "$P/$(id -u)/heat/v0000000002/"r000001.grid.*.dat)
printf '\x5a' | dd of="$f" bs=1 seek=100 conv=notrunc status=none
t_run "${IC[@]}" verify heat
assert_eq 1 "$T_RC" "verify finds the corrupted chunk"
assert_contains "$T_ERR" "first bad chunk: $f" "verify names the chunk file"
t_run "${IC[@]}" verify heat --version 2 --json
assert_eq "false $f" "$(jq -r '.[0] | "\(.ok) \(.bad_file)"' <<<"$T_OUT")" "verify --json names it"
t_run "${IC[@]}" redistribute heat --version 2 --to 2
assert_eq 2 "$T_RC" "a damaged version is not rewritten"
assert_contains "$T_ERR" "is damaged, not rewritten" "says so"
[[ ! -e $P/$(id -u)/heat/v0000000004 ]] || t_fail "a refused rewrite left a version directory"

# heat continues on 3 ranks from the rewritten version
t_run $T mpiexec -n 3 heat "${A[@]}" --config "$W/direct.yaml"
assert_eq "$ref" "$(ck "$T_OUT")" "heat resumed on 3 ranks from icredist's version ends with the fixed-size checksum"

# icadapt: PREDEFINED explicit and grid need their layouts; MANUAL refused
t_run $T mpiexec -n 4 icadapt adp commit --config "$W/direct.yaml" --no-manual
assert_contains "$T_OUT" "OK" "icadapt commit on 4: $T_OUT"
sums=$(grep '^CHECKSUM' <<<"$T_OUT")
t_run $T mpiexec -n 2 icadapt man commit --config "$W/direct.yaml"
assert_contains "$T_OUT" "OK" "icadapt commit with MANUAL: $T_OUT"
before=$(tree_sum)
t_run "${IC[@]}" redistribute man --to 1 --layout pre=0:9973 --grid grd=1x1
assert_eq 2 "$T_RC" "MANUAL refused"
assert_contains "$T_ERR" "'man' is MANUAL" "MANUAL refused with its name"
t_run "${IC[@]}" redistribute adp --to 2
assert_eq 2 "$T_RC" "PREDEFINED without a layout refused"
assert_contains "$T_ERR" "is PREDEFINED" "says which object needs a layout"
t_run "${IC[@]}" redistribute adp --to 2 --layout pre=0:100,200:100 --grid grd=1x2
assert_eq 2 "$T_RC" "a PREDEFINED layout that does not tile the array refused"
assert_contains "$T_ERR" "predefined counts sum to 200, not to the global count 9973" "says why"
t_run "${IC[@]}" redistribute adp --to 2 --layout pre=4987:4986,0:4987 --grid grd=3x1
assert_eq 2 "$T_RC" "a process grid of the wrong size refused"
assert_contains "$T_ERR" "process grid has 3 cells for 2 processes" "says why"
assert_eq "$before" "$(tree_sum)" "refused rewrites changed nothing"

# with icadapt's own layouts on 2 ranks (PREDEFINED: balanced blocks in reverse
# rank order, grid 1x2) the rewritten version restores as a 2-rank one
t_run "${IC[@]}" redistribute adp --to 2 --layout pre=4987:4986,0:4987 --grid grd=1x2
assert_eq 0 "$T_RC" "icadapt's version rewritten for 2 ranks: $T_ERR"
t_run $T mpiexec -n 2 icadapt adp restore --config "$W/direct.yaml" --no-manual --restart
assert_contains "$T_OUT" "RESTORED 2 2" "icadapt restored the rewritten 2-rank version: $T_OUT"
assert_contains "$T_OUT" "OK" "every element where icadapt's own layouts put it: $T_OUT"
assert_eq "$sums" "$(grep '^CHECKSUM' <<<"$T_OUT")" "same global arrays as the 4-rank commit"
t_done
