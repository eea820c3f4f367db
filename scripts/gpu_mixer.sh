#!/usr/bin/env bash
# Seed 001's mixer table on the GPU machine (see ../shared/DEVICE.md): starts
# scantuned from the carried bundle, tunes rglru and samu (bf16, fwd_bwd) at
# the four seed-001 shapes through the CLI, then runs scantune-mixer-bench
# over the selections. Everything lands under $OUT:
#   mixer.json (seed 001's schema), mixer_table.txt, tune_*.txt, select.txt,
#   devices.txt, scantuned.log, mixer_bench.log
#   device.run carry=[".bundle"] command="bash scripts/gpu_mixer.sh [--no-tune] [extra bench flags]"
# --no-tune skips tuning (the database then needs selections already, e.g. a
# previous round's database passed as SCANTUNE_DB).
set -uo pipefail
tune=1
if [ "${1:-}" = --no-tune ]; then tune=0; shift; fi
source "$(dirname "$0")/gpu_env.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.used --format=csv | tee "$out/gpu.txt"

sock=unix:///tmp/scantune-mixer.sock
db=${SCANTUNE_DB:-/tmp/scantune-mixer.db}
if [ $tune = 1 ] && [ -z "${SCANTUNE_DB:-}" ]; then rm -f "$db" "$db"-wal "$db"-shm; fi
"$bin/server/scantuned" --listen "$sock" --db "$db" --compile-threads 16 >"$out/scantuned.log" 2>&1 &
daemon=$!
trap 'kill $daemon 2>/dev/null; wait $daemon 2>/dev/null' EXIT
cli="$bin/client/scantune --address $sock"
for i in $(seq 1 50); do $cli devices >/dev/null 2>&1 && break; sleep 0.2; done
$cli devices | tee "$out/devices.txt"

shapes="4x2048x2048 1x8192x2560 1x32768x1024 1x32768x2048"
status=0
if [ $tune = 1 ]; then
  for op in rglru samu; do
    for shape in $shapes; do
      echo "== tune $op $shape bf16 fwd_bwd"
      $cli tune --op $op --shape $shape --dtype bf16 --mode fwd_bwd 2>"$out/tune_${op}_$shape.progress" \
        | tee -a "$out/tune_$op.txt" || status=1
    done
  done
fi
for op in rglru samu; do
  for shape in $shapes; do
    $cli select --op $op --shape $shape --dtype bf16 --mode fwd_bwd | tee -a "$out/select.txt" || status=1
    $cli select --op $op --shape $shape --dtype bf16 --mode fwd_bwd --deterministic \
      >>"$out/select_deterministic.txt" 2>&1
  done
done

echo "== mixer bench"
seed="$root/tests/integration/data/seed_001.json"
"$bin/bench/mixer/scantune-mixer-bench" --socket "$sock" --shapes "$(echo $shapes | tr ' ' ,)" \
  --out "$out/mixer.json" --seed-file "$seed" "$@" 2>"$out/mixer_bench.log" | tee "$out/mixer_table.txt"
rc=${PIPESTATUS[0]}
tail -5 "$out/mixer_bench.log"
$cli records --state OK --limit 2000 >"$out/records_ok.txt" 2>&1
# The daemon stops first: its last writes sit in the WAL until it closes the database.
kill $daemon 2>/dev/null; wait $daemon 2>/dev/null
cp "$db" "$out/scantune-mixer.db" 2>/dev/null
echo "mixer bench exit code $rc (2: the RG-LRU GEMM check failed); tune/select status $status"
exit $rc
