// How many MUFU results an SM delivers a clock (ex2, sqrt, rsqrt approx), against
// FFMA as a yardstick: every thread runs kChains independent chains of one op, so
// the pipe, not latency, bounds the rate. Cycles are the SM's own (clock64 per block,
// all blocks resident at once). Build and run on the GPU:
//   nvcc -O3 -arch=sm_90 -o /tmp/mufu_rate bench/micro/mufu_rate.cu && /tmp/mufu_rate
#include <cstdio>
#include <cuda_runtime.h>

constexpr int kChains = 8;
constexpr int kIters = 4096;

enum Op { kEx2, kSqrt, kRsqrt, kFfma };

template <Op OP>
__device__ __forceinline__ float Apply(float v) {
  float r;
  if constexpr (OP == kEx2) asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v));
  if constexpr (OP == kSqrt) asm volatile("sqrt.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v));
  if constexpr (OP == kRsqrt) asm volatile("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v));
  if constexpr (OP == kFfma) asm volatile("fma.rn.ftz.f32 %0, %1, 0f3F7FBE77, 0f3A83126F;" : "=f"(r) : "f"(v));
  return r;
}

template <Op OP>
__global__ void Rate(float* out, long long* cycles) {
  float v[kChains];
#pragma unroll
  for (int c = 0; c < kChains; ++c) v[c] = 0.5f + 1e-3f * (threadIdx.x + c);
  __syncthreads();
  const long long t0 = clock64();
  for (int i = 0; i < kIters; ++i) {
#pragma unroll
    for (int c = 0; c < kChains; ++c) v[c] = Apply<OP>(v[c]);
  }
  __syncthreads();
  const long long t1 = clock64();
  float s = 0.0f;
#pragma unroll
  for (int c = 0; c < kChains; ++c) s += v[c];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
  if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
}

template <Op OP>
void Measure(const char* name, int sms, int blocks_per_sm, int threads) {
  const int blocks = sms * blocks_per_sm;
  float* out;
  long long* cycles;
  cudaMalloc(&out, sizeof(float) * blocks * threads);
  cudaMalloc(&cycles, sizeof(long long) * blocks);
  Rate<OP><<<blocks, threads>>>(out, cycles);  // warm-up
  Rate<OP><<<blocks, threads>>>(out, cycles);
  cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess) {
    std::printf("%s: %s\n", name, cudaGetErrorString(err));
    return;
  }
  long long host[4096];
  cudaMemcpy(host, cycles, sizeof(long long) * blocks, cudaMemcpyDeviceToHost);
  long long worst = 0;
  for (int b = 0; b < blocks; ++b) worst = host[b] > worst ? host[b] : worst;
  const double ops_per_sm = double(blocks_per_sm) * threads * kChains * kIters;
  std::printf("%-6s %2d blocks x %4d threads a SM: %7.2f results a clock per SM (slowest block %lld cycles)\n", name,
              blocks_per_sm, threads, ops_per_sm / double(worst), worst);
  cudaFree(out);
  cudaFree(cycles);
}

int main() {
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  std::printf("%s, %d SMs, cc %d.%d\n", prop.name, prop.multiProcessorCount, prop.major, prop.minor);
  for (int bps : {1, 2, 4}) {
    Measure<kEx2>("ex2", prop.multiProcessorCount, bps, 512);
    Measure<kSqrt>("sqrt", prop.multiProcessorCount, bps, 512);
    Measure<kRsqrt>("rsqrt", prop.multiProcessorCount, bps, 512);
    Measure<kFfma>("ffma", prop.multiProcessorCount, bps, 512);
  }
  return 0;
}
