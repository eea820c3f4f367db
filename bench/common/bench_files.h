// Files the benchmark programs read and write: the report they write, and the
// seed record they print their table beside.
#pragma once

#include <string>

#include "common/status.h"

namespace scantune::bench {

// Writes `text` to `path` (parent folders created), replacing the file.
Status WriteTextFile(const std::string& path, const std::string& text);

// The seed record numbered `number` ("001"): $<env_var> if set, else the
// first ../shared/seeds/<number>_* or /work/shared/seeds/<number>_*, else the
// repository's copy tests/integration/data/seed_<number>.json (relative to
// the working directory, then to the source tree). Empty when none exists.
std::string FindSeedFile(const std::string& number, const char* env_var);

}  // namespace scantune::bench
