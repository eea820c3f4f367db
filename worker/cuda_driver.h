// CudaDriver: the CUDA driver API, loaded at run time. It owns the dlopen
// handle of libcuda.so.1 and the table of entry points resolved through
// cuGetProcAddress (by base name at the CUDA_VERSION of the headers we build
// against, so versioned symbols such as cuMemAlloc_v2 are picked by the
// driver, never guessed). Nothing links libcuda, so every binary starts on a
// machine without a driver and reports why CUDA is unusable.
//
// Thread safety: Load() is safe to call from any thread (the table is built
// once); the table is immutable afterwards and may be shared freely. The
// driver calls themselves follow the driver's own rules.
#pragma once

#include <cuda.h>

#include <memory>
#include <string>

#include "common/status.h"
#include "proto/scantune.pb.h"

namespace scantune {

// X(member, driver base name). Members are named without the "cu" prefix so
// that cuda.h's versioning macros (cuMemAlloc -> cuMemAlloc_v2) never rename
// them; the types come from decltype of those same macros, so each pointer's
// signature is the one the headers declare for CUDA_VERSION.
#define SCANTUNE_CUDA_DRIVER_FUNCTIONS(X)        \
  X(Init, cuInit)                                \
  X(DriverGetVersion, cuDriverGetVersion)        \
  X(GetErrorName, cuGetErrorName)                \
  X(GetErrorString, cuGetErrorString)            \
  X(DeviceGet, cuDeviceGet)                      \
  X(DeviceGetCount, cuDeviceGetCount)            \
  X(DeviceGetName, cuDeviceGetName)              \
  X(DeviceGetUuid, cuDeviceGetUuid)              \
  X(DeviceGetAttribute, cuDeviceGetAttribute)    \
  X(DeviceTotalMem, cuDeviceTotalMem)            \
  X(DevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain) \
  X(DevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease) \
  X(CtxSetCurrent, cuCtxSetCurrent)              \
  X(CtxGetCurrent, cuCtxGetCurrent)              \
  X(CtxSynchronize, cuCtxSynchronize)            \
  X(ModuleLoadData, cuModuleLoadData)            \
  X(ModuleUnload, cuModuleUnload)                \
  X(ModuleGetFunction, cuModuleGetFunction)      \
  X(FuncGetAttribute, cuFuncGetAttribute)        \
  X(FuncSetAttribute, cuFuncSetAttribute)        \
  X(LaunchKernel, cuLaunchKernel)                \
  X(LaunchKernelEx, cuLaunchKernelEx)            \
  X(MemAlloc, cuMemAlloc)                        \
  X(MemFree, cuMemFree)                          \
  X(MemGetInfo, cuMemGetInfo)                    \
  X(MemcpyHtoD, cuMemcpyHtoD)                    \
  X(MemcpyDtoH, cuMemcpyDtoH)                    \
  X(MemcpyDtoD, cuMemcpyDtoD)                    \
  X(MemcpyDtoDAsync, cuMemcpyDtoDAsync)          \
  X(MemsetD8Async, cuMemsetD8Async)              \
  X(MemsetD8, cuMemsetD8)                        \
  X(MemsetD32, cuMemsetD32)                      \
  X(StreamCreate, cuStreamCreate)                \
  X(StreamDestroy, cuStreamDestroy)              \
  X(StreamSynchronize, cuStreamSynchronize)      \
  X(StreamQuery, cuStreamQuery)                  \
  X(EventCreate, cuEventCreate)                  \
  X(EventDestroy, cuEventDestroy)                \
  X(EventRecord, cuEventRecord)                  \
  X(EventSynchronize, cuEventSynchronize)        \
  X(EventQuery, cuEventQuery)                    \
  X(EventElapsedTime, cuEventElapsedTime)

// Where a driver call failed, for classifying the failure of a candidate.
enum class CudaCallSite {
  kSetup,       // allocation, copies, context: not the candidate's fault unless out of memory
  kModuleLoad,  // cuModuleLoadData / cuModuleGetFunction / cuFuncSetAttribute
  kLaunch,      // cuLaunchKernel
  kExecution,   // a synchronisation that reports what a kernel did
};

// The first failing driver call of a piece of work: the raw CUresult (so the
// caller can classify it) and the call that returned it.
struct CudaFailure {
  CUresult result = CUDA_SUCCESS;
  CudaCallSite site = CudaCallSite::kSetup;
  std::string call;
  bool failed() const { return result != CUDA_SUCCESS; }
};

class CudaDriver {
 public:
  struct Api {
#define SCANTUNE_CUDA_MEMBER(member, symbol) decltype(&::symbol) member = nullptr;
    SCANTUNE_CUDA_DRIVER_FUNCTIONS(SCANTUNE_CUDA_MEMBER)
#undef SCANTUNE_CUDA_MEMBER
  };

  // dlopens `library` (default libcuda.so.1), resolves every entry point and
  // calls cuInit(0). FAILED_PRECONDITION with the reason when there is no
  // usable driver (library missing, stub library, no device, ...). The first
  // successful load of the default library is cached for the process.
  static StatusOr<const CudaDriver*> Load();
  // Loads a specific library (tests); the result is owned by the caller.
  static StatusOr<std::unique_ptr<CudaDriver>> LoadFrom(const std::string& library);

  ~CudaDriver();
  CudaDriver(const CudaDriver&) = delete;
  CudaDriver& operator=(const CudaDriver&) = delete;

  const Api& api() const { return api_; }
  int driver_version() const { return driver_version_; }

  // "CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered)".
  std::string ErrorText(CUresult result) const;

  // OK for CUDA_SUCCESS; otherwise a Status naming the call and the error,
  // with a StatusCode that fits (out of memory -> RESOURCE_EXHAUSTED, ...).
  // When `failure` is given and holds no earlier failure, the raw CUresult,
  // the site and the call are stored there: the first failure is the cause,
  // later ones (sticky errors) are echoes.
  Status Check(CUresult result, const char* call, CudaCallSite site = CudaCallSite::kSetup,
               CudaFailure* failure = nullptr) const;

 private:
  CudaDriver() = default;
  void* handle_ = nullptr;
  Api api_;
  int driver_version_ = 0;
};

// Errors after which the context is unusable (every later call fails): the
// worker reports the candidate and exits so the daemon starts a fresh one.
bool IsStickyCudaError(CUresult result);

// The record state for a candidate whose work failed with `failure`.
v1::ResultState ClassifyCudaFailure(const CudaFailure& failure);

}  // namespace scantune
