// CompileCache: NVRTC compiles through the compile cache in the Store. A
// cache entry is keyed by NvrtcCompiler::CacheKey (sources hash, options,
// arch, NVRTC version, instances), so equal keys mean equal cubins; it carries
// the cubin and the lowered names of every instance. Compile failures are
// cached too (NVRTC is deterministic); compile timeouts are not (a loaded
// machine may do better next time). A Store error never fails a compile: the
// cache is an optimisation.
//
// Thread safety: thread-safe (the compiler and the Store are).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "compiler/nvrtc_compiler.h"
#include "db/store.h"

namespace scantune {

class CompileCache {
 public:
  CompileCache(const NvrtcCompiler* compiler, Store* store) : compiler_(compiler), store_(store) {}

  // Results in request order; up to `threads` compiles of cache misses in flight.
  std::vector<StatusOr<CompileResult>> CompileAll(const std::vector<CompileRequest>& requests, int threads);
  StatusOr<CompileResult> Compile(const CompileRequest& request);

 private:
  const NvrtcCompiler* compiler_;
  Store* store_;
};

// {"name expression": "lowered name", ...}: how a cache entry stores the
// lowered names. Parse fails on anything else.
std::string LoweredNamesToJson(const std::map<std::string, std::string>& names);
StatusOr<std::map<std::string, std::string>> LoweredNamesFromJson(const std::string& json);

}  // namespace scantune
