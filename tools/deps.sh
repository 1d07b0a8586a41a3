#!/usr/bin/env bash
# Installs whatever viewgap needs that is missing, from Debian 12 packages only.
set -euo pipefail
pkgs=(build-essential cmake ninja-build git pkg-config bc
      libdnnl-dev libtbb-dev libspdlog-dev libfmt-dev libcli11-dev nlohmann-json3-dev
      libgtest-dev libgmock-dev libbenchmark-dev
      python3 python3-matplotlib python3-numpy python3-pil)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "viewgap: installing ${missing[*]}" >&2
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
