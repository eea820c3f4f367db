// NvrtcCompiler: one NVRTC program per (variant, dtype, arch) from the
// embedded sources. Stateless apart from the timeout, so every method is
// thread-safe (NVRTC itself is thread-safe across programs).
#include "compiler/nvrtc_compiler.h"

#include <nvrtc.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "common/log.h"
#include "compiler/kernel_sources.h"
#include "compiler/plan.h"

namespace scantune {
namespace {

// The module's one translation unit; everything else comes in as headers.
constexpr char kMainName[] = "scantune_module.cu";
std::string MainSource(Op op) { return std::string("#include \"") + MainHeader(op) + "\"\n"; }

// NVRTC 13 does not ship cuda_bf16.h / cuda_fp16.h as built-in headers, so
// the toolkit's include directory is passed with -I. Looked up at run time
// (the binary may run on another machine than it was built on); the build
// machine's directory is the last resort before the conventional path.
std::string FindCudaInclude() {
  std::vector<std::string> candidates;
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    if (const char* root = std::getenv(var); root != nullptr && *root != '\0') {
      candidates.push_back(std::string(root) + "/include");
    }
  }
#ifdef SCANTUNE_BUILD_CUDA_INCLUDE
  candidates.push_back(SCANTUNE_BUILD_CUDA_INCLUDE);
#endif
  candidates.push_back("/usr/local/cuda/include");
  std::error_code ec;
  for (const std::string& dir : candidates) {
    if (std::filesystem::exists(dir + "/cuda_bf16.h", ec)) return dir;
  }
  return "";
}

const std::string& CudaInclude() {
  static const std::string dir = [] {
    std::string found = FindCudaInclude();
    if (found.empty()) {
      Logger("compiler")->warn("no CUDA include directory with cuda_bf16.h found (set CUDA_HOME); "
                               "bf16/fp16 kernels will fail to compile");
    } else {
      Logger("compiler")->debug("CUDA headers from {}", found);
    }
    return found;
  }();
  return dir;
}

// Options that determine the cubin. The -I path is left out on purpose: it
// differs between machines but not in effect (the NVRTC version pins the
// headers' toolkit), and it must not split the cache.
std::vector<std::string> KeyOptions(const CompileRequest& request) {
  return {
      "--gpu-architecture=sm_" + std::to_string(request.cc_major * 10 + request.cc_minor),
      "-std=c++17",
      "-default-device",
      "-lineinfo",
      // The register/spill report lands in the log kept with every compile.
      "--ptxas-options=-v",
      // No --use_fast_math: IEEE fp32 (no flush-to-zero) keeps the carry
      // within the fp32 tolerance; these kernels have no transcendentals to speed up.
  };
}

std::string Hex64(uint64_t h) {
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

uint64_t Fnv1a(uint64_t h, const std::string& text) {
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  // Field separator, so that ("ab", "c") and ("a", "bc") differ.
  h ^= 0xff;
  h *= 1099511628211ull;
  return h;
}

std::string ProgramLog(nvrtcProgram program) {
  size_t size = 0;
  if (nvrtcGetProgramLogSize(program, &size) != NVRTC_SUCCESS || size <= 1) return "";
  std::string log(size, '\0');
  if (nvrtcGetProgramLog(program, log.data()) != NVRTC_SUCCESS) return "";
  log.resize(size - 1);  // drop the terminating NUL
  return log;
}

// Owns an nvrtcProgram; destroys it on every path.
class Program {
 public:
  Program() = default;
  ~Program() {
    if (program_ != nullptr) nvrtcDestroyProgram(&program_);
  }
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;
  nvrtcProgram* out() { return &program_; }
  nvrtcProgram get() const { return program_; }

 private:
  nvrtcProgram program_ = nullptr;
};

Status NvrtcError(nvrtcResult result, const char* what) {
  return Internal(std::string(what) + ": " + nvrtcGetErrorString(result));
}

// The compile itself, run on its own thread so that the caller can stop
// waiting at the timeout.
StatusOr<CompileResult> CompileNow(const CompileRequest& request, const std::vector<std::string>& names,
                                   const std::vector<std::string>& options) {
  CompileResult result;
  result.arch = "sm_" + std::to_string(request.cc_major * 10 + request.cc_minor);
  const std::vector<EmbeddedSource>& sources = EmbeddedSources();
  std::vector<const char*> header_texts, header_names;
  for (const EmbeddedSource& source : sources) {
    header_texts.push_back(source.text);
    header_names.push_back(source.name);
  }
  Program program;
  const std::string main_source = MainSource(request.op);
  nvrtcResult rc = nvrtcCreateProgram(program.out(), main_source.c_str(), kMainName, static_cast<int>(sources.size()),
                                      header_texts.data(), header_names.data());
  if (rc != NVRTC_SUCCESS) return NvrtcError(rc, "nvrtcCreateProgram");
  for (const std::string& name : names) {
    rc = nvrtcAddNameExpression(program.get(), name.c_str());
    if (rc != NVRTC_SUCCESS) return NvrtcError(rc, ("nvrtcAddNameExpression " + name).c_str());
  }
  std::vector<const char*> option_ptrs;
  for (const std::string& option : options) option_ptrs.push_back(option.c_str());

  rc = nvrtcCompileProgram(program.get(), static_cast<int>(option_ptrs.size()), option_ptrs.data());
  result.log = ProgramLog(program.get());
  if (rc == NVRTC_ERROR_COMPILATION) {
    result.state = v1::COMPILE_FAILED;
    return result;
  }
  if (rc != NVRTC_SUCCESS) {
    // Bad options or out of memory: the compiler, not the variant, is at fault.
    return NvrtcError(rc, "nvrtcCompileProgram").Annotate(result.log);
  }
  for (const std::string& name : names) {
    const char* lowered = nullptr;
    rc = nvrtcGetLoweredName(program.get(), name.c_str(), &lowered);
    if (rc != NVRTC_SUCCESS || lowered == nullptr) {
      result.state = v1::COMPILE_FAILED;
      result.log += "\nno lowered name for " + name + ": " + nvrtcGetErrorString(rc);
      return result;
    }
    result.lowered_names[name] = lowered;
  }
  size_t cubin_size = 0;
  rc = nvrtcGetCUBINSize(program.get(), &cubin_size);
  if (rc != NVRTC_SUCCESS) return NvrtcError(rc, "nvrtcGetCUBINSize");
  if (cubin_size == 0) {
    // Happens when the architecture is virtual (compute_XY): only PTX exists.
    result.state = v1::COMPILE_FAILED;
    result.log += "\nNVRTC produced no CUBIN for " + result.arch;
    return result;
  }
  result.cubin.resize(cubin_size);
  rc = nvrtcGetCUBIN(program.get(), result.cubin.data());
  if (rc != NVRTC_SUCCESS) return NvrtcError(rc, "nvrtcGetCUBIN");
  result.state = v1::OK;
  return result;
}

}  // namespace

struct NvrtcCompiler::InFlight {
  std::mutex mu;
  std::condition_variable idle_cv;
  int running = 0;
};

NvrtcCompiler::NvrtcCompiler(double timeout_ms) : timeout_ms_(timeout_ms), in_flight_(std::make_shared<InFlight>()) {}

NvrtcCompiler::~NvrtcCompiler() {
  std::unique_lock<std::mutex> lock(in_flight_->mu);
  in_flight_->idle_cv.wait(lock, [&] { return in_flight_->running == 0; });
}

std::string NvrtcCompiler::Version() {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return "unknown";
  return std::to_string(major) + "." + std::to_string(minor);
}

std::string NvrtcCompiler::CacheKey(const CompileRequest& request) const {
  uint64_t h = 14695981039346656037ull;
  h = Fnv1a(h, SourceHash());
  h = Fnv1a(h, "nvrtc " + Version());
  h = Fnv1a(h, std::string("op ") + OpName(request.op));
  for (const std::string& option : KeyOptions(request)) h = Fnv1a(h, option);
  for (const std::string& name : NameExpressions(request.variant, request.op, request.dtype, request.ssm, request.shape)) h = Fnv1a(h, name);
  return Hex64(h);
}

StatusOr<CompileResult> NvrtcCompiler::Compile(const CompileRequest& request) const {
  const std::vector<std::string> names = NameExpressions(request.variant, request.op, request.dtype, request.ssm, request.shape);
  if (names.empty()) {
    return InvalidArgument("no kernels for variant " + request.variant.Name() + " of " + OpName(request.op));
  }
  std::vector<std::string> options = KeyOptions(request);
  if (const std::string& include = CudaInclude(); !include.empty()) options.push_back("-I" + include);

  // The compile runs on a detached thread that owns its inputs: NVRTC cannot
  // be interrupted, so on timeout the caller gets COMPILE_TIMEOUT at once and
  // the thread finishes in the background; the compiler's destructor waits
  // for it, so it never runs on into static destruction at exit.
  struct Shared {
    std::mutex mu;
    std::condition_variable done_cv;
    bool done = false;
    std::optional<StatusOr<CompileResult>> outcome;
  };
  auto shared = std::make_shared<Shared>();
  const auto start = std::chrono::steady_clock::now();
  {
    std::lock_guard<std::mutex> lock(in_flight_->mu);
    ++in_flight_->running;
  }
  std::thread([shared, in_flight = in_flight_, request, names, options] {
    StatusOr<CompileResult> outcome = CompileNow(request, names, options);
    {
      std::lock_guard<std::mutex> lock(shared->mu);
      shared->outcome.emplace(std::move(outcome));
      shared->done = true;
      shared->done_cv.notify_all();
    }
    std::lock_guard<std::mutex> lock(in_flight->mu);
    --in_flight->running;
    in_flight->idle_cv.notify_all();
  }).detach();

  std::unique_lock<std::mutex> lock(shared->mu);
  const bool finished = shared->done_cv.wait_for(lock, std::chrono::duration<double, std::milli>(timeout_ms_),
                                                 [&] { return shared->done; });
  const double elapsed_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const std::string key = CacheKey(request);
  if (!finished) {
    CompileResult timeout;
    timeout.state = v1::COMPILE_TIMEOUT;
    timeout.compile_ms = elapsed_ms;
    timeout.cache_key = key;
    timeout.arch = "sm_" + std::to_string(request.cc_major * 10 + request.cc_minor);
    timeout.log = "NVRTC compile of " + request.variant.Name() + " exceeded " + std::to_string(timeout_ms_) + " ms";
    Logger("compiler")->warn("{}", timeout.log);
    return timeout;
  }
  StatusOr<CompileResult> outcome = std::move(*shared->outcome);
  if (!outcome.ok()) return outcome.status().Annotate("compiling " + request.variant.Name());
  outcome->compile_ms = elapsed_ms;
  outcome->cache_key = key;
  Logger("compiler")->debug("{} {} {}: {} in {:.0f} ms", request.variant.Name(), DTypeName(request.dtype),
                            outcome->arch, v1::ResultState_Name(outcome->state), elapsed_ms);
  return outcome;
}

std::vector<StatusOr<CompileResult>> CompileAll(const NvrtcCompiler& compiler,
                                                const std::vector<CompileRequest>& requests, int threads) {
  std::vector<std::optional<StatusOr<CompileResult>>> slots(requests.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < requests.size(); i = next++) slots[i].emplace(compiler.Compile(requests[i]));
  };
  const int pool = std::max(1, std::min<int>(threads, static_cast<int>(requests.size())));
  std::vector<std::thread> workers;
  for (int t = 1; t < pool; ++t) workers.emplace_back(work);
  work();
  for (std::thread& worker : workers) worker.join();
  std::vector<StatusOr<CompileResult>> results;
  results.reserve(requests.size());
  for (auto& slot : slots) results.push_back(std::move(*slot));
  return results;
}

}  // namespace scantune
