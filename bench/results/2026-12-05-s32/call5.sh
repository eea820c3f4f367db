#!/usr/bin/env bash
# Session 32's last GPU try (~3 minutes of device time left): only the _k1 timing, samu bf16 fwd_bwd at the four
# seed shapes over the four _k1 points and their twins. $OUT/call5.tar.gz.
#   device.run carry=[".bundle"] command="bash bench/results/2026-12-05-s32/call5.sh"
source "$(dirname "$0")/../../../scripts/gpu_env.sh"
res=$out/call5 && mkdir -p "$res"
twins=chunked_v8_t256_c32_l64_y1,chunked_v8_t256_c32_l64_y1_b4_i32_a1,chunked_v8_t512_c64_l64_y1_b4_i32_a1,chunked_v8_t256_c128_l64_y1_b5_i32_a1
baked=$(echo $twins | sed 's/,/_k1,/g')_k1
OUT=$res SCANTUNE_TUNE=samu:bf16:fwd_bwd SCANTUNE_VARIANTS=$twins,$baked timeout 110 bash scripts/gpu_round.sh tune \
  >"$res/round.log" 2>&1
grep samu "$res/records_ok.txt" | sort -k5,5 -k10,10n
tar -C "$out" -czf "$out/call5.tar.gz" call5
