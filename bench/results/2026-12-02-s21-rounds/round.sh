#!/usr/bin/env bash
# Session 21 rounds on the H200: the samu GPU suite, then samu bf16 fwd_bwd tuned at the four seed-001 shapes over
# each shape's selection of session 19 and its neighbours (scripts/gpu_samu_round.sh).
#   device.run carry=[".bundle"] command="bash bench/results/2026-12-02-s21-rounds/round.sh TAG"
export V_A="chunked_v8_t256_c32_l64_y1,chunked_v8_t256_c64_l64_y1_b5_i32,chunked_v8_t256_c128_l64_y1_b5_i32,chunked_v8_t256_c64_l64_y1"
export V_B="chunked_v8_t512_c64_l64_y1_b5_i32,chunked_v8_t512_c48_l64_y1_b5_i32,chunked_v8_t512_c64_l32_y1"
export TESTS_RE="${TESTS_RE:-EverySamu}"
exec bash scripts/gpu_samu_round.sh "${1:-new}"
