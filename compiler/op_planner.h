// OpPlanner: the plan module of one operator family. plan.h's free functions
// handle linear_scan themselves and hand every other operator to its planner:
// rglru and samu to GatedPlanner() (compiler/plan_gated.cc, kernels in
// kernels_src/gated_scan.cuh), selective_scan to SsmPlanner()
// (compiler/plan_ssm.cc, kernels in kernels_src/selective_scan.cuh).
// Variants reuse common/variant.h's algorithms and knobs; the variants table
// is keyed by (op, name), so the same name may mean another kernel per operator.
// Pure functions; no CUDA.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/problem.h"
#include "common/status.h"
#include "common/variant.h"
#include "compiler/plan.h"
#include "proto/scantune.pb.h"

namespace scantune {

class OpPlanner {
 public:
  virtual ~OpPlanner() = default;
  // The header the NVRTC module's one translation unit includes ("gated_scan.cuh").
  virtual const char* MainHeader(Op op) const = 0;
  virtual std::vector<Variant> EnumerateVariants(Op op) const = 0;
  virtual Status CanImplement(const Variant& variant, const Problem& problem, const DeviceLimits& device) const = 0;
  // plan.h's Deterministic for this family's operators.
  virtual bool Deterministic(const Variant& variant, const Problem& problem) const = 0;
  virtual StatusOr<LaunchPlan> MakePlan(const Variant& variant, const Problem& problem,
                                        const DeviceLimits& device) const = 0;
  // Every template instance of the variant's module (fwd and bwd) for the
  // operator, dtype, (selective_scan) N and options, and (variants that bake
  // it in, samu's `_k1`) the problem's shape.
  virtual std::vector<std::string> NameExpressions(const Variant& variant, Op op, DType dtype, const SsmOptions& ssm,
                                                   const Shape& shape) const = 0;
  virtual std::vector<v1::ParamField> ParamLayout(Op op) const = 0;
  virtual uint32_t ParamSize(Op op) const = 0;
};

const OpPlanner& GatedPlanner();  // rglru, samu
const OpPlanner& SsmPlanner();    // selective_scan

}  // namespace scantune
