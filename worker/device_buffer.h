// DeviceBuffer: one device allocation, optionally with guard regions of a
// known byte pattern before and after the usable bytes (inside the same
// allocation, so a write just outside the buffer lands in the guards and is
// caught instead of corrupting a neighbour silently). Owns the allocation and
// frees it on destruction.
//
// Thread safety: not thread-safe; used from the worker's one GPU thread.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "worker/gpu_context.h"

namespace scantune {

class DeviceBuffer {
 public:
  // Guards are a multiple of 256 bytes so the usable pointer keeps the
  // alignment cuMemAlloc gives (kernels may use vector loads).
  static constexpr uint64_t kGuardBytes = 4096;
  static constexpr unsigned char kGuardByte = 0xA5;
  // 0xFF bytes are NaN in fp32, bf16 and fp16: an output element a kernel
  // never wrote stays NaN and fails the check.
  static constexpr unsigned char kPoisonByte = 0xFF;

  DeviceBuffer() = default;
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // Allocates bytes (+ 2 guards when `guarded`) and writes the guard pattern.
  // Failures land in `failure` (site kSetup) for classification.
  static StatusOr<DeviceBuffer> Allocate(const GpuContext& ctx, uint64_t bytes, bool guarded, CudaFailure* failure);

  CUdeviceptr ptr() const { return base_ + guard_; }
  void* void_ptr() const { return reinterpret_cast<void*>(static_cast<uintptr_t>(ptr())); }
  uint64_t bytes() const { return bytes_; }
  bool empty() const { return base_ == 0; }

  Status Fill(unsigned char byte, CudaFailure* failure) const;          // synchronous
  Status Upload(const void* host, uint64_t bytes, CudaFailure* failure) const;
  Status Download(void* host, uint64_t bytes, CudaFailure* failure) const;

  // OK when both guards still hold the pattern; otherwise the failure text
  // ("wrote 12 bytes after the end, first at +0") in the returned string.
  StatusOr<std::string> CheckGuards(CudaFailure* failure) const;

 private:
  void Release();
  const GpuContext* ctx_ = nullptr;
  CUdeviceptr base_ = 0;
  uint64_t bytes_ = 0;
  uint64_t guard_ = 0;
};

}  // namespace scantune
