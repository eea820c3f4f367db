#!/usr/bin/env bash
# Session 23 rounds on the H200: the gated GPU suites on the bundle's own build (the candidate), then samu bf16
# fwd_bwd tuned over each shape's selection with each set of binaries in .bundle/alt_TAG (server, worker, client
# copied over the bundle's build before the round): main (the control one block per 8 tokens), c3 (the control on
# 3 blocks per SM), c3split (c3 + the held forward's staging in two halves), c4split (4 blocks per SM + split).
#   device.run carry=[".bundle"] command="bash bench/results/2026-12-03-s23-rounds/round.sh TAG..."
export V_A="chunked_v8_t256_c32_l64_y1,chunked_v8_t256_c64_l64_y1_b5_i32,chunked_v8_t256_c128_l64_y1_b5_i32"
export V_B="chunked_v8_t512_c64_l64_y1_b5_i32"
bash scripts/gpu_samu_alts.sh "$@"
