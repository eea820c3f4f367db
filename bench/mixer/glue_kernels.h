// GlueKernels: the mixer bench's own small kernels, compiled once with NVRTC
// for the device and loaded into its context: random fills (a counter-based
// hash, so inputs need no host generation or upload), the fp32 -> bf16 cast
// of the gate weights (autocast's per-forward weight cast) and the bias add
// of both gate pre-activations in one pass. All run on the context's stream.
//
// Thread safety: not thread-safe; used from the bench's one GPU thread.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/status.h"
#include "worker/gpu_context.h"

namespace scantune::mixer {

// NVRTC only (no GPU needed): the glue module's cubin for sm_<major><minor>.
StatusOr<std::vector<char>> CompileGlueCubin(int cc_major, int cc_minor);

class GlueKernels {
 public:
  // Compiles for sm_<cc_major><cc_minor>.
  static StatusOr<std::unique_ptr<GlueKernels>> Compile(const GpuContext& ctx, int cc_major, int cc_minor,
                                                        int sm_count);
  ~GlueKernels();
  GlueKernels(const GlueKernels&) = delete;
  GlueKernels& operator=(const GlueKernels&) = delete;

  // p[i] = lo + (hi - lo) * u(seed, i), u uniform in [0, 1).
  Status FillBf16(CUdeviceptr p, uint64_t n, uint64_t seed, float lo, float hi) const;
  Status FillF32(CUdeviceptr p, uint64_t n, uint64_t seed, float lo, float hi) const;
  // out (bf16) = in (fp32), round to nearest even.
  Status CastToBf16(CUdeviceptr in, CUdeviceptr out, uint64_t n) const;
  // ga[r, c] += ba[c], gx[r, c] += bx[c] for r < rows, c < width (bf16 in place, fp32 bias).
  Status AddBias2(CUdeviceptr ga, CUdeviceptr gx, CUdeviceptr ba, CUdeviceptr bx, uint64_t rows,
                  uint64_t width) const;

 private:
  explicit GlueKernels(const GpuContext& ctx) : ctx_(ctx) {}
  Status Launch(CUfunction f, uint64_t work_items, void** args, const char* what) const;

  const GpuContext& ctx_;
  int sm_count_ = 1;
  CUmodule module_ = nullptr;
  CUfunction fill_bf16_ = nullptr, fill_f32_ = nullptr, cast_bf16_ = nullptr, add_bias2_ = nullptr,
             add_bias2_vec_ = nullptr;
};

}  // namespace scantune::mixer
