#!/usr/bin/env bash
# Session 34, call 1 (written without a GPU; run it on the next H200): the GPU tests the last two sessions left
# unrun (samu and rglru `_k1`, Verifier with linear_scan's `_k1`, Worker, GpuDaemon, KernelLauncher), then samu bf16
# fwd_bwd tuned at the four seed shapes over the four `_k1` points and their unbaked twins. Session 34 changed
# the `_k1` `_a1` rescans only (samu_bwd_chunk_scan's issue path: bench/NOTES.md, session 34); the twins and
# `chunked_v8_t256_c32_l64_y1_k1` are the same SASS as in session 32, so they anchor the comparison in the call.
# $OUT/call1.tar.gz. The rglru / linear_scan `_k1` tuning is session 33's call 2 (`../2026-12-05-s33/call2.sh`, about
# 9 minutes; its GPU tests repeat part of this call's).
#   device.run carry=[".bundle"] command="bash bench/results/2026-12-05-s34/call1.sh"
source "$(dirname "$0")/../../../scripts/gpu_env.sh"
res=$out/call1 && mkdir -p "$res"
OUT=$res SCANTUNE_CTEST_REGEX='BakedShape|WorkerGpuTest|GpuDaemonTest|KernelLauncherGpuTest|VerifierGpuTest' \
  timeout 330 bash scripts/gpu_round.sh tests >"$res/round_tests.log" 2>&1
grep -E 'Test +#|tests passed|FAILED|Failure' "$res/gpu_tests.log" | head -30
pts=chunked_v8_t256_c32_l64_y1,chunked_v8_t256_c32_l64_y1_b4_i32_a1,chunked_v8_t512_c64_l64_y1_b4_i32_a1
pts=$pts,chunked_v8_t256_c128_l64_y1_b5_i32_a1
mkdir -p "$res/samu"
OUT=$res/samu SCANTUNE_TUNE=samu:bf16:fwd_bwd SCANTUNE_VARIANTS=$pts,$(echo $pts | sed 's/,/_k1,/g')_k1 \
  timeout 200 bash scripts/gpu_round.sh tune >"$res/samu/round.log" 2>&1
rm -f "$res/samu/scantune-gpu.db" "$res/samu/records.json"
grep -E "^ *[0-9]+ +samu " "$res/samu/records_ok.txt" | sort -k5,5 -k7,7 -k8,8n
cat "$res/samu/select.txt"
tar -C "$out" -czf "$out/call1.tar.gz" call1
