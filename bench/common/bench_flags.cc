#include "bench/common/bench_flags.h"

#include <cerrno>
#include <cstdlib>
#include <string>

namespace scantune::bench {

StatusOr<int64_t> IntFlag(const ArgParser& parser, const char* name, int64_t fallback, int64_t lo, int64_t hi) {
  auto v = parser.Get(name);
  if (!v) return fallback;
  char* end = nullptr;
  errno = 0;
  const long long parsed = std::strtoll(v->c_str(), &end, 10);
  if (v->empty() || *end != '\0' || errno != 0 || parsed < lo || parsed > hi) {
    return InvalidArgument("--" + std::string(name) + " must be an integer in [" + std::to_string(lo) + ", " +
                           std::to_string(hi) + "], got '" + *v + "'");
  }
  return static_cast<int64_t>(parsed);
}

StatusOr<double> DoubleFlag(const ArgParser& parser, const char* name, double fallback, double lo, double hi) {
  auto v = parser.Get(name);
  if (!v) return fallback;
  char* end = nullptr;
  const double parsed = std::strtod(v->c_str(), &end);
  if (v->empty() || *end != '\0' || !(parsed > lo) || parsed > hi) {
    return InvalidArgument("--" + std::string(name) + " must be a number in (" + std::to_string(lo) + ", " +
                           std::to_string(hi) + "], got '" + *v + "'");
  }
  return parsed;
}

}  // namespace scantune::bench
