// SourceHash(): 64-bit FNV-1a over the embedded kernel sources' names and
// texts, computed once. It goes into every compile-cache key and record, so
// a change of any kernel source marks old results stale.
#include <cstdint>
#include <cstdio>
#include <string>

#include "compiler/kernel_sources.h"

namespace scantune {
namespace {

uint64_t Fnv1a(uint64_t h, const char* text, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    h ^= static_cast<unsigned char>(text[i]);
    h *= 1099511628211ull;
  }
  return h;
}

std::string ComputeSourceHash() {
  uint64_t h = 14695981039346656037ull;
  for (const EmbeddedSource& source : EmbeddedSources()) {
    const std::string name = source.name;
    const std::string text = source.text;
    // Lengths first, so that moving bytes between name and text changes the hash.
    const std::string header = std::to_string(name.size()) + ":" + std::to_string(text.size()) + ":";
    h = Fnv1a(h, header.data(), header.size());
    h = Fnv1a(h, name.data(), name.size());
    h = Fnv1a(h, text.data(), text.size());
  }
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

}  // namespace

const std::string& SourceHash() {
  static const std::string hash = ComputeSourceHash();
  return hash;
}

}  // namespace scantune
