// MakeCandidate: a compiled variant as the worker receives it (proto
// Candidate): the cubin, and the plan's launches for the problem with
// entry = the lowered name of each template instance. Pure function.
#pragma once

#include "common/problem.h"
#include "common/status.h"
#include "common/variant.h"
#include "compiler/nvrtc_compiler.h"
#include "compiler/plan.h"
#include "proto/worker.pb.h"

namespace scantune {

StatusOr<v1::Candidate> MakeCandidate(const Variant& variant, const Problem& problem, const DeviceLimits& limits,
                                      const CompileResult& compiled);

}  // namespace scantune
