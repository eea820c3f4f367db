#!/usr/bin/env bash
# Session 37: (1) `_w1` (the held forward's warps wait for their own staged rows) against its `_k1` twins, and
# (2) does the enumerated `_k1` set (four points, bench/NOTES.md session 32) miss a better samu point?
# Tunes samu bf16 fwd_bwd at each seed shape over the forwards `_b5`, `_b4_i32_a1`, `_b5_i32_a1` and the latter
# two with `_w1`, at that shape's plausible rescan geometries, all `_l64_y1 ... _k1`, in one database with the
# session-36 selections among them (the baseline in the same call, on whatever card this is). Then `_w1`'s GPU
# legality suite, and on an H200 only h200_checks.sh's checks with the time left.
# $OUT/sweep.tar.gz (+ checks.tar.gz, block.tar.gz).
#   bash scripts/make_bundle.sh
#   device.run carry=[".bundle"] command="bash bench/results/2026-12-05-s37/k1_sweep.sh"
source "$(dirname "$0")/../../../scripts/gpu_env.sh"
t0=$(date +%s)
res=$out/sweep && mkdir -p "$res"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.used --format=csv | tee "$res/gpu.txt"
start_daemon s37 "$res/scantuned.log"
$cli devices | tee "$res/devices.txt"
points() {  # geometry list -> every forward at each, `_k1`
  local list="" g f
  for g in "$@"; do
    for f in _b5_k1 _b4_i32_a1_k1 _b5_i32_a1_k1 _b4_i32_a1_k1_w1 _b5_i32_a1_k1_w1; do
      list="$list,chunked_v8_${g}_l64_y1${f}"
    done
  done
  echo "${list#,}"
}
declare -A sweep=(
  [4x2048x2048]="$(points t256_c32 t512_c32)"
  [1x8192x2560]="$(points t512_c32 t512_c64 t512_c128)"
  [1x32768x1024]="$(points t256_c64 t512_c64 t512_c128)"
  [1x32768x2048]="$(points t256_c64 t256_c128 t512_c128)"
)
for shape in 4x2048x2048 1x8192x2560 1x32768x1024 1x32768x2048; do
  echo "== tune samu $shape"
  $cli tune --op samu --shape $shape --dtype bf16 --mode fwd_bwd --variants "${sweep[$shape]}" --skip-unfit \
    2>"$res/tune_$shape.progress" | tail -2
  $cli select --op samu --shape $shape --dtype bf16 --mode fwd_bwd >>"$res/select.txt" 2>&1
done
$cli records --limit 1000 >"$res/records_all.txt"
$cli records --state OK --limit 1000 >"$res/records_ok.txt"
kill $daemon; wait $daemon
echo "sweep: $(( $(date +%s) - t0 )) s"
grep -E "^ *[0-9]+ +samu " "$res/records_ok.txt" | awk '{print $5, $3, $8, $9, $10}' | sort -k1,1 -k5,5n
grep -E 'problem|variant|median|runner|margin' "$res/select.txt"
grep -vE " OK " "$res/records_all.txt" | awk '{print $3, $4, $5}' | sort | uniq -c | head -20
tar -C "$out" -czf "$out/sweep.tar.gz" sweep
OUT=$res SCANTUNE_CTEST_REGEX='SamuSegmentWaitVariantsAreLegal' timeout $(( 560 - ($(date +%s) - t0) )) \
  bash scripts/gpu_round.sh tests >"$res/round_tests.log" 2>&1
grep -E 'Test +#|tests passed|FAILED|Failure|Timeout' "$res/gpu_tests.log" | head -20
echo "w1 suite done at $(( $(date +%s) - t0 )) s"
tar -C "$out" -czf "$out/sweep.tar.gz" sweep
left=$(( 540 - ($(date +%s) - t0) ))
echo "checks with $left s left"
[ "$left" -gt 200 ] && CHECKS_GUARD=$left bash "$(dirname "$0")/h200_checks.sh"
echo "end at $(( $(date +%s) - t0 )) s"
