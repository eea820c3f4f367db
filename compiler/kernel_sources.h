// The CUDA sources of kernels_src/, embedded into the binaries at build time,
// and their hash, which goes into every compile-cache key and every record.
#pragma once

#include <string>
#include <vector>

namespace scantune {

struct EmbeddedSource {
  const char* name;   // as included from other sources, e.g. "linear_scan.cuh"
  const char* text;
};

const std::vector<EmbeddedSource>& EmbeddedSources();

// Hex digest (64-bit FNV-1a is enough to detect change) over names and texts.
const std::string& SourceHash();

}  // namespace scantune
