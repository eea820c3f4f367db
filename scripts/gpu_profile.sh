#!/usr/bin/env bash
# Nsight Compute looks at variants on the GPU machine. Each argument is one job
#   "OP|DTYPE|SHAPE|MODE|VARIANT|KERNEL_REGEX|COUNT[|extra bench flags]"
# For each job: scantuned (benchmarks enabled) runs under ncu, which follows
# the worker child; the variant is benchmarked once at the shape and ncu keeps
# its report of the first COUNT launches whose names match KERNEL_REGEX (the
# verification launches). Clocks are left alone. Reports land in $OUT as
# ncu_<n>.txt, the bench output as bench_<n>.txt, a digest in ncu_digest.txt.
# SCANTUNE_NCU_EXTRA adds ncu flags (e.g. "--section InstructionStats --section SourceCounters").
# SCANTUNE_NCU_SASS=1 also keeps each job's report and exports its source page
# per SASS line (instructions executed, stall samples by reason) as
# ncu_<n>_sass.csv.gz (ncu -i REPORT --page source --csv --print-source sass).
#   device.run carry=[".bundle"] command="bash scripts/gpu_profile.sh 'linear_scan|bf16|4x2048x2048|fwd|lookbacksmem_v4_t128_c64_i256|linear_scan_fwd|1'"
set -uo pipefail
source "$(dirname "$0")/gpu_env.sh"
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
n=0
for job in "$@"; do
  n=$((n + 1))
  IFS='|' read -r op dtype shape mode variant regex count extra <<<"$job"
  sock=unix:///tmp/scantune-prof$n.sock
  rm -f /tmp/scantune-prof$n.db*
  report=()
  [ "${SCANTUNE_NCU_SASS:-0}" = 1 ] && report=(--section SourceCounters -o "/tmp/ncu_$n") && rm -f "/tmp/ncu_$n.ncu-rep"
  timeout 150 "$ncu" --target-processes all --clock-control none --kernel-name "regex:$regex" --launch-count "$count" \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats \
    --section LaunchStats --section SchedulerStats --section ComputeWorkloadAnalysis ${SCANTUNE_NCU_EXTRA:-} \
    "${report[@]}" \
    "$bin/server/scantuned" --listen $sock --db /tmp/scantune-prof$n.db --enable-benchmark --candidate-timeout-s 600 \
    >"$out/ncu_$n.txt" 2>&1 &
  daemon=$!
  cli="$bin/client/scantune --address $sock"
  for i in $(seq 1 100); do $cli devices >/dev/null 2>&1 && break; sleep 0.3; done
  # shellcheck disable=SC2086
  timeout 120 $cli bench --op "$op" --shapes "$shape" --dtype "$dtype" --mode "$mode" --variants "$variant" $extra \
    >"$out/bench_$n.txt" 2>&1
  # Stop the daemon (ncu's child), not ncu: ncu prints its report when its target exits.
  pkill -TERM -x scantuned; wait $daemon
  if [ -f "/tmp/ncu_$n.ncu-rep" ]; then
    "$ncu" -i "/tmp/ncu_$n.ncu-rep" --page details >>"$out/ncu_$n.txt" 2>&1
    "$ncu" -i "/tmp/ncu_$n.ncu-rep" --page source --csv --print-source sass 2>&1 | gzip >"$out/ncu_${n}_sass.csv.gz"
  fi
  {
    echo "=== job $n: $job"
    tail -3 "$out/bench_$n.txt"
    grep -E "\(.*\)x\(.*\), Context|Duration|Executed Instructions  |DRAM Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Theoretical Occupancy|Warp Cycles Per Issued|Issue Slots Busy|No Eligible|Active Warps Per|Eligible Warps|Registers Per|Dynamic Shared|Block Limit (Reg|Shared)|L2 Hit|L1/TEX Hit" "$out/ncu_$n.txt"
    grep -E "^ +(OPT|WRN|INF) +.*(stall|Stall|cycles|waiting)" -A3 "$out/ncu_$n.txt" | head -40
  } >>"$out/ncu_digest.txt"
done
cat "$out/ncu_digest.txt"
