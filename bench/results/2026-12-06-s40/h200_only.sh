#!/usr/bin/env bash
# Session 40: call2.sh on an H200 only (its figures on H100s are h100_call2-3); on any other card it stops at once.
#   device.run kind=nvidia-h200 carry=[".bundle"] command="bash bench/results/2026-12-06-s40/h200_only.sh"
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$name" in *H200*) ;; *) echo "gpu: $name: not an H200, nothing run"; exit 0 ;; esac
exec bash "$(dirname "$0")/call2.sh"
