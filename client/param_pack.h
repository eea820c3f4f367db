// Packs a served backend's by-value kernel parameter struct by FIELD NAME
// from the layout GetKernel serves (ParamField name / offset / size / type),
// so a caller never assumes an offset: a backend whose struct differs is
// either packed correctly or refused with the field named. Used by
// KernelLauncher (client/kernel_launcher.h) and the mixer bench.
//
// Pure value code; thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "proto/scantune.pb.h"

namespace scantune {

struct ParamValue {
  enum class Kind { kPointer, kInteger };
  Kind kind = Kind::kPointer;
  uint64_t pointer = 0;  // device address; 0 is null
  int64_t integer = 0;
  // A field the caller needs the layout to have (a tensor it must pass);
  // optional ones (a null h0 the struct may not even have) may be absent.
  bool required = true;

  static ParamValue Pointer(uint64_t p, bool required = true) { return {Kind::kPointer, p, 0, required}; }
  static ParamValue Null() { return {Kind::kPointer, 0, 0, false}; }
  static ParamValue Integer(int64_t v) { return {Kind::kInteger, 0, v, true}; }
};

using ParamValues = std::map<std::string, ParamValue>;

// True when the field's meaning says a null pointer is accepted
// ("...; null: zero", "optional").
bool FieldAllowsNull(const v1::ParamField& field);

// The struct's bytes (params_size bytes, unnamed padding zero).
// INVALID_ARGUMENT, naming the field, when: the layout has a field not in
// `values` (the caller does not know what to pass); a required value has no
// field; a pointer goes into a non-pointer field or vice versa; a field's
// size is not 8 (pointer) or 4/8 (integer) or it runs past params_size; an
// integer does not fit its field; a null goes into a field that does not
// allow null.
StatusOr<std::vector<uint8_t>> PackParams(const google::protobuf::RepeatedPtrField<v1::ParamField>& layout,
                                          uint32_t params_size, const ParamValues& values);

// The sizes among `values` (batch, length, width; selective_scan's dim and
// state) against the problem the backend was served for (its response's
// `problem`): its launches cover that shape only, and a `_k1` kernel has it
// compiled in, so a struct with other sizes would read and write outside the
// caller's tensors. INVALID_ARGUMENT naming the field and both values; OK for
// a response without a problem (a daemon from before the field) and for sizes
// not given (PackParams names those).
Status CheckServedSizes(const v1::KernelResponse& kernel, const ParamValues& values);

}  // namespace scantune
