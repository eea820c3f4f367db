#!/usr/bin/env bash
# Session 24 round 6 on the H200: the per-kernel ablation (SCANTUNE_DIAG_SKIP_KERNEL, as round4.sh) of
# `chunked`'s own forward (rows agg that makes (r_t, i_t) and the chunk states, carry, columns rescan writing y
# and h) at the two small shapes, to price a columns forward after the control kernel.
#   device.run carry=[".bundle"] command="bash bench/results/2026-12-03-s24-rounds/round6.sh"
out=${OUT:-/tmp/out}
declare -A sel=([4x2048x2048]=chunked_v8_t256_c32 [1x8192x2560]=chunked_v8_t512_c64)
for skip in none samu_fwd_chunk_agg samu_fwd_chunk_scan; do
  for shape in 4x2048x2048 1x8192x2560; do
    d=$out/c_${skip}_$shape
    SCANTUNE_DIAG_SKIP_KERNEL=$([ $skip = none ] || echo $skip) SCANTUNE_TUNE="samu:bf16:fwd_bwd" \
      SCANTUNE_SHAPES="$shape" SCANTUNE_VARIANTS="${sel[$shape]}" OUT=$d bash scripts/gpu_round.sh tune > /dev/null 2>&1
    grep samu $d/records_ok.txt | awk -v s=$skip '{print s, $3, $5, $8, $9, $10}' >> $out/ablation_chunked_records.txt
    rm -rf $d
  done
done
echo "== ablation of chunked's forward (skipped kernel, variant, shape, fwd bwd fwd_bwd ms)"
cat $out/ablation_chunked_records.txt
