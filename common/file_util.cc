#include "common/file_util.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace scantune {

StatusOr<std::string> ReadFileToString(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT) return NotFound("'" + path + "' does not exist");
    return FailedPrecondition("cannot read '" + path + "': " + std::strerror(err));
  }
  if (S_ISDIR(st.st_mode)) return FailedPrecondition("'" + path + "' is a directory, not a file");
  std::ifstream file(path, std::ios::binary);
  if (!file) return FailedPrecondition("cannot read '" + path + "': " + std::strerror(errno));
  std::ostringstream text;
  text << file.rdbuf();
  if (file.bad()) return FailedPrecondition("error reading '" + path + "'");
  return text.str();
}

}  // namespace scantune
