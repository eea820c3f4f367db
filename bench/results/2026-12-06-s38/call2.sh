#!/usr/bin/env bash
# Session 38, call 2 (any card; the baseline in the same call):
#  1. bench/micro/l2_reuse.cu: does a kernel find in L2 the buffer the kernel before it read, with and without
#     evict_last / evict_first hints (and the persisting set-aside)?
#  2. samu `_e1` (L2 eviction priorities on the reads a later kernel repeats) against its `_k1` twin: bf16 fwd_bwd
#     at each seed shape, one tuning job per shape (the tuner's counterbalanced rounds), the session-36 selection
#     and its `_e1`;
#  3. ncu DRAM bytes per kernel of the `_e1` chain at 4x2048x2048 (no cache flush, one pass; call1's method);
#  4. `_e1`'s GPU legality suite (GatedGpuTest.SamuL2HintVariantsAreLegal);
#  5. on an H200 only, with the time left: session 37's h200_checks.sh.
# $OUT/call2.tar.gz (+ checks.tar.gz, block.tar.gz).
#   bash scripts/make_bundle.sh
#   device.run carry=[".bundle"] command="bash bench/results/2026-12-06-s38/call2.sh"
source "$(dirname "$0")/../../../scripts/gpu_env.sh"
t0=$(date +%s)
guard=${CALL_GUARD:-560}
res=$out/call2 && mkdir -p "$res"
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.max.sm,memory.total --format=csv | tee "$res/gpu.txt"
nvcc -O3 -arch=sm_90 -o /tmp/l2_reuse "$root/bench/micro/l2_reuse.cu" && timeout 120 /tmp/l2_reuse >"$res/l2_reuse.txt" 2>&1
head -40 "$res/l2_reuse.txt"
start_daemon s38 "$res/scantuned.log"
tune_samu_selections "$res" _e1
kill $daemon; wait $daemon 2>/dev/null
echo "tunes done at $(( $(date +%s) - t0 )) s"
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
sock=unix:///tmp/scantune-l2e.sock
rm -f /tmp/scantune-l2e.db*
timeout 120 "$ncu" --target-processes all --clock-control none --cache-control none --kernel-name regex:samu_ \
  --launch-count 12 --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,gpu__time_duration.sum \
  --csv "$bin/server/scantuned" --listen $sock --db /tmp/scantune-l2e.db --enable-benchmark --candidate-timeout-s 600 \
  >"$res/ncu_e1.csv" 2>"$res/ncu_e1.log" &
nd=$!
c2="$bin/client/scantune --address $sock"
for _ in $(seq 1 100); do $c2 devices >/dev/null 2>&1 && break; sleep 0.3; done
timeout 90 $c2 bench --op samu --shapes 4x2048x2048 --dtype bf16 --mode fwd_bwd \
  --variants chunked_v8_t256_c32_l64_y1_b4_i32_a1_k1_e1 >"$res/ncu_e1_bench.txt" 2>&1
pkill -TERM -x scantuned; wait $nd
grep -E '"(dram__bytes|lts__t_sector_hit|gpu__time)' "$res/ncu_e1.csv" |
  awk -F'","' '{k=$5; sub(/\(.*/, "", k); printf "%-3s %-28s %-28s %-10s %s\n", $1, substr(k, 1, 28), $(NF-2), $(NF-1), $NF}' |
  tr -d '"' | tee "$res/ncu_e1_digest.txt" | head -48
echo "ncu done at $(( $(date +%s) - t0 )) s"
left=$(( guard - ($(date +%s) - t0) ))
OUT=$res SCANTUNE_CTEST_REGEX='SamuL2HintVariantsAreLegal' timeout $(( left > 200 ? 180 : left - 20 )) \
  bash scripts/gpu_round.sh tests >"$res/round_tests.log" 2>&1
grep -E 'Test +#|tests passed|FAILED|Failure|Timeout' "$res/gpu_tests.log" 2>/dev/null | head
echo "tests done at $(( $(date +%s) - t0 )) s"
tar -C "$out" -czf "$out/call2.tar.gz" call2
h200_checks_with_time_left $(( t0 + guard )) 150
