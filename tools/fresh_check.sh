#!/usr/bin/env bash
# The README's promise, checked: its "Two commands" work on a fresh Debian 12.
#
# Builds a minimal Debian 12 (bookworm) root with `debootstrap --variant=minbase`
# from the Debian mirror this machine's apt sources already name (read at run
# time from /etc/apt/sources.list{,.d/*.list} and /etc/apt/sources.list.d/*.sources),
# copies the checkout in (the files of commit HEAD, as a clone has them, less
# .git; the tests read nothing beside the checkout, so ../shared is not
# copied; uncommitted changes are not checked: commit first), and
# runs there, as root, with a clean environment (but for the compiler cache's,
# below) and no stdin, the commands of README.md's "Two commands" block exactly
# as printed (parsed from the README, so the check cannot drift from the docs). Anything those commands need that a
# minimal root lacks must be installed by the commands themselves.
#
# Caches, both safe, in $VIEWGAP_FRESH_CACHE (default ~/.cache/viewgap-fresh,
# outside the checkout so that CI's fresh clones share it): the root as
# debootstrap left it, as a tarball (every check unpacks a pristine copy; remade
# when the mirror, suite or architecture change, or after a week), and the .deb
# files apt downloads inside the root (bind-mounted; apt checks each against the
# fresh index, so a cached file only saves the download). The root itself is
# build/fresh/root.
#
# Compiler cache: when the caller compiles through ccache (CMAKE_CXX_COMPILER_LAUNCHER=ccache,
# as .ci/run sets), the root's builds share the caller's cache (bind-mounted), so they
# recompile nothing CI's release build already compiled. For that, ccache (and
# libhiredis0.14, the one library it adds to a minbase root) is installed in the root before
# the README's commands run, and the commands see CCACHE_DIR, CCACHE_BASEDIR, the launcher
# variables and VIEWGAP_WERROR (so that their flags are the release build's). ccache supplies
# no header, library or tool the build needs and runs the real compiler on a miss, so a
# dependency the commands forget to install still fails here.
#
# Mounts /proc, /sys (read-only), a private /dev (tmpfs with the usual nodes,
# not the host's) and the .deb cache; a trap unmounts them and deletes the root
# on any exit (--keep keeps the root, unmounted, for a look after a failure).
#
# Usage: bash tools/fresh_check.sh [--keep]   (as root; prints its wall time)
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
t_start=$(date +%s)
die() { echo "fresh_check: $*" >&2; exit 1; }
keep=0
[ "${1:-}" = --keep ] && keep=1
[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, chroot, mount)"

bash tools/deps.sh fresh

suite=bookworm
arch=$(dpkg --print-architecture)
work=$src/build/fresh
root=$work/root
cache=${VIEWGAP_FRESH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/viewgap-fresh}
debs=$cache/apt-archives
mkdir -p "$work" "$debs"

# --- the README's commands ---------------------------------------------------------
mapfile -t cmds < <(awk '/^## Two commands/ { h = 1; next }
                         h && /^## / { exit }
                         h && /^```/ { if (f) exit; f = 1; next }
                         h && f && NF' README.md)
[ ${#cmds[@]} -gt 0 ] || die "no commands found in README.md's \"Two commands\" block"

# --- the mirror apt already uses for $suite ------------------------------------------
debian_mirror() {
  local f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    # deb [options] URI SUITE COMPONENT...
    awk -v s="$suite" '$1 == "deb" { i = 2
        if ($i ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
        if ($(i + 1) == s) print $i }' "$f"
  done
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    # deb822 stanzas: Types, URIs, Suites (and Enabled) fields
    awk -v s="$suite" 'BEGIN { RS = ""; FS = "\n" }
      { types = uris = suites = ""; enabled = "yes"
        for (i = 1; i <= NF; i++) {
          if ($i ~ /^[ \t#]/ || index($i, ":") == 0) continue
          key = tolower(substr($i, 1, index($i, ":") - 1)); val = substr($i, index($i, ":") + 1)
          gsub(/^[ \t]+|[ \t]+$/, "", val)
          if (key == "types") types = val; else if (key == "uris") uris = val
          else if (key == "suites") suites = val; else if (key == "enabled") enabled = tolower(val)
        }
        if (enabled != "no" && (" " types " ") ~ / deb / && (" " suites " ") ~ (" " s " ")) {
          split(uris, u, " "); print u[1] } }' "$f"
  done
}
mirror=$(debian_mirror | head -n 1)
[ -n "$mirror" ] || die "no 'deb' source for $suite in /etc/apt/sources.list or sources.list.d"

# --- cleanup: kill what runs in the root, unmount, delete --------------------------------
mounts_under_root() { awk -v r="$root" '$5 == r || index($5, r "/") == 1 { print $5 }' /proc/self/mountinfo; }
cleanup() {
  local p m
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/root" 2>/dev/null)" = "$root" ] && kill -9 "${p#/proc/}" 2>/dev/null
  done
  for m in $(mounts_under_root | sort -r); do
    umount "$m" 2>/dev/null || umount -l "$m" || true
  done
  if [ -n "$(mounts_under_root)" ]; then
    echo "fresh_check: still mounted under $root, not deleting it" >&2
  elif [ "$keep" -eq 0 ] && [ -d "$root" ]; then
    rm -rf --one-file-system "$root"
  fi
  return 0
}
cleanup  # a root left by an interrupted run
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- a pristine minbase root ---------------------------------------------------------------
tarball=$cache/$suite-minbase-$arch.tar
key="$suite $arch minbase $mirror"
if [ ! -f "$tarball" ] || [ "$(cat "$tarball.key" 2>/dev/null)" != "$key" ] || [ -n "$(find "$tarball" -mtime +7)" ]; then
  t0=$(date +%s)
  echo "fresh_check: debootstrap --variant=minbase $suite from $mirror"
  rm -rf "$root" "$tarball" "$tarball.key"
  mkdir -p "$root"
  debootstrap --variant=minbase --arch="$arch" "$suite" "$root" "$mirror" > "$work/debootstrap.log" 2>&1 \
    || { tail -n 20 "$work/debootstrap.log" >&2; die "debootstrap failed (log: $work/debootstrap.log)"; }
  tar -C "$root" --numeric-owner -cf "$tarball.tmp" .
  mv "$tarball.tmp" "$tarball"
  echo "$key" > "$tarball.key"
  echo "fresh_check: minbase root made in $(($(date +%s) - t0)) s (cached as $tarball)"
else
  mkdir -p "$root"
  tar -C "$root" --numeric-owner -xf "$tarball"
fi
cp -L /etc/resolv.conf "$root/etc/resolv.conf"

# --- the checkout, as a new user would have it ---------------------------------------------
dest=/root/viewgap
mkdir -p "$root$dest"
git archive --format=tar HEAD | tar -C "$root$dest" -xf -
git diff --quiet HEAD -- || echo "fresh_check: note: checking HEAD $(git rev-parse --short HEAD); uncommitted changes are not part of it"

# --- mounts ---------------------------------------------------------------------------------------
mount -t proc proc "$root/proc"
mount -t sysfs -o ro sysfs "$root/sys" 2>/dev/null || mount --bind -o ro /sys "$root/sys"
mount -t tmpfs -o mode=755,nosuid tmpfs "$root/dev"
for n in "null 1 3" "zero 1 5" "full 1 7" "random 1 8" "urandom 1 9" "tty 5 0"; do
  read -r name maj min <<< "$n"
  mknod -m 666 "$root/dev/$name" c "$maj" "$min"
done
ln -s /proc/self/fd "$root/dev/fd"
ln -s /proc/self/fd/0 "$root/dev/stdin"
ln -s /proc/self/fd/1 "$root/dev/stdout"
ln -s /proc/self/fd/2 "$root/dev/stderr"
mkdir -m 1777 "$root/dev/shm"
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$root/dev/shm"
mount --bind "$debs" "$root/var/cache/apt/archives"

# --- the caller's compiler cache, if it compiles through one ----------------------------------
env_=(HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin TERM=dumb LANG=C.UTF-8)
for v in http_proxy https_proxy no_proxy; do [ -n "${!v:-}" ] && env_+=("$v=${!v}"); done
if [ "${CMAKE_CXX_COMPILER_LAUNCHER:-}" = ccache ] && command -v ccache > /dev/null; then
  ccache_dir=$(ccache -k cache_dir)
  mkdir -p "$ccache_dir" "$root/var/cache/viewgap-ccache"
  mount --bind "$ccache_dir" "$root/var/cache/viewgap-ccache"
  t0=$(date +%s)
  chroot "$root" /usr/bin/env -i "${env_[@]}" DEBIAN_FRONTEND=noninteractive /bin/bash -c \
    'apt-get update -q && apt-get install -y -q --no-install-recommends ccache' < /dev/null > "$work/ccache.log" 2>&1 \
    || { tail -n 20 "$work/ccache.log" >&2; die "could not install ccache in the root (log: $work/ccache.log)"; }
  env_+=(CCACHE_DIR=/var/cache/viewgap-ccache "CCACHE_BASEDIR=$dest"
         CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache)
  [ -n "${VIEWGAP_WERROR:-}" ] && env_+=("VIEWGAP_WERROR=$VIEWGAP_WERROR")
  echo "fresh_check: compiling through the caller's ccache ($ccache_dir; ccache installed in the root in $(($(date +%s) - t0)) s)"
fi

# --- the README's commands, in order, as a new user types them ---------------------------------
log=$work/commands.log
: > "$log"
for c in "${cmds[@]}"; do
  t0=$(date +%s)
  echo "fresh_check: # $c" | tee -a "$log"
  if ! chroot "$root" /usr/bin/env -i "${env_[@]}" /bin/bash -c "cd $dest && $c" < /dev/null >> "$log" 2>&1; then
    tail -n 40 "$log" >&2
    die "FAILED on a fresh $suite minbase root: $c (log: $log; --keep keeps the root)"
  fi
  echo "fresh_check: ok in $(($(date +%s) - t0)) s: $c"
done
grep -E '^[0-9]+% tests passed' "$log" | sed 's/^/fresh_check: /' || true
echo "fresh_check: the README's ${#cmds[@]} commands pass on a fresh Debian 12 minbase root;" \
     "wall time $(($(date +%s) - t_start)) s"
