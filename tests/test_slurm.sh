#!/usr/bin/env bash
# tools/slurm_sweep.sh against a stand-in sbatch that runs each job at once,
# in order, with the variables Slurm documents for array tasks
# (SLURM_ARRAY_TASK_ID, SLURM_ARRAY_TASK_COUNT): the merged tables must be
# those of the unsharded sweep (timing columns aside).
# Usage: bash tests/test_slurm.sh VIEWGAP_EXE
set -euo pipefail
exe=$1
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/bin"
cat > "$work/bin/sbatch" <<'SB'
#!/usr/bin/env bash
set -euo pipefail
array= wrap= output=/dev/null
for a in "$@"; do
  case "$a" in
    --array=*) array=${a#--array=} ;;
    --wrap=*) wrap=${a#--wrap=} ;;
    --output=*) output=${a#--output=} ;;
  esac
done
id=$((RANDOM + 1000))
if [ -n "$array" ]; then
  first=${array%-*} last=${array#*-}
  for ((k = first; k <= last; k++)); do
    SLURM_ARRAY_TASK_ID=$k SLURM_ARRAY_TASK_COUNT=$((last - first + 1)) sh -c "$wrap" > "${output//%a/$k}" 2>&1
  done
else
  sh -c "$wrap" > "$output" 2>&1
fi
echo "$id"
SB
chmod +x "$work/bin/sbatch"
flags=(--seeds 0:2 --gaps 0,30 --n-epochs 1 --n-per-combo 1 --quiet)
"$exe" sweep "${flags[@]}" --jobs 2 --out "$work/whole"
PATH="$work/bin:$PATH" VIEWGAP="$exe" CPUS_PER_TASK=1 bash "$repo/tools/slurm_sweep.sh" 4 "$work/out with space" -- "${flags[@]}"
for f in summary.csv azimuth.csv circle.csv; do
  cmp "$work/whole/$f" "$work/out with space/sweep/$f"
done
strip() { cut -d, -f1-13 "$1"; }  # cells.csv without seconds and reason
cmp <(strip "$work/whole/cells.csv") <(strip "$work/out with space/sweep/cells.csv")
# A second submission resumes (nothing left) and merges again.
PATH="$work/bin:$PATH" VIEWGAP="$exe" CPUS_PER_TASK=1 bash "$repo/tools/slurm_sweep.sh" 4 "$work/out with space" -- "${flags[@]}" > /dev/null
grep -q "0 run now, 2 resumed" "$work/out with space/shard_0.log"
cmp "$work/whole/summary.csv" "$work/out with space/sweep/summary.csv"
# Bad input: one line, exit 2.
set +e
msg=$(bash "$repo/tools/slurm_sweep.sh" 0 "$work/x" -- --seeds 0 2>&1); code=$?
set -e
[ "$code" = 2 ] && [ "$(printf '%s\n' "$msg" | wc -l)" = 1 ] || { echo "N 0: exit $code: $msg"; exit 1; }
echo "slurm array script: merged tables identical to the unsharded sweep"
