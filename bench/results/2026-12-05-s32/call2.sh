#!/usr/bin/env bash
# Session 32's second GPU call:
#   1. the rest of the GPU suite (call 1 ran the selective_scan suites and PythonLaunchGpu);
#   2. the main job's GPU half (scripts/demo.sh's GPU branch, from the carried build: the device cannot build):
#      tune linear_scan bf16 fwd_bwd 4x2048x2048, select, records, plot (text and SVG), selections;
#   3. Nsight Compute on samu's held forward inside fwd_bwd at 4x2048x2048, per-SASS source page.
#   Everything lands in $OUT/call2.tar.gz (the device tool brings back at most 8 files).
#   device.run carry=[".bundle"] command="bash bench/results/2026-12-05-s32/call2.sh"
set -uo pipefail
source "$(dirname "$0")/../../../scripts/gpu_env.sh"
res=$out/call2 && mkdir -p "$res"
timeout 400 ctest --test-dir "$bin" -L gpu -E 'SsmGpuTest|SelectiveScanDeterministic|PythonLaunchGpu' \
  --output-on-failure --timeout 300 >"$res/gpu_tests.log" 2>&1
tail -4 "$res/gpu_tests.log"

sock=unix:///tmp/scantune-demo.sock
"$bin/server/scantuned" --listen $sock --db /tmp/demo.db >"$res/scantuned.log" 2>&1 &
daemon=$!
cli="$bin/client/scantune --address $sock"
for _ in $(seq 1 100); do $cli devices >/dev/null 2>&1 && break; sleep 0.1; done
problem="--op linear_scan --shape 4x2048x2048 --dtype bf16 --mode fwd_bwd"
{
  $cli devices
  timeout 150 $cli tune $problem
  $cli select $problem
  $cli records --op linear_scan --shape 4x2048x2048 --state OK --limit 10
  $cli plot $problem --top 15
  $cli plot $problem --top 15 --svg "$res/plot.svg"
  $cli selections
} >"$res/demo.txt" 2>&1
kill $daemon; wait $daemon
tail -30 "$res/demo.txt"

OUT=$res SCANTUNE_NCU_SASS=1 timeout 150 bash scripts/gpu_profile.sh \
  'samu|bf16|4x2048x2048|fwd_bwd|chunked_v8_t256_c32_l64_y1|samu_fwd_held|1' >/dev/null 2>&1
tar -C "$out" -czf "$out/call2.tar.gz" call2 && rm -rf "$res"
