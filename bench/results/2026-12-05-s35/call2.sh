#!/usr/bin/env bash
# Session 35, call 2: `VerifierGpuTest` alone (cut by the call's guard in sessions 32-34; it last passed in
# session 29, before linear_scan's `_k1` joined it), then seed 000's complete-block table (scripts/gpu_block.sh)
# over the samu `_k1` selections if time is left. $OUT/call2.tar.gz and $OUT/block.tar.gz.
#   device.run carry=[".bundle"] command="bash bench/results/2026-12-05-s35/call2.sh"
source "$(dirname "$0")/../../../scripts/gpu_env.sh"
res=$out/call2 && mkdir -p "$res"
start=$(date +%s)
OUT=$res SCANTUNE_CTEST_REGEX='VerifierGpuTest' timeout 420 bash scripts/gpu_round.sh tests >"$res/round.log" 2>&1
echo "verifier: $(( $(date +%s) - start )) s" | tee "$res/elapsed.txt"
grep -E 'Test +#|tests passed|FAILED|Failure|Timeout' "$res/gpu_tests.log" | head -20
tar -C "$out" -czf "$out/call2.tar.gz" call2
left=$(( 570 - ($(date +%s) - start) ))
if [ "$left" -gt 150 ]; then
  SCANTUNE_RGLRU_VARIANTS=lookback_v2_t256_s8_i16_o3_k1,lookback_v2_t256_s16_i16_o3_k1 \
  SCANTUNE_SAMU_VARIANTS=chunked_v8_t256_c32_l64_y1_b4_i32_a1_k1,chunked_v8_t512_c64_l64_y1_b4_i32_a1_k1,chunked_v8_t256_c128_l64_y1_b5_i32_a1_k1 \
    timeout $(( left - 10 )) bash scripts/gpu_block.sh --samples 6
fi
# A block run cut by its guard leaves its folder: bring back what it wrote.
[ -f "$out/block.tar.gz" ] || { [ -d "$out/block" ] && tar -C "$out" -czf "$out/block.tar.gz" block; }
