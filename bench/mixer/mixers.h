// The two mixers the bench compares, on one shape, with their device buffers:
//   RgLruMixer: gate projections ga = blockdiag(Wa) x + ba, gx = blockdiag(Wx) x + bx
//     (16-head strided-batched GEMMs, cuBLAS, bf16 in/out, fp32 compute; fp32
//     master weights cast to bf16 per forward, as autocast does) and the
//     selected rglru backend; backward: the backend, then dWa, dWx (fp32),
//     dba, dbx (GEMM with a ones vector) and dx += dga Wa + dgx Wx.
//   SamuMixer: the selected samu backend alone (its kernels compute the
//     4-parameter controller).
// Per-token buffers form "sets" (x, dy, saved tensors, gradients) the timing
// loop rotates over; parameters, their gradients and the workspace are shared
// (the stream serialises everything). Each mixer owns its buffers.
//
// Thread safety: not thread-safe; used from the bench's one GPU thread.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/mixer/blas.h"
#include "bench/mixer/glue_kernels.h"
#include "bench/mixer/report.h"
#include "client/kernel_launcher.h"
#include "worker/gpu_context.h"
#include "worker/device_buffer.h"

namespace scantune::mixer {

struct GpuTools {
  const GpuContext* ctx = nullptr;
  const Blas* blas = nullptr;
  const GlueKernels* glue = nullptr;
};

// The GEMM stride check: for a few rows and heads, max |gpu - ref| / max |ref|
// of ga and gx against a float64 host GEMM of the same bf16 inputs.
struct GemmCheck {
  bool pass = false;
  double rel_err = 0;
  std::string detail;
};

class Mixer {
 public:
  virtual ~Mixer() = default;
  virtual const char* architecture() const = 0;
  virtual std::optional<std::string> controller() const = 0;
  virtual uint64_t parameters() const = 0;
  virtual uint64_t control_values_per_token() const = 0;
  // Bytes of one set's per-token buffers.
  virtual uint64_t set_bytes() const = 0;

  // Allocates parameters, gradients, the workspace and `sets` sets, fills
  // random inputs (from `seed`) and packs each set's parameter struct.
  virtual Status Setup(int sets, uint64_t seed) = 0;
  virtual Status EnqueueForward(int set) = 0;
  virtual Status EnqueueBackward(int set) = 0;

  const std::string& backend() const { return kernel_->response().variant(); }
  uint64_t requested_bytes() const { return requested_bytes_; }
  int sets() const { return sets_; }
  void Release();

 protected:
  Mixer(GpuTools tools, ShapeKey shape, const KernelLauncher* kernel) : tools_(tools), shape_(shape), kernel_(kernel) {}
  StatusOr<CUdeviceptr> Allocate(uint64_t bytes);
  // True when the backend's struct has no such field or it accepts null.
  bool MayPassNull(const std::string& field) const;
  uint64_t elements() const { return static_cast<uint64_t>(shape_.batch * shape_.length * shape_.width); }
  uint64_t tokens() const { return static_cast<uint64_t>(shape_.batch * shape_.length); }
  uint64_t states() const { return static_cast<uint64_t>(shape_.batch * shape_.width); }

  GpuTools tools_;
  ShapeKey shape_;
  const KernelLauncher* kernel_;
  std::vector<DeviceBuffer> buffers_;
  uint64_t requested_bytes_ = 0;
  int sets_ = 0;
  CUdeviceptr workspace_ = 0;
  std::vector<std::vector<uint8_t>> params_;  // per set
};

class RgLruMixer final : public Mixer {
 public:
  RgLruMixer(GpuTools tools, ShapeKey shape, int heads, const KernelLauncher* kernel)
      : Mixer(tools, shape, kernel), heads_(heads) {}
  const char* architecture() const override { return "rglru"; }
  std::optional<std::string> controller() const override { return std::nullopt; }
  uint64_t parameters() const override { return RgLruMixerParameters(shape_.width, heads_); }
  uint64_t control_values_per_token() const override { return 2 * static_cast<uint64_t>(shape_.width); }
  uint64_t set_bytes() const override;
  Status Setup(int sets, uint64_t seed) override;
  Status EnqueueForward(int set) override;
  Status EnqueueBackward(int set) override;
  // Synchronises, then checks set 0's gates after a forward.
  StatusOr<GemmCheck> CheckGates();

 private:
  struct Set {
    CUdeviceptr x = 0, dy = 0, gates = 0, h = 0, h_final = 0, dx = 0, dgates = 0;
  };
  BlockDiagShape gemm_shape() const { return {static_cast<int64_t>(tokens()), shape_.width, heads_}; }
  int heads_;
  // Parameters (fp32): weights [Wa heads | Wx heads], biases [ba | bx], Lambda;
  // bf16 weight copies; gradients; a ones vector of M bf16.
  CUdeviceptr w_ = 0, bias_ = 0, lambda_ = 0, w16_ = 0, dw_ = 0, dbias_ = 0, dlambda_ = 0, ones_ = 0;
  std::vector<Set> set_;
};

class SamuMixer final : public Mixer {
 public:
  SamuMixer(GpuTools tools, ShapeKey shape, const KernelLauncher* kernel) : Mixer(tools, shape, kernel) {}
  const char* architecture() const override { return "samu"; }
  // Ours: m_t = fp32 mean over channels, (r_t, i_t) = sigmoid of two
  // 4-parameter affine maps, inside the samu backend's kernels.
  std::optional<std::string> controller() const override { return "fp32_mean_sigmoid_coords_in_backend"; }
  uint64_t parameters() const override { return SamuMixerParameters(shape_.width); }
  uint64_t control_values_per_token() const override { return 2; }
  uint64_t set_bytes() const override;
  Status Setup(int sets, uint64_t seed) override;
  Status EnqueueForward(int set) override;
  Status EnqueueBackward(int set) override;

 private:
  // Parameters [lambda | beta | gamma] (3W fp32), controller (4 fp32); gradients alike.
  CUdeviceptr params_buf_ = 0, controller_ = 0, dparams_ = 0, dcontroller_ = 0;
};

}  // namespace scantune::mixer
