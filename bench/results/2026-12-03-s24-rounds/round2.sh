#!/usr/bin/env bash
# Session 24 round 2 on the H200: the held forward's look-back with a window of kWin tiles per round trip for
# the thread's channels (one distance: gated_scan.cuh LookBackPackedLean, kWin > 0; _b forwards only), built
# as SCANTUNE_LOOKBACK_WINDOW = 0 (main's per-channel walk, one tile per round trip) and 2, each in
# .bundle/alt_w{n} (server, worker, client). At _b5 (48 registers) the window spills 28-44 bytes, so the
# same forwards also run at _b4 (64 registers, no spill with kWin = 2).
#   device.run carry=[".bundle"] command="bash bench/results/2026-12-03-s24-rounds/round2.sh w0 w2"
export V_A="chunked_v8_t256_c32_l64_y1,chunked_v8_t256_c32_l64_y1_b4,chunked_v8_t256_c64_l64_y1_b5_i32,\
chunked_v8_t256_c64_l64_y1_b4_i32,chunked_v8_t256_c128_l64_y1_b5_i32,chunked_v8_t256_c128_l64_y1_b4_i32"
export V_B="chunked_v8_t512_c64_l64_y1_b5_i32,chunked_v8_t512_c64_l64_y1_b4_i32"
bash scripts/gpu_samu_alts.sh "$@"
