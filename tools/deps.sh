#!/usr/bin/env bash
# Installs whatever viewgap needs that is missing, from Debian 12 packages only.
#
# Every package the build, the tests and CI read from is named here, in groups;
# nothing is left to Recommends (we install with --no-install-recommends, as
# many images do, so a package that is only recommended, e.g. ocl-icd-opencl-dev
# by libdnnl-dev, would be missing on such a machine). tools/check_deps.sh
# checks after a build that every file the build read belongs to a package
# listed here or to the Depends closure of one, reading the lists from
# `--list`, so they live in this file only.
#
# Usage: bash tools/deps.sh [GROUP...]    install base plus the GROUPs, missing packages only
#        bash tools/deps.sh --list GROUP  print GROUP's own packages, one a line
#        bash tools/deps.sh --groups      print the group names
# Groups:
#   base   (always installed) build, tests, benchmarks, figures; qemu-user for
#          the test that runs the x86-64 binary on an emulated AVX2-only CPU;
#          dataset-fashion-mnist, the real images --data fashion-mnist reads
#   cross  aarch64 cross toolchain and qemu-user (tools/cross_arm64.sh)
#   arm64  list only (--list): the arm64 packages tools/cross_arm64.sh unpacks
#          into its sysroot; never installed on the host
#   fresh  debootstrap and Debian's keys, for the fresh-machine check (tools/fresh_check.sh)
#   fuzz   clang 14 and its sanitizer and libFuzzer runtimes, for the smallNORB
#          and IDX readers' fuzz targets (tools/fuzz.sh)
#   cache  ccache, which CI's builds go through (.ci/run): a clean clone rebuilds
#          only what changed since the last run on the same machine
# Runs `apt-get update` once, only when something is missing; through sudo when
# not root.
set -euo pipefail

groups=(base cross arm64 fresh fuzz cache)

group_pkgs() {  # GROUP: its packages on one line; fails for an unknown group
  case "$1" in
    base) echo build-essential cmake ninja-build git pkg-config bc \
      libdnnl-dev ocl-icd-opencl-dev libtbb-dev libspdlog-dev libfmt-dev libcli11-dev \
      libopenmpi-dev openmpi-bin zlib1g-dev \
      nlohmann-json3-dev libgtest-dev libgmock-dev libbenchmark-dev dataset-fashion-mnist \
      python3 python3-matplotlib python3-numpy python3-pil qemu-user ;;
    cross) echo g++-aarch64-linux-gnu qemu-user ;;
    # Not installed on the host: tools/cross_arm64.sh unpacks these arm64
    # packages (and their Depends) into its sysroot. arm64 oneDNN has no GPU
    # runtime, so it needs no OpenCL.
    arm64) echo libdnnl-dev libtbb-dev libspdlog-dev libfmt-dev libcli11-dev zlib1g-dev \
      nlohmann-json3-dev libgtest-dev libgmock-dev ;;
    fresh) echo debootstrap debian-archive-keyring ;;
    # clang-14 ships clang++-14; libclang_rt.fuzzer/asan/ubsan and the
    # <sanitizer/*.h> headers are in libclang-rt-14-dev, which clang-14 only
    # reaches through a Recommends (of libclang-common-14-dev).
    fuzz) echo clang-14 libclang-rt-14-dev ;;
    cache) echo ccache ;;
    *) return 1 ;;
  esac
}

die() { echo "deps.sh: $*" >&2; exit 1; }

case "${1:-}" in
  --groups) printf '%s\n' "${groups[@]}"; exit 0 ;;
  --list)
    [ $# -eq 2 ] || die "usage: bash tools/deps.sh --list GROUP"
    list=$(group_pkgs "$2") || die "unknown group '$2' (groups: ${groups[*]})"
    # shellcheck disable=SC2086  # split: one package a line
    printf '%s\n' $list
    exit 0 ;;
esac

want=(base)
for g in "$@"; do
  group_pkgs "$g" >/dev/null || die "unknown group '$g' (groups: ${groups[*]})"
  [ "$g" != arm64 ] || die "group arm64 is not installed on the host: bash tools/cross_arm64.sh unpacks it"
  want+=("$g")
done

pkgs=()
for g in "${want[@]}"; do
  read -r -a list <<< "$(group_pkgs "$g")"
  pkgs+=("${list[@]}")
done

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || die "not root and no sudo: run as root, or install sudo"
  SUDO=(sudo)
fi

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)

echo "deps.sh: installing ${missing[*]}" >&2
"${SUDO[@]}" apt-get update -qq
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
