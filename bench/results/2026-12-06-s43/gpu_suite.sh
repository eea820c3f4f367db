#!/usr/bin/env bash
# Session 43 (any card): the whole GPU suite (ctest label `gpu`, 27 tests) on the final code, four tests at a
# time (the float64 references and NVRTC compiles use the host's 16 cores), within one call's guard.
# An optional regex argument limits it to those tests (a second call runs what the first did not reach).
# $OUT/gpu.txt (the card), $OUT/gpu_tests.log (ctest's output), $OUT/summary.txt (one line a test).
#   bash scripts/make_bundle.sh
#   device.run carry=[".bundle"] command="bash bench/results/2026-12-06-s43/gpu_suite.sh [REGEX]"
source "$(dirname "$0")/../../../scripts/gpu_env.sh"
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.max.sm,memory.total --format=csv | tee "$out/gpu.txt"
start=$(date +%s)
timeout 560 ctest --test-dir "$bin" -L gpu ${1:+-R "$1"} -j4 --output-on-failure --timeout 540 \
  >"$out/gpu_tests.log" 2>&1
echo "ctest rc $?"
grep -E 'Test +#' "$out/gpu_tests.log" | sed 's/^ *[0-9]*\/[0-9]* *//' | tee "$out/summary.txt"
grep -E 'tests passed|FAILED|Failure|Timeout' "$out/gpu_tests.log" | tail -5
echo "wall: $(( $(date +%s) - start )) s"
