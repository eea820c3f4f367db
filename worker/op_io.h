// OpIo: what an operator's kernels read and write, described as a list of
// tensors, so that one Verifier and one Timer serve every operator. Each
// operator provides an OpIo (OpIoFor): its tensors for a problem, the job's
// random inputs with their float64 references, and the packing of its
// kernels' by-value parameter struct from device pointers.
//
// Conventions every OpIo keeps:
//   - tensors are listed in a fixed order; `bytes` and `reference` of an
//     OpCase are indexed like `tensors`;
//   - an input's bytes are exactly what the kernels read (dtype-rounded), and
//     the reference is computed from those rounded values;
//   - parameters and their gradients are fp32; (B, L, W) activations and
//     their gradients are the problem's dtype; states (h0, final, dh0) fp32;
//   - kSaved tensors are written by the fwd phase and read by the bwd phase
//     (h of rglru, h and the control values of samu). In bwd-only mode the
//     bwd reads the bytes given in `bytes` (the reference forward, rounded);
//   - a reference left empty is not compared (for example a kSaved tensor
//     whose values are an implementation choice);
//   - optional tensors a problem does not use (h0 without has_h0, z without
//     z_gate) are not listed, and Params gets a null pointer for them.
//
// Thread safety: implementations are stateless; thread-safe.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/problem.h"
#include "worker/cuda_driver.h"

namespace scantune {

enum class TensorRole {
  kInput,    // read by fwd (and bwd): x, gates, parameters, h0
  kGradIn,   // upstream gradient, read by bwd: dh, dy
  kFwdOut,   // written by fwd, compared: h / y, final state
  kSaved,    // written by fwd, read by bwd (compared only if it has a reference)
  kBwdOut,   // written by bwd, compared: input and parameter gradients, dh0
};

struct TensorSpec {
  std::string name;             // as in the kernels' parameter struct: "x", "dlambda"
  DType dtype = DType::kF32;    // storage dtype
  uint64_t elements = 0;
  TensorRole role = TensorRole::kInput;
  std::vector<int64_t> dims;    // for positions in failure details, e.g. {B, L, W}
  const char* dim_names = "";   // "b,t,c" -- one letter (or word) per dim, comma-separated
  uint64_t bytes() const { return elements * static_cast<uint64_t>(ElementBytes(dtype)); }
};

// One job's data: inputs as the kernels read them, and the references.
struct OpCase {
  std::vector<TensorSpec> tensors;
  std::vector<std::vector<uint8_t>> bytes;      // inputs, grad-ins; kSaved in bwd-only mode; else empty
  std::vector<std::vector<double>> reference;   // outputs to compare (when `check`); else empty
};

class OpIo {
 public:
  virtual ~OpIo() = default;

  virtual std::vector<TensorSpec> Tensors(const Problem& problem) const = 0;

  // The job's random inputs from `seed` (reproducible on every platform, on
  // all host threads) and, when `check`, the float64 reference of every
  // output the problem's mode produces. bwd-only mode always fills the
  // kSaved tensors' bytes (the bwd reads them even when nothing is compared).
  virtual OpCase Prepare(const Problem& problem, uint64_t seed, bool check) const = 0;

  // The by-value kernel parameter struct as bytes: `pointers[i]` is the
  // device address of Tensors()[i]; `workspace` the plan's workspace.
  virtual std::vector<uint8_t> Params(const Problem& problem, const std::vector<CUdeviceptr>& pointers,
                                      CUdeviceptr workspace) const = 0;
};

// Every operator has one.
const OpIo& OpIoFor(Op op);

// The index of the tensor called `name`, or tensors.size() when the problem
// does not use it (h0 without has_h0).
size_t TensorIndex(const std::vector<TensorSpec>& tensors, std::string_view name);

// For Params implementations: the device pointer of each named tensor (null
// where the problem has none), and the filled struct as bytes.
class PointerMap {
 public:
  PointerMap(std::vector<TensorSpec> tensors, const std::vector<CUdeviceptr>& pointers)
      : tensors_(std::move(tensors)), pointers_(pointers) {}
  void* operator()(std::string_view name) const {
    const size_t i = TensorIndex(tensors_, name);
    return i < pointers_.size() ? reinterpret_cast<void*>(pointers_[i]) : nullptr;
  }
  float* Float(std::string_view name) const { return static_cast<float*>((*this)(name)); }

 private:
  std::vector<TensorSpec> tensors_;
  const std::vector<CUdeviceptr>& pointers_;
};

template <typename Params>
std::vector<uint8_t> AsBytes(const Params& params) {
  std::vector<uint8_t> bytes(sizeof params);
  std::memcpy(bytes.data(), &params, sizeof params);
  return bytes;
}

// The implementations (one file each): worker/op_io_linear_scan.cc,
// worker/op_io_gated.cc (rglru, samu), worker/op_io_ssm.cc (selective_scan).
const OpIo& LinearScanIo();
const OpIo& RgLruIo();
const OpIo& SamuIo();
const OpIo& SelectiveScanIo();

}  // namespace scantune
