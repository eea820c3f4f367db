#include "worker/gpu_context.h"

#include <algorithm>
#include <chrono>
#include <thread>

namespace scantune {

StatusOr<std::unique_ptr<GpuContext>> GpuContext::Open(const CudaDriver* driver, int ordinal) {
  std::unique_ptr<GpuContext> ctx(new GpuContext());
  ctx->driver_ = driver;
  ctx->ordinal_ = ordinal;
  const auto& api = driver->api();
  int count = 0;
  RETURN_IF_ERROR(driver->Check(api.DeviceGetCount(&count), "cuDeviceGetCount"));
  if (ordinal < 0 || ordinal >= count) {
    return InvalidArgument("device ordinal " + std::to_string(ordinal) + " does not exist (" +
                           std::to_string(count) + " devices)");
  }
  RETURN_IF_ERROR(driver->Check(api.DeviceGet(&ctx->device_, ordinal), "cuDeviceGet"));
  // The primary context is the one the runtime and other libraries share, so
  // its limits (local memory, shared carve-out) are those a client job sees.
  RETURN_IF_ERROR(driver->Check(api.DevicePrimaryCtxRetain(&ctx->context_, ctx->device_), "cuDevicePrimaryCtxRetain"));
  RETURN_IF_ERROR(ctx->MakeCurrent());
  // A blocking stream on purpose: the plain cuMemsetD8/cuMemcpyHtoD/DtoH
  // calls used to fill and read buffers run on the legacy default stream and
  // may return before the device finished them; a blocking stream orders our
  // kernels after them (and them after our kernels).
  RETURN_IF_ERROR(driver->Check(api.StreamCreate(&ctx->stream_, CU_STREAM_DEFAULT), "cuStreamCreate"));
  return ctx;
}

GpuContext::~GpuContext() {
  if (driver_ == nullptr || lost_) return;
  const auto& api = driver_->api();
  if (stream_ != nullptr) api.StreamDestroy(stream_);
  if (context_ != nullptr) api.DevicePrimaryCtxRelease(device_);
}

Status GpuContext::MakeCurrent() const {
  return driver_->Check(api().CtxSetCurrent(context_), "cuCtxSetCurrent");
}

template <typename Query>
Status GpuContext::Poll(Query query, double timeout_ms, const char* what, CudaFailure* failure) const {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::microseconds(static_cast<int64_t>(timeout_ms * 1000.0));
  // Spin briefly (short kernels finish within microseconds), then back off
  // to sleeps so a long or hung kernel does not burn a host core.
  auto sleep = std::chrono::microseconds(0);
  while (true) {
    CUresult r = query();
    if (r == CUDA_SUCCESS) return Status::Ok();
    if (r != CUDA_ERROR_NOT_READY) {
      if (IsStickyCudaError(r)) MarkLost();
      return driver_->Check(r, what, CudaCallSite::kExecution, failure);
    }
    if (Clock::now() >= deadline) {
      MarkLost();
      if (failure != nullptr && !failure->failed()) {
        failure->result = CUDA_ERROR_LAUNCH_TIMEOUT;
        failure->site = CudaCallSite::kExecution;
        failure->call = what;
      }
      return DeadlineExceeded(std::string(what) + ": still running after " + std::to_string(timeout_ms) +
                              " ms (kernel timeout)");
    }
    if (Clock::now() - start > std::chrono::milliseconds(2)) {
      sleep = std::min(std::chrono::microseconds(1000), sleep + std::chrono::microseconds(50));
      std::this_thread::sleep_for(sleep);
    }
  }
}

Status GpuContext::WaitStream(double timeout_ms, const char* what, CudaFailure* failure) const {
  return Poll([&] { return api().StreamQuery(stream_); }, timeout_ms, what, failure);
}

Status GpuContext::WaitEvent(CUevent event, double timeout_ms, const char* what, CudaFailure* failure) const {
  return Poll([&] { return api().EventQuery(event); }, timeout_ms, what, failure);
}

StatusOr<uint64_t> GpuContext::MemoryInUse() const {
  size_t free_bytes = 0, total_bytes = 0;
  RETURN_IF_ERROR(driver_->Check(api().MemGetInfo(&free_bytes, &total_bytes), "cuMemGetInfo"));
  return static_cast<uint64_t>(total_bytes - free_bytes);
}

StatusOr<uint64_t> GpuContext::MemoryFree() const {
  size_t free_bytes = 0, total_bytes = 0;
  RETURN_IF_ERROR(driver_->Check(api().MemGetInfo(&free_bytes, &total_bytes), "cuMemGetInfo"));
  return static_cast<uint64_t>(free_bytes);
}

}  // namespace scantune
