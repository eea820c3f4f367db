#include "common/problem.h"

#include <gtest/gtest.h>

namespace scantune {
namespace {

TEST(ProblemTest, ParsesNamesAndShapes) {
  EXPECT_EQ(*ParseDType("bf16"), DType::kBF16);
  EXPECT_EQ(*ParseMode("fwd_bwd"), Mode::kFwdBwd);
  EXPECT_EQ(*ParseOp("linear_scan"), Op::kLinearScan);
  StatusOr<Shape> shape = ParseShape("4x2048x2560");
  ASSERT_TRUE(shape.ok());
  EXPECT_EQ(shape->batch, 4);
  EXPECT_EQ(shape->length, 2048);
  EXPECT_EQ(shape->width, 2560);
  EXPECT_EQ(FormatShape(*shape), "4x2048x2560");
}

TEST(ProblemTest, RejectsBadNamesWithTheReason) {
  EXPECT_EQ(ParseDType("int8").status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(ParseDType("int8").status().message().find("int8"), std::string::npos);
  for (const char* op : {"linear_scan", "rglru", "samu", "selective_scan"}) {
    auto parsed = ParseOp(op);
    ASSERT_TRUE(parsed.ok()) << op;
    EXPECT_STREQ(OpName(*parsed), op);
  }
  EXPECT_EQ(ParseOp("conv").status().code(), StatusCode::kInvalidArgument);
  for (const char* bad : {"4x2048", "4x0x8", "ax2x3", "4x2x3x4", "-1x2x3", "4x2x"}) {
    EXPECT_FALSE(ParseShape(bad).ok()) << bad;
  }
}

TEST(ProblemTest, ValidatesLimits) {
  Problem p;
  p.shape = {4, 2048, 2048};
  EXPECT_TRUE(Validate(p).ok());
  p.shape = {1, (1 << 20) + 1, 1};
  Status too_long = Validate(p);
  EXPECT_EQ(too_long.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(too_long.message().find("length"), std::string::npos);
  p.shape = {4096, 1 << 20, 1 << 16};
  EXPECT_NE(Validate(p).message().find("elements"), std::string::npos);
}

TEST(ProblemTest, ProtoRoundTripAndRequiredFields) {
  Problem p{Op::kLinearScan, {2, 7, 33}, DType::kF16, Mode::kBwd, true};
  StatusOr<Problem> back = ProblemFromProto(ToProto(p));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, p);
  v1::Problem missing_dtype = ToProto(p);
  missing_dtype.set_dtype(v1::DTYPE_UNSPECIFIED);
  EXPECT_EQ(ProblemFromProto(missing_dtype).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(p.Key(), "linear_scan/2x7x33/fp16/bwd/h0");
}

// The one function every derived figure comes from: 6 bytes per element
// forward and 16 for fwd+bwd at bf16 (plus the fp32 states).
TEST(ProblemTest, FloorBytesCountEveryTensorOnce) {
  Problem p{Op::kLinearScan, {4, 2048, 2048}, DType::kBF16, Mode::kFwdBwd, false};
  const uint64_t n = 4ull * 2048 * 2048;
  const uint64_t state = 4ull * 2048 * 4;
  EXPECT_EQ(FloorBytes(p, Mode::kFwd), 6 * n + state);
  EXPECT_EQ(FloorBytes(p, Mode::kBwd), 10 * n);
  EXPECT_EQ(FloorBytes(p, Mode::kFwdBwd), 16 * n + state);
  p.has_h0 = true;
  p.dtype = DType::kF32;
  EXPECT_EQ(FloorBytes(p, Mode::kFwd), 12 * n + 2 * state);
  EXPECT_EQ(FloorBytes(p, Mode::kBwd), 20 * n + 2 * state);
}

}  // namespace
}  // namespace scantune

namespace scantune {
namespace {

TEST(ProblemTest, SelectiveScanOptionsKeyValidateAndRoundTrip) {
  v1::Problem proto;
  proto.set_op("selective_scan");
  proto.mutable_shape()->set_batch(4);
  proto.mutable_shape()->set_length(2048);
  proto.mutable_shape()->set_width(1024);
  proto.set_dtype(v1::FP32);
  proto.set_mode(v1::FWD);
  proto.set_delta_softplus(true);
  auto p = ProblemFromProto(proto);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->ssm.state, 16);  // 0 means the default N
  EXPECT_EQ(p->Key(), "selective_scan/4x2048x1024/fp32/fwd/n16+softplus");
  EXPECT_EQ(p->OpKey(), "selective_scan:n16+softplus");
  auto back = ProblemFromProto(ToProto(*p));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, *p);
  proto.set_state_dim(12);
  EXPECT_NE(ProblemFromProto(proto).status().message().find("8, 16, 32 or 64"), std::string::npos);
  // The options belong to selective_scan alone.
  proto.set_state_dim(0);
  proto.set_op("rglru");
  EXPECT_EQ(ProblemFromProto(proto).status().code(), StatusCode::kInvalidArgument);
  proto.set_delta_softplus(false);
  auto rglru = ProblemFromProto(proto);
  ASSERT_TRUE(rglru.ok());
  EXPECT_EQ(rglru->OpKey(), "rglru");
}

// bf16 at W = 2048: the parameter counts and control values of seed 001, and
// samu moving fewer bytes per element than rglru.
TEST(ProblemTest, GatedFloorsParametersAndControlValues) {
  Problem rglru{Op::kRgLru, {4, 2048, 2048}, DType::kBF16, Mode::kFwdBwd, false};
  Problem samu = rglru;
  samu.op = Op::kSamu;
  EXPECT_EQ(ParameterCount(rglru), 2048u);
  EXPECT_EQ(ParameterCount(samu), 6148u);
  EXPECT_EQ(ControlValuesPerToken(rglru), 4096u);
  EXPECT_EQ(ControlValuesPerToken(samu), 2u);
  const uint64_t n = 4ull * 2048 * 2048;
  EXPECT_EQ(FloorBytes(rglru, Mode::kFwdBwd) / n, 24u);
  EXPECT_EQ(FloorBytes(samu, Mode::kFwdBwd) / n, 14u);
  EXPECT_LT(FloorBytes(samu, Mode::kFwd), FloorBytes(rglru, Mode::kFwd));
}

}  // namespace
}  // namespace scantune
