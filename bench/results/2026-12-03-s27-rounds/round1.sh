#!/usr/bin/env bash
# Session 27 round 1 on the H200: `chunked`'s own forward (rows agg, carry, columns scan) with _y1 (its scan
# stores y only) against the selected look-back points, samu bf16 fwd_bwd at the four seed shapes; the
# records' fwd column is each forward chain alone. First the _y1 and _a1 legality suites.
#   device.run carry=[".bundle"] command="bash bench/results/2026-12-03-s27-rounds/round1.sh"
out=${OUT:-/tmp/out}
SCANTUNE_CTEST_REGEX='SamuHFromY|SamuAtomic' OUT=$out/tests bash scripts/gpu_round.sh tests > /dev/null 2>&1
tail -5 $out/tests/gpu_tests.log
v=chunked_v8_t256_c32_l64_y1,chunked_v8_t512_c64_l64_y1_b4_i32_a1,chunked_v8_t256_c128_l64_y1_b5_i32_a1
v=$v,chunked_v8_t256_c32_y1,chunked_v8_t256_c32_y1_a1,chunked_v8_t256_c64_y1_a1,chunked_v8_t512_c64_y1_a1
v=$v,chunked_v8_t512_c32_y1_a1,chunked_v8_t256_c128_y1_a1
SCANTUNE_TUNE="samu:bf16:fwd_bwd" SCANTUNE_VARIANTS="$v" OUT=$out/tune bash scripts/gpu_round.sh tune > /dev/null 2>&1
rm -f $out/tune/*.progress $out/tune/scantune-gpu.db
echo "== records (variant, shape, fwd bwd fwd_bwd ms)"
grep samu $out/tune/records_ok.txt | awk '{print $3, $5, $8, $9, $10}' | sort -k2,2 -k5,5n | tee $out/records.txt
