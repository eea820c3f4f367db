#include "worker/device_info.h"

#include <algorithm>
#include <cstdio>

#include "common/stats.h"
#if SCANTUNE_WORKER_WITHOUT_COMPILER
#include <nvrtc.h>
#else
#include "compiler/nvrtc_compiler.h"
#endif
#include "worker/device_buffer.h"

namespace scantune {

std::string FormatGpuUuid(const unsigned char b[16]) {
  char out[48];
  std::snprintf(out, sizeof out, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  return out;
}

StatusOr<v1::DeviceInfo> QueryDeviceInfo(const CudaDriver& driver, int ordinal) {
  const auto& api = driver.api();
  CUdevice dev = 0;
  RETURN_IF_ERROR(driver.Check(api.DeviceGet(&dev, ordinal), "cuDeviceGet"));
  v1::DeviceInfo info;
  char name[256] = {};
  RETURN_IF_ERROR(driver.Check(api.DeviceGetName(name, sizeof name - 1, dev), "cuDeviceGetName"));
  info.set_name(name);
  CUuuid uuid{};
  RETURN_IF_ERROR(driver.Check(api.DeviceGetUuid(&uuid, dev), "cuDeviceGetUuid"));
  info.set_uuid(FormatGpuUuid(reinterpret_cast<const unsigned char*>(uuid.bytes)));
  info.set_ordinal(ordinal);
  size_t total = 0;
  RETURN_IF_ERROR(driver.Check(api.DeviceTotalMem(&total, dev), "cuDeviceTotalMem"));
  info.set_memory_bytes(total);
  auto attr = [&](CUdevice_attribute a, const char* what) -> StatusOr<int> {
    int v = 0;
    RETURN_IF_ERROR(driver.Check(api.DeviceGetAttribute(&v, a, dev), what));
    return v;
  };
  ASSIGN_OR_RETURN(int cc_major, attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "cc major"));
  ASSIGN_OR_RETURN(int cc_minor, attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "cc minor"));
  ASSIGN_OR_RETURN(int sms, attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "SM count"));
  ASSIGN_OR_RETURN(int clock, attr(CU_DEVICE_ATTRIBUTE_CLOCK_RATE, "clock rate"));
  ASSIGN_OR_RETURN(int mem_clock, attr(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, "memory clock rate"));
  ASSIGN_OR_RETURN(int bus, attr(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, "bus width"));
  ASSIGN_OR_RETURN(int l2, attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, "L2 size"));
  ASSIGN_OR_RETURN(int smem, attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, "opt-in shared per block"));
  ASSIGN_OR_RETURN(int regs, attr(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, "registers per block"));
  info.set_cc_major(cc_major);
  info.set_cc_minor(cc_minor);
  info.set_sm_count(sms);
  info.set_sm_clock_khz(clock);
  info.set_memory_clock_khz(mem_clock);
  info.set_memory_bus_width_bits(bus);
  info.set_l2_bytes(l2);
  info.set_max_shared_per_block_bytes(smem);
  info.set_max_registers_per_block(regs);
  info.set_driver_version(driver.driver_version());
#if SCANTUNE_WORKER_WITHOUT_COMPILER
  int nvrtc_major = 0, nvrtc_minor = 0;
  nvrtcVersion(&nvrtc_major, &nvrtc_minor);
  info.set_nvrtc_version(std::to_string(nvrtc_major) + "." + std::to_string(nvrtc_minor));
#else
  info.set_nvrtc_version(NvrtcCompiler::Version());
#endif
  return info;
}

StatusOr<std::vector<v1::DeviceInfo>> QueryAllDevices(const CudaDriver& driver) {
  int count = 0;
  RETURN_IF_ERROR(driver.Check(driver.api().DeviceGetCount(&count), "cuDeviceGetCount"));
  std::vector<v1::DeviceInfo> devices;
  for (int i = 0; i < count; ++i) {
    ASSIGN_OR_RETURN(v1::DeviceInfo info, QueryDeviceInfo(driver, i));
    devices.push_back(std::move(info));
  }
  return devices;
}

StatusOr<double> MeasureCopyGbps(const GpuContext& ctx, uint64_t bytes, int repeats) {
  const auto& api = ctx.api();
  const auto& driver = ctx.driver();
  ASSIGN_OR_RETURN(uint64_t free_bytes, ctx.MemoryFree());
  // Two buffers of `bytes`, leaving a margin for the driver; a copy of a few
  // hundred MiB still dwarfs the L2, which is all the figure needs.
  bytes = std::min(bytes, free_bytes / 3);
  bytes &= ~uint64_t{255};
  if (bytes < (uint64_t{64} << 20)) {
    return ResourceExhausted("only " + std::to_string(free_bytes >> 20) + " MiB free: too little to measure copy bandwidth");
  }
  ASSIGN_OR_RETURN(DeviceBuffer src, DeviceBuffer::Allocate(ctx, bytes, false, nullptr));
  ASSIGN_OR_RETURN(DeviceBuffer dst, DeviceBuffer::Allocate(ctx, bytes, false, nullptr));
  RETURN_IF_ERROR(src.Fill(0x3c, nullptr));
  CUevent start = nullptr, stop = nullptr;
  RETURN_IF_ERROR(driver.Check(api.EventCreate(&start, CU_EVENT_DEFAULT), "cuEventCreate"));
  RETURN_IF_ERROR(driver.Check(api.EventCreate(&stop, CU_EVENT_DEFAULT), "cuEventCreate"));
  std::vector<double> gbps;
  Status status;
  for (int i = 0; i <= repeats && status.ok(); ++i) {
    status = driver.Check(api.EventRecord(start, ctx.stream()), "cuEventRecord");
    if (status.ok()) status = driver.Check(api.MemcpyDtoDAsync(dst.ptr(), src.ptr(), bytes, ctx.stream()), "cuMemcpyDtoDAsync");
    if (status.ok()) status = driver.Check(api.EventRecord(stop, ctx.stream()), "cuEventRecord");
    if (status.ok()) status = ctx.WaitEvent(stop, 60000.0, "copy bandwidth", nullptr);
    float ms = 0.0f;
    if (status.ok()) status = driver.Check(api.EventElapsedTime(&ms, start, stop), "cuEventElapsedTime");
    if (status.ok() && i > 0 && ms > 0.0f) gbps.push_back(2.0 * static_cast<double>(bytes) / (ms * 1e-3) / 1e9);
  }
  api.EventDestroy(start);
  api.EventDestroy(stop);
  RETURN_IF_ERROR(status);
  if (gbps.empty()) return Internal("copy bandwidth: no valid sample");
  return Quantile(gbps, 0.5);
}

}  // namespace scantune
