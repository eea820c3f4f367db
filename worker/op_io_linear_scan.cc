// linear_scan's tensors, inputs, references and parameter struct.
#include "kernels_src/linear_scan_params.h"
#include "worker/dtype_convert.h"
#include "worker/input_generator.h"
#include "worker/op_io.h"
#include "worker/reference.h"

namespace scantune {
namespace {

// Tensor order; optional tensors (h0, dh0) are left out without h0, so
// indices are looked up by name through TensorIndex.
class LinearScanOpIo final : public OpIo {
 public:
  std::vector<TensorSpec> Tensors(const Problem& p) const override {
    const Shape& s = p.shape;
    const uint64_t n = static_cast<uint64_t>(s.elements());
    const uint64_t states = static_cast<uint64_t>(s.batch * s.width);
    const std::vector<int64_t> blw = {s.batch, s.length, s.width}, bw = {s.batch, s.width};
    std::vector<TensorSpec> t = {
        {"a", p.dtype, n, TensorRole::kInput, blw, "b,t,c"},
        {"x", p.dtype, n, TensorRole::kInput, blw, "b,t,c"},
    };
    if (p.has_h0) t.push_back({"h0", DType::kF32, states, TensorRole::kInput, bw, "b,c"});
    t.push_back({"dh", p.dtype, n, TensorRole::kGradIn, blw, "b,t,c"});
    t.push_back({"h", p.dtype, n, TensorRole::kSaved, blw, "b,t,c"});
    t.push_back({"h_final", DType::kF32, states, TensorRole::kFwdOut, bw, "b,c"});
    t.push_back({"da", p.dtype, n, TensorRole::kBwdOut, blw, "b,t,c"});
    t.push_back({"dx", p.dtype, n, TensorRole::kBwdOut, blw, "b,t,c"});
    if (p.has_h0) t.push_back({"dh0", DType::kF32, states, TensorRole::kBwdOut, bw, "b,c"});
    return t;
  }

  OpCase Prepare(const Problem& p, uint64_t seed, bool check) const override {
    const bool wants_fwd = p.mode != Mode::kBwd;
    const bool wants_bwd = p.mode != Mode::kFwd;
    OpCase c;
    c.tensors = Tensors(p);
    c.bytes.resize(c.tensors.size());
    c.reference.resize(c.tensors.size());
    LinearScanInputs in = GenerateInputs(p, seed);
    auto at = [&](const char* name) { return TensorIndex(c.tensors, name); };
    c.bytes[at("a")] = EncodeAs(p.dtype, in.a);
    c.bytes[at("x")] = EncodeAs(p.dtype, in.x);
    c.bytes[at("dh")] = EncodeAs(p.dtype, in.dh);
    if (p.has_h0) c.bytes[at("h0")] = EncodeAs(DType::kF32, in.h0);
    // The bwd needs the forward: to compare against, or (bwd only) as its input h.
    if (!check && wants_fwd) return c;
    LinearScanForwardRef fwd = LinearScanForward(p.shape, in.a, in.x, in.h0);
    if (!wants_fwd) c.bytes[at("h")] = EncodeAs(p.dtype, fwd.h);
    if (!check) return c;
    if (wants_bwd) {
      LinearScanBackwardRef bwd = LinearScanBackward(p.shape, in.a, fwd.h, in.h0, in.dh);
      c.reference[at("da")] = std::move(bwd.da);
      c.reference[at("dx")] = std::move(bwd.dx);
      if (p.has_h0) c.reference[at("dh0")] = std::move(bwd.dh0);
    }
    if (wants_fwd) {
      c.reference[at("h")] = std::move(fwd.h);
      c.reference[at("h_final")] = std::move(fwd.h_final);
    }
    return c;
  }

  std::vector<uint8_t> Params(const Problem& p, const std::vector<CUdeviceptr>& ptrs,
                              CUdeviceptr workspace) const override {
    const PointerMap ptr(Tensors(p), ptrs);
    LinearScanParams params{};
    params.a = ptr("a");
    params.x = ptr("x");
    params.h = ptr("h");
    params.h0 = ptr.Float("h0");
    params.h_final = ptr.Float("h_final");
    params.dh = ptr("dh");
    params.da = ptr("da");
    params.dx = ptr("dx");
    params.dh0 = ptr.Float("dh0");
    params.workspace = reinterpret_cast<void*>(workspace);
    params.batch = p.shape.batch;
    params.length = p.shape.length;
    params.width = p.shape.width;
    return AsBytes(params);
  }
};

}  // namespace

const OpIo& LinearScanIo() {
  static const LinearScanOpIo io;
  return io;
}

}  // namespace scantune
