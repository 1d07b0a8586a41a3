#!/usr/bin/env bash
# A sweep as a Slurm job array: N array tasks each run one shard of the plan
# (`viewgap sweep --shard K/N`, K and N from Slurm's SLURM_ARRAY_TASK_ID and
# SLURM_ARRAY_TASK_COUNT), then one job, started only if every task succeeded,
# merges the shards into OUT/sweep (`viewgap merge`). Run it on a login node:
#
#   bash tools/slurm_sweep.sh N OUT -- SWEEP_FLAGS...
#   bash tools/slurm_sweep.sh 16 out/big -- --seeds 0:999 --gaps 0,30,60,90,120 --models caps,cnn
#
# Shard K writes OUT/shard_K (its log OUT/shard_K.log). Every task runs with
# --resume, so submitting the same command again finishes what a failed or
# timed-out task left, and the merge (--force) rewrites OUT/sweep.
# Environment: VIEWGAP (the binary; default build/release/viewgap of this
# checkout), CPUS_PER_TASK (cells each task runs at once; default 2), and any
# SBATCH_* variable sbatch reads (SBATCH_PARTITION, SBATCH_TIMELIMIT, ...).
set -euo pipefail
if [ $# -lt 3 ] || [ "$3" != "--" ]; then
  echo "usage: bash tools/slurm_sweep.sh N OUT -- SWEEP_FLAGS..." >&2
  exit 2
fi
n=$1 out=$2
shift 3
case "$n" in '' | *[!0-9]* | 0) echo "slurm_sweep.sh: N '$n': expected a whole number >= 1" >&2; exit 2 ;; esac
exe=${VIEWGAP:-$(cd "$(dirname "$0")/.." && pwd)/build/release/viewgap}
cpus=${CPUS_PER_TASK:-2}
[ -x "$exe" ] || { echo "slurm_sweep.sh: no viewgap binary at '$exe' (build it, or set VIEWGAP)" >&2; exit 2; }
mkdir -p "$out"
out=$(cd "$out" && pwd)

# The task's command; $SLURM_ARRAY_TASK_ID and $SLURM_ARRAY_TASK_COUNT are left
# for the task's shell to expand.
task="$(printf '%q ' "$exe" sweep "$@") --jobs $cpus --resume \
--shard \$SLURM_ARRAY_TASK_ID/\$SLURM_ARRAY_TASK_COUNT --out $(printf '%q' "$out")/shard_\$SLURM_ARRAY_TASK_ID"
array=$(sbatch --parsable --job-name=viewgap-shards --array="0-$((n - 1))" --ntasks=1 \
  --cpus-per-task="$cpus" --output="$out/shard_%a.log" --wrap="$task")
array=${array%%;*}  # "JOBID;CLUSTER" on a federation

shards=$(for ((k = 0; k < n; k++)); do printf '%q ' "$out/shard_$k"; done)
merge=$(sbatch --parsable --job-name=viewgap-merge --dependency="afterok:$array" --ntasks=1 \
  --output="$out/merge.log" --wrap="$(printf '%q ' "$exe") merge $shards --out $(printf '%q' "$out/sweep") --force")
echo "submitted array $array ($n shards into $out/shard_K) and merge job ${merge%%;*} (into $out/sweep)"
