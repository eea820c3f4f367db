// The one by-value parameter struct every rglru kernel takes (the kernels of
// kernels_src/gated_scan.cuh). Shared by the NVRTC-compiled kernels and the
// host code that fills it, so it may use nothing beyond plain C types. Field
// names are a contract: GetKernel reports this layout (ParamLayout) and
// clients fill the struct by field name.
#pragma once

struct RgLruParams {
  // Forward: r = sigmoid(ga), i = sigmoid(gx), log a_t = -8 softplus(lambda) r_t,
  // h_t = a_t h_{t-1} + sqrt(1 - a_t^2) i_t x_t, h_{-1} = h0 (or 0).
  const void* x;         // (B, L, W), dtype
  const void* ga;        // (B, L, W), dtype: recurrence-gate pre-activation
  const void* gx;        // (B, L, W), dtype: input-gate pre-activation
  const float* lambda;   // (W), fp32
  void* h;               // (B, L, W), dtype: output of fwd, input of bwd (h_{t-1})
  const float* h0;       // (B, W), fp32, optional (nullptr: zero)
  float* h_final;        // (B, W), fp32, output of fwd, optional
  // Backward: gradients of a loss with gradient dh w.r.t. h (none into h_final).
  const void* dh;        // (B, L, W), dtype
  void* dx;              // (B, L, W), dtype, output
  void* dga;             // (B, L, W), dtype, output
  void* dgx;             // (B, L, W), dtype, output
  float* dlambda;        // (W), fp32, output (summed over B and L)
  float* dh0;            // (B, W), fp32, output, optional (only with h0)
  void* workspace;       // workspace_bytes of scratch; the first workspace_zero_bytes zeroed before each phase
  long long batch;
  long long length;
  long long width;
};
