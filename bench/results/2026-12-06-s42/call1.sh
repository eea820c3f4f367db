#!/usr/bin/env bash
# Session 42, call 1 (any card): the GPU tests whose code session 41 changed (the C++ client's Prepare, the test
# daemon's options, the Python client and its daemon fixture: GpuDaemonTest, KernelLauncherGpuTest,
# PythonLaunchGpu, MixerGpu), then samu bf16 fwd_bwd's four selections re-timed by the daemon on this card.
# $OUT/gpu_tests.log, $OUT/samu/by_shape.txt (shape, variant, state, fwd / bwd / fwd_bwd ms).
#   bash scripts/make_bundle.sh
#   device.run carry=[".bundle"] command="bash bench/results/2026-12-06-s42/call1.sh"
source "$(dirname "$0")/../../../scripts/gpu_env.sh"
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.max.sm,memory.total --format=csv | tee "$out/gpu.txt"
start=$(date +%s)
timeout 330 ctest --test-dir "$bin" -L gpu -R 'GpuDaemonTest|KernelLauncherGpuTest|PythonLaunchGpu|MixerGpu' \
  --output-on-failure --timeout 300 >"$out/gpu_tests.log" 2>&1
grep -E 'Test +#|tests passed|FAILED|Failure|Timeout' "$out/gpu_tests.log"
echo "tests: $(( $(date +%s) - start )) s"
mkdir -p "$out/samu"
start_daemon s42 "$out/samu/scantuned.log" && tune_samu_selections "$out/samu" "" $(( start + 540 )) 90
kill $daemon 2>/dev/null; wait $daemon 2>/dev/null
echo "total: $(( $(date +%s) - start )) s"
