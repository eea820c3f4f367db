#include "worker/output_check.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "worker/device_buffer.h"
#include "worker/dtype_convert.h"
#include "worker/parallel.h"

namespace scantune {
namespace {

constexpr size_t kNone = std::numeric_limits<size_t>::max();
// Comparison passes are memory-bound: below this many elements per thread
// a thread start costs more than it saves.
constexpr size_t kGrain = 1 << 16;

std::string FormatDouble(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// "(b=1, t=6, c=32)" for a (B, L, W) tensor, "(b=1, c=32)" for a (B, W) state.
std::string Position(size_t index, const Shape& shape, bool is_state) {
  const size_t W = static_cast<size_t>(shape.width), L = static_cast<size_t>(shape.length);
  if (is_state) return "(b=" + std::to_string(index / W) + ", c=" + std::to_string(index % W) + ")";
  return "(b=" + std::to_string(index / (L * W)) + ", t=" + std::to_string(index / W % L) +
         ", c=" + std::to_string(index % W) + ")";
}

// max|ref|, max|out-ref| with its lowest index, and the lowest non-finite
// index, over a range of elements. Merging the ranges' partials in index
// order gives what one sequential walk would.
struct Partial {
  double max_ref = 0.0;
  double max_diff = 0.0;
  size_t worst = 0;
  size_t first_bad = kNone;

  void Add(size_t i, double out, double ref) {
    if (!std::isfinite(out)) {
      if (first_bad == kNone) first_bad = i;
      return;
    }
    max_ref = std::max(max_ref, std::fabs(ref));
    const double diff = std::fabs(out - ref);
    if (diff > max_diff) {
      max_diff = diff;
      worst = i;
    }
  }
  // `later` covers higher indices than *this.
  void Merge(const Partial& later) {
    if (first_bad == kNone) first_bad = later.first_bad;
    max_ref = std::max(max_ref, later.max_ref);
    if (later.max_diff > max_diff) {
      max_diff = later.max_diff;
      worst = later.worst;
    }
  }
};

Partial MergeAll(const std::vector<Partial>& parts) {
  Partial all;
  for (const Partial& p : parts) all.Merge(p);
  return all;
}

// The verdict on one output from its merged partial. out_at / ref_at give
// single elements for the detail text.
template <typename OutAt, typename RefAt, typename PositionOf>
OutputCheck Finish(const OutputDesc& desc, const Partial& p, std::span<const uint8_t> raw, OutAt out_at, RefAt ref_at,
                   PositionOf position, double tolerance) {
  OutputCheck c;
  const std::string name = desc.name;
  if (p.first_bad != kNone) {
    const size_t i = p.first_bad;
    const size_t bytes = static_cast<size_t>(ElementBytes(desc.dtype));
    const bool poison = std::all_of(raw.begin() + static_cast<std::ptrdiff_t>(i * bytes),
                                    raw.begin() + static_cast<std::ptrdiff_t>((i + 1) * bytes),
                                    [](uint8_t b) { return b == DeviceBuffer::kPoisonByte; });
    c.state = v1::WRONG_RESULT;
    c.rel_err = INFINITY;
    c.detail = name + "[" + std::to_string(i) + "] " + position(i) +
               (poison ? " was never written (poison left)" : " is " + FormatDouble(out_at(i)) + " (not finite)");
    return c;
  }
  // An all-zero reference (never with these inputs) falls back to absolute error.
  c.rel_err = p.max_diff / (p.max_ref > 0.0 ? p.max_ref : 1.0);
  if (!(c.rel_err <= tolerance)) {
    c.state = v1::WRONG_RESULT;
    c.detail = name + ": max|out-ref|/max|ref| = " + FormatDouble(c.rel_err) + " > " + FormatDouble(tolerance) +
               "; worst at " + name + "[" + std::to_string(p.worst) + "] " +
               position(p.worst) + ": out " + FormatDouble(out_at(p.worst)) + ", ref " +
               FormatDouble(ref_at(p.worst));
  }
  return c;
}

// Typed element loads, so the hot loops carry no dtype switch.
template <DType D>
inline double Load(const uint8_t* bytes, size_t i) {
  if constexpr (D == DType::kF32) {
    float f;
    std::memcpy(&f, bytes + i * 4, 4);
    return f;
  } else {
    uint16_t b;
    std::memcpy(&b, bytes + i * 2, 2);
    if constexpr (D == DType::kBF16) return Bf16ToFloat(b);
    else return HalfToFloat(b);
  }
}

// Calls fn(std::integral_constant<DType, d>) for the runtime dtype.
template <typename Fn>
decltype(auto) WithDType(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kF32: return fn(std::integral_constant<DType, DType::kF32>{});
    case DType::kBF16: return fn(std::integral_constant<DType, DType::kBF16>{});
    case DType::kF16: break;
  }
  return fn(std::integral_constant<DType, DType::kF16>{});
}

// "(b=1, t=6, c=32)" from the dims and their comma-separated names.
std::string DimsPosition(size_t index, const std::vector<int64_t>& dims, const std::string& names) {
  std::vector<std::string> labels;
  size_t start = 0;
  while (start <= names.size()) {
    const size_t comma = names.find(',', start);
    labels.push_back(names.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  std::vector<size_t> coords(dims.size());
  for (size_t d = dims.size(); d-- > 0;) {
    const size_t extent = static_cast<size_t>(std::max<int64_t>(dims[d], 1));
    coords[d] = index % extent;
    index /= extent;
  }
  std::string text = "(";
  for (size_t d = 0; d < dims.size(); ++d) {
    if (d > 0) text += ", ";
    text += (d < labels.size() && !labels[d].empty() ? labels[d] : "i" + std::to_string(d)) + "=" +
            std::to_string(coords[d]);
  }
  return text + ")";
}

template <typename PositionOf>
OutputCheck CheckWith(const OutputDesc& desc, std::span<const uint8_t> raw, std::span<const double> ref,
                      PositionOf position, double tolerance) {
  const size_t n = ref.size();
  std::vector<Partial> parts(ParallelChunks(n, kGrain));
  WithDType(desc.dtype, [&](auto d) {
    ParallelFor(n, kGrain, [&](size_t k, size_t begin, size_t end) {
      Partial p;
      for (size_t i = begin; i < end; ++i) p.Add(i, Load<decltype(d)::value>(raw.data(), i), ref[i]);
      parts[k] = p;
    });
  });
  return Finish(
      desc, MergeAll(parts), raw, [&](size_t i) { return DecodeAt(desc.dtype, raw.data(), i); },
      [&](size_t i) { return ref[i]; }, position, tolerance);
}

}  // namespace

OutputCheck CheckOutput(const OutputDesc& desc, std::span<const uint8_t> raw, std::span<const double> ref,
                        const Shape& shape, double tolerance) {
  return CheckWith(
      desc, raw, ref, [&](size_t i) { return Position(i, shape, desc.is_state); }, tolerance);
}

OutputCheck CheckTensor(const TensorSpec& spec, std::span<const uint8_t> raw, std::span<const double> ref,
                        double tolerance) {
  const std::string names = spec.dim_names;
  return CheckWith(
      {spec.name.c_str(), spec.dtype}, raw, ref, [&](size_t i) { return DimsPosition(i, spec.dims, names); },
      tolerance);
}

bool SameBytes(std::span<const uint8_t> a, std::span<const uint8_t> b) {
  if (a.size() != b.size()) return false;
  std::vector<char> differs(ParallelChunks(a.size(), kGrain * 8), 0);
  ParallelFor(a.size(), kGrain * 8, [&](size_t k, size_t begin, size_t end) {
    differs[k] = std::memcmp(a.data() + begin, b.data() + begin, end - begin) != 0;
  });
  return std::none_of(differs.begin(), differs.end(), [](char d) { return d != 0; });
}

namespace {

// FNV-1a over 8-byte words (then the tail bytes): not cryptographic, only a
// cheap fingerprint in which one changed bit changes the result.
constexpr uint64_t kFnvOffset = 14695981039346656037ull;
constexpr uint64_t kFnvPrime = 1099511628211ull;

uint64_t MixWord(uint64_t h, uint64_t word) { return (h ^ word) * kFnvPrime; }

uint64_t Fnv1aWords(std::span<const uint8_t> bytes) {
  uint64_t h = kFnvOffset;
  size_t i = 0;
  for (; i + 8 <= bytes.size(); i += 8) {
    uint64_t word;
    std::memcpy(&word, bytes.data() + i, 8);
    h = MixWord(h, word);
  }
  for (; i < bytes.size(); ++i) h = MixWord(h, bytes[i]);
  return h;
}

}  // namespace

uint64_t BytesDigest(std::span<const uint8_t> bytes) {
  // Blocks of a fixed size, hashed on any thread, then combined in order: the
  // digest depends on the bytes alone, not on the thread count.
  constexpr size_t kBlock = size_t{1} << 20;
  const size_t blocks = (bytes.size() + kBlock - 1) / kBlock;
  std::vector<uint64_t> parts(blocks, 0);
  ParallelFor(blocks, 1, [&](size_t, size_t begin, size_t end) {
    for (size_t b = begin; b < end; ++b) {
      parts[b] = Fnv1aWords(bytes.subspan(b * kBlock, std::min(kBlock, bytes.size() - b * kBlock)));
    }
  });
  uint64_t h = MixWord(kFnvOffset, bytes.size());
  for (uint64_t part : parts) h = MixWord(h, part);
  return h;
}

}  // namespace scantune
