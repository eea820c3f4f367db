#!/usr/bin/env bash
# One round on the GPU machine (see ../shared/DEVICE.md): the GPU test suite,
# then the daemon tuning at the four seed-001 shapes (by default linear_scan
# bf16 fwd_bwd; SCANTUNE_TUNE="op:dtype:mode ..." picks others, e.g.
# "linear_scan:bf16:fwd rglru:bf16:fwd_bwd samu:bf16:fwd_bwd"; SCANTUNE_VARIANTS="a,b" tunes
# only those variants, each shape those of them that can run it: --skip-unfit),
# `scantune select` for each, and the `scantune records` table. SCANTUNE_CTEST_REGEX="Samu" runs only the
# GPU tests whose names match it. Everything it
# prints also lands under $OUT (the folder the device tool brings back).
#   device.run carry=[".bundle"] command="bash scripts/gpu_round.sh [tests|tune|all]"
set -uo pipefail
what=${1:-all}
source "$(dirname "$0")/gpu_env.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.used --format=csv | tee "$out/gpu.txt"

if [ "$what" = tests ] || [ "$what" = all ]; then
  echo "== GPU suite: ctest -L gpu"
  ctest --test-dir "$bin" -L gpu ${SCANTUNE_CTEST_REGEX:+-R "$SCANTUNE_CTEST_REGEX"} --output-on-failure --timeout 300 \
    2>&1 | tee "$out/gpu_tests.log"
fi

if [ "$what" = tune ] || [ "$what" = all ]; then
  start_daemon gpu "$out/scantuned.log"
  $cli devices | tee "$out/devices.txt"
  for spec in ${SCANTUNE_TUNE:-linear_scan:bf16:fwd_bwd}; do
    IFS=: read -r op dtype mode <<<"$spec"
    for shape in ${SCANTUNE_SHAPES:-4x2048x2048 1x8192x2560 1x32768x1024 1x32768x2048}; do
      echo "== tune $op $shape $dtype $mode"
      $cli tune --op "$op" --shape "$shape" --dtype "$dtype" --mode "$mode" \
        ${SCANTUNE_VARIANTS:+--variants "$SCANTUNE_VARIANTS" --skip-unfit} \
        2>"$out/tune_${op}_${shape}_$mode.progress" | tee -a "$out/tune.txt"
      $cli select --op "$op" --shape "$shape" --dtype "$dtype" --mode "$mode" | tee -a "$out/select.txt"
      $cli select --op "$op" --shape "$shape" --dtype "$dtype" --mode "$mode" --deterministic \
        >>"$out/select_deterministic.txt" 2>&1
    done
  done
  $cli records --state OK --limit 1000 > "$out/records_ok.txt"
  $cli records --limit 1000 --json > "$out/records.json"
  kill $daemon; wait $daemon  # first: the last writes sit in the WAL until the daemon closes the database
  cp "$db" "$out/scantune-gpu.db" 2>/dev/null
  echo "== best per shape"; cat "$out/select.txt"
fi
