#!/usr/bin/env bash
# viewgap's `convcaps` against the same network in PyTorch (bench/pytorch_convcaps.py), one
# thread each, float32, batch 32, the paper's recipe (spread loss, the official lambda
# schedule, full backpropagation through the routing), for the default model
# (A=64, B=8, C=D=16) and the paper's larger one (A=B=C=D=32). Round i runs, for each
# model, viewgap's `profile` (the `step` row: median training step; `/usr/bin/time`: peak
# RSS) and then the PyTorch script (median training step and forward-only pass, its own
# peak RSS); N rounds alternate the two. Prints each run, then per model the medians of
# training and forward images/s and peak RSS, and the ratio viewgap / PyTorch.
# viewgap's forward-only figure is the sum of its profile's forward rows (the medians
# of conv1 ... class.routing and the loss), from the same training steps.
#
# PyTorch takes seconds to minutes per step here, so each run times only a few steps
# (defaults: viewgap 10 after 2 warm-up, large 3 after 1; PyTorch 3 after 1, large 1 after 1;
# set VG_STEPS, VG_WARMUP, VG_STEPS_LARGE, VG_WARMUP_LARGE, PT_STEPS, PT_WARMUP, PT_STEPS_LARGE).
# SIZES="default" (or "large") runs one model only. The images are random: this measures
# speed only. Each round also runs PyTorch at the default model as `pytorch-heap` (below).
#
# python3-torch (Debian's, 1.13) and an optimised BLAS are needed for this script
# only, never for the build or the tests: apt-get install python3-torch libopenblas0-pthread.
#
# Usage: bash bench/compare_convcaps.sh [N]   (default 3; from the repository root, after a
#        release build: the binary is build/release/viewgap)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-3}
case "$n" in '' | *[!0-9]* | 0) echo "compare_convcaps.sh: N '$n': expected a whole number >= 1" >&2; exit 2 ;; esac
source bench/torch_setup.sh
torch_setup compare_convcaps.sh
vg_steps=${VG_STEPS:-10} vg_warmup=${VG_WARMUP:-2} vg_steps_large=${VG_STEPS_LARGE:-3} vg_warmup_large=${VG_WARMUP_LARGE:-1}
pt_steps=${PT_STEPS:-3} pt_warmup=${PT_WARMUP:-1} pt_steps_large=${PT_STEPS_LARGE:-1}
log=$(mktemp)
tmp=$(mktemp -d)
trap 'rm -rf "$log" "$tmp"' EXIT
common=(--model convcaps --loss spread --em-lambda-schedule official --em-grad full --batch-size 32)
# glibc returns every freed block over 32 MB to the kernel, so each of PyTorch's vote-sized
# temporaries (85 MB at the default model) is page-faulted in afresh, every step: at the
# default model that is most of PyTorch's time. `pytorch-heap` runs it with glibc keeping
# freed memory instead (what jemalloc or tcmalloc would do); it doubles the peak RSS, so the
# large model (~10 GB at glibc's defaults) runs at glibc's defaults only.
heap=(MALLOC_MMAP_THRESHOLD_=4294967296 MALLOC_TRIM_THRESHOLD_=68719476736)
pytorch() {  # pytorch NAME SIZE [ENV...] -- ARGS...: one run of the script, a line in the log
  local name=$1 size=$2; shift 2
  pt_profile "$tmp" bench/pytorch_convcaps.py "$@"
  echo "$name $size $step_us $fwd_us $rss_kb" >> "$log"
  tail -n 1 "$log" | sed "s/^/round $i: /"
}
for ((i = 1; i <= n; i++)); do
  for size in ${SIZES:-default large}; do
    if [ "$size" = large ]; then
      vg_sizes=(--caps-a 32 --caps-b 32 --caps-c 32 --caps-d 32) pt_sizes=(--A 32 --B 32 --C 32 --D 32)
      steps=$pt_steps_large vs=$vg_steps_large vw=$vg_warmup_large
    else
      vg_sizes=() pt_sizes=() steps=$pt_steps vs=$vg_steps vw=$vg_warmup
    fi
    vg_profile "$tmp" "${common[@]}" "${vg_sizes[@]}" --steps "$vs" --warmup "$vw"
    echo "viewgap $size $step_us $fwd_us $rss_kb" >> "$log"
    tail -n 1 "$log" | sed "s/^/round $i: /"
    pytorch pytorch "$size" -- "${pt_sizes[@]}" --batch 32 --steps "$steps" --warmup "$pt_warmup"
    [ "$size" = large ] ||
      pytorch pytorch-heap "$size" "${heap[@]}" -- "${pt_sizes[@]}" --batch 32 --steps "$steps" --warmup "$pt_warmup"
  done
done
"$py" - "$log" "$n" <<'EOF'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    who, size, step_us, fwd_us, rss_kb = line.split()
    runs.setdefault((size, who), []).append((float(step_us), float(fwd_us), int(rss_kb)))
print(f"{sys.argv[2]} rounds, alternating; batch 32, one thread; images/s from median step times")
for size in ('default', 'large'):
    if (size, 'viewgap') not in runs:
        continue
    med = {}
    for who in ('viewgap', 'pytorch', 'pytorch-heap'):
        r = runs.get((size, who))
        if not r:
            continue
        train = statistics.median(32e6 / x[0] for x in r)
        fwd = statistics.median(32e6 / x[1] for x in r)
        med[who] = (train, fwd)
        print(f"{size:<8} {who:<13} train {train:8.2f} img/s (runs: {' '.join(f'{32e6 / x[0]:.2f}' for x in r)}); "
              f"forward {fwd:8.2f} img/s (runs: {' '.join(f'{32e6 / x[1]:.2f}' for x in r)}); "
              f"peak RSS {max(x[2] for x in r) / 1024:.0f} MB")
    for who in ('pytorch', 'pytorch-heap'):
        if who in med:
            print(f"{size:<8} viewgap / {who:<13} train {med['viewgap'][0] / med[who][0]:6.1f}x, "
                  f"forward {med['viewgap'][1] / med[who][1]:6.1f}x")
EOF
