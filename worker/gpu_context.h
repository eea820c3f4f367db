// GpuContext: the worker's hold on one device. It owns the retained primary
// context of the device and the one stream all of the worker's work is
// queued on, and it turns "wait for the GPU" into a bounded wait: a kernel
// that never finishes becomes a TIMEOUT failure instead of a hung worker.
//
// Thread safety: not thread-safe. The worker drives a device from one thread;
// MakeCurrent() binds the context to the calling thread.
#pragma once

#include <cstdint>
#include <memory>

#include "common/status.h"
#include "worker/cuda_driver.h"

namespace scantune {

class GpuContext {
 public:
  // Retains the primary context of device `ordinal`, makes it current and
  // creates a stream that synchronises with the legacy default stream.
  static StatusOr<std::unique_ptr<GpuContext>> Open(const CudaDriver* driver, int ordinal);
  ~GpuContext();
  GpuContext(const GpuContext&) = delete;
  GpuContext& operator=(const GpuContext&) = delete;

  const CudaDriver& driver() const { return *driver_; }
  const CudaDriver::Api& api() const { return driver_->api(); }
  CUdevice device() const { return device_; }
  CUstream stream() const { return stream_; }
  int ordinal() const { return ordinal_; }

  Status MakeCurrent() const;

  // Waits until all work queued on the stream is done, polling (a blocking
  // cuStreamSynchronize could wait forever on a kernel that spins). After
  // timeout_ms the wait gives up: `failure` gets CUDA_ERROR_LAUNCH_TIMEOUT
  // (the context is then stuck, the worker must exit) and DEADLINE_EXCEEDED
  // is returned. Errors of the kernels themselves are recorded at site kExecution.
  Status WaitStream(double timeout_ms, const char* what, CudaFailure* failure) const;
  // The same for one event.
  Status WaitEvent(CUevent event, double timeout_ms, const char* what, CudaFailure* failure) const;

  // After a sticky error or a kernel past its timeout the context is lost:
  // from then on buffers, modules and the context itself are abandoned, not
  // freed (a free would wait for a hung kernel forever, and the process is
  // about to exit anyway). Const: losing the context is not a change its
  // users make, it is news about the device.
  void MarkLost() const { lost_ = true; }
  bool lost() const { return lost_; }

  // Device memory in use (total - free) per cuMemGetInfo, in bytes.
  StatusOr<uint64_t> MemoryInUse() const;
  StatusOr<uint64_t> MemoryFree() const;

 private:
  GpuContext() = default;
  template <typename Query>
  Status Poll(Query query, double timeout_ms, const char* what, CudaFailure* failure) const;

  const CudaDriver* driver_ = nullptr;
  int ordinal_ = 0;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  CUstream stream_ = nullptr;
  mutable bool lost_ = false;
};

}  // namespace scantune
