// Host conversions between double/float and the kernels' storage dtypes
// (fp32, bf16, fp16), rounding to nearest even like the device intrinsics
// (__float2bfloat16_rn, __float2half_rn). Used to prepare inputs (the
// reference then runs on exactly the values the kernel reads) and to read
// outputs back. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/problem.h"

namespace scantune {

uint16_t FloatToBf16(float value);
float Bf16ToFloat(uint16_t bits);
uint16_t FloatToHalf(float value);
float HalfToFloat(uint16_t bits);

// The value as stored in `dtype` (double -> float -> dtype), back in double.
double RoundToDType(double value, DType dtype);

// Packs values into dtype storage (ElementBytes(dtype) bytes each).
std::vector<uint8_t> EncodeAs(DType dtype, std::span<const double> values);
// Unpacks `count` elements of dtype storage into doubles.
std::vector<double> DecodeFrom(DType dtype, const uint8_t* bytes, size_t count);

}  // namespace scantune
