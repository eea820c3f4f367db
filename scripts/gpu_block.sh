#!/usr/bin/env bash
# Seed 000's complete-block table on the GPU machine (see ../shared/DEVICE.md):
# starts scantuned from the carried bundle, tunes rglru and samu (bf16,
# fwd_bwd) at the four seed-000 scan shapes (B, L, rnn_width), then runs
# bench/block/block_bench.py (PyTorch, the machine's own) over the selections.
# SCANTUNE_RGLRU_VARIANTS / SCANTUNE_SAMU_VARIANTS="a,b" tune only those (each
# shape those of them that fit it); unset, every enumerated variant.
# Everything lands in $OUT/block.tar.gz (the device tool brings back at most
# 8 files): block.json (seed 000's schema), block_table.txt, block_bench.log,
# select.txt, tune_*.txt, records_ok.txt, scantuned.log.
#   device.run carry=[".bundle"] command="bash scripts/gpu_block.sh"
set -uo pipefail
source "$(dirname "$0")/gpu_env.sh"
res=$out/block && mkdir -p "$res"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.used --format=csv | tee "$res/gpu.txt"

start_daemon block "$res/scantuned.log"
$cli devices | tee "$res/devices.txt"

# The scan problem of each seed-000 case: (batch, length, rnn_width).
shapes="4x2048x2048 1x8192x2560 1x32768x1024 1x32768x2048"
status=0
for op in rglru samu; do
  variants=$([ $op = rglru ] && echo "${SCANTUNE_RGLRU_VARIANTS:-}" || echo "${SCANTUNE_SAMU_VARIANTS:-}")
  for shape in $shapes; do
    echo "== tune $op $shape bf16 fwd_bwd"
    $cli tune --op $op --shape $shape --dtype bf16 --mode fwd_bwd ${variants:+--variants "$variants" --skip-unfit} \
      2>"$res/tune_${op}_$shape.progress" | tee -a "$res/tune_$op.txt" || status=1
    $cli select --op $op --shape $shape --dtype bf16 --mode fwd_bwd >>"$res/select.txt" 2>&1 || status=1
  done
done

echo "== block bench"
PYTHONPATH=$bin/client/python python3 "$root/bench/block/block_bench.py" --address "$sock" \
  --out "$res/block.json" --seed "$root/tests/integration/data/seed_000.json" "$@" \
  2>"$res/block_bench.log" | tee "$res/block_table.txt"
rc=${PIPESTATUS[0]}
tail -5 "$res/block_bench.log"
$cli records --state OK --limit 2000 >"$res/records_ok.txt" 2>&1
kill $daemon 2>/dev/null; wait $daemon 2>/dev/null
tar -C "$out" -czf "$out/block.tar.gz" block && rm -rf "$res"
echo "block bench exit code $rc; tune/select status $status"
exit $rc
