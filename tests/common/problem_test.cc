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
  EXPECT_EQ(ParseOp("rglru").status().code(), StatusCode::kUnimplemented);
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
