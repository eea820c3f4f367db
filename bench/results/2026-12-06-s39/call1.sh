#!/usr/bin/env bash
# Session 39, call 1 (any card; the baseline in the same call):
#  1. bench/micro/rows_cluster_fwd.cu: samu's forward in one kernel, no control pass (rows blocks, clusters along
#     time, a look-back between clusters), checked against float64 and timed beside a bf16 copy;
#  2. the baseline on the same card: the service's samu selections, bf16 fwd_bwd (the records split fwd / bwd);
#  3. bench/micro/carry_resolver.cu (session 38's, never run);
#  4. on an H200 only, with the time left: session 37's h200_checks.sh.
# $OUT/call1.tar.gz (+ checks.tar.gz, block.tar.gz).
#   bash scripts/make_bundle.sh
#   device.run carry=[".bundle"] command="bash bench/results/2026-12-06-s39/call1.sh"
source "$(dirname "$0")/../../../scripts/gpu_env.sh"
t0=$(date +%s)
guard=${CALL_GUARD:-560}
res=$out/call1 && mkdir -p "$res"
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.max.sm,memory.total --format=csv | tee "$res/gpu.txt"
nvcc -O3 -std=c++17 -arch=sm_90 -Xptxas -v -o /tmp/rows_cluster_fwd "$root/bench/micro/rows_cluster_fwd.cu" \
  >"$res/rows_cluster_fwd_build.txt" 2>&1 && timeout 150 /tmp/rows_cluster_fwd 2>&1 | tee "$res/rows_cluster_fwd.txt"
echo "rows_cluster_fwd done at $(( $(date +%s) - t0 )) s"
tar -C "$out" -czf "$out/call1.tar.gz" call1
start_daemon s39 "$res/scantuned.log"
tune_samu_selections "$res" "" $(( t0 + guard - 200 )) 120
kill $daemon; wait $daemon 2>/dev/null
echo "baseline done at $(( $(date +%s) - t0 )) s"
tar -C "$out" -czf "$out/call1.tar.gz" call1
if [ $(( $(date +%s) - t0 )) -lt $(( guard - 150 )) ]; then
  nvcc -O3 -arch=sm_90 -o /tmp/carry_resolver "$root/bench/micro/carry_resolver.cu" &&
    timeout 100 /tmp/carry_resolver 2>&1 | tee "$res/carry_resolver.txt"
fi
tar -C "$out" -czf "$out/call1.tar.gz" call1
h200_checks_with_time_left $(( t0 + guard )) 150
