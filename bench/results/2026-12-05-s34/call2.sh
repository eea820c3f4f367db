#!/usr/bin/env bash
# Session 34, call 2 (written without a GPU; run it after call 1 on the next H200): where samu's `_k1` kernels
# wait now. Nsight Compute on the rescan (samu_bwd_chunk_scan) and the held forward (samu_fwd_held) of the `_a1_k1`
# selections, inside fwd_bwd, with the source page per SASS line (stall samples by reason): the profiles of
# sessions 10-19 and 32 predate `_k1`. Read them with scripts/sass_rescan_path.py's common path beside them.
# $OUT/call2.tar.gz.
#   device.run carry=[".bundle"] command="bash bench/results/2026-12-05-s34/call2.sh"
source "$(dirname "$0")/../../../scripts/gpu_env.sh"
res=$out/call2 && mkdir -p "$res"
k1=chunked_v8_t256_c32_l64_y1_b4_i32_a1_k1
OUT=$res SCANTUNE_NCU_SASS=1 timeout 540 bash scripts/gpu_profile.sh \
  "samu|bf16|4x2048x2048|fwd_bwd|$k1|samu_bwd_chunk_scan|1" \
  "samu|bf16|4x2048x2048|fwd_bwd|$k1|samu_fwd_held|1" \
  "samu|bf16|1x8192x2560|fwd_bwd|chunked_v8_t512_c64_l64_y1_b4_i32_a1_k1|samu_bwd_chunk_scan|1" \
  >"$res/profile.log" 2>&1
cat "$res/ncu_digest.txt" 2>/dev/null | head -60
tar -C "$out" -czf "$out/call2.tar.gz" call2
