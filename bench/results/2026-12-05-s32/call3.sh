#!/usr/bin/env bash
# Session 32's third GPU call: the GPU tests call 2's guard cut (WorkerGpuTest x3, GpuDaemonTest,
# KernelLauncherGpuTest; not VerifierGpuTest, for the device time left) and the new BlockBenchGpu; then seed 000's complete-block table
# (scripts/gpu_block.sh) tuned over session 29's selections only. Results: $OUT/call3.tar.gz, $OUT/block.tar.gz.
#   device.run carry=[".bundle"] command="bash bench/results/2026-12-05-s32/call3.sh"
source "$(dirname "$0")/../../../scripts/gpu_env.sh"
mkdir -p "$out/call3"
timeout 170 ctest --test-dir "$bin" -L gpu -R 'WorkerGpuTest|GpuDaemonTest|KernelLauncherGpuTest|BlockBenchGpu' \
  -V --timeout 160 >"$out/call3/gpu_tests.log" 2>&1
grep -E "Test +#|tests passed|worst of" "$out/call3/gpu_tests.log"
tar -C "$out" -czf "$out/call3.tar.gz" call3 && rm -rf "$out/call3"
export SCANTUNE_RGLRU_VARIANTS=lookback_v2_t256_s8_i16_o3,lookback_v2_t256_s16_i16_o3
export SCANTUNE_SAMU_VARIANTS=chunked_v8_t256_c32_l64_y1,chunked_v8_t512_c64_l64_y1_b4_i32_a1,chunked_v8_t256_c128_l64_y1_b5_i32_a1
timeout 250 bash scripts/gpu_block.sh --samples 6 --warmup 2
[ -d "$out/block" ] && tar -C "$out" -czf "$out/block.tar.gz" block  # cut by the timeout: what it had
