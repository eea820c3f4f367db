#include "worker/input_generator.h"

#include <cmath>

#include <gtest/gtest.h>

#include "worker/dtype_convert.h"
#include "worker/timer.h"
#include "worker/verifier.h"

namespace scantune {
namespace {

TEST(InputGeneratorTest, ReproducibleStableAndRoundedToTheDType) {
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    const Problem p{Op::kLinearScan, {2, 7, 33}, dtype, Mode::kFwdBwd, true};
    const LinearScanInputs in = GenerateInputs(p, 99);
    const LinearScanInputs again = GenerateInputs(p, 99);
    EXPECT_EQ(in.a, again.a);
    EXPECT_EQ(in.x, again.x);
    EXPECT_NE(in.x, GenerateInputs(p, 100).x);
    ASSERT_EQ(in.a.size(), 2u * 7 * 33);
    ASSERT_EQ(in.h0.size(), 2u * 33);
    for (size_t i = 0; i < in.a.size(); ++i) {
      EXPECT_GE(in.a[i], 0.5);
      EXPECT_LE(in.a[i], 1.0);
      EXPECT_NE(in.x[i], 0.0);
      EXPECT_EQ(in.a[i], RoundToDType(in.a[i], dtype));
      EXPECT_EQ(in.x[i], RoundToDType(in.x[i], dtype));
      EXPECT_EQ(in.dh[i], RoundToDType(in.dh[i], dtype));
    }
    for (double h0 : in.h0) EXPECT_EQ(h0, static_cast<double>(static_cast<float>(h0)));  // fp32 state
  }
  const Problem no_h0{Op::kLinearScan, {1, 1, 1}, DType::kF32, Mode::kFwd, false};
  EXPECT_TRUE(GenerateInputs(no_h0, 1).h0.empty());
}

TEST(TimingSettingsTest, ZeroFieldsTakeTheDefaults) {
  const TimingSettings d = TimingSettings::FromProto(v1::TimingConfig(), false);
  EXPECT_EQ(d.warmup_launches, 3);
  EXPECT_EQ(d.rounds, 2);
  EXPECT_EQ(d.samples_per_round, 5);
  EXPECT_EQ(d.target_sample_ms, 1.0);
  EXPECT_EQ(d.max_inner, 1000);
  EXPECT_TRUE(d.rotate_inputs);
  v1::TimingConfig c;
  c.set_rounds(4);
  c.set_max_inner(10);
  const TimingSettings s = TimingSettings::FromProto(c, true);
  EXPECT_EQ(s.rounds, 4);
  EXPECT_EQ(s.max_inner, 10);
  EXPECT_EQ(s.samples_per_round, 5);
  EXPECT_FALSE(s.rotate_inputs);  // a given config decides
}

TEST(VerifierTest, Tolerances) {
  EXPECT_EQ(Tolerance(DType::kF32), 1e-5);
  EXPECT_EQ(Tolerance(DType::kBF16), 1e-2);
  EXPECT_EQ(Tolerance(DType::kF16), 5e-3);
}

}  // namespace
}  // namespace scantune
