#include "bench/mixer/blas.h"

#include <cublas_v2.h>

namespace scantune::mixer {
namespace {

Status BlasCheck(cublasStatus_t status, const std::string& what) {
  if (status == CUBLAS_STATUS_SUCCESS) return Status::Ok();
  return Internal(what + " failed: " + cublasGetStatusName(status) + " (" + cublasGetStatusString(status) + ")");
}

}  // namespace

StatusOr<std::unique_ptr<Blas>> Blas::Create(const GpuContext& ctx) {
  RETURN_IF_ERROR(ctx.MakeCurrent());
  std::unique_ptr<Blas> blas(new Blas());
  RETURN_IF_ERROR(BlasCheck(cublasCreate(&blas->handle_), "cublasCreate"));
  // CUstream and cudaStream_t are the same type.
  RETURN_IF_ERROR(BlasCheck(cublasSetStream(blas->handle_, reinterpret_cast<cudaStream_t>(ctx.stream())),
                            "cublasSetStream"));
  RETURN_IF_ERROR(BlasCheck(cublasSetMathMode(blas->handle_, CUBLAS_DEFAULT_MATH), "cublasSetMathMode"));
  return blas;
}

Blas::~Blas() {
  if (handle_ != nullptr) cublasDestroy(handle_);
}

std::string Blas::Version() const {
  int major = 0, minor = 0, patch = 0;
  cublasGetProperty(MAJOR_VERSION, &major);
  cublasGetProperty(MINOR_VERSION, &minor);
  cublasGetProperty(PATCH_LEVEL, &patch);
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

Status Blas::Gemm(const GemmSpec& g, CUdeviceptr a, CUdeviceptr b, CUdeviceptr c, GemmOut out) const {
  const float alpha = 1.0f;
  const float beta = g.beta;
  const cudaDataType_t c_type = out == GemmOut::kBf16 ? CUDA_R_16BF : CUDA_R_32F;
  return BlasCheck(
      cublasGemmStridedBatchedEx(
          handle_, g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(g.m),
          static_cast<int>(g.n), static_cast<int>(g.k), &alpha, reinterpret_cast<const void*>(a), CUDA_R_16BF,
          static_cast<int>(g.lda), g.stride_a, reinterpret_cast<const void*>(b), CUDA_R_16BF, static_cast<int>(g.ldb),
          g.stride_b, &beta, reinterpret_cast<void*>(c), c_type, static_cast<int>(g.ldc), g.stride_c,
          static_cast<int>(g.batch), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      "cublasGemmStridedBatchedEx " + g.ToString());
}

}  // namespace scantune::mixer
