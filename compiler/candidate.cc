#include "compiler/candidate.h"

namespace scantune {

StatusOr<v1::Candidate> MakeCandidate(const Variant& variant, const Problem& problem, const DeviceLimits& limits,
                                      const CompileResult& compiled) {
  ASSIGN_OR_RETURN(LaunchPlan plan, MakePlan(variant, problem, limits));
  v1::Candidate c;
  c.set_variant(variant.Name());
  c.set_cubin(compiled.cubin);
  c.set_workspace_bytes(plan.workspace_bytes);
  c.set_workspace_zero_bytes(plan.workspace_zero_bytes);
  c.set_workspace_zero_once(plan.workspace_zero_once);
  c.set_compile_ms(compiled.compile_ms);
  for (const Launch& launch : plan.launches) {
    auto entry = compiled.lowered_names.find(launch.name_expression);
    if (entry == compiled.lowered_names.end()) {
      return Internal("the module of " + variant.Name() + " has no lowered name for " + launch.name_expression);
    }
    v1::KernelLaunch* k = c.add_launches();
    k->set_entry(entry->second);
    k->set_name_expression(launch.name_expression);
    for (uint32_t g : launch.grid) k->add_grid(g);
    for (uint32_t b : launch.block) k->add_block(b);
    k->set_shared_bytes(launch.shared_bytes);
    k->set_phase(launch.phase);
    k->set_dependent_launch(launch.dependent_launch);
    if (launch.cluster_x > 1) k->set_cluster_x(launch.cluster_x);
  }
  return c;
}

}  // namespace scantune
