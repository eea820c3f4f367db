#!/usr/bin/env bash
# Per-SASS-line counts of one kernel on the GPU machine: instructions executed
# and warp stall samples per SASS instruction (Nsight Compute SourceCounters).
# Each argument is one job "OP|DTYPE|SHAPE|MODE|VARIANT|KERNEL_REGEX": the
# variant is benchmarked once under ncu, which keeps the first launch whose
# name matches; the report's source page lands in $OUT as sass_<n>.csv.gz
# (ncu -i REPORT --page source --csv --print-source sass) with the kernel's
# WarpStateStats in sass_<n>_stalls.txt.
#   device.run carry=[".bundle"] command="bash scripts/gpu_sass_counts.sh 'samu|bf16|4x2048x2048|fwd_bwd|chunked_v8_t256_c32_l64|samu_fwd_held'"
set -uo pipefail
source "$(dirname "$0")/gpu_env.sh"
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
n=0
for job in "$@"; do
  n=$((n + 1))
  IFS='|' read -r op dtype shape mode variant regex <<<"$job"
  sock=unix:///tmp/scantune-sass$n.sock
  rm -f /tmp/scantune-sass$n.db* /tmp/sass_$n.ncu-rep
  timeout 200 "$ncu" --target-processes all --clock-control none --kernel-name "regex:$regex" --launch-count 1 \
    --section SourceCounters --section WarpStateStats --section SpeedOfLight -o /tmp/sass_$n \
    "$bin/server/scantuned" --listen $sock --db /tmp/scantune-sass$n.db --enable-benchmark --candidate-timeout-s 600 \
    >"$out/sass_${n}_ncu.log" 2>&1 &
  daemon=$!
  cli="$bin/client/scantune --address $sock"
  for i in $(seq 1 100); do $cli devices >/dev/null 2>&1 && break; sleep 0.3; done
  timeout 150 $cli bench --op "$op" --shapes "$shape" --dtype "$dtype" --mode "$mode" --variants "$variant" \
    >"$out/sass_${n}_bench.txt" 2>&1
  pkill -TERM -x scantuned; wait $daemon
  "$ncu" -i /tmp/sass_$n.ncu-rep --page source --csv --print-source sass 2>&1 | gzip >"$out/sass_$n.csv.gz"
  "$ncu" -i /tmp/sass_$n.ncu-rep --page details 2>&1 >"$out/sass_${n}_stalls.txt"
  echo "=== job $n: $job: $(zcat "$out/sass_$n.csv.gz" | wc -l) SASS lines"
done
