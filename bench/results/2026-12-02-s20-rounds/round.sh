#!/usr/bin/env bash
# Session 20 rounds on the H200: the GPU suites of samu (the enumerated points and the _k2 suite), then samu
# bf16 fwd_bwd tuned at the four seed-001 shapes over each shape's selection of session 19 and the _k2 points
# (the rescan's row over a 2-block cluster) beside them (scripts/gpu_samu_round.sh). The _k2 points need
# r1/rows_split_k2.diff applied; main refuses them as unknown knobs.
#   device.run carry=[".bundle"] command="bash bench/results/2026-12-02-s20-rounds/round.sh TAG"
K2="chunked_v8_t256_c48_l64_y1_b5_i32_k2,chunked_v8_t256_c64_l64_y1_b5_i32_k2,chunked_v8_t256_c32_l64_y1_b5_i32_k2"
export V_A="chunked_v8_t256_c32_l64_y1,chunked_v8_t256_c64_l64_y1_b5_i32,chunked_v8_t256_c128_l64_y1_b5_i32,chunked_v8_t256_c32_l64_y1_k2,$K2"
export V_B="chunked_v8_t512_c64_l64_y1_b5_i32,chunked_v8_t512_c48_l64_y1_b5_i32,$K2"
export TESTS_RE="${TESTS_RE:-SamuRowsSplit|EverySamu}"
exec bash scripts/gpu_samu_round.sh "${1:-new}"
