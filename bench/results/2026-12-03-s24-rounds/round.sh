#!/usr/bin/env bash
# Session 24 round on the H200: the gated GPU suites named by TESTS_RE on the bundle's build, then samu bf16
# fwd_bwd tuned over each shape's selection (the vec-2 look-back forward) and the same backward points with
# the vec-4 forward (_l128, _b4 and _b3), all in one tuning job per group, so each pair is measured in the
# same call and the same counterbalanced rounds.
#   device.run carry=[".bundle"] command="TESTS_RE=... bash bench/results/2026-12-03-s24-rounds/round.sh"
export V_A="chunked_v8_t256_c32_l64_y1,chunked_v8_t256_c64_l64_y1_b5_i32,chunked_v8_t256_c128_l64_y1_b5_i32,\
chunked_v8_t256_c32_l128_y1_b4,chunked_v8_t256_c32_l128_y1_b3,chunked_v8_t256_c64_l128_y1_b4,\
chunked_v8_t256_c64_l128_y1_b3,chunked_v8_t256_c128_l128_y1_b4,chunked_v8_t256_c128_l128_y1_b3"
export V_B="chunked_v8_t512_c64_l64_y1_b5_i32,chunked_v8_t512_c64_l128_y1_b4,chunked_v8_t512_c64_l128_y1_b3"
out=${OUT:-/tmp/out}
SKIP_TESTS=$([ -n "${TESTS_RE:-}" ] && echo 0 || echo 1) bash scripts/gpu_samu_round.sh ${TAG:-w4}
[ -f $out/tests/gpu_tests.log ] && cp $out/tests/gpu_tests.log $out/gpu_tests_${TAG:-w4}.log
rm -rf $out/${TAG:-w4}_a $out/${TAG:-w4}_b $out/tests
