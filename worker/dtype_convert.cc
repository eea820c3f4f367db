#include "worker/dtype_convert.h"

#include <cmath>
#include <cstring>

namespace scantune {
namespace {

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

}  // namespace

uint16_t FloatToBf16(float value) {
  uint32_t x = Bits(value);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x0040u);  // quiet NaN
  // Round to nearest, ties to even: add 0x7fff plus the lowest kept bit.
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

float Bf16ToFloat(uint16_t bits) { return FromBits(static_cast<uint32_t>(bits) << 16); }

uint16_t FloatToHalf(float value) {
  uint32_t x = Bits(value);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u) return sign | (x > 0x7f800000u ? 0x7e00u : 0x7c00u);  // NaN / Inf
  // 65520 is halfway between the largest half (65504, odd mantissa) and 2^16:
  // ties to even round it, and everything above, to infinity.
  if (x >= 0x477ff000u) return sign | 0x7c00u;
  if (x < 0x38800000u) {
    // Subnormal half (or zero): a multiple of 2^-24. Scaling by 2^24 is exact
    // in float, and nearbyint rounds ties to even in the default mode.
    const float scaled = std::fabs(value) * 16777216.0f;
    return sign | static_cast<uint16_t>(std::nearbyint(scaled));
  }
  x += 0xfffu + ((x >> 13) & 1u);  // round the 13 dropped bits, ties to even
  x -= 0x38000000u;                // exponent bias 127 -> 15
  return sign | static_cast<uint16_t>(x >> 13);
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    const float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return FromBits(sign | 0x7f800000u | (mant << 13));
  return FromBits(sign | ((exp + 112u) << 23) | (mant << 13));
}

double RoundToDType(double value, DType dtype) {
  const float f = static_cast<float>(value);
  switch (dtype) {
    case DType::kF32: return f;
    case DType::kBF16: return Bf16ToFloat(FloatToBf16(f));
    case DType::kF16: return HalfToFloat(FloatToHalf(f));
  }
  return f;
}

std::vector<uint8_t> EncodeAs(DType dtype, std::span<const double> values) {
  std::vector<uint8_t> out(values.size() * static_cast<size_t>(ElementBytes(dtype)));
  for (size_t i = 0; i < values.size(); ++i) {
    const float f = static_cast<float>(values[i]);
    switch (dtype) {
      case DType::kF32: std::memcpy(&out[i * 4], &f, 4); break;
      case DType::kBF16: {
        const uint16_t b = FloatToBf16(f);
        std::memcpy(&out[i * 2], &b, 2);
        break;
      }
      case DType::kF16: {
        const uint16_t b = FloatToHalf(f);
        std::memcpy(&out[i * 2], &b, 2);
        break;
      }
    }
  }
  return out;
}

std::vector<double> DecodeFrom(DType dtype, const uint8_t* bytes, size_t count) {
  std::vector<double> out(count);
  for (size_t i = 0; i < count; ++i) {
    switch (dtype) {
      case DType::kF32: {
        float f;
        std::memcpy(&f, bytes + i * 4, 4);
        out[i] = f;
        break;
      }
      case DType::kBF16: {
        uint16_t b;
        std::memcpy(&b, bytes + i * 2, 2);
        out[i] = Bf16ToFloat(b);
        break;
      }
      case DType::kF16: {
        uint16_t b;
        std::memcpy(&b, bytes + i * 2, 2);
        out[i] = HalfToFloat(b);
        break;
      }
    }
  }
  return out;
}

}  // namespace scantune
