#!/usr/bin/env bash
# Conformance of mjsub with the real sbatch (Slurm 22.05 of the outer-Slurm
# fixture): every job script of t/integration/t1025-cli-sbatch-conformance.d/ (one or more
# options of mjsub(1)'s option table each, and the examples of sbatch(1)) is
# submitted held to both, on clusters of the same shape (4 nodes of 2 CPUs and
# 1000 MB); then `scontrol show job` is compared with `mjcontrol show job`
# field by field (nodes, tasks, CPUs per task, memory, time limit, name,
# output and error paths, array indices and limit, dependency, begin time) by
# compare.py. A difference, or a script accepted by one only, fails the test
# unless allow.txt lists it with its reason (and every entry must be used).
# A script's "# ARGS: ..." line gives command-line options (as in sbatch(1)'s
# examples); "# STDIN" submits it on standard input. Also: #SBATCH --wait
# makes both exit with the job's exit code.
# Writes the per-script report to $DYNRES_CONFORMANCE_REPORT when set.
# About 15 s.
. "${DYNRES_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/t/lib.sh"
t_begin 120

SCRIPTS=$DYNRES_SRC/t/integration/t1025-cli-sbatch-conformance.d
t_require python3
((EUID == 0)) || t_skip "the outer-Slurm fixture needs root"
outer_slurm_start 4   # nodes of 2 CPUs and 1000 MB (t/fixtures/outer-slurm)
C=$T_TMP/cluster
boot_cluster "$C" 4 --tick 0.2 --cpus-per-node 2 --mem-per-node 1000
W=$T_TMP/work
mkdir -p "$W/s" "$W/m"
cd "$W" || t_fatal "cd $W"
t_log "outer Slurm and dynres up"

# the job the dependency scripts name (@BASE@), held in both
SBASE=$(sbatch -H --parsable --wrap true) || t_fatal "sbatch of the base job"
MBASE=$(mjsub -H --parsable --wrap true) || t_fatal "mjsub of the base job"

submit() {  # submit TOOL FILE ARGS...: "rc<TAB>id", the job id from --parsable (array: its id)
  local tool=$1 file=$2 out rc
  shift 2
  if grep -q '^# STDIN' "$file"; then
    out=$("$tool" -H --parsable "$@" <"$file" 2>>"$W/$tool.err") && rc=0 || rc=$?
  else
    out=$("$tool" -H --parsable "$@" "$file" 2>>"$W/$tool.err") && rc=0 || rc=$?
  fi
  printf '%s\t%s' "$rc" "${out%%;*}"
}
: >"$W/results.tsv"
n=0
for f in "$SCRIPTS"/*.sh; do
  name=$(basename "$f" .sh)
  for d in s m; do
    sed -e "s|@BASE@|$([[ $d == s ]] && echo "$SBASE" || echo "$MBASE")|g" -e "s|@DIR@|$SCRIPTS|g" "$f" >"$W/$d/$name.sh"
  done
  read -r -a args <<<"$(sed -n 's/^# ARGS: //p' "$f")"
  echo "== $name" >>"$W/sbatch.err"
  echo "== $name" >>"$W/mjsub.err"
  printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$(submit sbatch "$W/s/$name.sh" "${args[@]}")" \
    "$(submit mjsub "$W/m/$name.sh" "${args[@]}")" "$SBASE" "$MBASE" >>"$W/results.tsv"
  n=$((n + 1))
done
t_log "$n scripts submitted to both"
scontrol show job -o >"$W/slurm.txt" || t_fatal "scontrol show job"
mjcontrol --json show job >"$W/mj.json" || t_fatal "mjcontrol show job"
t_run python3 "$SCRIPTS/compare.py" "$W/results.tsv" "$W/slurm.txt" "$W/mj.json" "$SCRIPTS/allow.txt" \
  --report "${DYNRES_CONFORMANCE_REPORT:-$W/report.txt}"
echo "$T_OUT" | sed 's/^/  /'
assert_eq 0 "$T_RC" "every difference from Slurm is in allow.txt with its reason ($(tail -n 1 <<<"$T_OUT"))"
assert_contains "$T_OUT" "identical" "compare.py compared jobs"
pct=$(sed -n 's/.*dynres accepts [0-9]* (\([0-9.]*\) %).*/\1/p' <<<"$T_OUT")
assert_le 95 "${pct:-0}" "mjsub accepts at least 95 % of the scripts Slurm accepts"

# what the allow-list says of held jobs: submitted unheld, Slurm refuses them as mjsub does
for args in "--mem=2G|Memory specification can not be satisfied" "--tmp=10G|Temporary disk specification can not be satisfied"; do
  t_run sbatch --begin=now+1hour ${args%%|*} --wrap true
  assert_ne 0 "$T_RC" "sbatch ${args%%|*} (not held) is refused"
  assert_contains "$T_ERR" "${args#*|}" "sbatch ${args%%|*} says why"
  t_run mjsub ${args%%|*} --wrap true
  assert_ne 0 "$T_RC" "mjsub ${args%%|*} is refused"
done

# warnings: one line per option without effect, naming it; -Q silences them
t_run mjsub -H --parsable --qos=normal --mail-type=END -A acct --wrap true
assert_eq 0 "$T_RC" "warned options are accepted"
assert_eq 3 "$(grep -c '^mjsub: warning: --' <<<"$T_ERR")" "one warning line per option ($T_ERR)"
assert_contains "$T_ERR" "--qos: dynres has no QOS" "the warning names the option and why"
t_run mjsub -H --parsable -Q --qos=normal --wrap true
assert_eq "" "$T_ERR" "-Q: no warnings"

# GPUs: refused while the nodes declare none (as Slurm, above); once they declare
# two (vcluster-boot --gres gpu:2), the job's steps see their share
t_run mjcontrol update node ALL gres=gpu:2
assert_eq 0 "$T_RC" "mjcontrol update node ALL gres=gpu:2 ($T_ERR)"
write_script "$W/gpu.sh" '#!/bin/bash' '#SBATCH --gres=gpu:2' '#SBATCH --mem=900' \
  'echo "cuda=$CUDA_VISIBLE_DEVICES on_node=$SLURM_GPUS_ON_NODE mem=$SLURM_MEM_PER_NODE"'
t_run mjsub -W -o "$W/gpu.out" "$W/gpu.sh"
assert_eq 0 "$T_RC" "a --gres=gpu:2 job runs once the nodes have GPUs ($T_ERR)"
assert_file_content "$W/gpu.out" "cuda=0,1 on_node=2 mem=900" "the job sees CUDA_VISIBLE_DEVICES for its 2 GPUs"
t_run mjsub -H --gpus-per-node=3 --wrap true
assert_contains "$T_ERR" "GPUs per node (3) are more than a node has (2)" "more GPUs than a node has: refused"
t_run mjsub -H --parsable -G 3 --wrap true
assert_eq "2 2" "$(mjcontrol --json show job "$T_OUT" | perl -MJSON::PP -0777 -ne '$d = decode_json($_); print "$d->{nodes_requested} $d->{gpus_per_node}"')" \
  "-G 3 on nodes of 2 GPUs: 2 nodes, 2 GPUs each"

# #SBATCH --wait: both wait for the job and exit with its exit code
write_script "$W/wait.sh" '#!/bin/bash' '#SBATCH --wait' '#SBATCH -o /dev/null' 'exit 3'
t_run sbatch "$W/wait.sh"
assert_eq 3 "$T_RC" "sbatch: #SBATCH --wait exits with the job's exit code"
t_run mjsub "$W/wait.sh"
assert_eq 3 "$T_RC" "mjsub: #SBATCH --wait exits with the job's exit code"
t_done
