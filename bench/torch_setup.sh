# Sourced by the PyTorch comparisons (compare_pytorch.sh, compare_convcaps.sh,
# compare_fashion.sh): torch_setup NAME checks that the release binary and Debian's
# PyTorch are there (exit 2 with one line naming NAME when not), pins every library
# to one thread, and says which BLAS PyTorch maps. Sets exe and py.
# vg_profile and pt_profile (below) time one run of each side.
torch_setup() {
  local name=$1
  exe=build/release/viewgap
  py=/usr/bin/python3
  [ -x "$exe" ] || { echo "$name: no $exe (build first: cmake --preset release && cmake --build --preset release)" >&2; exit 2; }
  "$py" -c 'import torch' 2>/dev/null ||
    { echo "$name: PyTorch is not installed (apt-get install python3-torch; needed for this script only)" >&2; exit 2; }
  export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
  # Debian's torch does its dense algebra through libblas.so.3, whichever
  # implementation the alternatives system points at: with the reference BLAS
  # (libblas3, what a bare install gets) PyTorch's matmuls run ~3x slower than
  # with OpenBLAS, which would make a comparison unfair to it.
  local blas
  blas=$("$py" -c '
import torch
torch.ones(64, 64) @ torch.ones(64, 64)
print(next((l.split()[-1] for l in open("/proc/self/maps") if "blas" in l.split()[-1].lower()), "none found"))')
  echo "BLAS under PyTorch: $blas"
  case "$blas" in
    *openblas* | *mkl* | *blis*) ;;
    *) echo "warning: not an optimised BLAS: PyTorch is handicapped here (apt-get install libopenblas0-pthread for a fair comparison)" ;;
  esac
}

# vg_profile DIR ARGS...: one `viewgap profile ARGS...` under /usr/bin/time, its files in DIR.
# Sets step_us (the `step` row's median: a whole training step), fwd_us (the sum of the
# forward rows' medians: a training step's forward) and rss_kb (the process's peak RSS).
# shellcheck disable=SC2034  # step_us, fwd_us and rss_kb are the caller's
vg_profile() {
  local dir=$1; shift
  /usr/bin/time -f '%e %M' -o "$dir/time" "$exe" profile "$@" --out "$dir/profile.csv" > "$dir/table"
  # The table's rows: layer pass calls median_us ...
  step_us=$(awk '$1 == "step" && $2 == "step" { print $4 }' "$dir/table")
  fwd_us=$(awk '$2 == "forward" { s += $4 } END { print s }' "$dir/table")
  read -r _ rss_kb < "$dir/time"
}

# pt_profile DIR SCRIPT [NAME=VALUE...] -- ARGS...: one run of a PyTorch script
# (bench/pytorch_*.py, which prints one JSON line) with ARGS, in that environment,
# its JSON in DIR. Sets step_us and fwd_us (its median training step and forward-only
# pass, from its images/s and batch) and rss_kb (its ru_maxrss).
# shellcheck disable=SC2034  # step_us, fwd_us and rss_kb are the caller's
pt_profile() {
  local dir=$1 script=$2; shift 2
  local envs=() row; while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
  env "${envs[@]}" "$py" -W ignore "$script" "$@" > "$dir/pt.json"
  row=$("$py" -c 'import json, sys; j = json.load(open(sys.argv[1])); us = j["batch"] * 1e6
print(us / j["train_images_per_s"], us / j["forward_images_per_s"], int(j["peak_rss_mb"] * 1024))' "$dir/pt.json")
  read -r step_us fwd_us rss_kb <<< "$row"
}
