#include "worker/cuda_driver.h"

#include <dlfcn.h>

#include <mutex>

namespace scantune {
namespace {

using GetProcAddressV2 = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
using GetProcAddressV1 = CUresult (*)(const char*, void**, int, cuuint64_t);

StatusCode CodeFor(CUresult result) {
  switch (result) {
    case CUDA_ERROR_OUT_OF_MEMORY: return StatusCode::kResourceExhausted;
    case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: return StatusCode::kResourceExhausted;
    case CUDA_ERROR_LAUNCH_TIMEOUT: return StatusCode::kDeadlineExceeded;
    case CUDA_ERROR_INVALID_VALUE: return StatusCode::kInvalidArgument;
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_STUB_LIBRARY:
    case CUDA_ERROR_NOT_INITIALIZED:
      return StatusCode::kFailedPrecondition;
    default: return StatusCode::kInternal;
  }
}

}  // namespace

StatusOr<const CudaDriver*> CudaDriver::Load() {
  static std::mutex mu;
  static std::unique_ptr<CudaDriver> loaded;
  std::lock_guard<std::mutex> lock(mu);
  if (loaded) return static_cast<const CudaDriver*>(loaded.get());
  ASSIGN_OR_RETURN(std::unique_ptr<CudaDriver> driver, LoadFrom("libcuda.so.1"));
  loaded = std::move(driver);
  return static_cast<const CudaDriver*>(loaded.get());
}

StatusOr<std::unique_ptr<CudaDriver>> CudaDriver::LoadFrom(const std::string& library) {
  std::unique_ptr<CudaDriver> driver(new CudaDriver());
  // RTLD_LOCAL: the driver's symbols stay out of the global namespace; we
  // only ever reach it through the table.
  driver->handle_ = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (driver->handle_ == nullptr) {
    const char* why = ::dlerror();
    return FailedPrecondition("cannot load the CUDA driver (" + library + "): " + (why ? why : "unknown dlopen error") +
                              "; is the NVIDIA driver installed?");
  }
  // cuGetProcAddress_v2 (CUDA 12+) reports whether a symbol exists at the
  // requested version; the older 4-argument form is the fallback for 11.x drivers.
  auto v2 = reinterpret_cast<GetProcAddressV2>(::dlsym(driver->handle_, "cuGetProcAddress_v2"));
  auto v1 = reinterpret_cast<GetProcAddressV1>(::dlsym(driver->handle_, "cuGetProcAddress"));
  if (v2 == nullptr && v1 == nullptr) {
    return FailedPrecondition(library + " has no cuGetProcAddress: the driver is too old (CUDA 11.3+ needed)");
  }
  auto resolve = [&](const char* symbol, void** out) -> Status {
    CUresult r;
    if (v2 != nullptr) {
      CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SUCCESS;
      r = v2(symbol, out, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &found);
      if (r == CUDA_SUCCESS && found != CU_GET_PROC_ADDRESS_SUCCESS) r = CUDA_ERROR_NOT_FOUND;
    } else {
      r = v1(symbol, out, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT);
    }
    if (r == CUDA_ERROR_STUB_LIBRARY) {
      return FailedPrecondition(library + " is the CUDA toolkit's link stub, not a driver (CUDA_ERROR_STUB_LIBRARY)");
    }
    if (r != CUDA_SUCCESS || *out == nullptr) {
      return FailedPrecondition(std::string("the CUDA driver in ") + library + " lacks " + symbol + " (error " +
                                std::to_string(static_cast<int>(r)) + "); it is older than CUDA " +
                                std::to_string(CUDA_VERSION / 1000) + "." + std::to_string(CUDA_VERSION % 1000 / 10) +
                                " needs");
    }
    return Status::Ok();
  };
#define SCANTUNE_CUDA_RESOLVE(member, symbol) \
  RETURN_IF_ERROR(resolve(#symbol, reinterpret_cast<void**>(&driver->api_.member)));
  SCANTUNE_CUDA_DRIVER_FUNCTIONS(SCANTUNE_CUDA_RESOLVE)
#undef SCANTUNE_CUDA_RESOLVE

  CUresult r = driver->api_.Init(0);
  if (r != CUDA_SUCCESS) {
    return FailedPrecondition("cuInit failed: " + driver->ErrorText(r));
  }
  RETURN_IF_ERROR(driver->Check(driver->api_.DriverGetVersion(&driver->driver_version_), "cuDriverGetVersion"));
  return driver;
}

CudaDriver::~CudaDriver() {
  // The handle is deliberately not dlclose'd: the driver keeps threads and
  // atexit handlers that must outlive any unload.
}

std::string CudaDriver::ErrorText(CUresult result) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (api_.GetErrorName != nullptr) api_.GetErrorName(result, &name);
  if (api_.GetErrorString != nullptr) api_.GetErrorString(result, &text);
  std::string out = name ? name : "CUDA error " + std::to_string(static_cast<int>(result));
  if (text != nullptr) out += std::string(" (") + text + ")";
  return out;
}

Status CudaDriver::Check(CUresult result, const char* call, CudaCallSite site, CudaFailure* failure) const {
  if (result == CUDA_SUCCESS) return Status::Ok();
  if (failure != nullptr && !failure->failed()) {
    failure->result = result;
    failure->site = site;
    failure->call = call;
  }
  return Status(CodeFor(result), std::string(call) + ": " + ErrorText(result));
}

bool IsStickyCudaError(CUresult result) {
  switch (result) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
    case CUDA_ERROR_UNKNOWN:
      return true;
    default:
      return false;
  }
}

v1::ResultState ClassifyCudaFailure(const CudaFailure& failure) {
  switch (failure.result) {
    case CUDA_SUCCESS: return v1::OK;
    case CUDA_ERROR_OUT_OF_MEMORY: return v1::OUT_OF_MEMORY;
    case CUDA_ERROR_LAUNCH_TIMEOUT: return v1::TIMEOUT;
    case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: return v1::OUT_OF_RESOURCES;
    default: break;
  }
  if (IsStickyCudaError(failure.result)) return v1::ILLEGAL_ADDRESS;
  switch (failure.site) {
    case CudaCallSite::kModuleLoad:
      switch (failure.result) {
        // The image does not load on this device at all: a build problem,
        // not a resource limit.
        case CUDA_ERROR_NO_BINARY_FOR_GPU:
        case CUDA_ERROR_INVALID_IMAGE:
        case CUDA_ERROR_INVALID_PTX:
        case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
        case CUDA_ERROR_INVALID_SOURCE:
        case CUDA_ERROR_NOT_FOUND:
          return v1::COMPILE_FAILED;
        default:
          return v1::OUT_OF_RESOURCES;
      }
    case CudaCallSite::kLaunch:
      // INVALID_VALUE on launch means the geometry or shared memory exceeds
      // what the function may use on this device.
      return v1::OUT_OF_RESOURCES;
    case CudaCallSite::kExecution:
      return v1::ILLEGAL_ADDRESS;
    case CudaCallSite::kSetup:
      break;
  }
  return v1::STATE_UNSPECIFIED;  // not attributable to the candidate
}

}  // namespace scantune
