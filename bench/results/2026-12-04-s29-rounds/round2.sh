#!/usr/bin/env bash
# Session 29 round 2 on the H200: x1, samu_chunk_carry letting its dependent (the backward rescan) launch before
# its own grid wait, against main, in one call. .bundle/alt_main (main) and .bundle/alt_new (x1) hold each
# build's server, worker and client (gzipped); the bundle's own build is x1's.
# 1. The gated suites named by TESTS_RE on x1 (the bundle's build).
# 2. The selected points at the seed shapes, samu bf16 fwd_bwd, main / x1 / main / x1 (scripts/gpu_samu_round.sh).
# 3. Kernels alone and in pairs inside the backward's chain with each build (SCANTUNE_DIAG_SKIP_KERNEL="!a|b",
#    an ablation), at 4x2048x2048 and 1x8192x2560.
#   device.run carry=[".bundle"] command="bash bench/results/2026-12-04-s29-rounds/round2.sh"
out=${OUT:-/tmp/out}
mkdir -p "$out"
source scripts/gpu_env.sh
ctest --test-dir "$bin" -L gpu -R "${TESTS_RE:-EverySamu|SamuHFromY|SamuLongTile|SamuChunkedWide|SamuDeterminism}" \
  --output-on-failure --timeout 300 -j3 > "$out/gpu_tests_x1.log" 2>&1
grep -E "tests passed|tests failed|Failed|\*\*\*" "$out/gpu_tests_x1.log"
export V_A="chunked_v8_t256_c32_l64_y1,chunked_v8_t512_c64_l64_y1_b4_i32_a1,chunked_v8_t256_c128_l64_y1_b5_i32_a1"
export V_B="chunked_v8_t512_c64_l64_y1_b4_i32_a1"
n=0
for tag in main new main new; do
  n=$((n + 1))
  ALT_ONLY=1 bash scripts/gpu_samu_alts.sh $tag
  SKIP_TESTS=1 bash scripts/gpu_samu_round.sh ${tag}$n > /dev/null 2>&1
  rm -rf $out/${tag}${n}_a $out/${tag}${n}_b
  echo "== ${tag}$n"; cat $out/${tag}${n}_records.txt
done
declare -A sel=([4x2048x2048]=chunked_v8_t256_c32_l64_y1 [1x8192x2560]=chunked_v8_t512_c64_l64_y1_b4_i32_a1)
for tag in main new; do
  ALT_ONLY=1 bash scripts/gpu_samu_alts.sh $tag
  for only in samu_bwd_chunk_scan "samu_chunk_carry|samu_bwd_chunk_scan" "samu_bwd_chunk_agg|samu_bwd_chunk_scan" \
              "samu_bwd_chunk_agg|samu_chunk_carry|samu_bwd_chunk_scan"; do
    for shape in 4x2048x2048 1x8192x2560; do
      d=/tmp/a_$shape
      SCANTUNE_DIAG_SKIP_KERNEL="!$only" SCANTUNE_TUNE="samu:bf16:fwd_bwd" SCANTUNE_SHAPES="$shape" \
        SCANTUNE_VARIANTS="${sel[$shape]}" OUT=$d bash scripts/gpu_round.sh tune > /dev/null 2>&1
      grep samu $d/records_ok.txt | awk -v s="$tag $only" '{print s, $3, $5, $8, $9, $10}' >> "$out/only_records.txt"
      rm -rf $d
    done
  done
done
echo "== kernels alone (build, kernels, variant, shape, fwd bwd fwd_bwd ms)"; cat "$out/only_records.txt"
