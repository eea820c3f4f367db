#!/usr/bin/env bash
# Session 29 round 1 on the H200.
# 1. GPU tests of the launchers: KernelLauncherGpuTest (C++ client library), MixerGpu (the mixer bench now runs
#    its backends through it), and whatever else TESTS_RE names.
# 2. samu's PDL chain, each kernel alone: for the selected points at two shapes, the tuner verifies with every
#    kernel and then times every launch with only the named kernels (SCANTUNE_DIAG_SKIP_KERNEL="!name|name",
#    worker/candidate_module.cc: an ablation, never a result). Set against the full chain, the sum of the
#    kernels alone says how much of fwd_bwd the kernel boundaries cost (or hide).
#   device.run carry=[".bundle"] command="bash bench/results/2026-12-04-s29-rounds/round1.sh"
out=${OUT:-/tmp/out}
mkdir -p "$out"
source scripts/gpu_env.sh
ctest --test-dir "$bin" -L gpu -R "${TESTS_RE:-KernelLauncherGpu|MixerGpu}" --output-on-failure --timeout 300 \
  > "$out/gpu_tests.log" 2>&1
tail -6 "$out/gpu_tests.log"
declare -A sel=([4x2048x2048]=chunked_v8_t256_c32_l64_y1 [1x8192x2560]=chunked_v8_t512_c64_l64_y1_b4_i32_a1)
for only in none samu_fwd_control_fast samu_fwd_held "samu_fwd_control_fast|samu_fwd_held" samu_bwd_chunk_agg \
            samu_chunk_carry "samu_bwd_chunk_agg|samu_chunk_carry" samu_bwd_chunk_scan samu_bwd_chunk_finalize \
            "samu_bwd_chunk_agg|samu_chunk_carry|samu_bwd_chunk_scan"; do
  for shape in 4x2048x2048 1x8192x2560; do
    d=/tmp/a_$shape
    SCANTUNE_DIAG_SKIP_KERNEL=$([ "$only" = none ] || echo "!$only") SCANTUNE_TUNE="samu:bf16:fwd_bwd" \
      SCANTUNE_SHAPES="$shape" SCANTUNE_VARIANTS="${sel[$shape]}" OUT=$d bash scripts/gpu_round.sh tune > /dev/null 2>&1
    grep samu $d/records_ok.txt | awk -v s="$only" '{print s, $3, $5, $8, $9, $10}' >> "$out/only_records.txt"
    rm -rf $d
  done
done
echo "== each kernel alone (kernels, variant, shape, fwd bwd fwd_bwd ms)"; cat "$out/only_records.txt"
