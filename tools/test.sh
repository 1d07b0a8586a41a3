#!/usr/bin/env bash
# Install what is missing, build, and run the whole test suite.
# Usage: bash tools/test.sh [preset]   (release by default; debug, asan)
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-release}"
bash tools/deps.sh
cmake --preset "$preset" -DVIEWGAP_WERROR="${VIEWGAP_WERROR:-OFF}" >/dev/null
cmake --build --preset "$preset"
ctest --preset "$preset" -j "$(nproc)"
