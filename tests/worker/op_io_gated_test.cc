// rglru's and samu's OpIo (worker/op_io_gated.cc), CPU only: tensor lists and
// roles, reproducible inputs, references equal to the float64 references of
// worker/reference_gated.h on the prepared (dtype-rounded) inputs, bwd-only
// saved tensors, and Params packing device pointers at ParamLayout's offsets.
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "compiler/plan.h"
#include "worker/dtype_convert.h"
#include "worker/op_io.h"
#include "worker/reference_gated.h"

namespace scantune {
namespace {

Problem MakeProblem(Op op, Shape shape, DType dtype, Mode mode, bool h0) {
  Problem p;
  p.op = op;
  p.shape = shape;
  p.dtype = dtype;
  p.mode = mode;
  p.has_h0 = h0;
  return p;
}

std::map<std::string, TensorRole> Roles(const std::vector<TensorSpec>& tensors) {
  std::map<std::string, TensorRole> roles;
  for (const TensorSpec& t : tensors) roles[t.name] = t.role;
  return roles;
}

TEST(OpIoGated, RgLruTensors) {
  const Problem p = MakeProblem(Op::kRgLru, {2, 5, 7}, DType::kBF16, Mode::kFwdBwd, true);
  const std::vector<TensorSpec> t = OpIoFor(Op::kRgLru).Tensors(p);
  const std::map<std::string, TensorRole> roles = Roles(t);
  using enum TensorRole;
  EXPECT_EQ(roles, (std::map<std::string, TensorRole>{
                       {"x", kInput}, {"ga", kInput}, {"gx", kInput}, {"lambda", kInput}, {"h0", kInput},
                       {"dh", kGradIn}, {"h", kSaved}, {"h_final", kFwdOut}, {"dx", kBwdOut}, {"dga", kBwdOut},
                       {"dgx", kBwdOut}, {"dlambda", kBwdOut}, {"dh0", kBwdOut}}));
  for (const TensorSpec& s : t) {
    SCOPED_TRACE(s.name);
    if (s.name == "lambda" || s.name == "dlambda") {
      EXPECT_EQ(s.dtype, DType::kF32);
      EXPECT_EQ(s.elements, 7u);
    } else if (s.name == "h0" || s.name == "dh0" || s.name == "h_final") {
      EXPECT_EQ(s.dtype, DType::kF32);
      EXPECT_EQ(s.elements, 14u);
    } else {
      EXPECT_EQ(s.dtype, DType::kBF16);
      EXPECT_EQ(s.elements, 70u);
      EXPECT_EQ(s.bytes(), 140u);
    }
  }
  const std::vector<TensorSpec> no_h0 = OpIoFor(Op::kRgLru).Tensors(MakeProblem(Op::kRgLru, {2, 5, 7}, DType::kF32,
                                                                               Mode::kFwd, false));
  EXPECT_EQ(no_h0.size(), t.size() - 2);
  EXPECT_EQ(Roles(no_h0).count("h0") + Roles(no_h0).count("dh0"), 0u);
}

TEST(OpIoGated, SamuTensors) {
  const Problem p = MakeProblem(Op::kSamu, {2, 5, 7}, DType::kF16, Mode::kFwdBwd, true);
  const std::vector<TensorSpec> t = OpIoFor(Op::kSamu).Tensors(p);
  using enum TensorRole;
  EXPECT_EQ(Roles(t), (std::map<std::string, TensorRole>{
                          {"x", kInput}, {"lambda", kInput}, {"beta", kInput}, {"gamma", kInput},
                          {"controller", kInput}, {"h0", kInput}, {"dy", kGradIn}, {"y", kFwdOut},
                          {"h", kSaved}, {"ctrl", kSaved}, {"h_final", kFwdOut}, {"dx", kBwdOut},
                          {"dlambda", kBwdOut}, {"dbeta", kBwdOut}, {"dgamma", kBwdOut},
                          {"dcontroller", kBwdOut}, {"dh0", kBwdOut}}));
  for (const TensorSpec& s : t) {
    SCOPED_TRACE(s.name);
    if (s.name == "ctrl") {
      EXPECT_EQ(s.dtype, DType::kF32);
      EXPECT_EQ(s.elements, 20u);  // (B, L, 2)
    } else if (s.name == "controller" || s.name == "dcontroller") {
      EXPECT_EQ(s.elements, 4u);
    } else if (s.name == "x" || s.name == "y" || s.name == "h" || s.name == "dy" || s.name == "dx") {
      EXPECT_EQ(s.dtype, DType::kF16);
      EXPECT_EQ(s.elements, 70u);
    } else {
      EXPECT_EQ(s.dtype, DType::kF32);
    }
  }
}

std::vector<double> Decoded(const OpCase& c, const char* name) {
  const size_t i = TensorIndex(c.tensors, name);
  EXPECT_LT(i, c.tensors.size()) << name;
  return DecodeFrom(c.tensors[i].dtype, c.bytes[i].data(), c.tensors[i].elements);
}
const std::vector<double>& Ref(const OpCase& c, const char* name) { return c.reference[TensorIndex(c.tensors, name)]; }
std::vector<double> Rounded(const std::vector<double>& v, DType dtype) {
  std::vector<double> out;
  for (double x : v) out.push_back(RoundToDType(x, dtype));
  return out;
}

TEST(OpIoGated, RgLruPrepareMatchesTheReference) {
  for (Mode mode : {Mode::kFwd, Mode::kBwd, Mode::kFwdBwd}) {
    const Problem p = MakeProblem(Op::kRgLru, {2, 33, 19}, DType::kBF16, mode, true);
    SCOPED_TRACE(p.Key());
    const OpCase c = OpIoFor(Op::kRgLru).Prepare(p, 42, /*check=*/true);
    const OpCase again = OpIoFor(Op::kRgLru).Prepare(p, 42, true);
    EXPECT_EQ(c.bytes, again.bytes);
    EXPECT_NE(c.bytes[TensorIndex(c.tensors, "x")], OpIoFor(Op::kRgLru).Prepare(p, 43, true).bytes[0]);
    const std::vector<double> x = Decoded(c, "x"), ga = Decoded(c, "ga"), gx = Decoded(c, "gx"),
                              lambda = Decoded(c, "lambda"), h0 = Decoded(c, "h0"), dh = Decoded(c, "dh");
    // Base decays in (0.5, 0.999).
    for (double l : lambda) {
      const double a = std::exp(-kGatedC * GatedSoftplus(l));
      EXPECT_GT(a, 0.49);
      EXPECT_LT(a, 0.9991);
    }
    const RgLruInputs in{x, ga, gx, lambda, h0};
    const RgLruForwardRef fwd = *RgLruForward(p.shape, in);
    const std::vector<double> h_stored = Rounded(fwd.h, p.dtype);
    if (mode != Mode::kBwd) {
      EXPECT_EQ(Ref(c, "h"), fwd.h);
      EXPECT_EQ(Ref(c, "h_final"), fwd.h_final);
    } else {
      EXPECT_EQ(Decoded(c, "h"), h_stored);  // what the bwd reads
      EXPECT_TRUE(Ref(c, "h").empty());
    }
    if (mode != Mode::kFwd) {
      const RgLruBackwardRef bwd = *RgLruBackward(p.shape, in, h_stored, dh, {});
      EXPECT_EQ(Ref(c, "dx"), bwd.dx);
      EXPECT_EQ(Ref(c, "dga"), bwd.dga);
      EXPECT_EQ(Ref(c, "dgx"), bwd.dgx);
      EXPECT_EQ(Ref(c, "dlambda"), bwd.dlambda);
      EXPECT_EQ(Ref(c, "dh0"), bwd.dh0);
    } else {
      EXPECT_TRUE(Ref(c, "dx").empty());
    }
  }
}

TEST(OpIoGated, SamuPrepareMatchesTheReference) {
  for (Mode mode : {Mode::kFwd, Mode::kBwd, Mode::kFwdBwd}) {
    const Problem p = MakeProblem(Op::kSamu, {2, 33, 19}, DType::kF16, mode, true);
    SCOPED_TRACE(p.Key());
    const OpCase c = OpIoFor(Op::kSamu).Prepare(p, 7, /*check=*/true);
    EXPECT_EQ(c.bytes, OpIoFor(Op::kSamu).Prepare(p, 7, true).bytes);
    const std::vector<double> x = Decoded(c, "x"), lambda = Decoded(c, "lambda"), beta = Decoded(c, "beta"),
                              gamma = Decoded(c, "gamma"), ctrl = Decoded(c, "controller"), h0 = Decoded(c, "h0"),
                              dy = Decoded(c, "dy");
    const SamuInputs in{x, lambda, beta, gamma, {ctrl[0], ctrl[1], ctrl[2], ctrl[3]}, h0};
    const SamuForwardRef fwd = *SamuForward(p.shape, in);
    // The controller really varies over tokens.
    double lo = 1, hi = 0;
    for (size_t k = 0; k < fwd.control.size(); k += 2) {
      lo = std::min(lo, fwd.control[k]);
      hi = std::max(hi, fwd.control[k]);
    }
    EXPECT_GT(hi - lo, 0.05);
    const std::vector<double> h_stored = Rounded(fwd.h, p.dtype);
    if (mode != Mode::kBwd) {
      EXPECT_EQ(Ref(c, "y"), fwd.y);
      // fwd_bwd: the saved h is the backend's (chunked _h4 saves every 4th row); the gradients check it.
      if (mode == Mode::kFwd) {
        EXPECT_EQ(Ref(c, "h"), fwd.h);
      } else {
        EXPECT_TRUE(Ref(c, "h").empty());
      }
      EXPECT_EQ(Ref(c, "ctrl"), fwd.control);
      EXPECT_EQ(Ref(c, "h_final"), fwd.h_final);
    } else {
      EXPECT_EQ(Decoded(c, "h"), h_stored);
      EXPECT_EQ(Decoded(c, "ctrl"), Rounded(fwd.control, DType::kF32));
    }
    if (mode != Mode::kFwd) {
      const SamuBackwardRef bwd = *SamuBackward(p.shape, in, h_stored, dy, {});
      EXPECT_EQ(Ref(c, "dx"), bwd.dx);
      EXPECT_EQ(Ref(c, "dlambda"), bwd.dlambda);
      EXPECT_EQ(Ref(c, "dbeta"), bwd.dbeta);
      EXPECT_EQ(Ref(c, "dgamma"), bwd.dgamma);
      EXPECT_EQ(Ref(c, "dcontroller"),
                (std::vector<double>{bwd.dctrl.w_r, bwd.dctrl.b_r, bwd.dctrl.w_i, bwd.dctrl.b_i}));
      EXPECT_EQ(Ref(c, "dh0"), bwd.dh0);
    }
  }
}

TEST(OpIoGated, NoCheckPreparesOnlyInputs) {
  for (Op op : {Op::kRgLru, Op::kSamu}) {
    const OpCase fwd = OpIoFor(op).Prepare(MakeProblem(op, {1, 9, 8}, DType::kF32, Mode::kFwdBwd, false), 1, false);
    for (const std::vector<double>& r : fwd.reference) EXPECT_TRUE(r.empty());
    EXPECT_TRUE(fwd.bytes[TensorIndex(fwd.tensors, "h")].empty());
    // bwd-only always fills the saved tensors.
    const OpCase bwd = OpIoFor(op).Prepare(MakeProblem(op, {1, 9, 8}, DType::kF32, Mode::kBwd, false), 1, false);
    EXPECT_EQ(bwd.bytes[TensorIndex(bwd.tensors, "h")].size(), 9u * 8u * 4u);
    if (op == Op::kSamu) {
      EXPECT_EQ(bwd.bytes[TensorIndex(bwd.tensors, "ctrl")].size(), 9u * 2u * 4u);
    }
  }
}

// Params: every pointer field of ParamLayout holds the device pointer of the
// tensor of the same name (null where the problem has none), workspace the
// workspace, and batch/length/width the shape.
TEST(OpIoGated, ParamsPackPointersAtParamLayoutOffsets) {
  for (Op op : {Op::kRgLru, Op::kSamu}) {
    for (bool h0 : {false, true}) {
      const Problem p = MakeProblem(op, {3, 11, 13}, DType::kBF16, Mode::kFwdBwd, h0);
      SCOPED_TRACE(p.Key());
      const OpIo& io = OpIoFor(op);
      const std::vector<TensorSpec> tensors = io.Tensors(p);
      std::vector<CUdeviceptr> ptrs;
      for (size_t i = 0; i < tensors.size(); ++i) ptrs.push_back(0x10000 * (i + 1));
      const CUdeviceptr workspace = 0xabc000;
      const std::vector<uint8_t> bytes = io.Params(p, ptrs, workspace);
      ASSERT_EQ(bytes.size(), ParamSize(op));
      size_t pointer_fields = 0;
      for (const v1::ParamField& f : ParamLayout(op)) {
        SCOPED_TRACE(f.name());
        ASSERT_LE(f.offset_bytes() + f.size_bytes(), bytes.size());
        uint64_t value = 0;
        std::memcpy(&value, bytes.data() + f.offset_bytes(), sizeof value);
        if (f.type() == "i64") {
          const int64_t want = f.name() == "batch" ? p.shape.batch : f.name() == "length" ? p.shape.length
                                                                                          : p.shape.width;
          EXPECT_EQ(static_cast<int64_t>(value), want);
          continue;
        }
        if (f.name() == "workspace") {
          EXPECT_EQ(value, workspace);
          continue;
        }
        const size_t i = TensorIndex(tensors, f.name());
        if (i == tensors.size()) {
          EXPECT_TRUE(f.name() == "h0" || f.name() == "dh0") << "no tensor for a required field";
          EXPECT_EQ(value, 0u);
        } else {
          EXPECT_EQ(value, ptrs[i]);
          ++pointer_fields;
        }
      }
      EXPECT_EQ(pointer_fields, tensors.size());  // every tensor reaches the kernels
    }
  }
}

}  // namespace
}  // namespace scantune
