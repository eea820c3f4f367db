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

enum class Op { kLinearScan };
enum class DType { kF32, kBF16, kF16 };
enum class Mode { kFwd, kBwd, kFwdBwd };

struct Shape {
  int64_t batch = 0;
  int64_t length = 0;
  int64_t width = 0;
  int64_t elements() const { return batch * length * width; }
  auto operator<=>(const Shape&) const = default;
};

struct Problem {
  Op op = Op::kLinearScan;
  Shape shape;
  DType dtype = DType::kF32;
  Mode mode = Mode::kFwd;
  bool has_h0 = false;

  // "linear_scan/4x2048x2048/bf16/fwd_bwd/h0" -- stable, used in logs and keys.
  std::string Key() const;
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
// every input read once, every output written once (h0/final state included).
// linear_scan: fwd reads a, x and writes h; bwd reads a, dh, h and writes da, dx.
uint64_t FloorBytes(const Problem& problem, Mode mode);

// Learnable parameters of the operator (0 for linear_scan).
uint64_t ParameterCount(const Problem& problem);

}  // namespace scantune
