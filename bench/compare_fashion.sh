#!/usr/bin/env bash
# viewgap's `convcaps` and `cnn-paper` against the same networks in PyTorch
# (bench/pytorch_convcaps.py, bench/pytorch_cnn_paper.py) at Fashion-MNIST's shape, 28 x 28 x 1
# and 10 classes (issue 52 section 7, "Speed"): one thread each, float32, batch 32. Round i runs,
# for convcaps then cnn-paper, viewgap's `profile --data fashion-mnist` (the `step` row: median
# training step; the sum of its forward rows: a training step's forward; `/usr/bin/time`: peak
# RSS) and then the PyTorch script at `--image 28 --classes 10` (median training step and
# forward-only pass, its own peak RSS); N rounds alternate the two. Prints each run, then per
# model the medians of training and forward images/s, the peak RSS, and viewgap / PyTorch.
# convcaps runs at the paper's recipe (spread loss, the official lambda schedule, full
# backpropagation through the routing: convcaps's own defaults, passed explicitly as
# compare_convcaps.sh does), cnn-paper at its defaults (dropout 0.5, softmax cross-entropy).
# viewgap trains on Fashion-MNIST's images, PyTorch on random ones of the same shape: neither
# step's work depends on the pixels. viewgap's peak RSS includes the dataset, loaded whole
# (~280 MB), which PyTorch's (one random batch) does not.
#
# Steps timed per run (defaults): convcaps viewgap 10 after 2, PyTorch 3 after 1 (seconds a
# step); cnn-paper viewgap 50 after 5, PyTorch 20 after 3. VG_STEPS, VG_WARMUP, PT_STEPS and
# PT_WARMUP, when set, replace them for every model run; MODELS="convcaps" (or "cnn-paper")
# runs one model only.
#
# python3-torch (Debian's, 1.13) and an optimised BLAS are needed for this script
# only, never for the build or the tests: apt-get install python3-torch libopenblas0-pthread;
# viewgap's `--data fashion-mnist` reads Debian's dataset-fashion-mnist (docs/data.md).
#
# Usage: bash bench/compare_fashion.sh [N]   (default 3; from the repository root, after a
#        release build: the binary is build/release/viewgap)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-3}
case "$n" in '' | *[!0-9]* | 0) echo "compare_fashion.sh: N '$n': expected a whole number >= 1" >&2; exit 2 ;; esac
models=${MODELS:-convcaps cnn-paper}
for m in $models; do
  case "$m" in convcaps | cnn-paper) ;; *) echo "compare_fashion.sh: MODELS: '$m': expected convcaps or cnn-paper" >&2; exit 2 ;; esac
done
[ -n "${models// /}" ] || { echo "compare_fashion.sh: MODELS is empty: expected convcaps, cnn-paper or both" >&2; exit 2; }
for v in VG_STEPS VG_WARMUP PT_STEPS PT_WARMUP; do  # when set: whole numbers, steps >= 1
  [ -z "${!v+set}" ] && continue
  case "$v:${!v}" in
    *: | *:*[!0-9]* | *STEPS:0) echo "compare_fashion.sh: $v '${!v}': expected a whole number (steps >= 1)" >&2; exit 2 ;;
  esac
done
source bench/torch_setup.sh
torch_setup compare_fashion.sh
log=$(mktemp)
tmp=$(mktemp -d)
trap 'rm -rf "$log" "$tmp"' EXIT
shape=(--image 28 --classes 10)
for ((i = 1; i <= n; i++)); do
  for model in $models; do
    if [ "$model" = convcaps ]; then
      vg_flags=(--loss spread --em-lambda-schedule official --em-grad full) script=bench/pytorch_convcaps.py
      vs=${VG_STEPS:-10} vw=${VG_WARMUP:-2} ps=${PT_STEPS:-3} pw=${PT_WARMUP:-1}
    else
      vg_flags=() script=bench/pytorch_cnn_paper.py
      vs=${VG_STEPS:-50} vw=${VG_WARMUP:-5} ps=${PT_STEPS:-20} pw=${PT_WARMUP:-3}
    fi
    vg_profile "$tmp" --model "$model" --data fashion-mnist "${vg_flags[@]}" --batch-size 32 --steps "$vs" --warmup "$vw"
    echo "viewgap $model $step_us $fwd_us $rss_kb" >> "$log"
    tail -n 1 "$log" | sed "s/^/round $i: /"
    pt_profile "$tmp" "$script" -- "${shape[@]}" --batch 32 --steps "$ps" --warmup "$pw"
    echo "pytorch $model $step_us $fwd_us $rss_kb" >> "$log"
    tail -n 1 "$log" | sed "s/^/round $i: /"
  done
done
"$py" - "$log" "$n" <<'EOF'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    who, model, step_us, fwd_us, rss_kb = line.split()
    runs.setdefault((model, who), []).append((float(step_us), float(fwd_us), int(rss_kb)))
print(f"{sys.argv[2]} rounds, alternating; Fashion-MNIST's shape (28 x 28 x 1, 10 classes), batch 32, one thread; "
      "images/s from median step times")
for model in ('convcaps', 'cnn-paper'):
    if (model, 'viewgap') not in runs:
        continue
    med = {}
    for who in ('viewgap', 'pytorch'):
        r = runs[(model, who)]
        train = statistics.median(32e6 / x[0] for x in r)
        fwd = statistics.median(32e6 / x[1] for x in r)
        rss = max(x[2] for x in r) / 1024
        med[who] = (train, fwd, rss)
        print(f"{model:<9} {who:<8} train {train:9.2f} img/s (runs: {' '.join(f'{32e6 / x[0]:.2f}' for x in r)}); "
              f"forward {fwd:9.2f} img/s (runs: {' '.join(f'{32e6 / x[1]:.2f}' for x in r)}); peak RSS {rss:.0f} MB")
    v, p = med['viewgap'], med['pytorch']
    print(f"{model:<9} viewgap / pytorch: train {v[0] / p[0]:6.1f}x, forward {v[1] / p[1]:6.1f}x, "
          f"peak RSS {v[2] / p[2]:5.2f}x")
EOF
