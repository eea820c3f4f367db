#include "tests/worker/gpu_test_support.h"

#include <memory>

#include "worker/device_info.h"

namespace scantune::testing {

StatusOr<TestGpu*> GetTestGpu() {
  static std::unique_ptr<TestGpu> gpu;
  static std::unique_ptr<GpuContext> ctx;
  static Status failed;
  if (gpu) return gpu.get();
  if (!failed.ok()) return failed;
  auto init = [&]() -> Status {
    ASSIGN_OR_RETURN(const CudaDriver* driver, CudaDriver::Load());
    ASSIGN_OR_RETURN(ctx, GpuContext::Open(driver, 0));
    auto g = std::make_unique<TestGpu>();
    g->driver = driver;
    g->ctx = ctx.get();
    ASSIGN_OR_RETURN(g->info, QueryDeviceInfo(*driver, 0));
    g->limits = DeviceLimits::FromProto(g->info);
    gpu = std::move(g);
    return Status::Ok();
  };
  failed = init();
  if (!failed.ok()) return failed;
  return gpu.get();
}

StatusOr<v1::Candidate> MakeCandidate(const Variant& variant, const CompileResult& compiled, const Problem& problem,
                                      const DeviceLimits& limits) {
  ASSIGN_OR_RETURN(LaunchPlan plan, MakePlan(variant, problem, limits));
  v1::Candidate c;
  c.set_variant(variant.Name());
  c.set_cubin(compiled.cubin);
  c.set_compile_ms(compiled.compile_ms);
  c.set_workspace_bytes(plan.workspace_bytes);
  c.set_workspace_zero_bytes(plan.workspace_zero_bytes);
  for (const Launch& launch : plan.launches) {
    auto lowered = compiled.lowered_names.find(launch.name_expression);
    if (lowered == compiled.lowered_names.end()) {
      return NotFound("no lowered name for " + launch.name_expression + " in the module of " + variant.Name());
    }
    v1::KernelLaunch* l = c.add_launches();
    l->set_entry(lowered->second);
    l->set_name_expression(launch.name_expression);
    for (uint32_t g : launch.grid) l->add_grid(g);
    for (uint32_t b : launch.block) l->add_block(b);
    l->set_shared_bytes(launch.shared_bytes);
    l->set_phase(launch.phase);
  }
  return c;
}

}  // namespace scantune::testing
