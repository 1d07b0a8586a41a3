#!/usr/bin/env bash
# Fresh machine to results: install what is missing, build Release, run the
# default experiment (seed 0, both models, the seed's split), writing out/run.json.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/deps.sh
cmake --preset release -DVIEWGAP_WERROR="${VIEWGAP_WERROR:-OFF}" >/dev/null
cmake --build --preset release --target viewgap
mkdir -p out
./build/release/viewgap run --out-json out/run.json "$@"
