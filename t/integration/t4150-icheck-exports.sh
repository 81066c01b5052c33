#!/bin/bash
# libicheck.so, the library applications link, exports the C API of
# include/icheck.h and nothing else: no daemon code (the agent lives in the
# daemons' module), no C++ symbol of the library's insides.
. "${DYNRES_SRC:-$(dirname "$0")/../..}/t/lib.sh"
t_begin 30
LIB=$DYNRES_BUILD/lib/libicheck.so
[[ -f $LIB ]] || t_skip "libicheck.so not built (no libfabric)"
command -v nm >/dev/null || t_skip "nm not installed"

# every defined dynamic symbol of the library (functions and data)
mapfile -t exported < <(nm -D --defined-only "$LIB" | awk '$2 ~ /^[TtDdBbRrVvWwiu]$/ {print $3}' | sed 's/@.*//' | sort -u)
assert_ne 0 "${#exported[@]}" "libicheck.so exports something"
others=()
for s in "${exported[@]}"; do [[ $s == icheck_* ]] || others+=("$s"); done
assert_eq "" "${others[*]:0:10}" "symbols exported beside icheck_* (first 10)"

# every function the header declares is exported
mapfile -t declared < <(grep -oE '\bicheck_[a-z_]+\(' "$DYNRES_SRC/include/icheck.h" | tr -d '(' | sort -u)
missing=()
for f in "${declared[@]}"; do
  printf '%s\n' "${exported[@]}" | grep -qx "$f" || missing+=("$f")
done
assert_eq "" "${missing[*]}" "icheck.h functions missing from libicheck.so"
assert_le 15 "${#declared[@]}" "the header declares the API (${#declared[@]} functions)"

# no daemon inside: neither exported nor present as a local symbol
if nm "$LIB" 2>/dev/null | grep -q .; then
  daemon=$(nm -C "$LIB" | grep -cE 'run_agent|run_controller|run_manager|Agent::serve' || true)
  assert_eq 0 "$daemon" "daemon symbols linked into libicheck.so"
fi
t_done
