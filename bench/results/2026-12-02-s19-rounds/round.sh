#!/usr/bin/env bash
# Session 19 rounds on the H200: the GPU suites of the gated operators, then samu bf16 fwd_bwd tuned over the
# selected variants at the four seed-001 shapes, first with the bundle of the working tree (.bundle), then with
# main's (.bundle_main: its build only, the libraries shared).
#   device.run carry=[".bundle", ".bundle_main"] command="bash bench/results/2026-12-02-s19-rounds/round.sh TAG"
# (without .bundle_main: the working tree's bundle only, its records tagged TAG)
set -u
out=${OUT:-/tmp/out}
V_A="chunked_v8_t256_c32_l64_y1,chunked_v8_t256_c32_l64_y1_b5,chunked_v8_t256_c64_l64_y1_b5_i32,chunked_v8_t512_c64_l64_y1_b5_i32,chunked_v8_t256_c128_l64_y1_b5_i32"
V_B="chunked_v8_t512_c64_l32_y1,chunked_v8_t512_c64_l32_y1_b5,chunked_v8_t512_c64_l64_y1_b5_i32"
tune() {  # $1 tag
  SCANTUNE_TUNE="samu:bf16:fwd_bwd" SCANTUNE_SHAPES="4x2048x2048 1x32768x1024 1x32768x2048" SCANTUNE_VARIANTS="$V_A" \
    OUT=$out/$1_a bash scripts/gpu_round.sh tune > /dev/null 2>&1
  SCANTUNE_TUNE="samu:bf16:fwd_bwd" SCANTUNE_SHAPES="1x8192x2560" SCANTUNE_VARIANTS="$V_B" \
    OUT=$out/$1_b bash scripts/gpu_round.sh tune > /dev/null 2>&1
  cat $out/$1_a/records_ok.txt $out/$1_b/records_ok.txt | grep samu | awk '{print $3, $5, $8, $9, $10}' | sort -k2,2 -k5n > $out/$1_records.txt
  rm -f $out/$1_?/scantune-gpu.db
}
tag=${1:-new}
SCANTUNE_CTEST_REGEX="Samu|HFromY|Gated" OUT=$out/tests bash scripts/gpu_round.sh tests > /dev/null 2>&1
grep -E "tests passed|tests failed|Failed|\*\*\*" $out/tests/gpu_tests.log
tune $tag
echo "== $tag"; cat $out/${tag}_records.txt
if [ -d .bundle_main ]; then
  mv .bundle/lib /tmp/lib_keep && rm -rf .bundle && mv .bundle_main .bundle && mv /tmp/lib_keep .bundle/lib
  tune main
  echo "== main"; cat $out/main_records.txt
fi
