// What the worker reports about its device: the v1::DeviceInfo of a device
// (read from driver attributes; no context needed) and the device-to-device
// copy bandwidth, measured once at worker start, that every record's
// pct_of_copy is relative to. Free functions; callers serialise GPU work.
#pragma once

#include <vector>

#include "common/status.h"
#include "proto/scantune.pb.h"
#include "worker/cuda_driver.h"
#include "worker/gpu_context.h"

namespace scantune {

// Everything but copy_gbps (0: not measured).
StatusOr<v1::DeviceInfo> QueryDeviceInfo(const CudaDriver& driver, int ordinal);
StatusOr<std::vector<v1::DeviceInfo>> QueryAllDevices(const CudaDriver& driver);

// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi prints it.
std::string FormatGpuUuid(const unsigned char bytes[16]);

// Bytes read + written per second / 1e9 for a device-to-device copy of
// `bytes` (2 GiB by default; less when memory is short), median of `repeats`
// after one warm-up copy.
StatusOr<double> MeasureCopyGbps(const GpuContext& ctx, uint64_t bytes = uint64_t{2} << 30, int repeats = 5);

}  // namespace scantune
