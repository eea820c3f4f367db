#!/usr/bin/env bash
# One GPU call that runs a whole measuring round within the device tool's
# 10-minute limit, each stage under its own time limit and in its own folder
# under $OUT:
#   tests/   ctest -L gpu for the gated and selective_scan suites
#   linear/  linear_scan bf16 (LINEAR_TUNE, default fwd) at the seed-001 shapes, the
#            variants in LINEAR_VARIANTS (gpu_round.sh tune)
#   mixer/   rglru and samu tuned at the seed-001 shapes, then the mixer table (gpu_mixer.sh)
#   ssm/     the seed-004 selective-scan table (gpu_ssm.sh)
# The device tool brings back at most 8 files, so the stages write under
# /tmp/gpu-final and everything ends up in $OUT/final.tgz, with the summary
# (what this script prints) in $OUT/summary.txt. Each stage's limit is an
# environment variable (TESTS_S, MIXER_S, SSM_S, LINEAR_S); 0 skips the stage.
# LINEAR_VARIANTS="" tunes every linear_scan variant.
#   device.run carry=[".bundle"] command="bash scripts/gpu_final.sh"
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out_dir=${OUT:-$(pwd)/gpu-out}
top=/tmp/gpu-final
rm -rf "$top" && mkdir -p "$top" "$out_dir"
stage() {  # stage NAME SECONDS COMMAND... (a limit of 0 skips the stage)
  local name=$1 limit=$2
  shift 2
  [ "$limit" -gt 0 ] || { echo "== $name skipped"; return; }
  mkdir -p "$top/$name"
  echo "== $name (limit ${limit} s)"
  local start=$(date +%s)
  OUT=$top/$name timeout "$limit" "$@" >"$top/$name/stdout.txt" 2>&1
  echo "   $name: exit $? after $(( $(date +%s) - start )) s"
}
# The suites only check correctness, so they share the GPU (-j3).
stage tests "${TESTS_S:-150}" bash -c "source '$here/gpu_env.sh' && \
  ctest --test-dir \"\$bin\" -L gpu -R '${TESTS_RE:-Gated|Ssm}' -j3 --output-on-failure --timeout 140"
stage mixer "${MIXER_S:-170}" bash "$here/gpu_mixer.sh"
# SSM_ARGS: extra scantune-ssm-bench flags, e.g. "--shapes 4x8192x256,4x8192x1024 --no-max-len".
# shellcheck disable=SC2086
SSM_DEADLINE_S=${SSM_DEADLINE_S:-155} SSM_TIMEOUT_S=${SSM_TIMEOUT_S:-195} stage ssm "${SSM_S:-200}" \
  bash "$here/gpu_ssm.sh" ${SSM_ARGS:-}
SCANTUNE_TUNE="${LINEAR_TUNE:-linear_scan:bf16:fwd}" \
  SCANTUNE_VARIANTS="${LINEAR_VARIANTS-lookbacksmem_v4_t128_c64_i256,lookbacksmem_v4_t128_c32_i512}" \
  stage linear "${LINEAR_S:-35}" bash "$here/gpu_round.sh" tune
{
  grep -E "Passed|Failed|tests passed" "$top/tests/stdout.txt" | tail -8
  grep -E "problem|variant  |median" "$top/linear/select.txt" | paste - - - | awk '{$1=$1};1'
  grep -E "problem|variant  |median" "$top/mixer/select.txt" | paste - - - | awk '{$1=$1};1'
  echo "deterministic selections:"
  grep -hE "problem|variant  |median" "$top/linear/select_deterministic.txt" "$top/mixer/select_deterministic.txt" \
    2>/dev/null | paste - - - | awk '{$1=$1};1'
  tail -32 "$top/mixer/mixer_table.txt"
  [ -f "$top/ssm/ssm_table.txt" ] && tail -40 "$top/ssm/ssm_table.txt"
} 2>&1 | tee "$out_dir/summary.txt"
tar czf "$out_dir/final.tgz" -C /tmp gpu-final
