#!/usr/bin/env bash
# Session 40, call 1: can any kernel move linear_scan's forward bytes fast enough for issue 3's "1.5x faster than
# the public forward" at 1x32768x2048 (97.3 us)? bench/micro/stream_ceiling.cu (the cudaMemcpy ceiling, a copy
# kernel, h = a * x elementwise in 13 forms), then the service's linear_scan bf16 fwd on the same card (its
# forward winners and their _k1 twins, one tuning job a seed shape). On an H200 with time left, session 37's
# h200_checks.sh after them. Results in $OUT: stream_ceiling.txt, linear_fwd/ (records), checks/.
#   bash scripts/make_bundle.sh
#   device.run carry=[".bundle"] command="bash bench/results/2026-12-06-s40/call1.sh"
source "$(dirname "$0")/../../../scripts/gpu_env.sh"
start=$(date +%s)
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.max.sm,memory.total --format=csv | tee "$out/gpu.txt"
nvcc -O3 -arch=sm_90 -o /tmp/stream_ceiling bench/micro/stream_ceiling.cu && /tmp/stream_ceiling | tee "$out/stream_ceiling.txt"
res=$out/linear_fwd && mkdir -p "$res"
start_daemon s40 "$res/daemon.log" || exit 1
variants=lookbacksmem_v4_t128_c64_i256_o5,lookbacksmem_v4_t128_c64_i256_o7,lookbacksmem_v4_t256_c64_i256_o3
variants=$variants,lookbacksmem_v4_t128_c64_i256_o5_k1,lookbacksmem_v4_t128_c64_i256_o3_k1,lookbacksmem_v4_t256_c64_i256_o3_k1
for shape in 4x2048x2048 1x8192x2560 1x32768x1024 1x32768x2048; do
  echo "== tune linear_scan fwd $shape"
  timeout 120 $cli tune --op linear_scan --shape $shape --dtype bf16 --mode fwd --variants $variants --skip-unfit \
    --force 2>"$res/tune_$shape.progress" | tail -1
done
$cli records --op linear_scan --limit 100 | tee "$res/records.txt"
kill $daemon
h200_checks_with_time_left $(( start + 590 )) 200
ls -la "$out"
