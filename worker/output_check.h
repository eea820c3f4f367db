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
#include "worker/reference.h"

namespace scantune {

// What verifying a linear_scan candidate needs that depends only on the
// problem and the job's seed: built once per job, shared by every candidate.
struct VerificationData {
  // The inputs as the kernels read them (h0 as fp32; empty without h0).
  std::vector<uint8_t> a, x, dh, h0;
  // bwd-only mode: the reference forward rounded to the dtype, which the
  // backward reads as its input h.
  std::vector<uint8_t> h_for_bwd;
  // The float64 reference, where the mode and `check` need it (else empty).
  LinearScanForwardRef forward;   // h, h_final
  LinearScanReverseRef reverse;   // g (= dx), dh0
  std::vector<double> h0_values;  // h_{-1} for da at t = 0; empty without h0
};

// GenerateInputs, encoding and the reference, all on the host's threads.
// The float64 inputs are dropped once the reference is built: candidates
// only ever need the bytes and the reference.
VerificationData PrepareVerification(const Problem& problem, uint64_t seed, bool check);

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

struct BackwardCheck {
  OutputCheck dx, da;
  bool h_changed = false;  // h_after differs from h_read: the backward wrote its input h
};

// The (B, L, W) gradients of linear_scan in one pass:
//   dx against g (LinearScanReverse: g does not depend on h);
//   da against g_t * h_{t-1}, with h_{t-1} decoded from h_read (the h the
//     candidate's backward read: its own forward's output in fwd_bwd, the
//     rounded reference forward in bwd) or h0 at t = 0 (empty: zero);
//     bit-identical to LinearScanBackward(..., Decode(h_read), ...).da;
//   h_after (h as it is after the backward) against h_read, byte for byte;
//     empty h_after: not compared.
// dx_raw, da_raw and h_read hold g.size() elements of `dtype`.
BackwardCheck CheckBackward(DType dtype, std::span<const uint8_t> dx_raw, std::span<const uint8_t> da_raw,
                            std::span<const double> g, std::span<const uint8_t> h_read,
                            std::span<const uint8_t> h_after, std::span<const double> h0, const Shape& shape,
                            double tolerance);

// a == b, compared on all host threads (the inputs-unchanged check).
bool SameBytes(std::span<const uint8_t> a, std::span<const uint8_t> b);

}  // namespace scantune
