// Shape math of the RG-LRU mixer's block-diagonal gate projections as
// cuBLAS strided-batched GEMMs over heads, on token-major activations.
//
// Activations are row-major (M, W) with M = B*L tokens; head h owns columns
// [h*D, (h+1)*D), D = W / heads. cuBLAS is column-major, so a row-major (M, W)
// tensor is a column-major (W, M) matrix with leading dimension W, and head
// h's slice is that matrix from row h*D on: pointer offset h*D, leading
// dimension W. A batch over heads is then a constant stride of D elements, so
// no transpose or gather copy is needed. Weights are PyTorch-Linear style:
// head h's W_h is (D_out, D_in) row-major, D*D elements, heads contiguous.
//
//   forward      gate_h  = x_h W_h^T            (+ bias, added separately)
//   input grad   dx_h   += dgate_h W_h          (beta = 1: accumulates)
//   weight grad  dW_h    = dgate_h^T x_h        (fp32 output)
//   bias grad    db      = column sums of dgate = dgate^T 1 (GEMM with n = 1;
//                          batch 2 runs ga's and gx's when they sit `gate_stride`
//                          elements apart)
//
// Pure value code; thread-safe. HostGemm runs a GemmSpec on the CPU with
// cuBLAS's semantics so the math is testable without a GPU.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace scantune::mixer {

// One cublasGemmStridedBatchedEx call (column-major, element strides):
// C_b = alpha * op(A_b) op(B_b) + beta * C_b for b < batch, where X_b starts
// stride_x elements after X_{b-1}. op(A) is m x k, op(B) is k x n, C is m x n.
struct GemmSpec {
  bool trans_a = false;
  bool trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  int64_t batch = 1;
  float beta = 0.0f;  // alpha is always 1
  std::string ToString() const;
};

struct BlockDiagShape {
  int64_t tokens = 0;  // M = B * L
  int64_t width = 0;   // W
  int64_t heads = 16;  // H; W % H == 0
  int64_t head_dim() const { return width / heads; }
};

// INVALID_ARGUMENT unless every dimension is positive, W % H == 0 and each
// value fits cuBLAS's int arguments.
Status ValidateShape(const BlockDiagShape& s);
// INVALID_ARGUMENT when cuBLAS would reject the leading dimensions.
Status ValidateGemm(const GemmSpec& g);

// A = weights (all heads), B = x, C = gate.
GemmSpec GateForwardGemm(const BlockDiagShape& s);
// A = weights, B = dgate, C = dx (accumulated).
GemmSpec InputGradGemm(const BlockDiagShape& s);
// A = x, B = dgate, C = dW (fp32).
GemmSpec WeightGradGemm(const BlockDiagShape& s);
// A = dgate (`gates` gate tensors, `gate_stride` elements apart), B = ones (M),
// C = db (`gates` bias vectors of W, contiguous).
GemmSpec BiasGradGemm(const BlockDiagShape& s, int64_t gates, int64_t gate_stride);

// Parameters of the mixer: 2 block-diagonal maps (2 * W * D) plus Lambda and
// the two biases (3W). 530,432 at W = 2048 (seed 001).
uint64_t RgLruMixerParameters(int64_t width, int64_t heads);
// lambda, beta, gamma (3W) and the 4 controller scalars.
uint64_t SamuMixerParameters(int64_t width);

// C = op(A) op(B) (+ beta C) on the host with cuBLAS's column-major
// semantics, in double. The vectors hold every batch's elements.
void HostGemm(const GemmSpec& g, const std::vector<double>& a, const std::vector<double>& b, std::vector<double>* c);

}  // namespace scantune::mixer
