#!/usr/bin/env bash
# Session 24 round 3 on the H200: the look-back forward's blocks per SM and tokens per thread, swept at each
# seed shape with that shape's selected backward (t256_c32, t512_c64, t256_c64, t256_c128): _b{3,4,5}, _i32
# and _i64 (tile 512 at strip 64), strips 64 and 32; one tuning job per shape (counterbalanced rounds, the
# same call). Then the gated GPU suites named by TESTS_RE.
#   device.run carry=[".bundle"] command="TESTS_RE=... bash bench/results/2026-12-03-s24-rounds/round3.sh"
out=${OUT:-/tmp/out}
fwds="l64_y1_b5_i32 l64_y1_b4_i32 l64_y1_b3_i32 l64_y1_b3_i64 l64_y1_b4_i64 l32_y1_b4_i32 l32_y1_b5_i32 l32_y1_b3_i64"
list() {  # backward prefix, extra forwards
  local v="" f
  for f in $fwds $2; do v="$v${v:+,}chunked_v8_$1_$f"; done
  echo "$v"
}
declare -A bwd=([4x2048x2048]=t256_c32 [1x8192x2560]=t512_c64 [1x32768x1024]=t256_c64 [1x32768x2048]=t256_c128)
for shape in 4x2048x2048 1x8192x2560 1x32768x1024 1x32768x2048; do
  extra=""
  [ $shape = 4x2048x2048 ] && extra="l64_y1 l64_y1_b4 l64_y1_b5"
  SCANTUNE_TUNE="samu:bf16:fwd_bwd" SCANTUNE_SHAPES="$shape" SCANTUNE_VARIANTS="$(list ${bwd[$shape]} "$extra")" \
    OUT=$out/f_$shape bash scripts/gpu_round.sh tune > /dev/null 2>&1
  grep samu $out/f_$shape/records_ok.txt | awk '{print $3, $4, $5, $8, $9, $10, $13}' | sort -k4n >> $out/fwd_sweep_records.txt
  rm -f $out/f_$shape/scantune-gpu.db
done
echo "== fwd sweep (variant state shape fwd bwd fwd_bwd rel_err)"; cat $out/fwd_sweep_records.txt
if [ -n "${TESTS_RE:-}" ]; then
  SCANTUNE_CTEST_REGEX="$TESTS_RE" OUT=$out/tests bash scripts/gpu_round.sh tests > /dev/null 2>&1
  tr -d '\0' < $out/tests/gpu_tests.log > $out/gpu_tests_fwd_sweep.log; rm -rf $out/tests
  grep -E "tests passed|tests failed|Failed|\*\*\*" $out/gpu_tests_fwd_sweep.log
fi
