#!/usr/bin/env bash
# Session 39, call 4 (any card): rows_cluster_fwd.cu, the shared-memory tile (tb16, clusters of 1, 2, 4); the flag release with
# every thread's fence (as in call 3) and with thread 0's cumulative st.release alone, and,
# per point, the same kernel with no carry at all (each cluster from h = 0: wrong results, timing only), to
# tell the carry's cost from the blocks' own. $OUT/call4/.
#   device.run command="bash bench/results/2026-12-06-s39/call4.sh"
res=${OUT:-/tmp}/call4 && mkdir -p "$res"
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.max.sm,memory.total --format=csv | tee "$res/gpu.txt"
nvcc -O3 -std=c++17 -arch=sm_90 -Xptxas -v -o /tmp/rows_cluster_fwd bench/micro/rows_cluster_fwd.cu \
  >"$res/rows_cluster_fwd_build.txt" 2>&1 && timeout 200 /tmp/rows_cluster_fwd 2>&1 | tee "$res/rows_cluster_fwd.txt"
