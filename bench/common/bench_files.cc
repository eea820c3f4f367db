#include "bench/common/bench_files.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <vector>

namespace scantune::bench {

Status WriteTextFile(const std::string& path, const std::string& text) {
  const std::filesystem::path p(path);
  std::error_code ec;
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return FailedPrecondition("cannot write " + path);
  out << text;
  out.close();
  if (!out) return FailedPrecondition("writing " + path + " failed");
  return Status::Ok();
}

std::string FindSeedFile(const std::string& number, const char* env_var) {
  namespace fs = std::filesystem;
  std::vector<fs::path> candidates;
  if (const char* env = std::getenv(env_var); env && *env) candidates.push_back(env);
  for (const fs::path& dir : {fs::path("../shared/seeds"), fs::path("/work/shared/seeds")}) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      if (entry.path().filename().string().rfind(number + "_", 0) == 0) candidates.push_back(entry.path());
    }
  }
  const std::string copy = "tests/integration/data/seed_" + number + ".json";
  candidates.push_back(copy);
  candidates.push_back(fs::path(SCANTUNE_SOURCE_DIR) / copy);
  for (const fs::path& path : candidates) {
    std::error_code ec;
    if (fs::is_regular_file(path, ec)) return path.string();
  }
  return "";
}

}  // namespace scantune::bench
