// selective_scan's tensors, inputs, references and parameter struct. No
// kSaved tensor: the backward recomputes the states from the inputs (per-chunk
// checkpoints in the plan's workspace), so bwd-only mode needs nothing extra.
#include <cmath>

#include "kernels_src/selective_scan_params.h"
#include "worker/dtype_convert.h"
#include "worker/input_generator.h"
#include "worker/op_io.h"
#include "worker/parallel.h"
#include "worker/reference_ssm.h"

namespace scantune {
namespace {

constexpr size_t kGrain = 1 << 14;


// n values gen(i) of one stream, rounded to dtype, on all host threads.
template <typename Gen>
std::vector<double> Values(size_t n, DType dtype, Gen gen) {
  std::vector<double> v(n);
  ParallelFor(n, kGrain, [&](size_t, size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) v[i] = RoundToDType(gen(i), dtype);
  });
  return v;
}

struct SsmData {
  std::vector<double> u, delta, A, Bm, Cm, Dv, delta_bias, z, h0, dy;
};

// u, Bm, Cm, z, dy standard normal; delta a step size in (0.01, 0.2) (or,
// with softplus, raw values whose softplus is mostly 0.05 .. 0.4); A
// negative with every 4th state slow (-0.01 .. -0.05: memory over hundreds
// of steps, across chunk and segment boundaries, where carry bugs show), the
// rest -0.1 .. -2; Dv, h0 normal, delta_bias 0.1 x normal (fp32).
SsmData Generate(const Problem& p, uint64_t seed) {
  const Shape& s = p.shape;
  const size_t tok = static_cast<size_t>(s.elements());
  const size_t n = static_cast<size_t>(p.ssm.state);
  const size_t tokn = static_cast<size_t>(s.batch * s.length) * n;
  const size_t D = static_cast<size_t>(s.width);
  SsmData d;
  auto normal = [](uint64_t stream) { return [stream](size_t i) { return NormalAt(stream, i); }; };
  d.u = Values(tok, p.dtype, normal(seed ^ 0x75ull));
  if (p.ssm.delta_softplus) {
    d.delta = Values(tok, p.dtype, [&](size_t i) { return -2.0 + 0.7 * NormalAt(seed ^ 0x64ull, i); });
  } else {
    d.delta = Values(tok, p.dtype, [&](size_t i) { return 0.01 + 0.19 * UniformAt(seed ^ 0x64ull, i + 1); });
  }
  d.A = Values(D * n, DType::kF32, [&](size_t i) {
    const double r = UniformAt(seed ^ 0x41ull, i + 1);
    return (i % n) % 4 == 0 ? -(0.01 + 0.04 * r) : -(0.1 + 1.9 * r);
  });
  d.Bm = Values(tokn, p.dtype, normal(seed ^ 0x42ull));
  d.Cm = Values(tokn, p.dtype, normal(seed ^ 0x43ull));
  d.Dv = Values(D, DType::kF32, normal(seed ^ 0x44ull));
  if (p.ssm.delta_bias) d.delta_bias = Values(D, DType::kF32, [&](size_t i) { return 0.1 * NormalAt(seed ^ 0x62ull, i); });
  if (p.ssm.z_gate) d.z = Values(tok, p.dtype, normal(seed ^ 0x7aull));
  if (p.has_h0) d.h0 = Values(static_cast<size_t>(s.batch) * D * n, DType::kF32, normal(seed ^ 0x68ull));
  d.dy = Values(tok, p.dtype, normal(seed ^ 0x6479ull));
  return d;
}

class SelectiveScanOpIo final : public OpIo {
 public:
  std::vector<TensorSpec> Tensors(const Problem& p) const override {
    const Shape& s = p.shape;
    const int64_t N = p.ssm.state;
    const uint64_t tok = static_cast<uint64_t>(s.elements());
    const uint64_t tokn = static_cast<uint64_t>(s.batch * s.length * N);
    const uint64_t dn = static_cast<uint64_t>(s.width * N), d = static_cast<uint64_t>(s.width);
    const uint64_t states = static_cast<uint64_t>(s.batch * s.width * N);
    const std::vector<int64_t> bld = {s.batch, s.length, s.width}, bln = {s.batch, s.length, N},
                               dnd = {s.width, N}, dd = {s.width}, bdn = {s.batch, s.width, N};
    const DType e = p.dtype, f = DType::kF32;
    std::vector<TensorSpec> t = {
        {"u", e, tok, TensorRole::kInput, bld, "b,t,d"},
        {"delta", e, tok, TensorRole::kInput, bld, "b,t,d"},
        {"A", f, dn, TensorRole::kInput, dnd, "d,n"},
        {"Bm", e, tokn, TensorRole::kInput, bln, "b,t,n"},
        {"Cm", e, tokn, TensorRole::kInput, bln, "b,t,n"},
        {"Dv", f, d, TensorRole::kInput, dd, "d"},
    };
    if (p.ssm.delta_bias) t.push_back({"delta_bias", f, d, TensorRole::kInput, dd, "d"});
    if (p.ssm.z_gate) t.push_back({"z", e, tok, TensorRole::kInput, bld, "b,t,d"});
    if (p.has_h0) t.push_back({"h0", f, states, TensorRole::kInput, bdn, "b,d,n"});
    t.push_back({"dy", e, tok, TensorRole::kGradIn, bld, "b,t,d"});
    t.push_back({"y", e, tok, TensorRole::kFwdOut, bld, "b,t,d"});
    t.push_back({"h_final", f, states, TensorRole::kFwdOut, bdn, "b,d,n"});
    t.push_back({"du", e, tok, TensorRole::kBwdOut, bld, "b,t,d"});
    t.push_back({"ddelta", e, tok, TensorRole::kBwdOut, bld, "b,t,d"});
    t.push_back({"dA", f, dn, TensorRole::kBwdOut, dnd, "d,n"});
    t.push_back({"dBm", e, tokn, TensorRole::kBwdOut, bln, "b,t,n"});
    t.push_back({"dCm", e, tokn, TensorRole::kBwdOut, bln, "b,t,n"});
    t.push_back({"dDv", f, d, TensorRole::kBwdOut, dd, "d"});
    if (p.ssm.delta_bias) t.push_back({"ddelta_bias", f, d, TensorRole::kBwdOut, dd, "d"});
    if (p.ssm.z_gate) t.push_back({"dz", e, tok, TensorRole::kBwdOut, bld, "b,t,d"});
    if (p.has_h0) t.push_back({"dh0", f, states, TensorRole::kBwdOut, bdn, "b,d,n"});
    return t;
  }

  OpCase Prepare(const Problem& p, uint64_t seed, bool check) const override {
    OpCase c;
    c.tensors = Tensors(p);
    c.bytes.resize(c.tensors.size());
    c.reference.resize(c.tensors.size());
    SsmData d = Generate(p, seed);
    auto at = [&](const char* name) { return TensorIndex(c.tensors, name); };
    c.bytes[at("u")] = EncodeAs(p.dtype, d.u);
    c.bytes[at("delta")] = EncodeAs(p.dtype, d.delta);
    c.bytes[at("A")] = EncodeAs(DType::kF32, d.A);
    c.bytes[at("Bm")] = EncodeAs(p.dtype, d.Bm);
    c.bytes[at("Cm")] = EncodeAs(p.dtype, d.Cm);
    c.bytes[at("Dv")] = EncodeAs(DType::kF32, d.Dv);
    if (p.ssm.delta_bias) c.bytes[at("delta_bias")] = EncodeAs(DType::kF32, d.delta_bias);
    if (p.ssm.z_gate) c.bytes[at("z")] = EncodeAs(p.dtype, d.z);
    if (p.has_h0) c.bytes[at("h0")] = EncodeAs(DType::kF32, d.h0);
    c.bytes[at("dy")] = EncodeAs(p.dtype, d.dy);
    if (!check) return c;
    SsmRefInputs in;
    in.shape = p.shape;
    in.state = p.ssm.state;
    in.delta_softplus = p.ssm.delta_softplus;
    in.u = d.u;
    in.delta = d.delta;
    in.A = d.A;
    in.Bm = d.Bm;
    in.Cm = d.Cm;
    in.Dv = d.Dv;
    in.delta_bias = d.delta_bias;
    in.z = d.z;
    in.h0 = d.h0;
    if (p.mode != Mode::kBwd) {
      SsmForwardRef fwd = SelectiveScanForward(in);
      c.reference[at("y")] = std::move(fwd.y);
      c.reference[at("h_final")] = std::move(fwd.h_final);
    }
    if (p.mode != Mode::kFwd) {
      SsmBackwardRef bwd = SelectiveScanBackward(in, d.dy);
      c.reference[at("du")] = std::move(bwd.du);
      c.reference[at("ddelta")] = std::move(bwd.ddelta);
      c.reference[at("dA")] = std::move(bwd.dA);
      c.reference[at("dBm")] = std::move(bwd.dBm);
      c.reference[at("dCm")] = std::move(bwd.dCm);
      c.reference[at("dDv")] = std::move(bwd.dDv);
      if (p.ssm.delta_bias) c.reference[at("ddelta_bias")] = std::move(bwd.ddelta_bias);
      if (p.ssm.z_gate) c.reference[at("dz")] = std::move(bwd.dz);
      if (p.has_h0) c.reference[at("dh0")] = std::move(bwd.dh0);
    }
    return c;
  }

  std::vector<uint8_t> Params(const Problem& p, const std::vector<CUdeviceptr>& ptrs,
                              CUdeviceptr workspace) const override {
    const PointerMap ptr(Tensors(p), ptrs);
    auto fptr = [&](const char* name) { return ptr.Float(name); };
    SelectiveScanParams params{};
    params.u = ptr("u");
    params.delta = ptr("delta");
    params.A = fptr("A");
    params.Bm = ptr("Bm");
    params.Cm = ptr("Cm");
    params.Dv = fptr("Dv");
    params.delta_bias = fptr("delta_bias");
    params.z = ptr("z");
    params.h0 = fptr("h0");
    params.y = ptr("y");
    params.h_final = fptr("h_final");
    params.dy = ptr("dy");
    params.du = ptr("du");
    params.ddelta = ptr("ddelta");
    params.dA = fptr("dA");
    params.dBm = ptr("dBm");
    params.dCm = ptr("dCm");
    params.dDv = fptr("dDv");
    params.ddelta_bias = fptr("ddelta_bias");
    params.dz = ptr("dz");
    params.dh0 = fptr("dh0");
    params.workspace = reinterpret_cast<void*>(workspace);
    params.batch = p.shape.batch;
    params.length = p.shape.length;
    params.dim = p.shape.width;
    params.state = p.ssm.state;
    return AsBytes(params);
  }
};

}  // namespace

const OpIo& SelectiveScanIo() {
  static const SelectiveScanOpIo io;
  return io;
}

}  // namespace scantune
