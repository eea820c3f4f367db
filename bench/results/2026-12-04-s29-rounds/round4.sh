#!/usr/bin/env bash
# Session 29 round 4 on the H200: fp32 decays. .bundle/alt_main holds main's server, worker and client;
# .bundle/alt_fix (also the bundle's own build) takes fp32 decays near 1 by an unbiased Taylor series
# (kernels_src/gated_scan.cuh, ExpNearZero) instead of expf.
# 1. fp32_decay.py with each build: samu and rglru variants at 1x1000x200 fp32 with h0, six input draws.
# 2. The gated suites on the fix (fp32, bf16 and fp16 of every enumerated samu and rglru variant, and more).
#   device.run carry=[".bundle"] command="bash bench/results/2026-12-04-s29-rounds/round4.sh"
out=${OUT:-/tmp/out}
mkdir -p "$out"
source scripts/gpu_env.sh
here=bench/results/2026-12-04-s29-rounds
for tag in main fix; do
  ALT_ONLY=1 bash scripts/gpu_samu_alts.sh $tag
  SCANTUNED=$bin/server/scantuned SCANTUNE_WORKER=$bin/worker/scantune-worker PYTHONPATH=$bin/client/python \
    timeout 150 python3 $here/fp32_decay.py $tag >> "$out/fp32_decay.txt" 2> "$out/fp32_decay_$tag.err"
done
cat "$out/fp32_decay.txt"
ctest --test-dir "$bin" -L gpu -R "${TESTS_RE:-EverySamu|EveryRgLru|SamuHFromY|PythonLaunchGpu|KernelLauncherGpu}" \
  -j3 --output-on-failure --timeout 300 > "$out/gpu_tests_fix.log" 2>&1
grep -E "tests passed|tests failed|Passed|Failed|\*\*\*" "$out/gpu_tests_fix.log"
