#!/usr/bin/env bash
# Session 37: the GPU checks that have run on H100s only since the kernels last changed, now on an H200:
# `VerifierGpuTest` (every variant of every operator against the float64 reference), `GatedGpuTest`'s
# `RgLruBakedShapeVariantsAreLegal`, then seed 000's block table (scripts/gpu_block.sh) over the `_k1`
# selections if time is left. On any other card it stops at once (those checks passed on H100s in
# sessions 34-35). $OUT/checks.tar.gz, $OUT/block.tar.gz.
#   bash scripts/make_bundle.sh
#   device.run carry=[".bundle"] command="bash bench/results/2026-12-05-s37/h200_checks.sh"
source "$(dirname "$0")/../../../scripts/gpu_env.sh"
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "gpu: $name"
case "$name" in *H200*) ;; *) echo "not an H200: nothing run"; exit 0 ;; esac
res=$out/checks && mkdir -p "$res"
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.max.sm,memory.total --format=csv >"$res/gpu.txt"
start=$(date +%s)
OUT=$res SCANTUNE_CTEST_REGEX='VerifierGpuTest|RgLruBakedShapeVariantsAreLegal' timeout ${CHECKS_TESTS_S:-400} \
  bash scripts/gpu_round.sh tests >"$res/round.log" 2>&1
echo "checks: $(( $(date +%s) - start )) s" | tee "$res/elapsed.txt"
grep -E 'Test +#|tests passed|FAILED|Failure|Timeout' "$res/gpu_tests.log" | head -20
tar -C "$out" -czf "$out/checks.tar.gz" checks
left=$(( ${CHECKS_GUARD:-560} - ($(date +%s) - start) ))
if [ "$left" -gt 120 ]; then
  SCANTUNE_RGLRU_VARIANTS=lookback_v2_t256_s8_i16_o3_k1,lookback_v2_t256_s16_i16_o3_k1 \
  SCANTUNE_SAMU_VARIANTS=chunked_v8_t256_c32_l64_y1_b4_i32_a1_k1,chunked_v8_t512_c64_l64_y1_b4_i32_a1_k1,chunked_v8_t256_c128_l64_y1_b5_i32_a1_k1 \
    timeout $(( left - 10 )) bash scripts/gpu_block.sh --samples 6
fi
[ -f "$out/block.tar.gz" ] || { [ -d "$out/block" ] && tar -C "$out" -czf "$out/block.tar.gz" block; }
ls -la "$out"
