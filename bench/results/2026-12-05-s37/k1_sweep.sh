#!/usr/bin/env bash
# Session 37, one call on whatever card comes (the baseline in the same call):
#  1. `_w1` (the held forward's warps wait for their own staged rows) against its `_k1` twins: samu bf16 fwd_bwd at
#     each seed shape over session 36's selection and the other `_i32` `_k1` points, each with and without `_w1`;
#  2. `_w1`'s GPU legality suite (GatedGpuTest.SamuSegmentWaitVariantsAreLegal);
#  3. with the time left, more `_k1` geometries (does the enumerated set miss a better point?);
#  4. on an H200 only, with the time left, h200_checks.sh's checks.
# Every tune is in one database; $OUT/sweep.tar.gz (+ checks.tar.gz, block.tar.gz).
#   bash scripts/make_bundle.sh
#   device.run carry=[".bundle"] command="bash bench/results/2026-12-05-s37/k1_sweep.sh"
source "$(dirname "$0")/../../../scripts/gpu_env.sh"
t0=$(date +%s)
guard=${SWEEP_GUARD:-560}
res=$out/sweep && mkdir -p "$res"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,memory.used --format=csv | tee "$res/gpu.txt"
start_daemon s37 "$res/scantuned.log"
$cli devices | tee "$res/devices.txt"
points() {  # FORWARDS GEOMETRY... -> chunked_v8_{geometry}_l64_y1{forward} for each
  local fwds=$1 list="" g f
  shift
  for g in "$@"; do
    for f in $fwds; do list="$list,chunked_v8_${g}_l64_y1${f}"; done
  done
  echo "${list#,}"
}
ab="_b4_i32_a1_k1 _b4_i32_a1_k1_w1 _b5_i32_a1_k1 _b5_i32_a1_k1_w1"
declare -A first=(
  [4x2048x2048]="$(points "$ab" t256_c32)"
  [1x8192x2560]="$(points "$ab" t512_c64)"
  [1x32768x1024]="$(points "$ab" t512_c64)"
  [1x32768x2048]="$(points "$ab" t256_c128)"
)
declare -A more=(
  [4x2048x2048]="$(points "$ab _b5_k1" t512_c32),$(points _b5_k1 t256_c32)"
  [1x8192x2560]="$(points "$ab _b5_k1" t512_c32 t512_c128),$(points _b5_k1 t512_c64)"
  [1x32768x1024]="$(points "$ab _b5_k1" t256_c64 t512_c128),$(points _b5_k1 t512_c64)"
  [1x32768x2048]="$(points "$ab _b5_k1" t256_c64 t512_c128),$(points _b5_k1 t256_c128)"
)
shapes="4x2048x2048 1x8192x2560 1x32768x1024 1x32768x2048"
tune() {  # SHAPE LIST TAG (--force: each part after the first adds to its shape's selection)
  echo "== tune samu $1 ($3)"
  $cli tune --op samu --shape $1 --dtype bf16 --mode fwd_bwd --variants "$2" --skip-unfit --force \
    2>"$res/tune_$1_$3.progress" | tail -1
}
summary() {
  $cli records --limit 2000 >"$res/records_all.txt"
  $cli records --state OK --limit 2000 >"$res/records_ok.txt"
  grep -E "^ *[0-9]+ +samu " "$res/records_ok.txt" | awk '{print $5, $3, $8, $9, $10}' | sort -k1,1 -k5,5n \
    >"$res/by_shape.txt"
  tar -C "$out" -czf "$out/sweep.tar.gz" sweep
}
# SWEEP_PARTS: which of ab (1-2) and more (3) run; both by default.
parts=${SWEEP_PARTS:-ab more}
if [[ " $parts " == *" ab "* ]]; then
  for shape in $shapes; do tune $shape "${first[$shape]}" ab; done
  summary
  cat "$res/by_shape.txt"
  echo "ab done at $(( $(date +%s) - t0 )) s"
  OUT=$res SCANTUNE_CTEST_REGEX='SamuSegmentWaitVariantsAreLegal' timeout $(( guard - 60 - ($(date +%s) - t0) )) \
    bash scripts/gpu_round.sh tests >"$res/round_tests.log" 2>&1
  grep -E 'Test +#|tests passed|FAILED|Failure|Timeout' "$res/gpu_tests.log" | head -20
  echo "w1 suite done at $(( $(date +%s) - t0 )) s"
  summary
fi
[[ " $parts " == *" more "* ]] || shapes=""
for shape in $shapes; do tune $shape "${first[$shape]}" baseline; done  # the A/B points again beside the others
for shape in $shapes; do
  [ $(( $(date +%s) - t0 )) -lt $(( guard - 90 )) ] || { echo "more: stopped before $shape"; break; }
  tune $shape "${more[$shape]}" more
  $cli select --op samu --shape $shape --dtype bf16 --mode fwd_bwd >>"$res/select.txt" 2>&1
done
summary
kill $daemon; wait $daemon
cat "$res/by_shape.txt"
grep -E 'problem|variant|median|runner|margin' "$res/select.txt"
grep -vE " OK " "$res/records_all.txt" | awk '{print $3, $4, $5}' | sort | uniq -c | head -20
left=$(( guard - ($(date +%s) - t0) ))
echo "checks with $left s left"
[ "$left" -gt 200 ] && CHECKS_GUARD=$left bash "$(dirname "$0")/h200_checks.sh"
echo "end at $(( $(date +%s) - t0 )) s"
