#!/usr/bin/env bash
# Docs integration: the man pages cannot drift from the code.
#   - every tool's --help exits 0 and the tool has a man page in man/;
#   - every page renders without warnings (man --warnings -l; skipped with a
#     message when man is not installed);
#   - every long option a tool's --help prints (--[a-z-]+) is mentioned in its
#     page (C++ tools, mjworkload esp, share/dynres/vcluster-boot,
#     vcluster-down, esp and esp-run);
#   - every dynres page named in a SEE ALSO / cross reference exists.
# Needs no cluster; a few seconds.
. "${DYNRES_SRC:-$(dirname "$0")/../..}/t/lib.sh"
t_begin 120
SRC=$DYNRES_SRC
MAN=$SRC/man

TOOLS=(mjsub mjstat mjcancel mjcontrol mjsched mjstepd mjworkload mjsim pcorridor mjnoded icredist)
for t in "${TOOLS[@]}"; do
  command -v "$t" >/dev/null || t_skip "$t is not built (not on PATH)"
done

# The pages this test owns, and which page documents which tool.
PAGES=(mjsub.1 mjstat.1 mjcancel.1 mjcontrol.1 mjsched.8 mjstepd.8 mjworkload.1 mjsim.1 pcorridor.1
       vcluster-boot.1 vcluster-down.1 vcluster-fail.1 vcluster-throttle.1 mjnoded.8 esp.1 dynres.yaml.5 dynres.7 mj.3 icredist.1)
declare -A PAGE_OF=([mjsub]=mjsub.1 [mjstat]=mjstat.1 [mjcancel]=mjcancel.1 [mjcontrol]=mjcontrol.1 [mjsched]=mjsched.8
                    [pcorridor]=pcorridor.1 [mjnoded]=mjnoded.8 [icredist]=icredist.1
                    [mjstepd]=mjstepd.8 [mjworkload]=mjworkload.1 [mjsim]=mjsim.1)

# Page source with roff escapes removed, so "\-\-nodes" and "\fB\-\-nodes\fR"
# both read "--nodes".
plain() {
  sed -e 's/\\-/-/g' -e 's/\\f[BIRP]//g' -e 's/\\f(..//g' -e 's/\\&//g' -e 's/\\%//g' "$1"
}

# check_options WHAT HELP_TEXT PAGE — every --option of HELP_TEXT is in PAGE.
check_options() {
  local what=$1 help=$2 page=$3 text opt n=0
  text=$(plain "$MAN/$page")
  while read -r opt; do
    [[ -z $opt ]] && continue
    n=$((n + 1))
    if grep -qE -- "(^|[^A-Za-z0-9-])${opt}([^a-z0-9-]|\$)" <<<"$text"; then
      t_pass "$what: $opt in man/$page"
    else
      t_fail "$what: option $opt (from --help) is not mentioned in man/$page"
    fi
  done < <(grep -oE -- '--[a-z-]+' <<<"$help" | sed 's/-*$//' | grep -E -- '^--[a-z]' | sort -u)
  ((n > 0)) || t_fail "$what: --help printed no long option at all"
}

# help_of WHAT CMD... — run CMD (a --help call), which must exit 0; sets HELP.
help_of() {
  local what=$1 rc
  shift
  HELP=$("$@" 2>&1 </dev/null)
  rc=$?
  if ((rc == 0)); then t_pass "$what --help exits 0"; else t_fail "$what --help exited $rc: ${HELP:0:300}"; fi
}

# ------------------------------------------------------------ the C++ tools
for t in "${TOOLS[@]}"; do
  page=${PAGE_OF[$t]}
  if [[ -f $MAN/$page ]]; then t_pass "$t has man/$page"; else t_fail "$t: no man page man/$page"; continue; fi
  help_of "$t" "$t" --help
  check_options "$t" "$HELP" "$page"
done
# mjworkload's options live on its subcommand
help_of "mjworkload esp" mjworkload esp --help
check_options "mjworkload esp" "$HELP" mjworkload.1
# and icredist's on its subcommands
for sub in ls show verify redistribute export; do
  help_of "icredist $sub" icredist "$sub" --help
  check_options "icredist $sub" "$HELP" icredist.1
done

# ------------------------------------------------------------ the scripts
declare -A SCRIPT_PAGES=([vcluster-boot]="vcluster-boot.1" [vcluster-down]="vcluster-boot.1 vcluster-down.1"
                         [vcluster-fail]="vcluster-fail.1" [vcluster-throttle]="vcluster-throttle.1" [esp]="esp.1" [esp-run]="esp.1")
for s in vcluster-boot vcluster-down vcluster-fail vcluster-throttle esp esp-run; do
  help_of "$s" bash "$SRC/share/dynres/$s" --help
  for page in ${SCRIPT_PAGES[$s]}; do
    if [[ -f $MAN/$page ]]; then check_options "$s" "$HELP" "$page"; else t_fail "$s: no man page man/$page"; fi
  done
done

# ------------------------------------------------------------ rendering
if command -v man >/dev/null; then
  loc=C
  locale -a 2>/dev/null | grep -qiE '^c\.utf-?8$' && loc=C.UTF-8
  for page in "${PAGES[@]}"; do
    [[ -f $MAN/$page ]] || { t_fail "man/$page is missing"; continue; }
    err=$(LC_ALL=$loc LANG=$loc MANWIDTH=80 MANPAGER=cat PAGER=cat man --warnings -l "$MAN/$page" 2>&1 >/dev/null)
    rc=$?
    if ((rc == 0)) && [[ -z $err ]]; then
      t_pass "man/$page renders without warnings"
    else
      t_fail "man/$page: man --warnings -l exited $rc with: ${err:0:600}"
    fi
  done
else
  t_log "note: man is not installed (Debian: man-db groff-base); rendering checks skipped"
fi

# ------------------------------------------------------------ cross references
for page in "${PAGES[@]}"; do
  [[ -f $MAN/$page ]] || continue
  while read -r ref; do
    n=${ref%%(*}
    sec=${ref#*(}
    sec=${sec%)}
    if [[ -f $MAN/$n.$sec ]]; then t_pass "man/$page: $ref exists"; else t_fail "man/$page refers to $ref but man/$n.$sec does not exist"; fi
  done < <(plain "$MAN/$page" | grep -E '^\.BR? ' | sed -E 's/^\.BR? +//' |
           grep -oE '^(mj[a-z]+|vcluster-[a-z]+|esp|dynres[a-z.]*|icheck[a-z.]*|icagent) +\([1-8]\)' | tr -d ' ' | sort -u)
done

t_done
