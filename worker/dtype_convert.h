// Host conversions between double/float and the kernels' storage dtypes
// (fp32, bf16, fp16), rounding to nearest even like the device intrinsics
// (__float2bfloat16_rn, __float2half_rn). Used to prepare inputs (the
// reference then runs on exactly the values the kernel reads) and to read
// outputs back. Pure functions; thread-safe.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "common/problem.h"

namespace scantune {

uint16_t FloatToBf16(float value);
uint16_t FloatToHalf(float value);

// Inline: the comparison passes decode every output element.
inline float BitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
inline float Bf16ToFloat(uint16_t bits) { return BitsToFloat(static_cast<uint32_t>(bits) << 16); }
inline float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    const float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return BitsToFloat(sign | 0x7f800000u | (mant << 13));
  return BitsToFloat(sign | ((exp + 112u) << 23) | (mant << 13));
}

// The value as stored in `dtype` (double -> float -> dtype), back in double.
double RoundToDType(double value, DType dtype);

// Packs values into dtype storage (ElementBytes(dtype) bytes each). The
// bulk conversions below run on all host threads (see worker/parallel.h);
// each element converts the same way whatever the thread count.
std::vector<uint8_t> EncodeAs(DType dtype, std::span<const double> values);
// The same into `out`, which holds values.size() * ElementBytes(dtype) bytes.
void EncodeInto(DType dtype, std::span<const double> values, uint8_t* out);
// Unpacks `count` elements of dtype storage into doubles.
std::vector<double> DecodeFrom(DType dtype, const uint8_t* bytes, size_t count);

// Element i of dtype storage as a double: the inner step of DecodeFrom, for
// passes that read stored values without materialising them.
inline double DecodeAt(DType dtype, const uint8_t* bytes, size_t i) {
  switch (dtype) {
    case DType::kF32: {
      float f;
      std::memcpy(&f, bytes + i * 4, 4);
      return f;
    }
    case DType::kBF16: {
      uint16_t b;
      std::memcpy(&b, bytes + i * 2, 2);
      return Bf16ToFloat(b);
    }
    case DType::kF16: {
      uint16_t b;
      std::memcpy(&b, bytes + i * 2, 2);
      return HalfToFloat(b);
    }
  }
  return 0.0;
}

}  // namespace scantune
