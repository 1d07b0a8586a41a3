# Sourced by the PyTorch comparisons (compare_pytorch.sh, compare_convcaps.sh):
# torch_setup NAME checks that the release binary and Debian's PyTorch are there
# (exit 2 with one line naming NAME when not), pins every library to one
# thread, and says which BLAS PyTorch maps. Sets exe and py.
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
