#include "client/param_pack.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <limits>
#include <set>
#include <utility>

namespace scantune {

Status CheckServedSizes(const v1::KernelResponse& kernel, const ParamValues& values) {
  if (!kernel.has_problem()) return Status::Ok();
  const v1::Problem& p = kernel.problem();
  const bool ssm = p.op() == "selective_scan";
  std::vector<std::pair<const char*, int64_t>> sizes = {
      {"batch", p.shape().batch()}, {"length", p.shape().length()}, {ssm ? "dim" : "width", p.shape().width()}};
  if (ssm) sizes.emplace_back("state", p.state_dim() != 0 ? p.state_dim() : 16);
  for (const auto& [name, served] : sizes) {
    auto it = values.find(name);
    if (it == values.end() || it->second.kind != ParamValue::Kind::kInteger || it->second.integer == served) continue;
    return InvalidArgument("parameter field '" + std::string(name) + "' is " + std::to_string(it->second.integer) +
                           ", but backend " + kernel.variant() + " was served for " + p.op() + " " +
                           std::to_string(p.shape().batch()) + "x" + std::to_string(p.shape().length()) + "x" +
                           std::to_string(p.shape().width()) + " (" + name + " " + std::to_string(served) +
                           "): its launches cover that shape only; ask GetKernel for this one");
  }
  return Status::Ok();
}

bool FieldAllowsNull(const v1::ParamField& field) {
  std::string m = field.meaning();
  std::transform(m.begin(), m.end(), m.begin(), [](unsigned char c) { return std::tolower(c); });
  return m.find("null") != std::string::npos || m.find("optional") != std::string::npos;
}

StatusOr<std::vector<uint8_t>> PackParams(const google::protobuf::RepeatedPtrField<v1::ParamField>& layout,
                                          uint32_t params_size, const ParamValues& values) {
  if (layout.empty()) return InvalidArgument("the backend serves no parameter layout");
  std::vector<uint8_t> bytes(params_size, 0);
  std::set<std::string> seen;
  for (const v1::ParamField& f : layout) {
    const std::string where = "parameter field '" + f.name() + "'";
    if (!seen.insert(f.name()).second) return InvalidArgument(where + " appears twice in the layout");
    auto it = values.find(f.name());
    if (it == values.end()) {
      return InvalidArgument(where + " (" + f.type() + ", " + f.meaning() +
                             ") has no value: this caller does not know the backend's struct");
    }
    if (static_cast<uint64_t>(f.offset_bytes()) + f.size_bytes() > params_size) {
      return InvalidArgument(where + " runs past the struct's " + std::to_string(params_size) + " bytes");
    }
    const ParamValue& v = it->second;
    uint8_t* at = bytes.data() + f.offset_bytes();
    const bool pointer_field = f.type() == "ptr";
    if (v.kind == ParamValue::Kind::kPointer) {
      if (!pointer_field) return InvalidArgument(where + " has type '" + f.type() + "', a pointer was given");
      if (f.size_bytes() != sizeof(uint64_t)) {
        return InvalidArgument(where + " is a pointer of " + std::to_string(f.size_bytes()) + " bytes");
      }
      if (v.pointer == 0 && !FieldAllowsNull(f)) {
        return InvalidArgument(where + " does not accept null (" + f.meaning() + ")");
      }
      std::memcpy(at, &v.pointer, sizeof(uint64_t));
    } else {
      if (pointer_field) return InvalidArgument(where + " is a pointer, an integer was given");
      if (f.size_bytes() == 8) {
        std::memcpy(at, &v.integer, sizeof(int64_t));
      } else if (f.size_bytes() == 4) {
        if (v.integer < std::numeric_limits<int32_t>::min() || v.integer > std::numeric_limits<int32_t>::max()) {
          return InvalidArgument(where + " cannot hold " + std::to_string(v.integer) + " in 4 bytes");
        }
        const int32_t narrow = static_cast<int32_t>(v.integer);
        std::memcpy(at, &narrow, sizeof(int32_t));
      } else {
        return InvalidArgument(where + " is an integer of " + std::to_string(f.size_bytes()) + " bytes");
      }
    }
  }
  for (const auto& [name, v] : values) {
    if (v.required && seen.count(name) == 0) {
      return InvalidArgument("the backend's parameter struct has no field '" + name + "', which the caller passes");
    }
  }
  return bytes;
}

}  // namespace scantune
