// Output checks: one candidate's outputs, as read back from the device (raw
// bytes of their storage dtype), against the float64 reference. Pure
// functions over host arrays, so they are tested without a GPU.
//
// An output passes when every element is finite and
// max|out - ref| / max|ref| <= tolerance (an all-zero reference falls back to
// the absolute error). The first non-finite element (lowest index) fails it:
// still all poison bytes means it was never written, otherwise it is NaN/Inf.
// Each check is one pass over its data on all host threads (worker/parallel.h);
// verdict, rel_err and detail (which element is worst, which first) are the
// same for any thread count: per-chunk results merge by max and lowest index.
//
// Thread safety: pure; thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/problem.h"
#include "proto/scantune.pb.h"
#include "worker/op_io.h"

namespace scantune {

struct OutputCheck {
  v1::ResultState state = v1::OK;
  double rel_err = 0.0;  // +inf when an element is not finite
  std::string detail;    // why, for the record, when not OK
  bool ok() const { return state == v1::OK; }
};

// What is checked, for the detail text: a (B, L, W) tensor or a (B, W) state.
struct OutputDesc {
  const char* name;
  DType dtype;  // storage dtype of the raw bytes
  bool is_state = false;
};

// raw holds ref.size() elements of desc.dtype.
OutputCheck CheckOutput(const OutputDesc& desc, std::span<const uint8_t> raw, std::span<const double> ref,
                        const Shape& shape, double tolerance);

// One tensor of an operator (worker/op_io.h) against its reference; the
// detail names the element by the tensor's dims ("(b=1, t=6, c=32)").
OutputCheck CheckTensor(const TensorSpec& spec, std::span<const uint8_t> raw, std::span<const double> ref,
                        double tolerance);

// a == b, compared on all host threads (the inputs-unchanged check).
bool SameBytes(std::span<const uint8_t> a, std::span<const uint8_t> b);

// A 64-bit digest of the bytes, on all host threads: equal bytes give equal
// digests (whatever the thread count), so two runs' outputs compare by it.
uint64_t BytesDigest(std::span<const uint8_t> bytes);

}  // namespace scantune
