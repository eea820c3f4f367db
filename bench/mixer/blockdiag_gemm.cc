#include "bench/mixer/blockdiag_gemm.h"

#include <algorithm>
#include <limits>
#include <sstream>

namespace scantune::mixer {
namespace {

constexpr int64_t kIntMax = std::numeric_limits<int>::max();

}  // namespace

std::string GemmSpec::ToString() const {
  std::ostringstream o;
  o << "gemm(" << (trans_a ? 'T' : 'N') << (trans_b ? 'T' : 'N') << " m=" << m << " n=" << n << " k=" << k
    << " lda=" << lda << " ldb=" << ldb << " ldc=" << ldc << " strides=" << stride_a << "/" << stride_b << "/"
    << stride_c << " batch=" << batch << " beta=" << beta << ")";
  return o.str();
}

Status ValidateShape(const BlockDiagShape& s) {
  if (s.tokens <= 0 || s.width <= 0 || s.heads <= 0) {
    return InvalidArgument("block-diagonal GEMM needs positive tokens, width and heads");
  }
  if (s.width % s.heads != 0) {
    return InvalidArgument("width " + std::to_string(s.width) + " is not a multiple of " + std::to_string(s.heads) +
                           " heads");
  }
  if (s.tokens > kIntMax || s.width > kIntMax) {
    return InvalidArgument("tokens or width beyond cuBLAS's int range");
  }
  return Status::Ok();
}

Status ValidateGemm(const GemmSpec& g) {
  if (g.m <= 0 || g.n <= 0 || g.k <= 0 || g.batch <= 0) return InvalidArgument(g.ToString() + ": empty dimension");
  for (int64_t v : {g.m, g.n, g.k, g.lda, g.ldb, g.ldc, g.batch}) {
    if (v > kIntMax) return InvalidArgument(g.ToString() + ": beyond cuBLAS's int range");
  }
  // Stored A is m x k (N) or k x m (T); its leading dimension covers its rows.
  const int64_t a_rows = g.trans_a ? g.k : g.m;
  const int64_t b_rows = g.trans_b ? g.n : g.k;
  if (g.lda < std::max<int64_t>(1, a_rows)) return InvalidArgument(g.ToString() + ": lda too small");
  if (g.ldb < std::max<int64_t>(1, b_rows)) return InvalidArgument(g.ToString() + ": ldb too small");
  if (g.ldc < std::max<int64_t>(1, g.m)) return InvalidArgument(g.ToString() + ": ldc too small");
  return Status::Ok();
}

// Column-major view: x is (W, M) with ld W; head h's x_h^T is its rows
// [hD, hD+D): offset hD. W_h (D_out, D_in) row-major is W_h^T column-major
// with ld D.

GemmSpec GateForwardGemm(const BlockDiagShape& s) {
  // gate_h^T (D x M) = W_h (D x D) * x_h^T (D x M): A = stored W_h^T, op T.
  const int64_t d = s.head_dim();
  GemmSpec g;
  g.trans_a = true;
  g.trans_b = false;
  g.m = d, g.n = s.tokens, g.k = d;
  g.lda = d, g.ldb = s.width, g.ldc = s.width;
  g.stride_a = d * d, g.stride_b = d, g.stride_c = d;
  g.batch = s.heads;
  g.beta = 0.0f;
  return g;
}

GemmSpec InputGradGemm(const BlockDiagShape& s) {
  // dx_h^T (D x M) += W_h^T (D x D) * dgate_h^T (D x M): A = stored W_h^T, op N.
  const int64_t d = s.head_dim();
  GemmSpec g;
  g.trans_a = false;
  g.trans_b = false;
  g.m = d, g.n = s.tokens, g.k = d;
  g.lda = d, g.ldb = s.width, g.ldc = s.width;
  g.stride_a = d * d, g.stride_b = d, g.stride_c = d;
  g.batch = s.heads;
  g.beta = 1.0f;
  return g;
}

GemmSpec WeightGradGemm(const BlockDiagShape& s) {
  // dW_h (D_out x D_in) row-major = dW_h^T column-major (D_in x D_out)
  //   = x_h^T (D x M) * dgate_h (M x D): A = x_h^T, op N; B = stored dgate_h^T, op T.
  const int64_t d = s.head_dim();
  GemmSpec g;
  g.trans_a = false;
  g.trans_b = true;
  g.m = d, g.n = d, g.k = s.tokens;
  g.lda = s.width, g.ldb = s.width, g.ldc = d;
  g.stride_a = d, g.stride_b = d, g.stride_c = d * d;
  g.batch = s.heads;
  g.beta = 0.0f;
  return g;
}

GemmSpec BiasGradGemm(const BlockDiagShape& s, int64_t gates, int64_t gate_stride) {
  // db (W x 1) = dgate^T (W x M, ld W) * ones (M x 1).
  GemmSpec g;
  g.trans_a = false;
  g.trans_b = false;
  g.m = s.width, g.n = 1, g.k = s.tokens;
  g.lda = s.width, g.ldb = s.tokens, g.ldc = s.width;
  g.stride_a = gate_stride, g.stride_b = 0, g.stride_c = s.width;
  g.batch = gates;
  g.beta = 0.0f;
  return g;
}

uint64_t RgLruMixerParameters(int64_t width, int64_t heads) {
  const uint64_t w = static_cast<uint64_t>(width);
  return 2 * w * (w / static_cast<uint64_t>(heads)) + 3 * w;
}

uint64_t SamuMixerParameters(int64_t width) { return 3 * static_cast<uint64_t>(width) + 4; }

void HostGemm(const GemmSpec& g, const std::vector<double>& a, const std::vector<double>& b, std::vector<double>* c) {
  for (int64_t batch = 0; batch < g.batch; ++batch) {
    const double* A = a.data() + batch * g.stride_a;
    const double* B = b.data() + batch * g.stride_b;
    double* C = c->data() + batch * g.stride_c;
    for (int64_t j = 0; j < g.n; ++j) {
      for (int64_t i = 0; i < g.m; ++i) {
        double sum = 0.0;
        for (int64_t l = 0; l < g.k; ++l) {
          const double av = g.trans_a ? A[l + i * g.lda] : A[i + l * g.lda];
          const double bv = g.trans_b ? B[j + l * g.ldb] : B[l + j * g.ldb];
          sum += av * bv;
        }
        double& out = C[i + j * g.ldc];
        out = sum + (g.beta != 0.0f ? static_cast<double>(g.beta) * out : 0.0);
      }
    }
  }
}

}  // namespace scantune::mixer
