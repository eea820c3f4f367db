#!/usr/bin/env bash
# Session 30 on the GPU machine: selective_scan's fixed-order backward (tscan `_f1`).
#   tests: the selective_scan GPU suites (every enumerated variant legal, the _f1 twins among
#          them; the long sequences) and DeterminismGpuTest's selective_scan case (same bits
#          three runs for every deterministic variant, _f1 in fwd_bwd and bwd now included);
#   tune:  the daemon tunes selective_scan fp32 fwd_bwd (N = 16, no options: seed 004's
#          problems) at seed 004's nine shapes over every enumerated variant, then prints
#          the ordinary and the deterministic selection of each and every OK record.
#   device.run carry=[".bundle"] command="bash bench/results/2026-12-04-s30-ssm-fixed/round.sh tests|tune"
set -uo pipefail
what=${1:-tests}
source scripts/gpu_env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.used --format=csv | tee "$out/gpu.txt"
if [ "$what" = tests ]; then
  ctest --test-dir "$bin" -L gpu -R 'SsmGpuTest|SelectiveScanDeterministic' --output-on-failure --timeout 400 \
    2>&1 | tee "$out/gpu_tests.log"
  exit 0
fi
sock=unix:///tmp/scantune-s30.sock
db=/tmp/scantune-s30.db
rm -f "$db" "$db"-wal "$db"-shm
"$bin/server/scantuned" --listen "$sock" --db "$db" --compile-threads 16 >"$out/scantuned.log" 2>&1 &
daemon=$!
cli="$bin/client/scantune --address $sock"
for i in $(seq 1 50); do $cli devices >/dev/null 2>&1 && break; sleep 0.2; done
for shape in ${SHAPES:-4x512x256 4x2048x256 4x8192x256 4x512x512 4x2048x512 4x8192x512 4x512x1024 4x2048x1024 4x8192x1024}; do
  echo "== tune $shape"
  $cli tune --op selective_scan --shape "$shape" --dtype fp32 --mode fwd_bwd 2>"$out/tune_$shape.progress" >>"$out/tune.txt"
  $cli select --op selective_scan --shape "$shape" --dtype fp32 --mode fwd_bwd | tee -a "$out/select.txt"
  $cli select --op selective_scan --shape "$shape" --dtype fp32 --mode fwd_bwd --deterministic 2>&1 |
    tee -a "$out/select_deterministic.txt"
done
$cli records --op selective_scan --state OK --limit 2000 > "$out/records_ok.txt"
$cli records --op selective_scan --limit 2000 | grep -v " OK " > "$out/records_not_ok.txt"
kill $daemon; wait $daemon
