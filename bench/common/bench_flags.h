// Numeric flags of the benchmark programs, checked against a range; the
// error names the flag, the range and the text given.
#pragma once

#include <cstdint>

#include "client/arg_parser.h"
#include "common/status.h"

namespace scantune::bench {

// --name as an integer in [lo, hi]; `fallback` when the flag is absent.
StatusOr<int64_t> IntFlag(const ArgParser& parser, const char* name, int64_t fallback, int64_t lo, int64_t hi);

// --name as a number in (lo, hi]; `fallback` when the flag is absent.
StatusOr<double> DoubleFlag(const ArgParser& parser, const char* name, double fallback, double lo, double hi);

}  // namespace scantune::bench
