// Blas: one cuBLAS handle bound to the bench's context stream, running the
// GemmSpecs of blockdiag_gemm.h as cublasGemmStridedBatchedEx with bf16
// inputs, CUBLAS_COMPUTE_32F and a bf16 or fp32 output. cuBLAS uses the
// context current on the calling thread (the device's primary context,
// which GpuContext retains).
//
// Thread safety: not thread-safe; used from the bench's one GPU thread.
#pragma once

#include <memory>
#include <string>

#include "bench/mixer/blockdiag_gemm.h"
#include "common/status.h"
#include "worker/gpu_context.h"

struct cublasContext;

namespace scantune::mixer {

enum class GemmOut { kBf16, kF32 };

class Blas {
 public:
  static StatusOr<std::unique_ptr<Blas>> Create(const GpuContext& ctx);
  ~Blas();
  Blas(const Blas&) = delete;
  Blas& operator=(const Blas&) = delete;

  // "13.0.0" (cublasGetProperty).
  std::string Version() const;

  // C = op(A) op(B) + beta C per the spec; A and B bf16.
  Status Gemm(const GemmSpec& spec, CUdeviceptr a, CUdeviceptr b, CUdeviceptr c, GemmOut out) const;

 private:
  Blas() = default;
  cublasContext* handle_ = nullptr;
};

}  // namespace scantune::mixer
