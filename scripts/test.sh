#!/usr/bin/env bash
# Sets up, builds and runs every test that needs no GPU (the CI test command).
# GPU tests carry the ctest label `gpu`; run them on a GPU machine with
#   ctest --test-dir build -L gpu --output-on-failure
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
ctest --test-dir build -LE gpu --output-on-failure -j"${SCANTUNE_JOBS:-$(nproc)}" --timeout 1500
