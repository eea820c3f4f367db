#!/usr/bin/env bash
# Session 29's final call on the H200.
# 1. The GPU suites of this session's code: both launchers (KernelLauncherGpu, PythonLaunchGpu), the mixer bench's
#    (MixerGpu), and the worker's and the daemon's (WorkerGpu, GpuDaemon), whose launches now go through
#    PlannedKernel::Launch(driver, stream).
# 2. Seed 001's mixer table with the mixer bench as it now runs its backends (client/kernel_launcher.h: the
#    worker's workspace contract): rglru and samu tuned over session 28's selections only (one variant per
#    problem, so that the call fits the device time left), then scripts/gpu_mixer.sh --no-tune over them.
#   device.run carry=[".bundle"] command="bash bench/results/2026-12-04-s29-final/round3.sh"
out=${OUT:-/tmp/out}
mkdir -p "$out"
source scripts/gpu_env.sh
ctest --test-dir "$bin" -L gpu -R "KernelLauncherGpu|PythonLaunchGpu|MixerGpu|WorkerGpu|GpuDaemon" -j3 \
  --output-on-failure --timeout 300 > "$out/gpu_tests.log" 2>&1
grep -E "tests passed|tests failed|Passed|Failed|\*\*\*" "$out/gpu_tests.log"
db=/tmp/scantune-mixer.db
rm -f $db $db-wal $db-shm
sock=unix:///tmp/scantune-sel.sock
"$bin/server/scantuned" --listen $sock --db $db --compile-threads 16 > "$out/tune_scantuned.log" 2>&1 &
daemon=$!
cli="$bin/client/scantune --address $sock"
for i in $(seq 1 50); do $cli devices > /dev/null 2>&1 && break; sleep 0.2; done
tune() { $cli tune --op $1 --shape $2 --dtype bf16 --mode fwd_bwd --variants $3 2>/dev/null | tail -1 >> "$out/tune.txt"; }
tune rglru 4x2048x2048 lookback_v2_t256_s8_i16_o3
tune rglru 1x8192x2560 lookback_v2_t256_s8_i16_o3
tune rglru 1x32768x1024 lookback_v2_t256_s16_i16_o3
tune rglru 1x32768x2048 lookback_v2_t256_s8_i16_o3
tune samu 4x2048x2048 chunked_v8_t256_c32_l64_y1
tune samu 1x8192x2560 chunked_v8_t512_c64_l64_y1_b4_i32_a1
tune samu 1x32768x1024 chunked_v8_t512_c64_l64_y1_b4_i32_a1
tune samu 1x32768x2048 chunked_v8_t256_c128_l64_y1_b5_i32_a1
$cli records --state OK --limit 100 > "$out/tune_records_ok.txt"
kill $daemon; wait $daemon
SCANTUNE_DB=$db OUT=$out/mixer timeout 330 bash scripts/gpu_mixer.sh --no-tune > "$out/mixer_stdout.txt" 2>&1
echo "mixer exit $?"
cp $out/mixer/mixer.json $out/mixer/mixer_table.txt $out/ 2>/dev/null
tar czf $out/mixer_all.tgz -C $out mixer && rm -rf $out/mixer
tail -32 $out/mixer_table.txt
