#!/usr/bin/env bash
# Session 40, call 2: bench/micro/stream_ceiling.cu with its part 2 (samu's fwd_bwd passes as elementwise passes,
# no scan), then on an H200 with time left session 37's h200_checks.sh. $OUT: gpu.txt, stream_ceiling.txt, checks/.
#   bash scripts/make_bundle.sh
#   device.run carry=[".bundle"] command="bash bench/results/2026-12-06-s40/call2.sh"
source "$(dirname "$0")/../../../scripts/gpu_env.sh"
start=$(date +%s)
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.max.sm,memory.total --format=csv | tee "$out/gpu.txt"
nvcc -O3 -arch=sm_90 -o /tmp/stream_ceiling bench/micro/stream_ceiling.cu && /tmp/stream_ceiling | tee "$out/stream_ceiling.txt"
h200_checks_with_time_left $(( start + 590 )) 200
ls -la "$out"
