// Plans of selective_scan. STUB: replaced by the operator's real planner.
#include "compiler/op_planner.h"

namespace scantune {
namespace {

class Stub final : public OpPlanner {
 public:
  const char* MainHeader(Op) const override { return "selective_scan.cuh"; }
  std::vector<Variant> EnumerateVariants(Op) const override { return {}; }
  Status CanImplement(const Variant&, const Problem& problem, const DeviceLimits&) const override {
    return Unimplemented(std::string("operator ") + OpName(problem.op) + " has no kernels yet");
  }
  StatusOr<LaunchPlan> MakePlan(const Variant& v, const Problem& p, const DeviceLimits& d) const override {
    RETURN_IF_ERROR(CanImplement(v, p, d));
    return LaunchPlan{};
  }
  std::vector<std::string> NameExpressions(const Variant&, Op, DType, const SsmOptions&) const override { return {}; }
  std::vector<v1::ParamField> ParamLayout(Op) const override { return {}; }
  uint32_t ParamSize(Op) const override { return 0; }
};

}  // namespace

const OpPlanner& SsmPlanner() {
  static const Stub planner;
  return planner;
}

}  // namespace scantune
