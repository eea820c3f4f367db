// The one by-value parameter struct every linear_scan kernel takes. Shared by
// the NVRTC-compiled kernels and the host code that fills it, so it may use
// nothing beyond plain C types. Layout is reported to clients by GetKernel.
#pragma once

struct LinearScanParams {
  // Forward: h_t = a_t * h_{t-1} + x_t per channel, h_{-1} = h0 (or 0).
  const void* a;        // (B, L, W), dtype
  const void* x;        // (B, L, W), dtype
  void* h;              // (B, L, W), dtype, output of fwd; input of bwd (h_{t-1} for da)
  const float* h0;      // (B, W), fp32, optional (nullptr: zero)
  float* h_final;       // (B, W), fp32, output of fwd, optional
  // Backward: g_t = dh_t + a_{t+1} g_{t+1}; dx_t = g_t; da_t = g_t * h_{t-1}; dh0 = a_0 * g_0.
  const void* dh;       // (B, L, W), dtype
  void* da;             // (B, L, W), dtype, output
  void* dx;             // (B, L, W), dtype, output
  float* dh0;           // (B, W), fp32, output, optional (only with h0)
  void* workspace;      // workspace_bytes of scratch; the first workspace_zero_bytes zeroed before each phase
  long long batch;
  long long length;
  long long width;
};
