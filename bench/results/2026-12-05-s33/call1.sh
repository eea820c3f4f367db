#!/usr/bin/env bash
# Session 33, call 1: the GPU tests that have not finished on a GPU since their code changed
# (SamuBakedShape, BlockBenchGpu) or were cut by time in session 32 (Verifier, Worker, GpuDaemon,
# KernelLauncher), then seed 000's complete-block table (scripts/gpu_block.sh) over the rglru and samu
# selections of sessions 29/32 only. $OUT/call1.tar.gz and $OUT/block.tar.gz.
#   device.run carry=[".bundle"] command="bash bench/results/2026-12-05-s33/call1.sh"
source "$(dirname "$0")/../../../scripts/gpu_env.sh"
res=$out/call1 && mkdir -p "$res"
OUT=$res SCANTUNE_CTEST_REGEX='SamuBakedShape|BlockBenchGpu|VerifierGpuTest|WorkerGpuTest|GpuDaemonTest|KernelLauncherGpuTest' \
  timeout 240 bash scripts/gpu_round.sh tests >"$res/round.log" 2>&1
tail -25 "$res/gpu_tests.log"
tar -C "$out" -czf "$out/call1.tar.gz" call1 && rm -rf "$res"
SCANTUNE_RGLRU_VARIANTS=lookback_v2_t256_s8_i16_o3,lookback_v2_t256_s16_i16_o3 \
SCANTUNE_SAMU_VARIANTS=chunked_v8_t256_c32_l64_y1_b4_i32_a1_k1,chunked_v8_t512_c64_l64_y1_b4_i32_a1_k1,chunked_v8_t256_c128_l64_y1_b5_i32_a1 \
  timeout 230 bash scripts/gpu_block.sh --samples 6
