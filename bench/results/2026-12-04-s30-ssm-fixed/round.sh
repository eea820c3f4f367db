#!/usr/bin/env bash
# Session 30's GPU round for selective_scan's fixed-order backward (tscan `_f1`), through scripts/gpu_round.sh:
#   tests: the selective_scan GPU suites (every enumerated variant legal, the _f1 twins among them; the long
#          sequences), DeterminismGpuTest's selective_scan case (same bits three runs for every deterministic
#          variant, _f1 in fwd_bwd and bwd now included) and PythonLaunchGpu (ServedScan's selective_scan case);
#   tune:  the daemon tunes selective_scan fp32 fwd_bwd (N = 16, no options: seed 004's problems) at seed 004's
#          nine shapes over every enumerated variant; select.txt and select_deterministic.txt hold the ordinary
#          and the deterministic selection of each.
#   device.run carry=[".bundle"] command="bash bench/results/2026-12-04-s30-ssm-fixed/round.sh tests|tune"
what=${1:-tests}
export SCANTUNE_CTEST_REGEX='SsmGpuTest|SelectiveScanDeterministic|PythonLaunchGpu'
export SCANTUNE_TUNE=selective_scan:fp32:fwd_bwd
export SCANTUNE_SHAPES="4x512x256 4x2048x256 4x8192x256 4x512x512 4x2048x512 4x8192x512 4x512x1024 4x2048x1024 4x8192x1024"
exec bash "$(dirname "$0")/../../../scripts/gpu_round.sh" "$what"
