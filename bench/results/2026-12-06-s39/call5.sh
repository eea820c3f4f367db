#!/usr/bin/env bash
# Session 39, call 5 (any card): the final rows_cluster_fwd.cu (shared helpers: ptx.h, RowControls), every form's best point;
# each with every thread's fence, with thread 0's cumulative st.release alone, and,
# per point, the same kernel with no carry at all (each cluster from h = 0: wrong results, timing only), to
# tell the carry's cost from the blocks' own. $OUT/call5/.
#   device.run command="bash bench/results/2026-12-06-s39/call5.sh"
res=${OUT:-/tmp}/call5 && mkdir -p "$res"
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.max.sm,memory.total --format=csv | tee "$res/gpu.txt"
nvcc -O3 -std=c++17 -arch=sm_90 -Xptxas -v -o /tmp/rows_cluster_fwd bench/micro/rows_cluster_fwd.cu \
  >"$res/rows_cluster_fwd_build.txt" 2>&1 && timeout 200 /tmp/rows_cluster_fwd 2>&1 | tee "$res/rows_cluster_fwd.txt"
