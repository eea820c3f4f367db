// The mixer benchmark run: the service's selections and kernels for rglru and
// samu at each shape, the mixers on the GPU, the memory probe, the GEMM check
// and the counterbalanced timing rounds; or, with --dry-run, synthetic
// samples with the same report layout (no GPU, no daemon).
//
// Thread safety: one run per process (it drives the GPU from the caller's thread).
#pragma once

#include "bench/mixer/options.h"
#include "bench/mixer/report.h"
#include "common/status.h"

namespace scantune::mixer {

StatusOr<MixerReport> RunMixerBench(const MixerOptions& options);

// Synthetic, deterministic samples for every shape and both architectures,
// backend "dry-run", through the same protocol and row layout.
MixerReport DryRunReport(const MixerOptions& options);

}  // namespace scantune::mixer
