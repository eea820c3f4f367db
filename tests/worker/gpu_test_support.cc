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

}  // namespace scantune::testing
