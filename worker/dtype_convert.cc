#include "worker/dtype_convert.h"

#include <cmath>
#include <cstring>

#include "worker/parallel.h"

namespace scantune {
namespace {

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

}  // namespace

uint16_t FloatToBf16(float value) {
  uint32_t x = Bits(value);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x0040u);  // quiet NaN
  // Round to nearest, ties to even: add 0x7fff plus the lowest kept bit.
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

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

double RoundToDType(double value, DType dtype) {
  const float f = static_cast<float>(value);
  switch (dtype) {
    case DType::kF32: return f;
    case DType::kBF16: return Bf16ToFloat(FloatToBf16(f));
    case DType::kF16: return HalfToFloat(FloatToHalf(f));
  }
  return f;
}

namespace {

// Elementwise conversions are memory-bound: below this many elements per
// thread a thread start costs more than it saves.
constexpr size_t kGrain = 1 << 16;

template <typename Fn>
void ForEachChunk(size_t count, Fn&& fn) {
  ParallelFor(count, kGrain, [&](size_t, size_t begin, size_t end) { fn(begin, end); });
}

}  // namespace

void EncodeInto(DType dtype, std::span<const double> values, uint8_t* out) {
  // The dtype switch sits outside the element loops so they stay tight.
  switch (dtype) {
    case DType::kF32:
      ForEachChunk(values.size(), [&](size_t begin, size_t end) {
        for (size_t i = begin; i < end; ++i) {
          const float f = static_cast<float>(values[i]);
          std::memcpy(out + i * 4, &f, 4);
        }
      });
      break;
    case DType::kBF16:
      ForEachChunk(values.size(), [&](size_t begin, size_t end) {
        for (size_t i = begin; i < end; ++i) {
          const uint16_t b = FloatToBf16(static_cast<float>(values[i]));
          std::memcpy(out + i * 2, &b, 2);
        }
      });
      break;
    case DType::kF16:
      ForEachChunk(values.size(), [&](size_t begin, size_t end) {
        for (size_t i = begin; i < end; ++i) {
          const uint16_t b = FloatToHalf(static_cast<float>(values[i]));
          std::memcpy(out + i * 2, &b, 2);
        }
      });
      break;
  }
}

std::vector<uint8_t> EncodeAs(DType dtype, std::span<const double> values) {
  std::vector<uint8_t> out(values.size() * static_cast<size_t>(ElementBytes(dtype)));
  EncodeInto(dtype, values, out.data());
  return out;
}

std::vector<double> DecodeFrom(DType dtype, const uint8_t* bytes, size_t count) {
  std::vector<double> out(count);
  ForEachChunk(count, [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) out[i] = DecodeAt(dtype, bytes, i);
  });
  return out;
}

}  // namespace scantune
