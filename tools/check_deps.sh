#!/usr/bin/env bash
# Checks that tools/deps.sh names every Debian package a build read from, so
# that a package present here by accident (installed by hand, or pulled in as a
# Recommends) cannot hide a missing install step on a fresh machine.
#
# The files a build read, all taken from the finished build directory:
#   - every header each object was compiled from: `ninja -t deps` (the
#     compiler's -MD dependency files, as Ninja recorded them);
#   - every CMake file the configure step read, package config files
#     (dnnl-config.cmake, TBBConfig.cmake, ...) and CMake's own modules
#     alike: the inputs of the rule that regenerates build.ninja
#     (`ninja -t query build.ninja`), which CMake writes from the list of files
#     it actually processed. This is exact, needs no re-run of CMake and also
#     covers packages found only through another (find_dependency);
#   - every existing file named in a build command (compilers, libraries on
#     link lines): `ninja -t commands`;
#   - every file CMake found by find_program/find_library (FILEPATH entries of
#     CMakeCache.txt, e.g. python3 for the plots test, libOpenCL.so);
#   - for a native build, the shared libraries the built executables load.
# Each file is mapped to its package with `dpkg -S` (also trying the path with
# symlinks resolved and its merged-/usr twin, as dpkg records one of them). The
# check fails, naming file and package, when that package is neither in the
# lists of tools/deps.sh (base plus the GROUPs given) nor in the Depends /
# Pre-Depends closure of a listed package (`apt-cache depends --recurse
# --installed`, Recommends and Suggests not followed). It also fails for a file
# outside the source and build trees that no package owns (installed by hand).
# Files in the source or build tree (the project's own, generated) are skipped;
# with --sysroot DIR (a cross build), files in DIR map through the manifest
# tools/cross_arm64.sh wrote when it unpacked DIR from the arm64 list.
#
# Usage: bash tools/check_deps.sh [--sysroot DIR] BUILD_DIR [GROUP...]
#   e.g. bash tools/check_deps.sh build/release
#        bash tools/check_deps.sh --sysroot build/aarch64-sysroot build/aarch64 cross
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
die() { echo "check_deps: $*" >&2; exit 1; }

sysroot=""
if [ "${1:-}" = --sysroot ]; then
  [ $# -ge 2 ] || die "usage: bash tools/check_deps.sh [--sysroot DIR] BUILD_DIR [GROUP...]"
  sysroot=$(realpath "$2")
  shift 2
fi
[ $# -ge 1 ] || die "usage: bash tools/check_deps.sh [--sysroot DIR] BUILD_DIR [GROUP...]"
build=$(realpath "$1")
shift
[ -f "$build/build.ninja" ] || die "$build is not a configured Ninja build directory"
[ -f "$build/.ninja_deps" ] || die "$build has not been built (no .ninja_deps)"
groups=(base "$@")
command -v ninja >/dev/null || die "ninja not found (bash tools/deps.sh)"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# --- the files the build read ----------------------------------------------------
{
  ninja -C "$build" -t deps | awk '/^    /{ print $1 }'
  ninja -C "$build" -t query build.ninja | awk '$1 == "|" { print $2 } $1 ~ /^\// { print $1 }'
  ninja -C "$build" -t commands | grep -oE '/[A-Za-z0-9_.+@/-]+'
  sed -nE 's/^[A-Za-z0-9_.+-]+:FILEPATH=(\/.*)$/\1/p' "$build/CMakeCache.txt"
  if [ -z "$sysroot" ]; then
    for exe in "$build"/viewgap "$build"/viewgap_tests "$build"/viewgap_bench; do
      [ -x "$exe" ] && ldd "$exe" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }'
    done
  fi
} > "$tmp/raw"
# Lexically normal absolute paths (no `..`), existing regular files only;
# Ninja names files of the build tree relative to it: those are generated.
sort -u "$tmp/raw" | while IFS= read -r f; do
  if [[ "$f" == /* && -f "$f" ]]; then realpath -s -m "$f"; fi
done | sort -u > "$tmp/files"

n_read=$(wc -l < "$tmp/files")
: > "$tmp/sys_owned"; : > "$tmp/sys_files"; : > "$tmp/host"; : > "$tmp/sys_stray"
while IFS= read -r f; do
  if [ -n "$sysroot" ] && [[ "$f" == "$sysroot"/* ]]; then
    echo "$f" >> "$tmp/sys_files"
  elif [[ "$f" == "$src"/* || "$f" == "$build"/* ]]; then
    :  # the project's own or generated
  else
    echo "$f" >> "$tmp/host"
  fi
done < "$tmp/files"

fail=0
# --- sysroot files: from the manifest of the unpacked arm64 packages ---------------
if [ -n "$sysroot" ] && [ -s "$tmp/sys_files" ]; then
  manifest=$sysroot/var/lib/viewgap-sysroot.files
  [ -f "$manifest" ] || die "no manifest $manifest: rebuild the sysroot (bash tools/cross_arm64.sh)"
  awk -v root="$sysroot" 'NR == FNR { sub(/: /, "\t"); split($0, a, "\t"); own[root a[2]] = a[1]; next }
       { if ($0 in own) print own[$0] "\t" $0 > "/dev/stdout"; else print $0 > "/dev/stderr" }' \
    "$manifest" "$tmp/sys_files" > "$tmp/sys_owned" 2> "$tmp/sys_stray"
  while IFS= read -r f; do
    echo "check_deps: $f: in the sysroot but from no unpacked package (tools/deps.sh --list arm64)" >&2
    fail=1
  done < "$tmp/sys_stray"
fi

# --- host files: dpkg -S ----------------------------------------------------------------
owners() {  # FILE... -> "pkg[, pkg]\tpath" for the ones dpkg knows
  [ $# -gt 0 ] || return 0
  dpkg -S "$@" 2>/dev/null | grep -v '^diversion ' | sed -E 's/: (\/.*)$/\t\1/' || true
}
mapfile -t host < "$tmp/host"
owners "${host[@]}" > "$tmp/owned"
cut -f2 "$tmp/owned" | sort -u > "$tmp/owned_paths"
# dpkg records a path as its package ships it: retry the rest through symlinks
# (alternatives, /usr/bin/c++) and merged /usr (/lib <-> /usr/lib).
comm -23 <(printf '%s\n' "${host[@]}" | sort -u) "$tmp/owned_paths" | while IFS= read -r f; do
  for alt in "$(realpath -e "$f")" "${f#/usr}" "/usr$f"; do
    [ "$alt" = "$f" ] && continue
    o=$(owners "$alt" | cut -f1 | head -1)
    if [ -n "$o" ]; then printf '%s\t%s\n' "$o" "$f"; continue 2; fi
  done
  echo "check_deps: $f: read by the build, but no Debian package owns it (installed by hand?)" >&2
  echo x >> "$tmp/unowned"
done >> "$tmp/owned"
[ -s "$tmp/unowned" ] && fail=1

# --- the packages tools/deps.sh promises: the lists and their Depends closure -------------
native=$(dpkg --print-architecture)
listed=()
for g in "${groups[@]}"; do
  mapfile -t l < <(bash tools/deps.sh --list "$g") || die "tools/deps.sh --list $g failed"
  listed+=("${l[@]}")
done
apt-cache depends --recurse --installed --no-recommends --no-suggests --no-conflicts \
    --no-breaks --no-replaces --no-enhances "${listed[@]}" 2>/dev/null \
  | awk '!/^ / { gsub(/[<>]/, ""); print }' | sed "s/:$native\$//" | sort -u > "$tmp/closure"
printf '%s\n' "${listed[@]}" | sed "s/:$native\$//" >> "$tmp/closure"

# A file is covered when any of its owners is in the closure.
while IFS=$'\t' read -r pk f; do
  ok=0
  IFS=', ' read -r -a ps <<< "$pk"
  for p in "${ps[@]}"; do
    grep -qxF "${p%:"$native"}" "$tmp/closure" && { ok=1; break; }
  done
  [ $ok -eq 1 ] || printf '%s\t%s\n' "$pk" "$f" >> "$tmp/uncovered"
done < "$tmp/owned"
if [ -s "$tmp/uncovered" ]; then  # one line per package: its first file and how many more
  sort "$tmp/uncovered" | awk -F '\t' -v g="${groups[*]}" '
    $1 != p { if (p != "") out(); p = $1; f = $2; n = 0; next } { n++ }
    function out() { printf "check_deps: package %s (e.g. %s%s), read by the build, is neither listed in tools/deps.sh (groups: %s) nor in the Depends closure of a listed package\n", p, f, n ? ", and " n " more files" : "", g }
    END { out() }' >&2
  fail=1
fi

pks=$(cut -f1 "$tmp/owned" | tr ',' '\n' | sed "s/^ *//; s/:$native\$//" | sort -u)
n_pk=$(wc -w <<< "$pks")
n_sys=$(wc -l < "$tmp/sys_owned")
[ $fail -eq 0 ] || die "FAILED: add the packages named above to tools/deps.sh"
echo "check_deps: $build: $n_read files read; $(wc -l < "$tmp/owned") from $n_pk Debian packages," \
     "all covered by tools/deps.sh (groups: ${groups[*]})${sysroot:+; $n_sys from the arm64 sysroot}"
echo "check_deps: packages read: $(tr '\n' ' ' <<< "$pks")"
