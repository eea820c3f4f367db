#!/usr/bin/env bash
# Session 38, one call on whatever card comes:
#  1. Does the samu chain reuse L2 between its kernels? Nsight Compute with --cache-control none (no flush
#     between kernels) and one pass of metrics (no replay, so each kernel sees the L2 its predecessor left):
#     DRAM bytes read / written, L2 hit rate and duration of each samu kernel of the fwd_bwd chain of the
#     selection at 4x2048x2048 and 1x8192x2560, where x (33.5 / 42 MB) fits the 50 MB L2. The first launches
#     are the verifier's, in chain order. Kernels are serialized (no PDL overlap): a diagnosis, not a timing.
#     Then bench/micro/l2_reuse.cu: the same question for plain streaming kernels.
#  2. On an H200 only: session 37's h200_checks.sh with the time left.
# $OUT/l2.tar.gz (+ checks.tar.gz, block.tar.gz).
#   bash scripts/make_bundle.sh
#   device.run carry=[".bundle"] command="bash bench/results/2026-12-06-s38/call1.sh"
source "$(dirname "$0")/../../../scripts/gpu_env.sh"
t0=$(date +%s)
res=$out/l2 && mkdir -p "$res"
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.max.sm,memory.total --format=csv | tee "$res/gpu.txt"
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
metrics=dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,gpu__time_duration.sum
n=0
for job in "4x2048x2048 chunked_v8_t256_c32_l64_y1_b4_i32_a1_k1" "1x8192x2560 chunked_v8_t512_c64_l64_y1_b4_i32_a1_k1"; do
  n=$((n + 1))
  read -r shape variant <<<"$job"
  sock=unix:///tmp/scantune-l2$n.sock
  rm -f /tmp/scantune-l2$n.db*
  timeout 200 "$ncu" --target-processes all --clock-control none --cache-control none \
    --kernel-name regex:samu_ --launch-count 24 --metrics $metrics --csv \
    "$bin/server/scantuned" --listen $sock --db /tmp/scantune-l2$n.db --enable-benchmark --candidate-timeout-s 600 \
    >"$res/ncu_$n.csv" 2>"$res/ncu_$n.log" &
  daemon=$!
  cli="$bin/client/scantune --address $sock"
  for _ in $(seq 1 100); do $cli devices >/dev/null 2>&1 && break; sleep 0.3; done
  timeout 150 $cli bench --op samu --shapes $shape --dtype bf16 --mode fwd_bwd --variants $variant >"$res/bench_$n.txt" 2>&1
  pkill -TERM -x scantuned; wait $daemon
  echo "== $shape $variant"
  grep -E '"(dram__bytes|lts__t_sector_hit|gpu__time)' "$res/ncu_$n.csv" |
    awk -F'","' '{k=$5; sub(/\(.*/, "", k); printf "%-3s %-28s %-28s %-10s %s\n", $1, substr(k, 1, 28), $(NF-2), $(NF-1), $NF}' |
    tr -d '"' | head -100 | tee "$res/digest_$n.txt"
done
# The same question without the scans: bench/micro/l2_reuse.cu (a buffer read by one kernel, then by the next).
nvcc -O3 -arch=sm_90 -o /tmp/l2_reuse "$root/bench/micro/l2_reuse.cu" && timeout 120 /tmp/l2_reuse | tee "$res/l2_reuse.txt"
tar -C "$out" -czf "$out/l2.tar.gz" l2
echo "l2 done at $(( $(date +%s) - t0 )) s"
h200_checks_with_time_left $(( t0 + ${CALL_GUARD:-560} ))
