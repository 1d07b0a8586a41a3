#!/usr/bin/env bash
# The NEON kernels on an x86 machine: cross-compiles the kernel core (the
# sources of viewgap_kernels_core for aarch64, as CMakeLists.txt lists them) and
# the pose-matmul and EM-routing tests for aarch64, statically, with GoogleTest
# built from Debian's sources, then runs the tests under qemu-user.
# Usage: bash tools/cross_neon.sh [gtest args...]   (builds in build/neon;
# VIEWGAP_WERROR=ON makes warnings errors, as in CI). Exits non-zero on failure.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
out=build/neon
mkdir -p "$out"

pkgs=(g++-aarch64-linux-gnu qemu-user googletest)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "cross_neon: installing ${missing[*]}" >&2
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

CXX=aarch64-linux-gnu-g++
gt=/usr/src/googletest/googletest
base=(-std=c++20 -O2 -I"$src")
warn=(-Wall -Wextra -Wpedantic)
[ "${VIEWGAP_WERROR:-OFF}" = "ON" ] && warn+=(-Werror)

gtest=(-isystem "$gt/include")
# Every object in parallel; any failed compile fails the script.
objs=() pids=()
compile() {  # output source flags...
  local o=$1 s=$2
  shift 2
  objs+=("$o")
  $CXX "${base[@]}" "$@" -c "$s" -o "$o" &
  pids+=($!)
}
for f in isa pose_matmul em_routing pose_matmul_neon em_routing_neon; do
  compile "$out/$f.o" "$src/kernels/$f.cpp" "${warn[@]}"
done
for f in pose_matmul_scalar em_routing_scalar; do  # the references: no contraction
  compile "$out/$f.o" "$src/kernels/$f.cpp" "${warn[@]}" -ffp-contract=off
done
for f in test_pose_matmul test_em_routing; do
  compile "$out/$f.o" "$src/tests/$f.cpp" "${warn[@]}" "${gtest[@]}"
done
for f in gtest-all gtest_main; do
  compile "$out/$f.o" "$gt/src/$f.cc" "${gtest[@]}" -I"$gt"
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
[ $status -eq 0 ] || { echo "cross_neon: compile failed" >&2; exit 1; }

$CXX -static -pthread "${objs[@]}" -o "$out/viewgap_kernel_tests"
echo "cross_neon: running $out/viewgap_kernel_tests (aarch64, static) under qemu-aarch64"
qemu-aarch64 "$out/viewgap_kernel_tests" "$@"
