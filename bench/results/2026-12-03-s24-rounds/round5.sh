#!/usr/bin/env bash
# Session 24 rounds 5 and 7 on the H200: the backward agg in 512-channel columns where that pads W less (W = 2560: 5
# columns, not 1024 + 1024 + 512) and the chunked finalize in one wave (round 5: at 2 blocks per SM; round 7:
# at 32 channels per block where 16 would be two waves), built into .bundle/alt_new; .bundle/alt_prev is the
# commit before both (5f74d27). Each shape's selection (and the
# other enumerated points of its backward), samu bf16 fwd_bwd, with each set of binaries in turn; then the
# gated GPU suites named by TESTS_RE on the bundle's own build (alt_new's sources).
#   device.run carry=[".bundle"] command="TESTS_RE=... bash bench/results/2026-12-03-s24-rounds/round5.sh prev new prev new"
export V_A="chunked_v8_t256_c32_l64_y1,chunked_v8_t256_c32_l64_y1_b4_i32,chunked_v8_t256_c64_l64_y1_b5_i32,\
chunked_v8_t256_c128_l64_y1_b5_i32"
export V_B="chunked_v8_t512_c64_l64_y1_b4_i32,chunked_v8_t512_c64_l64_y1_b5_i32"
out=${OUT:-/tmp/out}
n=0
for tag in "$@"; do
  n=$((n + 1))
  ALT_ONLY=1 bash scripts/gpu_samu_alts.sh $tag
  SKIP_TESTS=1 bash scripts/gpu_samu_round.sh ${tag}$n > /dev/null 2>&1
  rm -rf $out/${tag}${n}_a $out/${tag}${n}_b $out/${tag}${n}_not_ok.txt
  echo "== ${tag}$n"; cat $out/${tag}${n}_records.txt
done
if [ -n "${TESTS_RE:-}" ]; then
  SCANTUNE_CTEST_REGEX="$TESTS_RE" OUT=$out/tests bash scripts/gpu_round.sh tests > /dev/null 2>&1
  tr -d '\0' < $out/tests/gpu_tests.log > $out/gpu_tests_new.log; rm -rf $out/tests
  grep -E "tests passed|tests failed|Failed|\*\*\*|Passed" $out/gpu_tests_new.log
fi
