// Problem: what is being scanned (operator, shape, dtype, mode, h0), its
// validation against the service's limits, conversion to/from the proto, and
// the one function that counts the bytes an operator must move (every derived
// figure, GB/s and percent of copy bandwidth, comes from FloorBytes).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"
#include "proto/scantune.pb.h"

namespace scantune {

enum class Op {
  kLinearScan,     // h_t = a_t h_{t-1} + x_t
  kRgLru,          // Griffin's RG-LRU recurrence (gates from ga, gx; parameter Lambda)
  kSamu,           // scalar-modulated unit (per-token controller, parameters lambda, beta, gamma)
  kSelectiveScan,  // Mamba S6: state (D, N) per sequence; shape.width is D
};
enum class DType { kF32, kBF16, kF16 };
enum class Mode { kFwd, kBwd, kFwdBwd };

struct Shape {
  int64_t batch = 0;
  int64_t length = 0;
  int64_t width = 0;
  int64_t elements() const { return batch * length * width; }
  auto operator<=>(const Shape&) const = default;
};

// selective_scan's structural options (all off / 0 for the other operators).
struct SsmOptions {
  int state = 0;               // N: 8, 16, 32 or 64 (selective_scan); 0 for the other operators
  bool delta_bias = false;     // delta += delta_bias (D)
  bool delta_softplus = false; // delta = softplus(delta)
  bool z_gate = false;         // y *= silu(z)
  auto operator<=>(const SsmOptions&) const = default;
};

struct Problem {
  Op op = Op::kLinearScan;
  Shape shape;  // (B, L, W); for selective_scan W is D
  DType dtype = DType::kF32;
  Mode mode = Mode::kFwd;
  bool has_h0 = false;
  SsmOptions ssm;

  // "linear_scan/4x2048x2048/bf16/fwd_bwd/h0",
  // "selective_scan/4x2048x1024/fp32/fwd/n16+softplus" -- stable, used in logs and keys.
  std::string Key() const;
  // The operator as the database keys it: "selective_scan:n16+softplus" for
  // selective_scan (its N and options select different kernels), the op name otherwise.
  std::string OpKey() const;
  auto operator<=>(const Problem&) const = default;
};

// Bounds on what one request may ask for. Elements are capped so that the
// worker's inputs, outputs, gradients and reference copies fit comfortably.
struct ProblemLimits {
  int64_t max_batch = 4096;
  int64_t max_length = 1 << 20;
  int64_t max_width = 1 << 16;
  int64_t max_elements = int64_t{1} << 30;
};

const char* OpName(Op op);
const char* DTypeName(DType dtype);
const char* ModeName(Mode mode);
StatusOr<Op> ParseOp(std::string_view name);
StatusOr<DType> ParseDType(std::string_view name);   // fp32|bf16|fp16
StatusOr<Mode> ParseMode(std::string_view name);     // fwd|bwd|fwd_bwd
StatusOr<Shape> ParseShape(std::string_view text);   // "4x2048x2048"
std::string FormatShape(const Shape& shape);
int ElementBytes(DType dtype);

// Validates names, dimensions and limits; the message says which field and why.
Status Validate(const Problem& problem, const ProblemLimits& limits = {});

StatusOr<Problem> ProblemFromProto(const v1::Problem& proto);  // also validates
v1::Problem ToProto(const Problem& problem);
v1::DType ToProto(DType dtype);
v1::Mode ToProto(Mode mode);

// The fewest bytes the operator must move through device memory in `mode`:
// every input read once, every output written once (h0/final state included;
// per-channel parameters and their gradients included). e = element bytes.
//   linear_scan: fwd reads a, x, writes h (3e); bwd reads a, dh, h, writes da, dx (5e).
//   rglru: fwd reads x, ga, gx, writes h (4e); bwd reads x, ga, gx, h, dh, writes
//     dx, dga, dgx (8e). 24 B/elt fwd_bwd in bf16.
//   samu: fwd reads x, writes y and the saved h (3e); bwd reads x, h, dy, writes
//     dx (4e); the 2 control values per token are fp32. 14 B/elt fwd_bwd in bf16:
//     its transition comes from two per-token scalars, not from (B, L, W) gates.
//   selective_scan (D = width): fwd reads u, delta (+ z), Bm, Cm (B, L, N), writes
//     y; bwd reads u, delta, Bm, Cm, dy (+ z) and writes du, ddelta, dBm, dCm
//     (+ dz); A, Dv, delta_bias and their gradients are per channel.
uint64_t FloorBytes(const Problem& problem, Mode mode);

// Learnable parameters the operator owns: 0 for linear_scan, W for rglru
// (Lambda), 3W + 4 for samu, D*N + D (+ D with delta_bias) for selective_scan.
uint64_t ParameterCount(const Problem& problem);

// Dynamic control values per token: 2 for samu (r_t, i_t), 2W for rglru (its
// per-channel gates), 0 for linear_scan, 2N + D for selective_scan (Bm, Cm, delta).
uint64_t ControlValuesPerToken(const Problem& problem);

}  // namespace scantune
