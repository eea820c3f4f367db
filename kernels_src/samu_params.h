// The one by-value parameter struct every samu kernel takes (the kernels of
// kernels_src/gated_scan.cuh). Plain C types only (shared with NVRTC). Field
// names are a contract: GetKernel reports this layout (ParamLayout) and
// clients fill the struct by field name.
#pragma once

struct SamuParams {
  // Forward: m_t = mean_c x_{t,c}; r_t = sigmoid(w_r m_t + b_r), i_t = sigmoid(w_i m_t + b_i);
  // a = exp(-8 softplus(lambda_c) r_t); h = a h_{t-1} + sqrt(1 - a^2) i_t beta_c x; y = gamma_c h.
  const void* x;              // (B, L, W), dtype
  const float* lambda;        // (W), fp32
  const float* beta;          // (W), fp32
  const float* gamma;         // (W), fp32
  const float* controller;    // [4] fp32: w_r, b_r, w_i, b_i
  void* y;                    // (B, L, W), dtype, output of fwd (`chunked` _y1: also read by bwd, h = y / gamma)
  void* h;                    // (B, L, W), dtype, written by fwd, read by bwd (h_{t-1}); `chunked` _y1 (fwd_bwd
                              // only): written and read only in the 8-channel groups whose gamma y cannot invert
  float* ctrl;                // (B, L, 2) fp32: (r_t, i_t) per token, written by fwd, read by bwd
  const float* h0;            // (B, W), fp32, optional (nullptr: zero)
  float* h_final;             // (B, W), fp32, output of fwd, optional
  // Backward: gradients of a loss with gradient dy w.r.t. y (none into h_final).
  const void* dy;             // (B, L, W), dtype
  void* dx;                   // (B, L, W), dtype, output (includes the path through m_t)
  float* dlambda;             // (W), fp32, output
  float* dbeta;               // (W), fp32, output
  float* dgamma;              // (W), fp32, output
  float* dcontroller;         // [4] fp32, output: d w_r, d b_r, d w_i, d b_i
  float* dh0;                 // (B, W), fp32, output, optional (only with h0)
  void* workspace;            // workspace_bytes of scratch; the first workspace_zero_bytes zeroed before each phase
  long long batch;
  long long length;
  long long width;
};
