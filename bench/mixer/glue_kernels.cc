#include "bench/mixer/glue_kernels.h"

#include <nvrtc.h>

#include <algorithm>
#include <string>
#include <vector>

namespace scantune::mixer {
namespace {

// Header-free (NVRTC finds no CUDA headers on some machines): bf16 is
// handled as its bit pattern.
constexpr const char* kSource = R"(
typedef unsigned short bf16_t;
typedef unsigned long long u64;
__device__ __forceinline__ float bf16_to_f32(bf16_t v) { return __uint_as_float(((unsigned)v) << 16); }
__device__ __forceinline__ bf16_t f32_to_bf16(float f) {
  unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (bf16_t)0x7fc0;
  u += 0x7fffu + ((u >> 16) & 1u);
  return (bf16_t)(u >> 16);
}
__device__ __forceinline__ float uniform(u64 seed, u64 i) {
  u64 z = seed * 0x9E3779B97F4A7C15ull + i + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return (float)(z >> 40) * (1.0f / 16777216.0f);
}
extern "C" __global__ void mixer_fill_bf16(bf16_t* p, long long n, u64 seed, float lo, float hi) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    p[i] = f32_to_bf16(lo + (hi - lo) * uniform(seed, (u64)i));
}
extern "C" __global__ void mixer_fill_f32(float* p, long long n, u64 seed, float lo, float hi) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    p[i] = lo + (hi - lo) * uniform(seed, (u64)i);
}
extern "C" __global__ void mixer_cast_bf16(const float* in, bf16_t* out, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    out[i] = f32_to_bf16(in[i]);
}
extern "C" __global__ void mixer_add_bias2(bf16_t* ga, bf16_t* gx, const float* ba, const float* bx,
                                           long long rows, long long width) {
  const long long n = rows * width;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    const long long c = i % width;
    ga[i] = f32_to_bf16(bf16_to_f32(ga[i]) + ba[c]);
    gx[i] = f32_to_bf16(bf16_to_f32(gx[i]) + bx[c]);
  }
}
// 8 bf16 (16 bytes) per item; width % 8 == 0 and 16-byte aligned rows.
__device__ __forceinline__ uint4 add8(uint4 v, const float* b) {
  unsigned w[4] = {v.x, v.y, v.z, v.w};
  for (int j = 0; j < 4; ++j) {
    const float lo = bf16_to_f32((bf16_t)(w[j] & 0xffffu)) + b[2 * j];
    const float hi = bf16_to_f32((bf16_t)(w[j] >> 16)) + b[2 * j + 1];
    w[j] = (unsigned)f32_to_bf16(lo) | ((unsigned)f32_to_bf16(hi) << 16);
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}
extern "C" __global__ void mixer_add_bias2_vec8(uint4* ga, uint4* gx, const float* ba, const float* bx,
                                                long long rows, long long width) {
  const long long n8 = rows * width / 8;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n8; i += (long long)gridDim.x * blockDim.x) {
    const long long c = (i * 8) % width;
    ga[i] = add8(ga[i], ba + c);
    gx[i] = add8(gx[i], bx + c);
  }
}
)";

constexpr unsigned kThreads = 256;

}  // namespace

StatusOr<std::vector<char>> CompileGlueCubin(int cc_major, int cc_minor) {
  nvrtcProgram program = nullptr;
  if (nvrtcCreateProgram(&program, kSource, "mixer_glue.cu", 0, nullptr, nullptr) != NVRTC_SUCCESS) {
    return Internal("nvrtcCreateProgram failed for the mixer glue kernels");
  }
  struct ProgramGuard {
    nvrtcProgram* p;
    ~ProgramGuard() { nvrtcDestroyProgram(p); }
  } guard{&program};
  const std::string arch = "--gpu-architecture=sm_" + std::to_string(cc_major) + std::to_string(cc_minor);
  const char* options[] = {arch.c_str(), "--std=c++17", "-default-device"};
  const nvrtcResult compiled = nvrtcCompileProgram(program, 3, options);
  if (compiled != NVRTC_SUCCESS) {
    size_t log_size = 0;
    nvrtcGetProgramLogSize(program, &log_size);
    std::string log(log_size, '\0');
    if (log_size > 0) nvrtcGetProgramLog(program, log.data());
    return Internal(std::string("NVRTC could not compile the mixer glue kernels (") + nvrtcGetErrorString(compiled) +
                    "): " + log);
  }
  size_t cubin_size = 0;
  if (nvrtcGetCUBINSize(program, &cubin_size) != NVRTC_SUCCESS || cubin_size == 0) {
    return Internal("NVRTC produced no cubin for the mixer glue kernels (" + arch + ")");
  }
  std::vector<char> cubin(cubin_size);
  if (nvrtcGetCUBIN(program, cubin.data()) != NVRTC_SUCCESS) return Internal("nvrtcGetCUBIN failed");
  return cubin;
}

StatusOr<std::unique_ptr<GlueKernels>> GlueKernels::Compile(const GpuContext& ctx, int cc_major, int cc_minor,
                                                            int sm_count) {
  std::unique_ptr<GlueKernels> g(new GlueKernels(ctx));
  g->sm_count_ = std::max(1, sm_count);
  ASSIGN_OR_RETURN(std::vector<char> cubin, CompileGlueCubin(cc_major, cc_minor));
  const auto& api = ctx.api();
  const auto& driver = ctx.driver();
  RETURN_IF_ERROR(driver.Check(api.ModuleLoadData(&g->module_, cubin.data()), "cuModuleLoadData(mixer glue)"));
  for (auto [fn, name] : {std::pair{&g->fill_bf16_, "mixer_fill_bf16"}, {&g->fill_f32_, "mixer_fill_f32"},
                          {&g->cast_bf16_, "mixer_cast_bf16"}, {&g->add_bias2_, "mixer_add_bias2"},
                          {&g->add_bias2_vec_, "mixer_add_bias2_vec8"}}) {
    RETURN_IF_ERROR(driver.Check(api.ModuleGetFunction(fn, g->module_, name), "cuModuleGetFunction(mixer glue)"));
  }
  return g;
}

GlueKernels::~GlueKernels() {
  if (module_ != nullptr && !ctx_.lost()) (void)ctx_.api().ModuleUnload(module_);
}

Status GlueKernels::Launch(CUfunction f, uint64_t work_items, void** args, const char* what) const {
  if (work_items == 0) return Status::Ok();
  // Grid-stride loops: enough blocks to fill the device, no more.
  const uint64_t wanted = (work_items + kThreads - 1) / kThreads;
  const unsigned blocks = static_cast<unsigned>(std::min<uint64_t>(wanted, static_cast<uint64_t>(sm_count_) * 16));
  return ctx_.driver().Check(
      ctx_.api().LaunchKernel(f, blocks, 1, 1, kThreads, 1, 1, 0, ctx_.stream(), args, nullptr), what);
}

Status GlueKernels::FillBf16(CUdeviceptr p, uint64_t n, uint64_t seed, float lo, float hi) const {
  long long count = static_cast<long long>(n);
  unsigned long long s = seed;
  void* args[] = {&p, &count, &s, &lo, &hi};
  return Launch(fill_bf16_, n, args, "cuLaunchKernel(mixer_fill_bf16)");
}

Status GlueKernels::FillF32(CUdeviceptr p, uint64_t n, uint64_t seed, float lo, float hi) const {
  long long count = static_cast<long long>(n);
  unsigned long long s = seed;
  void* args[] = {&p, &count, &s, &lo, &hi};
  return Launch(fill_f32_, n, args, "cuLaunchKernel(mixer_fill_f32)");
}

Status GlueKernels::CastToBf16(CUdeviceptr in, CUdeviceptr out, uint64_t n) const {
  long long count = static_cast<long long>(n);
  void* args[] = {&in, &out, &count};
  return Launch(cast_bf16_, n, args, "cuLaunchKernel(mixer_cast_bf16)");
}

Status GlueKernels::AddBias2(CUdeviceptr ga, CUdeviceptr gx, CUdeviceptr ba, CUdeviceptr bx, uint64_t rows,
                             uint64_t width) const {
  long long r = static_cast<long long>(rows);
  long long w = static_cast<long long>(width);
  void* args[] = {&ga, &gx, &ba, &bx, &r, &w};
  const bool vec = width % 8 == 0 && ga % 16 == 0 && gx % 16 == 0;
  if (vec) return Launch(add_bias2_vec_, rows * width / 8, args, "cuLaunchKernel(mixer_add_bias2_vec8)");
  return Launch(add_bias2_, rows * width, args, "cuLaunchKernel(mixer_add_bias2)");
}

}  // namespace scantune::mixer
