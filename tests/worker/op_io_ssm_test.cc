// selective_scan's OpIo (worker/op_io_ssm.cc): the tensor list per options,
// inputs rounded to the dtype and reproducible from the seed, references
// equal to the float64 reference on the decoded inputs, and the parameter
// struct packing every pointer at its ParamLayout offset.
#include <cstring>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "compiler/plan.h"
#include "worker/dtype_convert.h"
#include "worker/op_io.h"
#include "worker/reference_ssm.h"

namespace scantune {
namespace {

Problem Ssm(Mode mode, DType dtype, bool options, bool h0, int n = 16) {
  Problem p;
  p.op = Op::kSelectiveScan;
  p.shape = {2, 37, 19};
  p.dtype = dtype;
  p.mode = mode;
  p.has_h0 = h0;
  p.ssm.state = n;
  p.ssm.delta_bias = options;
  p.ssm.delta_softplus = options;
  p.ssm.z_gate = options;
  return p;
}

std::map<std::string, TensorSpec> ByName(const std::vector<TensorSpec>& tensors) {
  std::map<std::string, TensorSpec> m;
  for (const TensorSpec& t : tensors) m[t.name] = t;
  return m;
}

TEST(SsmOpIo, TensorsPerOptions) {
  const OpIo& io = OpIoFor(Op::kSelectiveScan);
  const std::vector<TensorSpec> plain = io.Tensors(Ssm(Mode::kFwdBwd, DType::kBF16, false, false));
  std::vector<std::string> names;
  for (const TensorSpec& t : plain) names.push_back(t.name);
  EXPECT_EQ(names, (std::vector<std::string>{"u", "delta", "A", "Bm", "Cm", "Dv", "dy", "y", "h_final", "du", "ddelta",
                                             "dA", "dBm", "dCm", "dDv"}));
  const auto all = ByName(io.Tensors(Ssm(Mode::kFwdBwd, DType::kBF16, true, true, 32)));
  EXPECT_EQ(all.size(), 21u);
  const uint64_t tok = 2 * 37 * 19, tokn = 2 * 37 * 32;
  auto expect = [&](const char* name, DType dtype, uint64_t elements, TensorRole role) {
    ASSERT_TRUE(all.count(name)) << name;
    const TensorSpec& t = all.at(name);
    EXPECT_EQ(t.dtype, dtype) << name;
    EXPECT_EQ(t.elements, elements) << name;
    EXPECT_EQ(t.role, role) << name;
    uint64_t product = 1;
    for (int64_t dim : t.dims) product *= static_cast<uint64_t>(dim);
    EXPECT_EQ(product, elements) << name;
  };
  const DType e = DType::kBF16, f = DType::kF32;
  expect("u", e, tok, TensorRole::kInput);
  expect("delta", e, tok, TensorRole::kInput);
  expect("A", f, 19 * 32, TensorRole::kInput);
  expect("Bm", e, tokn, TensorRole::kInput);
  expect("Cm", e, tokn, TensorRole::kInput);
  expect("Dv", f, 19, TensorRole::kInput);
  expect("delta_bias", f, 19, TensorRole::kInput);
  expect("z", e, tok, TensorRole::kInput);
  expect("h0", f, 2 * 19 * 32, TensorRole::kInput);
  expect("dy", e, tok, TensorRole::kGradIn);
  expect("y", e, tok, TensorRole::kFwdOut);
  expect("h_final", f, 2 * 19 * 32, TensorRole::kFwdOut);
  expect("du", e, tok, TensorRole::kBwdOut);
  expect("ddelta", e, tok, TensorRole::kBwdOut);
  expect("dA", f, 19 * 32, TensorRole::kBwdOut);
  expect("dBm", e, tokn, TensorRole::kBwdOut);
  expect("dCm", e, tokn, TensorRole::kBwdOut);
  expect("dDv", f, 19, TensorRole::kBwdOut);
  expect("ddelta_bias", f, 19, TensorRole::kBwdOut);
  expect("dz", e, tok, TensorRole::kBwdOut);
  expect("dh0", f, 2 * 19 * 32, TensorRole::kBwdOut);
}

// The references equal SelectiveScanForward/Backward on the decoded bytes.
void CheckPrepare(const Problem& p) {
  SCOPED_TRACE(p.Key());
  const OpIo& io = OpIoFor(Op::kSelectiveScan);
  const OpCase c = io.Prepare(p, 77, /*check=*/true);
  ASSERT_EQ(c.bytes.size(), c.tensors.size());
  ASSERT_EQ(c.reference.size(), c.tensors.size());
  std::map<std::string, std::vector<double>> in;
  for (size_t i = 0; i < c.tensors.size(); ++i) {
    const TensorSpec& t = c.tensors[i];
    if (t.role == TensorRole::kInput || t.role == TensorRole::kGradIn) {
      ASSERT_EQ(c.bytes[i].size(), t.bytes()) << t.name;
      in[t.name] = DecodeFrom(t.dtype, c.bytes[i].data(), t.elements);
      // Already rounded: encoding again gives the same bytes.
      EXPECT_EQ(EncodeAs(t.dtype, in[t.name]), c.bytes[i]) << t.name;
    } else {
      EXPECT_TRUE(c.bytes[i].empty()) << t.name;
    }
  }
  SsmRefInputs r;
  r.shape = p.shape;
  r.state = p.ssm.state;
  r.delta_softplus = p.ssm.delta_softplus;
  r.u = in["u"];
  r.delta = in["delta"];
  r.A = in["A"];
  r.Bm = in["Bm"];
  r.Cm = in["Cm"];
  r.Dv = in["Dv"];
  r.delta_bias = in["delta_bias"];
  r.z = in["z"];
  r.h0 = in["h0"];
  const SsmForwardRef fwd = SelectiveScanForward(r);
  const SsmBackwardRef bwd = SelectiveScanBackward(r, in["dy"]);
  std::map<std::string, const std::vector<double>*> expected = {
      {"y", &fwd.y},   {"h_final", &fwd.h_final}, {"du", &bwd.du},   {"ddelta", &bwd.ddelta},
      {"dA", &bwd.dA}, {"dBm", &bwd.dBm},         {"dCm", &bwd.dCm}, {"dDv", &bwd.dDv},
      {"ddelta_bias", &bwd.ddelta_bias}, {"dz", &bwd.dz}, {"dh0", &bwd.dh0}};
  for (size_t i = 0; i < c.tensors.size(); ++i) {
    const TensorSpec& t = c.tensors[i];
    const bool compared = (t.role == TensorRole::kFwdOut && p.mode != Mode::kBwd) ||
                          (t.role == TensorRole::kBwdOut && p.mode != Mode::kFwd);
    if (!compared) {
      EXPECT_TRUE(c.reference[i].empty()) << t.name;
      continue;
    }
    ASSERT_TRUE(expected.count(t.name)) << t.name;
    EXPECT_EQ(c.reference[i], *expected[t.name]) << t.name;
    EXPECT_EQ(c.reference[i].size(), t.elements) << t.name;
  }
}

TEST(SsmOpIo, PrepareEqualsTheReference) {
  CheckPrepare(Ssm(Mode::kFwdBwd, DType::kF32, false, false));
  CheckPrepare(Ssm(Mode::kFwdBwd, DType::kBF16, true, true, 8));
  CheckPrepare(Ssm(Mode::kFwd, DType::kF16, true, false));
  CheckPrepare(Ssm(Mode::kBwd, DType::kF32, false, true, 64));
}

TEST(SsmOpIo, InputsReproducibleFromTheSeed) {
  const OpIo& io = OpIoFor(Op::kSelectiveScan);
  const Problem p = Ssm(Mode::kFwd, DType::kBF16, true, true);
  const OpCase a = io.Prepare(p, 5, false), b = io.Prepare(p, 5, false), c = io.Prepare(p, 6, false);
  EXPECT_EQ(a.bytes, b.bytes);
  EXPECT_NE(a.bytes, c.bytes);
  for (const auto& r : a.reference) EXPECT_TRUE(r.empty());
  // A is negative (a decay), delta positive after softplus or as given.
  const size_t ia = TensorIndex(a.tensors, "A");
  for (double v : DecodeFrom(DType::kF32, a.bytes[ia].data(), a.tensors[ia].elements)) EXPECT_LT(v, 0);
  const OpCase plain = io.Prepare(Ssm(Mode::kFwd, DType::kF32, false, false), 5, false);
  const size_t id = TensorIndex(plain.tensors, "delta");
  for (double v : DecodeFrom(DType::kF32, plain.bytes[id].data(), plain.tensors[id].elements)) EXPECT_GT(v, 0);
}

TEST(SsmOpIo, ParamsPackPointersAtTheLayoutOffsets) {
  const OpIo& io = OpIoFor(Op::kSelectiveScan);
  for (bool options : {false, true}) {
    const Problem p = Ssm(Mode::kFwdBwd, DType::kBF16, options, options, 32);
    const std::vector<TensorSpec> tensors = io.Tensors(p);
    std::vector<CUdeviceptr> ptrs;
    for (size_t i = 0; i < tensors.size(); ++i) ptrs.push_back(0x10000 * (i + 1));
    const CUdeviceptr workspace = 0xabc0000;
    const std::vector<uint8_t> bytes = io.Params(p, ptrs, workspace);
    ASSERT_EQ(bytes.size(), ParamSize(Op::kSelectiveScan));
    int pointers = 0;
    for (const v1::ParamField& f : ParamLayout(Op::kSelectiveScan)) {
      ASSERT_LE(f.offset_bytes() + f.size_bytes(), bytes.size()) << f.name();
      uint64_t value = 0;
      std::memcpy(&value, bytes.data() + f.offset_bytes(), 8);
      if (f.type() == "ptr") {
        const size_t i = TensorIndex(tensors, f.name());
        const uint64_t want = f.name() == "workspace" ? workspace : i < tensors.size() ? ptrs[i] : 0;
        EXPECT_EQ(value, want) << f.name();
        pointers += value != 0;
      } else {
        const std::map<std::string, uint64_t> dims = {{"batch", 2}, {"length", 37}, {"dim", 19}, {"state", 32}};
        EXPECT_EQ(value, dims.at(f.name())) << f.name();
      }
    }
    EXPECT_EQ(pointers, static_cast<int>(tensors.size()) + 1);  // every tensor, and the workspace
  }
}

}  // namespace
}  // namespace scantune
