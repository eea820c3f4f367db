#!/usr/bin/env bash
# Session 35, call 1 (H200): what sessions 33-34 could only measure on an H100.
#  1. samu bf16 fwd_bwd tuned at the four seed shapes over the four `_k1` points and their unbaked twins
#     (session 34's `_a1_k1` rescan), and rglru over its two `_k1` points and their twins, in one database;
#  2. seed 001's mixer table over those selections (scripts/gpu_mixer.sh --no-tune);
#  3. with the time left (the call stops by ~250 s: device time is short), GatedGpuTest's two BakedShape suites
#     on the H200 (they passed on an H100 in session 34; VerifierGpuTest passed on one this session).
# CALL1_RGLRU narrows rglru's variants, CALL1_GUARD (s, default 250) when the tests stop.
# $OUT/call1.tar.gz (mixer.json and mixer_table.txt also beside it).
#   device.run carry=[".bundle"] command="bash bench/results/2026-12-05-s35/call1.sh"
source "$(dirname "$0")/../../../scripts/gpu_env.sh"
t0=$(date +%s)
res=$out/call1 && mkdir -p "$res"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.used --format=csv | tee "$res/gpu.txt"
start_daemon s35 "$res/scantuned.log"
$cli devices | tee "$res/devices.txt"
samu=chunked_v8_t256_c32_l64_y1,chunked_v8_t256_c32_l64_y1_b4_i32_a1,chunked_v8_t512_c64_l64_y1_b4_i32_a1
samu=$samu,chunked_v8_t256_c128_l64_y1_b5_i32_a1
samu=$samu,$(echo $samu | sed 's/,/_k1,/g')_k1
rglru=${CALL1_RGLRU:-lookback_v2_t256_s8_i16_o3,lookback_v2_t256_s16_i16_o3,lookback_v2_t256_s8_i16_o3_k1,lookback_v2_t256_s16_i16_o3_k1}
for shape in 4x2048x2048 1x8192x2560 1x32768x1024 1x32768x2048; do
  for op in samu rglru; do
    vs=$([ $op = samu ] && echo $samu || echo $rglru)
    echo "== tune $op $shape"
    $cli tune --op $op --shape $shape --dtype bf16 --mode fwd_bwd --variants "$vs" --skip-unfit \
      2>"$res/tune_${op}_$shape.progress" | tail -2
    $cli select --op $op --shape $shape --dtype bf16 --mode fwd_bwd >>"$res/select.txt" 2>&1
  done
done
$cli records --state OK --limit 1000 >"$res/records_ok.txt"
kill $daemon; wait $daemon
echo "tuning: $(( $(date +%s) - t0 )) s"
grep -E "^ *[0-9]+ +(samu|rglru) " "$res/records_ok.txt" | sort -k2,2 -k5,5 -k3,3 | awk '{print $2, $3, $5, $8, $9, $10}'
grep -E 'problem|variant|median|runner|margin' "$res/select.txt"
SCANTUNE_DB=$db OUT=$res/mixer timeout 240 bash scripts/gpu_mixer.sh --no-tune >"$res/mixer_stdout.txt" 2>&1
echo "mixer exit $? at $(( $(date +%s) - t0 )) s"
rm -f "$res/mixer/scantune-mixer.db"
cp "$res/mixer/mixer.json" "$res/mixer/mixer_table.txt" "$out/" 2>/dev/null
grep -E 'shape|rglru|samu|SAMU' "$res/mixer/mixer_table.txt"
tar -C "$out" -czf "$out/call1.tar.gz" call1
left=$(( ${CALL1_GUARD:-250} - ($(date +%s) - t0) ))
echo "tests with $left s left"
OUT=$res SCANTUNE_CTEST_REGEX='BakedShape' timeout $(( left > 30 ? left : 15 )) \
  bash scripts/gpu_round.sh tests >"$res/round_tests.log" 2>&1
grep -E 'Test +#|tests passed|FAILED|Failure' "$res/gpu_tests.log" | head -20
echo "end at $(( $(date +%s) - t0 )) s"
tar -C "$out" -czf "$out/call1.tar.gz" call1
