#include "worker/device_buffer.h"

#include <vector>

namespace scantune {

DeviceBuffer::~DeviceBuffer() { Release(); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : ctx_(other.ctx_), base_(other.base_), bytes_(other.bytes_), guard_(other.guard_) {
  other.base_ = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    Release();
    ctx_ = other.ctx_;
    base_ = other.base_;
    bytes_ = other.bytes_;
    guard_ = other.guard_;
    other.base_ = 0;
  }
  return *this;
}

void DeviceBuffer::Release() {
  // A free after a sticky error fails too; there is nothing more to do then.
  if (base_ != 0 && ctx_ != nullptr && !ctx_->lost()) (void)ctx_->api().MemFree(base_);
  base_ = 0;
}

StatusOr<DeviceBuffer> DeviceBuffer::Allocate(const GpuContext& ctx, uint64_t bytes, bool guarded,
                                              CudaFailure* failure) {
  DeviceBuffer buffer;
  buffer.ctx_ = &ctx;
  buffer.bytes_ = bytes;
  buffer.guard_ = guarded ? kGuardBytes : 0;
  const uint64_t total = bytes + 2 * buffer.guard_;
  // cuMemAlloc refuses 0 bytes; an empty buffer still gets a valid pointer.
  RETURN_IF_ERROR(ctx.driver().Check(ctx.api().MemAlloc(&buffer.base_, total == 0 ? 256 : total), "cuMemAlloc",
                                     CudaCallSite::kSetup, failure));
  if (guarded) {
    const auto& api = ctx.api();
    RETURN_IF_ERROR(ctx.driver().Check(api.MemsetD8(buffer.base_, kGuardByte, buffer.guard_), "cuMemsetD8(guard)",
                                       CudaCallSite::kSetup, failure));
    RETURN_IF_ERROR(ctx.driver().Check(api.MemsetD8(buffer.base_ + buffer.guard_ + bytes, kGuardByte, buffer.guard_),
                                       "cuMemsetD8(guard)", CudaCallSite::kSetup, failure));
  }
  return buffer;
}

Status DeviceBuffer::Fill(unsigned char byte, CudaFailure* failure) const {
  if (bytes_ == 0) return Status::Ok();
  return ctx_->driver().Check(ctx_->api().MemsetD8(ptr(), byte, bytes_), "cuMemsetD8", CudaCallSite::kSetup, failure);
}

Status DeviceBuffer::Upload(const void* host, uint64_t bytes, CudaFailure* failure) const {
  if (bytes > bytes_) return Internal("upload of " + std::to_string(bytes) + " bytes into " + std::to_string(bytes_));
  if (bytes == 0) return Status::Ok();
  return ctx_->driver().Check(ctx_->api().MemcpyHtoD(ptr(), host, bytes), "cuMemcpyHtoD", CudaCallSite::kSetup,
                              failure);
}

Status DeviceBuffer::Download(void* host, uint64_t bytes, CudaFailure* failure) const {
  if (bytes > bytes_) return Internal("download of " + std::to_string(bytes) + " bytes from " + std::to_string(bytes_));
  if (bytes == 0) return Status::Ok();
  // A kernel fault surfaces here if nothing synchronised before: execution site.
  return ctx_->driver().Check(ctx_->api().MemcpyDtoH(host, ptr(), bytes), "cuMemcpyDtoH", CudaCallSite::kExecution,
                              failure);
}

StatusOr<std::string> DeviceBuffer::CheckGuards(CudaFailure* failure) const {
  if (guard_ == 0) return std::string();
  std::vector<unsigned char> host(guard_);
  std::string report;
  auto check = [&](CUdeviceptr at, const char* where) -> Status {
    RETURN_IF_ERROR(ctx_->driver().Check(ctx_->api().MemcpyDtoH(host.data(), at, guard_), "cuMemcpyDtoH(guard)",
                                         CudaCallSite::kExecution, failure));
    uint64_t changed = 0;
    int64_t first = -1;
    for (uint64_t i = 0; i < guard_; ++i) {
      if (host[i] != kGuardByte) {
        ++changed;
        if (first < 0) first = static_cast<int64_t>(i);
      }
    }
    if (changed > 0) {
      // Offsets are relative to the buffer: negative before its start.
      const int64_t offset = std::string(where) == "before"
                                 ? first - static_cast<int64_t>(guard_)
                                 : static_cast<int64_t>(bytes_) + first;
      if (!report.empty()) report += "; ";
      report += std::to_string(changed) + " guard bytes changed " + where + " the buffer, first at byte offset " +
                std::to_string(offset);
    }
    return Status::Ok();
  };
  RETURN_IF_ERROR(check(base_, "before"));
  RETURN_IF_ERROR(check(base_ + guard_ + bytes_, "after"));
  return report;
}

}  // namespace scantune
