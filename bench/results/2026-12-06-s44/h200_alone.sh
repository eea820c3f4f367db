#!/usr/bin/env bash
# Session 44 (H200 only; on any other card it stops at once): on one card, in one call,
#   1. bench/micro/stream_ceiling.cu: samu fwd_bwd's passes with no scan (part 2) and h = a * x (part 1);
#   2. session 40's call3.sh: each kernel of samu's selected fwd_bwd chain alone inside its PDL chain.
# Session 40 had part 2 on an H200 but the kernels alone only on H100s (the H200's kernels-alone figures were
# session 29's, older kernels). $OUT: gpu.txt, stream_ceiling.txt, alone.txt.
#   bash scripts/make_bundle.sh
#   device.run kind=nvidia-h200 carry=[".bundle"] command="bash bench/results/2026-12-06-s44/h200_alone.sh"
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$name" in *H200*) ;; *) echo "gpu: $name: not an H200, nothing run"; exit 0 ;; esac
source "$(dirname "$0")/../../../scripts/gpu_env.sh"
nvcc -O3 -arch=sm_90 -o /tmp/stream_ceiling bench/micro/stream_ceiling.cu && /tmp/stream_ceiling | tee "$out/stream_ceiling.txt"
bash "$(dirname "$0")/../2026-12-06-s40/call3.sh"
