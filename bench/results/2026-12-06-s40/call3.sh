#!/usr/bin/env bash
# Session 40, call 3 (any card): each kernel of samu's selected fwd_bwd chain alone inside its PDL chain
# (SCANTUNE_DIAG_SKIP_KERNEL="!NAME", an ablation: verification still runs them all), per seed shape, to set
# beside stream_ceiling's elementwise passes on the same card model. $OUT/alone.txt: kernel, shape, variant,
# fwd / bwd / fwd_bwd ms; $OUT/full.txt the selections with every kernel.
#   bash scripts/make_bundle.sh
#   device.run carry=[".bundle"] command="bash bench/results/2026-12-06-s40/call3.sh"
source "$(dirname "$0")/../../../scripts/gpu_env.sh"
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.max.sm,memory.total --format=csv | tee "$out/gpu.txt"
run_alone() {  # run_alone KERNELS TAG: the four selections with SCANTUNE_DIAG_SKIP_KERNEL="!KERNELS" (none: all)
  local kernels=$1 tag=$2 shape
  if [ -n "$kernels" ]; then export SCANTUNE_DIAG_SKIP_KERNEL="!$kernels"; else unset SCANTUNE_DIAG_SKIP_KERNEL; fi
  start_daemon "s40-$tag" "$out/daemon_$tag.log" || return 1
  for shape in 4x2048x2048 1x8192x2560 1x32768x1024 1x32768x2048; do
    timeout 120 $cli tune --op samu --shape $shape --dtype bf16 --mode fwd_bwd --variants ${samu_selections[$shape]} \
      --skip-unfit --force >/dev/null 2>"$out/tune_${tag}_$shape.progress"
  done
  $cli records --op samu --limit 20 | grep -E "^ *[0-9]+ +samu " | awk -v k="$tag" '{print k, $5, $3, $8, $9, $10}' \
    | sort -k2 | tee -a "$out/alone.txt"
  kill $daemon; wait $daemon 2>/dev/null
}
run_alone "" all
run_alone samu_fwd_control control
run_alone samu_fwd_held held
run_alone samu_bwd_chunk_agg agg
run_alone samu_chunk_carry carry
run_alone samu_bwd_chunk_scan rescan
