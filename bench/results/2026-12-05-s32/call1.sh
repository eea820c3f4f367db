#!/usr/bin/env bash
# Session 32's first GPU call:
#   1. Nsight Compute on samu's held forward at 4x2048x2048 (session 29's selection), per-SASS source page;
#   2. session 30's selective_scan round: the GPU tests (`_f1`, ServedScan), then the daemon tuning seed 004's
#      nine shapes (ordinary and deterministic selections).
#   device.run carry=[".bundle"] command="bash bench/results/2026-12-05-s32/call1.sh"
here=$(dirname "$0")
SCANTUNE_NCU_SASS=1 timeout 150 bash scripts/gpu_profile.sh \
  'samu|bf16|4x2048x2048|fwd|chunked_v8_t256_c32_l64_y1|samu_fwd_held|1' >/dev/null 2>&1
for f in ncu_1.txt ncu_1_sass.csv.gz ncu_digest.txt bench_1.txt; do [ -f "$OUT/$f" ] && mv "$OUT/$f" "$OUT/held_$f"; done
bash "$here/../2026-12-04-s30-ssm-fixed/round.sh" tests
timeout 330 bash "$here/../2026-12-04-s30-ssm-fixed/round.sh" tune
