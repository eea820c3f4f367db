#!/usr/bin/env bash
# Session 33, call 2: `_k1` for rglru's lookback and linear_scan's lookbacksmem. The GPU tests for them and the
# ones session 32 and call 1 left unrun (VerifierGpuTest now also runs linear_scan's _k1 per problem; Worker,
# GpuDaemon, KernelLauncher), then the tuner over the _k1 points and their twins, bf16, at the four seed shapes:
# rglru fwd_bwd, linear_scan fwd_bwd and fwd. $OUT/call2.tar.gz.
#   device.run carry=[".bundle"] command="bash bench/results/2026-12-05-s33/call2.sh"
source "$(dirname "$0")/../../../scripts/gpu_env.sh"
res=$out/call2 && mkdir -p "$res"
OUT=$res SCANTUNE_CTEST_REGEX=${CALL2_TESTS:-'RgLruBakedShape|WorkerGpuTest|GpuDaemonTest|KernelLauncherGpuTest|VerifierGpuTest'} \
  timeout 290 bash scripts/gpu_round.sh tests >"$res/round_tests.log" 2>&1
grep -E 'Test +#|tests passed|FAILED|Failure' "$res/gpu_tests.log" | head -30
rg=lookback_v2_t256_s8_i16_o3,lookback_v2_t256_s16_i16_o3
ls=lookbacksmem_v4_t256_c64_i256_o3,lookbacksmem_v4_t128_c64_i256_o3,lookbacksmem_v4_t128_c64_i256_o5
mkdir -p "$res/rglru" "$res/linear_scan"
OUT=$res/rglru SCANTUNE_TUNE=rglru:bf16:fwd_bwd SCANTUNE_VARIANTS=$rg,$(echo $rg | sed 's/,/_k1,/g')_k1 \
  timeout 110 bash scripts/gpu_round.sh tune >"$res/rglru/round.log" 2>&1
OUT=$res/linear_scan SCANTUNE_TUNE="linear_scan:bf16:fwd_bwd linear_scan:bf16:fwd" \
  SCANTUNE_VARIANTS=$ls,$(echo $ls | sed 's/,/_k1,/g')_k1 \
  timeout 150 bash scripts/gpu_round.sh tune >"$res/linear_scan/round.log" 2>&1
for op in rglru linear_scan; do
  rm -f "$res/$op/scantune-gpu.db" "$res/$op/records.json"
  grep -E "^ *[0-9]+ +$op " "$res/$op/records_ok.txt" | sort -k5,5 -k7,7 -k8,8n
done
tar -C "$out" -czf "$out/call2.tar.gz" call2
