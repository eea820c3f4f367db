// Whole-file reads for small files the user names (certificates, keys,
// tokens, seed exports). Stateless; thread-safe.
#pragma once

#include <string>

#include "common/status.h"

namespace scantune {

// The file's bytes. NOT_FOUND if it does not exist, FAILED_PRECONDITION if it
// cannot be read (a directory, no permission); the message names the path.
StatusOr<std::string> ReadFileToString(const std::string& path);

}  // namespace scantune
