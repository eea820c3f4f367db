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
#include "worker/input_generator.h"
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
template <typename OutAt, typename RefAt>
OutputCheck Finish(const OutputDesc& desc, const Partial& p, std::span<const uint8_t> raw, OutAt out_at, RefAt ref_at,
                   const Shape& shape, double tolerance) {
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
    c.detail = name + "[" + std::to_string(i) + "] " + Position(i, shape, desc.is_state) +
               (poison ? " was never written (poison left)" : " is " + FormatDouble(out_at(i)) + " (not finite)");
    return c;
  }
  // An all-zero reference (never with these inputs) falls back to absolute error.
  c.rel_err = p.max_diff / (p.max_ref > 0.0 ? p.max_ref : 1.0);
  if (!(c.rel_err <= tolerance)) {
    c.state = v1::WRONG_RESULT;
    c.detail = name + ": max|out-ref|/max|ref| = " + FormatDouble(c.rel_err) + " > " + FormatDouble(tolerance) +
               "; worst at " + name + "[" + std::to_string(p.worst) + "] " +
               Position(p.worst, shape, desc.is_state) + ": out " + FormatDouble(out_at(p.worst)) + ", ref " +
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

}  // namespace

VerificationData PrepareVerification(const Problem& problem, uint64_t seed, bool check) {
  const bool wants_fwd = problem.mode != Mode::kBwd;
  const bool wants_bwd = problem.mode != Mode::kFwd;
  VerificationData v;
  LinearScanInputs in = GenerateInputs(problem, seed);
  v.a = EncodeAs(problem.dtype, in.a);
  v.x = EncodeAs(problem.dtype, in.x);
  v.dh = EncodeAs(problem.dtype, in.dh);
  v.h0 = EncodeAs(DType::kF32, in.h0);
  // bwd-only mode needs the reference forward as the backward's input h
  // even when nothing is compared (time-only jobs).
  if (check || !wants_fwd) v.forward = LinearScanForward(problem.shape, in.a, in.x, in.h0);
  if (!wants_fwd) {
    v.h_for_bwd = EncodeAs(problem.dtype, v.forward.h);
    v.forward = {};  // no forward output to compare
  }
  if (wants_bwd && check) v.reverse = LinearScanReverse(problem.shape, in.a, in.dh);
  v.h0_values = std::move(in.h0);
  return v;
}

OutputCheck CheckOutput(const OutputDesc& desc, std::span<const uint8_t> raw, std::span<const double> ref,
                        const Shape& shape, double tolerance) {
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
      [&](size_t i) { return ref[i]; }, shape, tolerance);
}

BackwardCheck CheckBackward(DType dtype, std::span<const uint8_t> dx_raw, std::span<const uint8_t> da_raw,
                            std::span<const double> g, std::span<const uint8_t> h_read,
                            std::span<const uint8_t> h_after, std::span<const double> h0, const Shape& shape,
                            double tolerance) {
  const size_t n = g.size();
  const size_t W = static_cast<size_t>(shape.width), L = static_cast<size_t>(shape.length);
  const size_t e = static_cast<size_t>(ElementBytes(dtype));
  const bool compare_h = !h_after.empty();
  struct Parts {
    Partial dx, da;
    bool h_changed = false;
  };
  std::vector<Parts> parts(ParallelChunks(n, kGrain));
  WithDType(dtype, [&](auto d) {
    ParallelFor(n, kGrain, [&](size_t k, size_t begin, size_t end) {
      Parts p;
      // Row by row: within a row t is fixed, h_{t-1} is the previous row of
      // h_read (still in cache from this row's byte comparison one row ago).
      for (size_t i = begin; i < end;) {
        const size_t row = i / W, row_end = std::min(end, (row + 1) * W);
        const size_t t = row % L, b = row / L;
        if (compare_h && std::memcmp(h_after.data() + i * e, h_read.data() + i * e, (row_end - i) * e) != 0) {
          p.h_changed = true;
        }
        for (; i < row_end; ++i) {
          const double gi = g[i];
          p.dx.Add(i, Load<decltype(d)::value>(dx_raw.data(), i), gi);
          const double h_prev =
              t > 0 ? Load<decltype(d)::value>(h_read.data(), i - W) : (h0.empty() ? 0.0 : h0[b * W + i % W]);
          p.da.Add(i, Load<decltype(d)::value>(da_raw.data(), i), gi * h_prev);
        }
      }
      parts[k] = p;
    });
  });
  Partial dx, da;
  BackwardCheck out;
  for (const Parts& p : parts) {
    dx.Merge(p.dx);
    da.Merge(p.da);
    out.h_changed = out.h_changed || p.h_changed;
  }
  auto da_ref = [&](size_t i) {
    const size_t row = i / W;
    const double h_prev = row % L > 0 ? DecodeAt(dtype, h_read.data(), i - W)
                                      : (h0.empty() ? 0.0 : h0[row / L * W + i % W]);
    return g[i] * h_prev;
  };
  out.dx = Finish(
      {"dx", dtype}, dx, dx_raw, [&](size_t i) { return DecodeAt(dtype, dx_raw.data(), i); },
      [&](size_t i) { return g[i]; }, shape, tolerance);
  out.da = Finish(
      {"da", dtype}, da, da_raw, [&](size_t i) { return DecodeAt(dtype, da_raw.data(), i); }, da_ref, shape,
      tolerance);
  return out;
}

bool SameBytes(std::span<const uint8_t> a, std::span<const uint8_t> b) {
  if (a.size() != b.size()) return false;
  std::vector<char> differs(ParallelChunks(a.size(), kGrain * 8), 0);
  ParallelFor(a.size(), kGrain * 8, [&](size_t k, size_t begin, size_t end) {
    differs[k] = std::memcmp(a.data() + begin, b.data() + begin, end - begin) != 0;
  });
  return std::none_of(differs.begin(), differs.end(), [](char d) { return d != 0; });
}

}  // namespace scantune
