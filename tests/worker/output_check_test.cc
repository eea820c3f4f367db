// The host side of verification without a GPU: the once-per-job data
// (inputs, references of linear_scan's OpIo), the comparison passes on
// hand-made "device" results (correct, perturbed, NaN, never written), and
// independence from the host thread count (inputs, reference and verdicts
// are the same for any count).
#include "worker/output_check.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "worker/device_buffer.h"
#include "worker/dtype_convert.h"
#include "worker/input_generator.h"
#include "worker/parallel.h"
#include "worker/reference.h"
#include "worker/op_io.h"
#include "worker/verifier.h"

namespace scantune {
namespace {

// The comparison the Verifier did per candidate before the host passes were
// restructured: decode everything, then one sequential walk.
struct Legacy {
  bool finite = true;
  double rel_err = 0.0;
  size_t worst = 0;
};
Legacy LegacyCompare(DType dtype, const std::vector<uint8_t>& raw, const std::vector<double>& ref) {
  Legacy c;
  const std::vector<double> out = DecodeFrom(dtype, raw.data(), ref.size());
  double max_ref = 0.0, max_diff = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(out[i])) {
      c.finite = false;
      c.rel_err = INFINITY;
      return c;
    }
    max_ref = std::max(max_ref, std::fabs(ref[i]));
    const double diff = std::fabs(out[i] - ref[i]);
    if (diff > max_diff) {
      max_diff = diff;
      c.worst = i;
    }
  }
  c.rel_err = max_diff / (max_ref > 0.0 ? max_ref : 1.0);
  return c;
}

// The generator as it was, one sequential splitmix64 stream per tensor: the
// counter-based one must give exactly these values.
struct SequentialSplitMix {
  uint64_t state;
  uint64_t Next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double Uniform() { return (static_cast<double>(Next() >> 11) + 0.5) * 0x1.0p-53; }
  double Normal() {
    const double u1 = Uniform(), u2 = Uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  }
};

// Multiplies every value by (1 + scale * a pseudo-random sign-varying factor):
// a plausible kernel result with rounding-sized errors everywhere.
std::vector<double> Jitter(std::vector<double> v, double scale) {
  for (size_t i = 0; i < v.size(); ++i) v[i] *= 1.0 + scale * std::sin(static_cast<double>(i) * 0.7);
  return v;
}

std::vector<uint8_t> Poke(std::vector<uint8_t> raw, DType dtype, size_t i, double value) {
  const std::vector<uint8_t> one = EncodeAs(dtype, std::vector<double>{value});
  std::memcpy(raw.data() + i * one.size(), one.data(), one.size());
  return raw;
}

TEST(VerifierHostTest, CounterBasedInputsMatchTheSequentialStreamForAnyThreadCount) {
  const Problem p{Op::kLinearScan, {2, 100, 300}, DType::kBF16, Mode::kFwdBwd, true};
  SequentialSplitMix ra{7 ^ 0x61ull}, rx{7 ^ 0x78ull}, rh{7 ^ 0x68ull}, rd{7 ^ 0x64ull};
  for (int threads : {1, 3, 16}) {
    ScopedHostThreads scoped(threads);
    const LinearScanInputs in = GenerateInputs(p, 7);
    SequentialSplitMix a = ra, x = rx, h = rh, d = rd;
    for (size_t i = 0; i < in.a.size(); ++i) {
      const double u = a.Uniform();
      ASSERT_EQ(in.a[i], RoundToDType((i % 300) % 4 == 0 ? 0.99 + 0.0099 * u : 0.5 + 0.49 * u, p.dtype)) << i;
      ASSERT_EQ(in.x[i], RoundToDType(x.Normal(), p.dtype)) << i;
      ASSERT_EQ(in.dh[i], RoundToDType(d.Normal(), p.dtype)) << i;
    }
    for (size_t i = 0; i < in.h0.size(); ++i) ASSERT_EQ(in.h0[i], static_cast<float>(h.Normal())) << i;
  }
}

TEST(VerifierHostTest, ReferenceIsBitIdenticalForAnyThreadCount) {
  const Problem p{Op::kLinearScan, {3, 50, 257}, DType::kF32, Mode::kFwdBwd, true};
  const LinearScanInputs in = GenerateInputs(p, 3);
  LinearScanForwardRef f1;
  LinearScanBackwardRef b1;
  {
    ScopedHostThreads one(1);
    f1 = LinearScanForward(p.shape, in.a, in.x, in.h0);
    b1 = LinearScanBackward(p.shape, in.a, f1.h, in.h0, in.dh);
  }
  ScopedHostThreads many(7);
  const LinearScanForwardRef f7 = LinearScanForward(p.shape, in.a, in.x, in.h0);
  const LinearScanBackwardRef b7 = LinearScanBackward(p.shape, in.a, f7.h, in.h0, in.dh);
  EXPECT_EQ(f1.h, f7.h);
  EXPECT_EQ(f1.h_final, f7.h_final);
  EXPECT_EQ(b1.da, b7.da);
  EXPECT_EQ(b1.dx, b7.dx);
  EXPECT_EQ(b1.dh0, b7.dh0);
}

// The same-bits-every-run check compares digests: one flipped bit anywhere
// (here in the last, partial block) changes it, and the thread count does not.
TEST(VerifierHostTest, BytesDigestSeesOneBitAndIgnoresTheThreadCount) {
  std::vector<uint8_t> bytes((size_t{3} << 20) + 13);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 2654435761u >> 13);
  uint64_t one_thread;
  {
    ScopedHostThreads one(1);
    one_thread = BytesDigest(bytes);
  }
  ScopedHostThreads many(5);
  EXPECT_EQ(BytesDigest(bytes), one_thread);
  std::vector<uint8_t> flipped = bytes;
  flipped.back() ^= 0x10;
  EXPECT_NE(BytesDigest(flipped), one_thread);
  flipped = bytes;
  flipped[(size_t{1} << 20) + 5] ^= 0x01;
  EXPECT_NE(BytesDigest(flipped), one_thread);
  // A shorter run of the same bytes is another digest, as is the empty one.
  EXPECT_NE(BytesDigest(std::span<const uint8_t>(bytes.data(), bytes.size() - 8)), one_thread);
  EXPECT_NE(BytesDigest({}), one_thread);
}

// LinearScanIo::Prepare gives the generated inputs' bytes and the float64
// references of every output of the mode, and CheckTensor on jittered
// "device" results gives the rel_err of a plain sequential comparison.
TEST(VerifierHostTest, LinearScanCaseHoldsInputsAndReferences) {
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (Mode mode : {Mode::kFwdBwd, Mode::kBwd, Mode::kFwd}) {
      for (bool has_h0 : {false, true}) {
        const Problem p{Op::kLinearScan, {2, 61, 130}, dtype, mode, has_h0};
        SCOPED_TRACE(p.Key());
        const double tol = Tolerance(dtype);
        const OpCase job = LinearScanIo().Prepare(p, 11, /*check=*/true);
        auto at = [&](const char* name) { return TensorIndex(job.tensors, name); };
        const LinearScanInputs in = GenerateInputs(p, 11);
        EXPECT_EQ(job.bytes[at("a")], EncodeAs(dtype, in.a));
        EXPECT_EQ(job.bytes[at("x")], EncodeAs(dtype, in.x));
        EXPECT_EQ(job.bytes[at("dh")], EncodeAs(dtype, in.dh));
        EXPECT_EQ(at("h0") < job.tensors.size(), has_h0);
        EXPECT_EQ(at("dh0") < job.tensors.size(), has_h0);
        if (has_h0) EXPECT_EQ(job.bytes[at("h0")], EncodeAs(DType::kF32, in.h0));
        const LinearScanForwardRef fwd = LinearScanForward(p.shape, in.a, in.x, in.h0);
        if (mode == Mode::kBwd) {
          EXPECT_EQ(job.bytes[at("h")], EncodeAs(dtype, fwd.h));  // the backward's input
          EXPECT_TRUE(job.reference[at("h")].empty());
        } else {
          EXPECT_TRUE(job.bytes[at("h")].empty());
          const std::vector<uint8_t> h_dev = EncodeAs(dtype, Jitter(fwd.h, 1e-3));
          const OutputCheck h = CheckTensor(job.tensors[at("h")], h_dev, job.reference[at("h")], tol);
          EXPECT_EQ(h.rel_err, LegacyCompare(dtype, h_dev, fwd.h).rel_err);
          EXPECT_GT(h.rel_err, 0.0);
          EXPECT_EQ(job.reference[at("h_final")], fwd.h_final);
        }
        if (mode == Mode::kFwd) {
          EXPECT_TRUE(job.reference[at("dx")].empty());
          continue;
        }
        const LinearScanBackwardRef bwd = LinearScanBackward(p.shape, in.a, fwd.h, in.h0, in.dh);
        EXPECT_EQ(job.reference[at("dx")], bwd.dx);
        EXPECT_EQ(job.reference[at("da")], bwd.da);
        if (has_h0) EXPECT_EQ(job.reference[at("dh0")], bwd.dh0);
        const std::vector<uint8_t> da_dev = EncodeAs(dtype, Jitter(bwd.da, 3e-3));
        const OutputCheck da = CheckTensor(job.tensors[at("da")], da_dev, job.reference[at("da")], tol);
        EXPECT_EQ(da.rel_err, LegacyCompare(dtype, da_dev, bwd.da).rel_err);
      }
    }
  }
}

// The failure detail names the element by the tensor's own dims.
TEST(VerifierHostTest, CheckTensorNamesTheElementByItsDims) {
  const TensorSpec spec{"dBm", DType::kF32, 2 * 3 * 4, TensorRole::kBwdOut, {2, 3, 4}, "b,t,n"};
  std::vector<double> ref(24, 1.0);
  std::vector<uint8_t> raw = Poke(EncodeAs(DType::kF32, ref), DType::kF32, 23, 3.0);
  const OutputCheck c = CheckTensor(spec, raw, ref, 1e-5);
  EXPECT_EQ(c.state, v1::WRONG_RESULT);
  EXPECT_NE(c.detail.find("worst at dBm[23] (b=1, t=2, n=3)"), std::string::npos) << c.detail;
}

class VerifierCheckTest : public ::testing::TestWithParam<int> {  // host threads
 protected:
  const Shape shape{2, 300, 200};  // 120000 elements: several chunks at the comparison grain
  const DType dtype = DType::kBF16;
  const double tol = Tolerance(DType::kBF16);
  std::vector<double> ref() const {
    std::vector<double> v(static_cast<size_t>(shape.elements()));
    for (size_t i = 0; i < v.size(); ++i) v[i] = RoundToDType(std::cos(static_cast<double>(i)) * 4.0, dtype);
    return v;
  }
};

TEST_P(VerifierCheckTest, CorrectOutputPasses) {
  ScopedHostThreads threads(GetParam());
  const std::vector<double> r = ref();
  const OutputCheck c = CheckOutput({"h", dtype}, EncodeAs(dtype, r), r, shape, tol);
  EXPECT_TRUE(c.ok()) << c.detail;
  EXPECT_EQ(c.rel_err, 0.0);
}

TEST_P(VerifierCheckTest, PerturbedElementFailsWithItsIndex) {
  ScopedHostThreads threads(GetParam());
  const std::vector<double> r = ref();
  const size_t bad = 70123;  // b=1, t=50, c=123
  const std::vector<uint8_t> raw = Poke(EncodeAs(dtype, r), dtype, bad, r[bad] + 1.0);
  const OutputCheck c = CheckOutput({"h", dtype}, raw, r, shape, tol);
  EXPECT_EQ(c.state, v1::WRONG_RESULT);
  EXPECT_GT(c.rel_err, tol);
  EXPECT_NE(c.detail.find("worst at h[70123] (b=1, t=50, c=123)"), std::string::npos) << c.detail;
}

TEST_P(VerifierCheckTest, TiesReportTheLowestIndex) {
  ScopedHostThreads threads(GetParam());
  const std::vector<double> r(static_cast<size_t>(shape.elements()), 1.0);
  std::vector<uint8_t> raw = EncodeAs(dtype, r);
  for (size_t i : {size_t{119000}, size_t{40000}, size_t{90000}}) raw = Poke(raw, dtype, i, 2.0);
  const OutputCheck c = CheckOutput({"h", dtype}, raw, r, shape, tol);
  EXPECT_EQ(c.rel_err, 1.0);
  EXPECT_NE(c.detail.find("worst at h[40000]"), std::string::npos) << c.detail;
}

TEST_P(VerifierCheckTest, NanFails) {
  ScopedHostThreads threads(GetParam());
  const std::vector<double> r = ref();
  std::vector<uint8_t> raw = Poke(EncodeAs(dtype, r), dtype, 100000, std::numeric_limits<double>::quiet_NaN());
  raw = Poke(raw, dtype, 110000, INFINITY);
  const OutputCheck c = CheckOutput({"h", dtype}, raw, r, shape, tol);
  EXPECT_EQ(c.state, v1::WRONG_RESULT);
  EXPECT_TRUE(std::isinf(c.rel_err));
  EXPECT_NE(c.detail.find("h[100000]"), std::string::npos) << c.detail;
  EXPECT_NE(c.detail.find("(not finite)"), std::string::npos) << c.detail;
}

TEST_P(VerifierCheckTest, UnwrittenElementFails) {
  ScopedHostThreads threads(GetParam());
  const std::vector<double> r = ref();
  std::vector<uint8_t> raw = EncodeAs(dtype, r);
  raw[2 * 99999] = raw[2 * 99999 + 1] = DeviceBuffer::kPoisonByte;
  raw[2 * 100] = raw[2 * 100 + 1] = DeviceBuffer::kPoisonByte;  // the first one is reported
  const OutputCheck c = CheckOutput({"h", dtype}, raw, r, shape, tol);
  EXPECT_EQ(c.state, v1::WRONG_RESULT);
  EXPECT_NE(c.detail.find("h[100] (b=0, t=0, c=100) was never written (poison left)"), std::string::npos)
      << c.detail;
}

INSTANTIATE_TEST_SUITE_P(Threads, VerifierCheckTest, ::testing::Values(1, 4, 13));

TEST(VerifierHostTest, SameBytes) {
  std::vector<uint8_t> a(1 << 21, 7);
  std::vector<uint8_t> b = a;
  EXPECT_TRUE(SameBytes(a, b));
  b[(1 << 21) - 1] = 8;
  EXPECT_FALSE(SameBytes(a, b));
  EXPECT_FALSE(SameBytes(a, std::span<const uint8_t>(a).first(10)));
  EXPECT_TRUE(SameBytes({}, {}));
}

}  // namespace
}  // namespace scantune
