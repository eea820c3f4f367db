#!/usr/bin/env bash
# Session 32's fourth GPU call (the device time left: ~6 minutes with the start):
#   1. samu bf16 fwd_bwd tuned at the four seed shapes over the four _k1 points and their twins only;
#   2. GPU tests: the new GatedGpuTest.SamuBakedShapeVariantsAreLegal (_k1) and BlockBenchGpu (the block
#      bench's float64 check and one end-to-end run).
#   Everything in $OUT/call4.tar.gz (packed after each step).
#   device.run carry=[".bundle"] command="bash bench/results/2026-12-05-s32/call4.sh"
source "$(dirname "$0")/../../../scripts/gpu_env.sh"
res=$out/call4 && mkdir -p "$res"
twins=chunked_v8_t256_c32_l64_y1,chunked_v8_t256_c32_l64_y1_b4_i32_a1,chunked_v8_t512_c64_l64_y1_b4_i32_a1,chunked_v8_t256_c128_l64_y1_b5_i32_a1
baked=$(echo $twins | sed 's/,/_k1,/g')_k1
OUT=$res SCANTUNE_TUNE=samu:bf16:fwd_bwd SCANTUNE_VARIANTS=$twins,$baked timeout 150 bash scripts/gpu_round.sh tune \
  >"$res/round.log" 2>&1
grep samu "$res/records_ok.txt" | sort -k5,5 -k10,10n
tar -C "$out" -czf "$out/call4.tar.gz" call4
timeout 110 ctest --test-dir "$bin" -L gpu -R 'SamuBakedShape|BlockBenchGpu' -V --timeout 100 >"$res/gpu_tests.log" 2>&1
grep -E "Test +#|tests passed|worst of" "$res/gpu_tests.log" | tail -12
tar -C "$out" -czf "$out/call4.tar.gz" call4
