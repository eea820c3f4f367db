#include "common/problem.h"

#include <charconv>
#include <vector>

namespace scantune {
namespace {

StatusOr<int64_t> ParsePositive(std::string_view text, const char* what) {
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value <= 0) {
    return InvalidArgument(std::string(what) + " must be a positive integer, got '" + std::string(text) + "'");
  }
  return value;
}

}  // namespace

std::string Problem::Key() const {
  std::string key = std::string(OpName(op)) + "/" + FormatShape(shape) + "/" + DTypeName(dtype) + "/" +
                    ModeName(mode);
  if (has_h0) key += "/h0";
  if (op == Op::kSelectiveScan) key += "/" + OpKey().substr(sizeof("selective_scan:") - 1);
  return key;
}

std::string Problem::OpKey() const {
  std::string key = OpName(op);
  if (op != Op::kSelectiveScan) return key;
  key += ":n" + std::to_string(ssm.state);
  if (ssm.delta_bias) key += "+bias";
  if (ssm.delta_softplus) key += "+softplus";
  if (ssm.z_gate) key += "+z";
  return key;
}

const char* OpName(Op op) {
  switch (op) {
    case Op::kLinearScan: return "linear_scan";
    case Op::kRgLru: return "rglru";
    case Op::kSamu: return "samu";
    case Op::kSelectiveScan: return "selective_scan";
  }
  return "?";
}

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "fp32";
    case DType::kBF16: return "bf16";
    case DType::kF16: return "fp16";
  }
  return "?";
}

const char* ModeName(Mode mode) {
  switch (mode) {
    case Mode::kFwd: return "fwd";
    case Mode::kBwd: return "bwd";
    case Mode::kFwdBwd: return "fwd_bwd";
  }
  return "?";
}

StatusOr<Op> ParseOp(std::string_view name) {
  if (name == "linear_scan") return Op::kLinearScan;
  if (name == "rglru") return Op::kRgLru;
  if (name == "samu") return Op::kSamu;
  if (name == "selective_scan") return Op::kSelectiveScan;
  return InvalidArgument("unknown operator '" + std::string(name) +
                         "' (available: linear_scan, rglru, samu, selective_scan)");
}

StatusOr<DType> ParseDType(std::string_view name) {
  if (name == "fp32" || name == "float32") return DType::kF32;
  if (name == "bf16" || name == "bfloat16") return DType::kBF16;
  if (name == "fp16" || name == "float16") return DType::kF16;
  return InvalidArgument("unknown dtype '" + std::string(name) + "' (expected fp32, bf16 or fp16)");
}

StatusOr<Mode> ParseMode(std::string_view name) {
  if (name == "fwd") return Mode::kFwd;
  if (name == "bwd") return Mode::kBwd;
  if (name == "fwd_bwd") return Mode::kFwdBwd;
  return InvalidArgument("unknown mode '" + std::string(name) + "' (expected fwd, bwd or fwd_bwd)");
}

StatusOr<Shape> ParseShape(std::string_view text) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t x = text.find('x', start);
    parts.push_back(text.substr(start, x == std::string_view::npos ? std::string_view::npos : x - start));
    if (x == std::string_view::npos) break;
    start = x + 1;
  }
  if (parts.size() != 3) {
    return InvalidArgument("shape must be BxLxW (batch x length x width), got '" + std::string(text) + "'");
  }
  Shape shape;
  ASSIGN_OR_RETURN(shape.batch, ParsePositive(parts[0], "batch"));
  ASSIGN_OR_RETURN(shape.length, ParsePositive(parts[1], "length"));
  ASSIGN_OR_RETURN(shape.width, ParsePositive(parts[2], "width"));
  return shape;
}

std::string FormatShape(const Shape& s) {
  return std::to_string(s.batch) + "x" + std::to_string(s.length) + "x" + std::to_string(s.width);
}

int ElementBytes(DType dtype) { return dtype == DType::kF32 ? 4 : 2; }

Status Validate(const Problem& p, const ProblemLimits& limits) {
  const Shape& s = p.shape;
  auto check = [](int64_t v, int64_t max, const char* name) -> Status {
    if (v <= 0) return InvalidArgument(std::string("shape.") + name + " must be > 0, got " + std::to_string(v));
    if (v > max) {
      return InvalidArgument(std::string("shape.") + name + " = " + std::to_string(v) + " exceeds the limit " +
                             std::to_string(max));
    }
    return Status::Ok();
  };
  RETURN_IF_ERROR(check(s.batch, limits.max_batch, "batch"));
  RETURN_IF_ERROR(check(s.length, limits.max_length, "length"));
  RETURN_IF_ERROR(check(s.width, limits.max_width, "width"));
  if (s.elements() > limits.max_elements) {
    return InvalidArgument("shape " + FormatShape(s) + " has " + std::to_string(s.elements()) +
                           " elements, over the limit of " + std::to_string(limits.max_elements));
  }
  if (p.op == Op::kSelectiveScan) {
    const int n = p.ssm.state;
    if (n != 8 && n != 16 && n != 32 && n != 64) {
      return InvalidArgument("selective_scan state_dim must be 8, 16, 32 or 64, got " + std::to_string(n));
    }
    // The state (B, D, N) and the (B, L, N) inputs count against the limit too.
    const int64_t state_elements = s.batch * s.width * n;
    if (state_elements > limits.max_elements) {
      return InvalidArgument("selective_scan state " + std::to_string(s.batch) + "x" + std::to_string(s.width) + "x" +
                             std::to_string(n) + " is over the limit of " + std::to_string(limits.max_elements) +
                             " elements");
    }
  } else if (p.ssm != SsmOptions{}) {
    return InvalidArgument(std::string("state_dim, delta_bias, delta_softplus and z_gate apply to selective_scan only, not ") +
                           OpName(p.op));
  }
  return Status::Ok();
}

StatusOr<Problem> ProblemFromProto(const v1::Problem& proto) {
  Problem p;
  if (proto.op().empty()) return InvalidArgument("problem.op is required (e.g. linear_scan)");
  ASSIGN_OR_RETURN(p.op, ParseOp(proto.op()));
  p.shape = {proto.shape().batch(), proto.shape().length(), proto.shape().width()};
  switch (proto.dtype()) {
    case v1::FP32: p.dtype = DType::kF32; break;
    case v1::BF16: p.dtype = DType::kBF16; break;
    case v1::FP16: p.dtype = DType::kF16; break;
    default: return InvalidArgument("problem.dtype is required (FP32, BF16 or FP16)");
  }
  switch (proto.mode()) {
    case v1::FWD: p.mode = Mode::kFwd; break;
    case v1::BWD: p.mode = Mode::kBwd; break;
    case v1::FWD_BWD: p.mode = Mode::kFwdBwd; break;
    default: return InvalidArgument("problem.mode is required (FWD, BWD or FWD_BWD)");
  }
  p.has_h0 = proto.has_h0();
  if (p.op == Op::kSelectiveScan) {
    p.ssm.state = proto.state_dim() == 0 ? 16 : static_cast<int>(proto.state_dim());
    p.ssm.delta_bias = proto.delta_bias();
    p.ssm.delta_softplus = proto.delta_softplus();
    p.ssm.z_gate = proto.z_gate();
  } else if (proto.state_dim() != 0 || proto.delta_bias() || proto.delta_softplus() || proto.z_gate()) {
    return InvalidArgument(std::string("problem.state_dim, delta_bias, delta_softplus and z_gate apply to "
                                       "selective_scan only, not ") + OpName(p.op));
  }
  RETURN_IF_ERROR(Validate(p));
  return p;
}

v1::DType ToProto(DType dtype) {
  switch (dtype) {
    case DType::kF32: return v1::FP32;
    case DType::kBF16: return v1::BF16;
    case DType::kF16: return v1::FP16;
  }
  return v1::DTYPE_UNSPECIFIED;
}

v1::Mode ToProto(Mode mode) {
  switch (mode) {
    case Mode::kFwd: return v1::FWD;
    case Mode::kBwd: return v1::BWD;
    case Mode::kFwdBwd: return v1::FWD_BWD;
  }
  return v1::MODE_UNSPECIFIED;
}

v1::Problem ToProto(const Problem& p) {
  v1::Problem proto;
  proto.set_op(OpName(p.op));
  proto.mutable_shape()->set_batch(static_cast<uint32_t>(p.shape.batch));
  proto.mutable_shape()->set_length(static_cast<uint32_t>(p.shape.length));
  proto.mutable_shape()->set_width(static_cast<uint32_t>(p.shape.width));
  proto.set_dtype(ToProto(p.dtype));
  proto.set_mode(ToProto(p.mode));
  proto.set_has_h0(p.has_h0);
  if (p.op == Op::kSelectiveScan) {
    proto.set_state_dim(static_cast<uint32_t>(p.ssm.state));
    proto.set_delta_bias(p.ssm.delta_bias);
    proto.set_delta_softplus(p.ssm.delta_softplus);
    proto.set_z_gate(p.ssm.z_gate);
  }
  return proto;
}

uint64_t FloorBytes(const Problem& p, Mode mode) {
  const uint64_t n = static_cast<uint64_t>(p.shape.elements());
  const uint64_t e = static_cast<uint64_t>(ElementBytes(p.dtype));
  const uint64_t w = static_cast<uint64_t>(p.shape.width);
  const uint64_t f = sizeof(float);
  const uint64_t tokens = static_cast<uint64_t>(p.shape.batch * p.shape.length);
  uint64_t state = static_cast<uint64_t>(p.shape.batch) * w * f;
  if (p.op == Op::kSelectiveScan) state *= static_cast<uint64_t>(p.ssm.state);
  const uint64_t h0 = p.has_h0 ? state : 0;
  uint64_t fwd = 0, bwd = 0;
  switch (p.op) {
    case Op::kLinearScan:
      fwd = 3 * n * e + state + h0;  // a, x in; h out; final state out (+ h0 in)
      bwd = 5 * n * e + 2 * h0;      // a, dh, h in; da, dx out (+ h0 in, dh0 out)
      break;
    case Op::kRgLru:
      fwd = 4 * n * e + w * f + state + h0;           // x, ga, gx, Lambda in; h, final state out
      bwd = 8 * n * e + 2 * w * f + 2 * h0;           // x, ga, gx, h, dh, Lambda in; dx, dga, dgx, dLambda out
      break;
    case Op::kSamu:
      fwd = 3 * n * e + 2 * tokens * f + (3 * w + 4) * f + state + h0;  // x in; y, h, (r, i) out
      bwd = 4 * n * e + 2 * tokens * f + 2 * (3 * w + 4) * f + 2 * h0;  // x, h, dy, (r, i) in; dx out
      break;
    case Op::kSelectiveScan: {
      const uint64_t bc = 2 * tokens * static_cast<uint64_t>(p.ssm.state) * e;  // Bm, Cm
      const uint64_t params = (w * static_cast<uint64_t>(p.ssm.state) + w + (p.ssm.delta_bias ? w : 0)) * f;
      const uint64_t z = p.ssm.z_gate ? n * e : 0;
      fwd = 3 * n * e + z + bc + params + state + h0;               // u, delta (z), Bm, Cm in; y out
      bwd = 5 * n * e + 2 * z + 2 * bc + 2 * params + 2 * h0;       // u, delta, dy (z) in; du, ddelta (dz) out
      break;
    }
  }
  switch (mode) {
    case Mode::kFwd: return fwd;
    case Mode::kBwd: return bwd;
    case Mode::kFwdBwd: return fwd + bwd;
  }
  return 0;
}

uint64_t ParameterCount(const Problem& p) {
  const uint64_t w = static_cast<uint64_t>(p.shape.width);
  switch (p.op) {
    case Op::kLinearScan: return 0;
    case Op::kRgLru: return w;
    case Op::kSamu: return 3 * w + 4;
    case Op::kSelectiveScan: return w * static_cast<uint64_t>(p.ssm.state) + w + (p.ssm.delta_bias ? w : 0);
  }
  return 0;
}

uint64_t ControlValuesPerToken(const Problem& p) {
  const uint64_t w = static_cast<uint64_t>(p.shape.width);
  switch (p.op) {
    case Op::kLinearScan: return 0;
    case Op::kRgLru: return 2 * w;
    case Op::kSamu: return 2;
    case Op::kSelectiveScan: return 2 * static_cast<uint64_t>(p.ssm.state) + w;
  }
  return 0;
}

}  // namespace scantune
