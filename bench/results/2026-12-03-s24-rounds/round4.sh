#!/usr/bin/env bash
# Session 24 round 4 on the H200: what each kernel of samu's selected fwd_bwd point costs inside its PDL chain.
# For each seed shape and each kernel, the tuner verifies the point with every kernel and then times every
# launch without that kernel (SCANTUNE_DIAG_SKIP_KERNEL, worker/timer.cc: an ablation, not a result); the
# difference to the run without a skip is the kernel's share of fwd_bwd.
#   device.run carry=[".bundle"] command="bash bench/results/2026-12-03-s24-rounds/round4.sh"
out=${OUT:-/tmp/out}
declare -A sel=([4x2048x2048]=chunked_v8_t256_c32_l64_y1 [1x8192x2560]=chunked_v8_t512_c64_l64_y1_b4_i32
                [1x32768x1024]=chunked_v8_t256_c64_l64_y1_b5_i32 [1x32768x2048]=chunked_v8_t256_c128_l64_y1_b5_i32)
for skip in none samu_fwd_control_fast samu_fwd_held samu_bwd_chunk_agg samu_chunk_carry samu_bwd_chunk_scan \
            samu_bwd_chunk_finalize; do
  for shape in 4x2048x2048 1x8192x2560 1x32768x1024 1x32768x2048; do
    d=$out/a_${skip}_$shape
    SCANTUNE_DIAG_SKIP_KERNEL=$([ $skip = none ] || echo $skip) SCANTUNE_TUNE="samu:bf16:fwd_bwd" \
      SCANTUNE_SHAPES="$shape" SCANTUNE_VARIANTS="${sel[$shape]}" OUT=$d bash scripts/gpu_round.sh tune > /dev/null 2>&1
    grep samu $d/records_ok.txt | awk -v s=$skip '{print s, $3, $5, $8, $9, $10}' >> $out/ablation_records.txt
    grep -c "SCANTUNE_DIAG_SKIP_KERNEL" $d/scantuned.log > /dev/null 2>&1
    rm -rf $d
  done
done
echo "== ablation (skipped kernel, variant, shape, fwd bwd fwd_bwd ms)"; cat $out/ablation_records.txt
