#!/usr/bin/env bash
# Session 38, call 3 (any card): bench/micro/carry_resolver.cu (how many tiles a us a resolver warp composes, the
# rate a single-pass rows forward would need), then on an H200 only session 37's h200_checks.sh. $OUT/call3/.
#   bash scripts/make_bundle.sh
#   device.run carry=[".bundle"] command="bash bench/results/2026-12-06-s38/call3.sh"
source "$(dirname "$0")/../../../scripts/gpu_env.sh"
t0=$(date +%s)
res=$out/call3 && mkdir -p "$res"
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.max.sm,memory.total --format=csv | tee "$res/gpu.txt"
nvcc -O3 -arch=sm_90 -o /tmp/carry_resolver "$root/bench/micro/carry_resolver.cu" &&
  timeout 120 /tmp/carry_resolver | tee "$res/carry_resolver.txt"
h200_checks_with_time_left $(( t0 + ${CALL_GUARD:-560} ))
