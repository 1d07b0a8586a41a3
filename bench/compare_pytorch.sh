#!/usr/bin/env bash
# viewgap against the same experiment in PyTorch (bench/pytorch_run.py), side by side:
# the default `viewgap run` (one thread) and the PyTorch script (one thread, float32),
# run alternately N times each. For each it prints the wall time and peak RSS of every
# run (`/usr/bin/time -f '%e %M'`), then the medians, min-max and the ratio of the
# median wall times (PyTorch / viewgap: how many times faster viewgap is).
#
# python3-torch (Debian's, 1.13) and an optimised BLAS are needed for this script
# only, never for the build or the tests: apt-get install python3-torch libopenblas0-pthread.
#
# Usage: bash bench/compare_pytorch.sh [N]   (default 5; from the repository root,
#        after a release build: the binary is build/release/viewgap)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-5}
case "$n" in '' | *[!0-9]* | 0) echo "compare_pytorch.sh: N '$n': expected a whole number >= 1" >&2; exit 2 ;; esac
source bench/torch_setup.sh
torch_setup compare_pytorch.sh
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for ((i = 1; i <= n; i++)); do
  /usr/bin/time -f "viewgap %e %M" -a -o "$log" "$exe" run --quiet --threads 1 > /dev/null
  /usr/bin/time -f "pytorch %e %M" -a -o "$log" "$py" bench/pytorch_run.py > /dev/null
done
"$py" - "$log" "$n" <<'EOF'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    name, wall, rss = line.split()
    runs.setdefault(name, []).append((float(wall), int(rss)))
print(f"{sys.argv[2]} runs each, alternating; wall time in s, peak RSS in MB")
for name, r in runs.items():
    w = [x[0] for x in r]
    print(f"{name:<8} median {statistics.median(w):.2f} s (min {min(w):.2f}, max {max(w):.2f}); "
          f"peak RSS {max(x[1] for x in r) / 1024:.0f} MB; runs: {' '.join(f'{x:.2f}' for x in w)}")
ratio = statistics.median(x[0] for x in runs['pytorch']) / statistics.median(x[0] for x in runs['viewgap'])
print(f"ratio of medians (pytorch / viewgap): {ratio:.1f}x")
EOF
