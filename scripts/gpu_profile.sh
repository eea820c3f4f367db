#!/usr/bin/env bash
# Nsight Compute look at one variant on the GPU machine: starts scantuned with
# benchmarks enabled under ncu (following the worker child), benchmarks the
# variant once at one shape, and keeps ncu's report of its first fwd and bwd
# launches (the verification launches). Clocks are left alone.
#   device.run carry=[".bundle"] command="bash scripts/gpu_profile.sh VARIANT SHAPE"
set -uo pipefail
variant=${1:-lookbacksmem_v4_t256_c64_i256}
shape=${2:-1x32768x2048}
source "$(dirname "$0")/gpu_env.sh"
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
sock=unix:///tmp/scantune-prof.sock
rm -f /tmp/scantune-prof.db*
"$ncu" --target-processes all --clock-control none --kernel-name regex:linear_scan_ --launch-count 2 \
  --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats \
  --section LaunchStats --section SchedulerStats \
  "$bin/server/scantuned" --listen $sock --db /tmp/scantune-prof.db --enable-benchmark --candidate-timeout-s 600 \
  >"$out/ncu_$variant.txt" 2>&1 &
daemon=$!
cli="$bin/client/scantune --address $sock"
for i in $(seq 1 100); do $cli devices >/dev/null 2>&1 && break; sleep 0.3; done
$cli bench --op linear_scan --shapes "$shape" --dtype bf16 --mode fwd_bwd --variants "$variant" | tee "$out/bench_$variant.txt"
# Stop the daemon (ncu's child), not ncu: ncu prints its report when its target exits.
pkill -TERM -x scantuned; wait $daemon
grep -E "linear_scan_|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Theoretical Occupancy|Warp Cycles Per Issued|Block Limit|Stall|Registers|Shared Memory Config|Dynamic Shared" "$out/ncu_$variant.txt" | head -80
