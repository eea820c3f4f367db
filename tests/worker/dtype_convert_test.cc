#include "worker/dtype_convert.h"

#include <cmath>
#include <cstring>
#include <limits>

#include <gtest/gtest.h>

namespace scantune {
namespace {

float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST(DTypeConvertTest, Bf16RoundTripsEveryFiniteValue) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const float f = Bf16ToFloat(static_cast<uint16_t>(b));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(f))));
      continue;
    }
    EXPECT_EQ(FloatToBf16(f), b) << std::hex << b;
  }
}

TEST(DTypeConvertTest, HalfRoundTripsEveryFiniteValue) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const float f = HalfToFloat(static_cast<uint16_t>(b));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(f))));
      continue;
    }
    EXPECT_EQ(FloatToHalf(f), b) << std::hex << b;
  }
}

TEST(DTypeConvertTest, HalfKnownValues) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(FloatToHalf(1e-10f), 0x0000);
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
}

TEST(DTypeConvertTest, HalfRoundsToNearestEven) {
  // Between 1 (0x3c00) and 1 + 2^-10 (0x3c01): the tie goes to the even 0x3c00,
  // the tie between 0x3c01 and 0x3c02 to 0x3c02.
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3c01);  // just above the tie
  EXPECT_EQ(FloatToHalf(65519.0f), 0x7bff);  // below the halfway point to 2^16
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);  // the tie rounds (to even) to infinity
  // Subnormal ties: 2.5 * 2^-24 -> 2, 3.5 * 2^-24 -> 4.
  EXPECT_EQ(FloatToHalf(2.5f * std::ldexp(1.0f, -24)), 0x0002);
  EXPECT_EQ(FloatToHalf(3.5f * std::ldexp(1.0f, -24)), 0x0004);
  // Rounding up out of the subnormals into the smallest normal.
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -14) - std::ldexp(1.0f, -26)), 0x0400);
}

TEST(DTypeConvertTest, Bf16RoundsToNearestEven) {
  EXPECT_EQ(FloatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBf16(FromBits(0x3f808000u)), 0x3f80);  // tie, even below
  EXPECT_EQ(FloatToBf16(FromBits(0x3f818000u)), 0x3f82);  // tie, even above
  EXPECT_EQ(FloatToBf16(FromBits(0x3f808001u)), 0x3f81);  // above the tie
  EXPECT_EQ(FloatToBf16(FromBits(0x7f7fffffu)), 0x7f80);  // FLT_MAX rounds to infinity
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(DTypeConvertTest, EncodeDecode) {
  const std::vector<double> values = {0.1, -3.5, 1e-3, 1000.25};
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    const std::vector<uint8_t> bytes = EncodeAs(dtype, values);
    ASSERT_EQ(bytes.size(), values.size() * ElementBytes(dtype));
    const std::vector<double> back = DecodeFrom(dtype, bytes.data(), values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      EXPECT_EQ(back[i], RoundToDType(values[i], dtype)) << DTypeName(dtype) << " " << values[i];
      EXPECT_NEAR(back[i], values[i], std::fabs(values[i]) * (dtype == DType::kF32 ? 1e-7 : 4e-3));
    }
  }
  // Poison (all 0xFF bytes) decodes to NaN in every dtype: unwritten outputs fail.
  const std::vector<uint8_t> poison(4, 0xFF);
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    EXPECT_TRUE(std::isnan(DecodeFrom(dtype, poison.data(), 1)[0])) << DTypeName(dtype);
  }
}

}  // namespace
}  // namespace scantune
