// rglru's and samu's tensors, inputs, references and parameter structs
// (kernels in kernels_src/gated_scan.cuh, references in worker/reference_gated.h).
//
// Inputs are reproducible from the seed (counter-based splitmix64, as
// worker/input_generator.cc) and well conditioned: x, ga, gx, dh, dy
// standard normal; the decay parameter is drawn so that the base decay
// exp(-8 softplus(lambda)) is uniform in (0.5, 0.999); samu's beta and
// gamma are in (0.5, 1.5) (with h0, one gamma is 2^-20), its controller weights O(1), and its x gets a
// per-token offset (0.5 x standard normal) so that m_t, and with it r_t and
// i_t, really vary from token to token.
//
// References: the backward is computed from the forward h rounded to the
// dtype, which is what the bwd reads in bwd-only mode (and, up to the
// kernel's own rounding, in fwd_bwd).
#include <cmath>

#include "kernels_src/rglru_params.h"
#include "kernels_src/samu_params.h"
#include "worker/dtype_convert.h"
#include "worker/input_generator.h"
#include "worker/op_io.h"
#include "worker/parallel.h"
#include "worker/reference_gated.h"

namespace scantune {
namespace {

constexpr size_t kGrain = 1 << 14;


// n standard normals (+ offset(i)) of stream `seed`, rounded to dtype.
template <typename Offset>
std::vector<double> Normals(uint64_t seed, size_t n, DType dtype, Offset offset) {
  std::vector<double> v(n);
  ParallelFor(n, kGrain, [&](size_t, size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) v[i] = RoundToDType(NormalAt(seed, i) + offset(i), dtype);
  });
  return v;
}
std::vector<double> Normals(uint64_t seed, size_t n, DType dtype) {
  return Normals(seed, n, dtype, [](size_t) { return 0.0; });
}

// Decay parameters with exp(-8 softplus(p)) uniform in (0.5, 0.999), fp32.
std::vector<double> DecayParams(uint64_t seed, size_t width) {
  std::vector<double> p(width);
  for (size_t c = 0; c < width; ++c) {
    const double a = 0.5 + 0.499 * UniformAt(seed, c + 1);
    const double sp = -std::log(a) / kGatedC;
    p[c] = static_cast<float>(std::log(std::expm1(sp)));
  }
  return p;
}

std::vector<double> UniformParams(uint64_t seed, size_t width, double lo, double hi) {
  std::vector<double> p(width);
  for (size_t c = 0; c < width; ++c) p[c] = static_cast<float>(lo + (hi - lo) * UniformAt(seed, c + 1));
  return p;
}

std::vector<double> Fp32Normals(uint64_t seed, size_t n) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(NormalAt(seed, i));
  return v;
}

// The dtype-rounded copy of values (what a kernel stores and reads back).
std::vector<double> Rounded(const std::vector<double>& values, DType dtype) {
  std::vector<double> out(values.size());
  ParallelFor(values.size(), kGrain, [&](size_t, size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) out[i] = RoundToDType(values[i], dtype);
  });
  return out;
}

struct Dims {
  uint64_t n, states, width;
  std::vector<int64_t> blw, bw, w;
};
Dims DimsOf(const Problem& p) {
  const Shape& s = p.shape;
  return {static_cast<uint64_t>(s.elements()), static_cast<uint64_t>(s.batch * s.width),
          static_cast<uint64_t>(s.width), {s.batch, s.length, s.width}, {s.batch, s.width}, {s.width}};
}


std::vector<double> Decode(const OpCase& c, size_t i) {
  return DecodeFrom(c.tensors[i].dtype, c.bytes[i].data(), c.tensors[i].elements);
}


// ---- rglru ---------------------------------------------------------------------

class RgLruOpIo final : public OpIo {
 public:
  std::vector<TensorSpec> Tensors(const Problem& p) const override {
    const Dims d = DimsOf(p);
    std::vector<TensorSpec> t = {
        {"x", p.dtype, d.n, TensorRole::kInput, d.blw, "b,t,c"},
        {"ga", p.dtype, d.n, TensorRole::kInput, d.blw, "b,t,c"},
        {"gx", p.dtype, d.n, TensorRole::kInput, d.blw, "b,t,c"},
        {"lambda", DType::kF32, d.width, TensorRole::kInput, d.w, "c"},
    };
    if (p.has_h0) t.push_back({"h0", DType::kF32, d.states, TensorRole::kInput, d.bw, "b,c"});
    t.push_back({"dh", p.dtype, d.n, TensorRole::kGradIn, d.blw, "b,t,c"});
    t.push_back({"h", p.dtype, d.n, TensorRole::kSaved, d.blw, "b,t,c"});
    t.push_back({"h_final", DType::kF32, d.states, TensorRole::kFwdOut, d.bw, "b,c"});
    t.push_back({"dx", p.dtype, d.n, TensorRole::kBwdOut, d.blw, "b,t,c"});
    t.push_back({"dga", p.dtype, d.n, TensorRole::kBwdOut, d.blw, "b,t,c"});
    t.push_back({"dgx", p.dtype, d.n, TensorRole::kBwdOut, d.blw, "b,t,c"});
    t.push_back({"dlambda", DType::kF32, d.width, TensorRole::kBwdOut, d.w, "c"});
    if (p.has_h0) t.push_back({"dh0", DType::kF32, d.states, TensorRole::kBwdOut, d.bw, "b,c"});
    return t;
  }

  OpCase Prepare(const Problem& p, uint64_t seed, bool check) const override {
    const bool wants_fwd = p.mode != Mode::kBwd;
    const bool wants_bwd = p.mode != Mode::kFwd;
    const Dims d = DimsOf(p);
    OpCase c;
    c.tensors = Tensors(p);
    c.bytes.resize(c.tensors.size());
    c.reference.resize(c.tensors.size());
    auto at = [&](const char* name) { return TensorIndex(c.tensors, name); };
    // One stream per tensor, so adding a tensor never changes the others.
    const std::vector<double> x = Normals(seed ^ 0x78ull, d.n, p.dtype);
    const std::vector<double> ga = Normals(seed ^ 0x6761ull, d.n, p.dtype);
    const std::vector<double> gx = Normals(seed ^ 0x6778ull, d.n, p.dtype);
    const std::vector<double> lambda = DecayParams(seed ^ 0x6c61ull, d.width);
    const std::vector<double> dh = Normals(seed ^ 0x64ull, d.n, p.dtype);
    std::vector<double> h0;
    if (p.has_h0) h0 = Fp32Normals(seed ^ 0x68ull, d.states);
    c.bytes[at("x")] = EncodeAs(p.dtype, x);
    c.bytes[at("ga")] = EncodeAs(p.dtype, ga);
    c.bytes[at("gx")] = EncodeAs(p.dtype, gx);
    c.bytes[at("lambda")] = EncodeAs(DType::kF32, lambda);
    c.bytes[at("dh")] = EncodeAs(p.dtype, dh);
    if (p.has_h0) c.bytes[at("h0")] = EncodeAs(DType::kF32, h0);
    if (!check && wants_fwd) return c;
    const RgLruInputs in{x, ga, gx, lambda, h0};
    StatusOr<RgLruForwardRef> fwd = RgLruForward(p.shape, in);
    if (!fwd.ok()) return c;  // shapes are validated before a job runs
    const std::vector<double> h_stored = Rounded(fwd->h, p.dtype);
    if (!wants_fwd) c.bytes[at("h")] = EncodeAs(p.dtype, h_stored);
    if (!check) return c;
    if (wants_bwd) {
      StatusOr<RgLruBackwardRef> bwd = RgLruBackward(p.shape, in, h_stored, dh, {});
      if (bwd.ok()) {
        c.reference[at("dx")] = std::move(bwd->dx);
        c.reference[at("dga")] = std::move(bwd->dga);
        c.reference[at("dgx")] = std::move(bwd->dgx);
        c.reference[at("dlambda")] = std::move(bwd->dlambda);
        if (p.has_h0) c.reference[at("dh0")] = std::move(bwd->dh0);
      }
    }
    if (wants_fwd) {
      c.reference[at("h")] = std::move(fwd->h);
      c.reference[at("h_final")] = std::move(fwd->h_final);
    }
    return c;
  }

  std::vector<uint8_t> Params(const Problem& p, const std::vector<CUdeviceptr>& ptrs,
                              CUdeviceptr workspace) const override {
    const PointerMap ptr(Tensors(p), ptrs);
    RgLruParams params{};
    params.x = ptr("x");
    params.ga = ptr("ga");
    params.gx = ptr("gx");
    params.lambda = static_cast<const float*>(ptr("lambda"));
    params.h = ptr("h");
    params.h0 = static_cast<const float*>(ptr("h0"));
    params.h_final = static_cast<float*>(ptr("h_final"));
    params.dh = ptr("dh");
    params.dx = ptr("dx");
    params.dga = ptr("dga");
    params.dgx = ptr("dgx");
    params.dlambda = static_cast<float*>(ptr("dlambda"));
    params.dh0 = static_cast<float*>(ptr("dh0"));
    params.workspace = reinterpret_cast<void*>(workspace);
    params.batch = p.shape.batch;
    params.length = p.shape.length;
    params.width = p.shape.width;
    return AsBytes(params);
  }
};

// ---- samu -----------------------------------------------------------------------

class SamuOpIo final : public OpIo {
 public:
  std::vector<TensorSpec> Tensors(const Problem& p) const override {
    const Dims d = DimsOf(p);
    const uint64_t tokens = static_cast<uint64_t>(p.shape.batch * p.shape.length);
    const std::vector<int64_t> bl2 = {p.shape.batch, p.shape.length, 2}, four = {4};
    std::vector<TensorSpec> t = {
        {"x", p.dtype, d.n, TensorRole::kInput, d.blw, "b,t,c"},
        {"lambda", DType::kF32, d.width, TensorRole::kInput, d.w, "c"},
        {"beta", DType::kF32, d.width, TensorRole::kInput, d.w, "c"},
        {"gamma", DType::kF32, d.width, TensorRole::kInput, d.w, "c"},
        {"controller", DType::kF32, 4, TensorRole::kInput, four, "k"},
    };
    if (p.has_h0) t.push_back({"h0", DType::kF32, d.states, TensorRole::kInput, d.bw, "b,c"});
    t.push_back({"dy", p.dtype, d.n, TensorRole::kGradIn, d.blw, "b,t,c"});
    t.push_back({"y", p.dtype, d.n, TensorRole::kFwdOut, d.blw, "b,t,c"});
    t.push_back({"h", p.dtype, d.n, TensorRole::kSaved, d.blw, "b,t,c"});
    t.push_back({"ctrl", DType::kF32, 2 * tokens, TensorRole::kSaved, bl2, "b,t,k"});
    t.push_back({"h_final", DType::kF32, d.states, TensorRole::kFwdOut, d.bw, "b,c"});
    t.push_back({"dx", p.dtype, d.n, TensorRole::kBwdOut, d.blw, "b,t,c"});
    t.push_back({"dlambda", DType::kF32, d.width, TensorRole::kBwdOut, d.w, "c"});
    t.push_back({"dbeta", DType::kF32, d.width, TensorRole::kBwdOut, d.w, "c"});
    t.push_back({"dgamma", DType::kF32, d.width, TensorRole::kBwdOut, d.w, "c"});
    t.push_back({"dcontroller", DType::kF32, 4, TensorRole::kBwdOut, four, "k"});
    if (p.has_h0) t.push_back({"dh0", DType::kF32, d.states, TensorRole::kBwdOut, d.bw, "b,c"});
    return t;
  }

  OpCase Prepare(const Problem& p, uint64_t seed, bool check) const override {
    const bool wants_fwd = p.mode != Mode::kBwd;
    const bool wants_bwd = p.mode != Mode::kFwd;
    const Dims d = DimsOf(p);
    const uint64_t width = d.width;
    OpCase c;
    c.tensors = Tensors(p);
    c.bytes.resize(c.tensors.size());
    c.reference.resize(c.tensors.size());
    auto at = [&](const char* name) { return TensorIndex(c.tensors, name); };
    const uint64_t shift_seed = seed ^ 0x6d74ull;
    const std::vector<double> x =
        Normals(seed ^ 0x78ull, d.n, p.dtype, [&](size_t i) { return 0.5 * NormalAt(shift_seed, i / width); });
    const std::vector<double> lambda = DecayParams(seed ^ 0x6c61ull, d.width);
    const std::vector<double> beta = UniformParams(seed ^ 0x6265ull, d.width, 0.5, 1.5);
    std::vector<double> gamma = UniformParams(seed ^ 0x6761ull, d.width, 0.5, 1.5);
    // With h0, gammas at and below SamuGroupKeepsH's 2^-14 (each in its own
    // 8-channel group): the _y1 backward takes h, not y / gamma, for a group
    // with a gamma below it (near zero, zero, just below and negative) and y /
    // gamma at exactly 2^-14; also at widths that are multiples of 8 (whose
    // rows are all in groups of 8). All fp32-exact, as the other draws.
    if (p.has_h0 && d.width >= 16) gamma[d.width / 2] = 0x1p-20;
    if (p.has_h0 && d.width >= 64) {
      gamma[d.width / 4] = 0.0;
      gamma[3 * d.width / 4] = 0x1p-14;
      gamma[3 * d.width / 4 + 8] = -0x1.ffp-15;
    }
    const std::vector<double> controller = {
        static_cast<float>(0.5 + UniformAt(seed ^ 0x6374ull, 1)), static_cast<float>(NormalAt(seed ^ 0x6374ull, 1)),
        static_cast<float>(-0.5 - UniformAt(seed ^ 0x6374ull, 2)), static_cast<float>(NormalAt(seed ^ 0x6374ull, 2))};
    const std::vector<double> dy = Normals(seed ^ 0x6479ull, d.n, p.dtype);
    std::vector<double> h0;
    if (p.has_h0) h0 = Fp32Normals(seed ^ 0x68ull, d.states);
    c.bytes[at("x")] = EncodeAs(p.dtype, x);
    c.bytes[at("lambda")] = EncodeAs(DType::kF32, lambda);
    c.bytes[at("beta")] = EncodeAs(DType::kF32, beta);
    c.bytes[at("gamma")] = EncodeAs(DType::kF32, gamma);
    c.bytes[at("controller")] = EncodeAs(DType::kF32, controller);
    c.bytes[at("dy")] = EncodeAs(p.dtype, dy);
    if (p.has_h0) c.bytes[at("h0")] = EncodeAs(DType::kF32, h0);
    if (!check && wants_fwd) return c;
    // The reference reads exactly the bytes the kernels read.
    const std::vector<double> ctl = Decode(c, at("controller"));
    const SamuInputs in{x, lambda, beta, gamma, {ctl[0], ctl[1], ctl[2], ctl[3]}, h0};
    StatusOr<SamuForwardRef> fwd = SamuForward(p.shape, in);
    if (!fwd.ok()) return c;  // shapes are validated before a job runs
    const std::vector<double> h_stored = Rounded(fwd->h, p.dtype);
    if (!wants_fwd) {
      c.bytes[at("h")] = EncodeAs(p.dtype, h_stored);
      c.bytes[at("ctrl")] = EncodeAs(DType::kF32, fwd->control);
    }
    if (!check) return c;
    if (wants_bwd) {
      StatusOr<SamuBackwardRef> bwd = SamuBackward(p.shape, in, h_stored, dy, {});
      if (bwd.ok()) {
        c.reference[at("dx")] = std::move(bwd->dx);
        c.reference[at("dlambda")] = std::move(bwd->dlambda);
        c.reference[at("dbeta")] = std::move(bwd->dbeta);
        c.reference[at("dgamma")] = std::move(bwd->dgamma);
        c.reference[at("dcontroller")] = {bwd->dctrl.w_r, bwd->dctrl.b_r, bwd->dctrl.w_i, bwd->dctrl.b_i};
        if (p.has_h0) c.reference[at("dh0")] = std::move(bwd->dh0);
      }
    }
    if (wants_fwd) {
      c.reference[at("y")] = std::move(fwd->y);
      // The saved h is compared where a fwd-only caller keeps it for any
      // backward. In fwd_bwd it is the backend's own (`chunked` _h4 saves
      // every 4th row and recomputes the rest): the gradients prove it.
      if (!wants_bwd) c.reference[at("h")] = std::move(fwd->h);
      c.reference[at("ctrl")] = std::move(fwd->control);
      c.reference[at("h_final")] = std::move(fwd->h_final);
    }
    return c;
  }

  std::vector<uint8_t> Params(const Problem& p, const std::vector<CUdeviceptr>& ptrs,
                              CUdeviceptr workspace) const override {
    const PointerMap ptr(Tensors(p), ptrs);
    SamuParams params{};
    params.x = ptr("x");
    params.lambda = static_cast<const float*>(ptr("lambda"));
    params.beta = static_cast<const float*>(ptr("beta"));
    params.gamma = static_cast<const float*>(ptr("gamma"));
    params.controller = static_cast<const float*>(ptr("controller"));
    params.y = ptr("y");
    params.h = ptr("h");
    params.ctrl = static_cast<float*>(ptr("ctrl"));
    params.h0 = static_cast<const float*>(ptr("h0"));
    params.h_final = static_cast<float*>(ptr("h_final"));
    params.dy = ptr("dy");
    params.dx = ptr("dx");
    params.dlambda = static_cast<float*>(ptr("dlambda"));
    params.dbeta = static_cast<float*>(ptr("dbeta"));
    params.dgamma = static_cast<float*>(ptr("dgamma"));
    params.dcontroller = static_cast<float*>(ptr("dcontroller"));
    params.dh0 = static_cast<float*>(ptr("dh0"));
    params.workspace = reinterpret_cast<void*>(workspace);
    params.batch = p.shape.batch;
    params.length = p.shape.length;
    params.width = p.shape.width;
    return AsBytes(params);
  }
};

}  // namespace

const OpIo& RgLruIo() {
  static const RgLruOpIo io;
  return io;
}

const OpIo& SamuIo() {
  static const SamuOpIo io;
  return io;
}

}  // namespace scantune
