// NVRTC wrapper: compiles one variant's module (all its template instances,
// named through nvrtcAddNameExpression) from the embedded sources into a
// cubin for the device's architecture. Thread-safe; CompileAll runs several
// compiles in parallel. A compile failure is a result with a state, not an
// error: Status errors mean the compiler itself is unusable.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/problem.h"
#include "common/status.h"
#include "common/variant.h"
#include "proto/scantune.pb.h"

namespace scantune {

struct CompileRequest {
  Variant variant;
  Op op = Op::kLinearScan;
  DType dtype = DType::kF32;
  SsmOptions ssm;  // selective_scan: N and options (template arguments of its instances)
  int cc_major = 9;
  int cc_minor = 0;
  Shape shape;     // the problem's: template arguments of the variants that bake it in (`_k1`)
};

struct CompileResult {
  v1::ResultState state = v1::STATE_UNSPECIFIED;  // OK, COMPILE_FAILED or COMPILE_TIMEOUT
  std::string cubin;
  std::map<std::string, std::string> lowered_names;  // name expression -> mangled entry
  std::string log;                                   // NVRTC log, kept for every compile
  double compile_ms = 0.0;
  std::string cache_key;
  std::string arch;                                  // "sm_90"
};

class NvrtcCompiler {
 public:
  // Compiles slower than this are recorded COMPILE_TIMEOUT.
  explicit NvrtcCompiler(double timeout_ms = 120000.0);
  // Waits for compiles that outlived their timeout: NVRTC cannot be
  // interrupted, and no compile thread may outlive the compiler (or the process).
  ~NvrtcCompiler();

  StatusOr<CompileResult> Compile(const CompileRequest& request) const;

  // Source hash + options + arch + NVRTC version + instances: equal keys, equal cubins.
  std::string CacheKey(const CompileRequest& request) const;

  // "13.0"
  static std::string Version();

 private:
  struct InFlight;  // compile threads still running, counted so that the destructor can wait
  double timeout_ms_;
  std::shared_ptr<InFlight> in_flight_;
};

// Compiles every request with up to `threads` compiles in flight; results in request order.
std::vector<StatusOr<CompileResult>> CompileAll(const NvrtcCompiler& compiler,
                                                const std::vector<CompileRequest>& requests, int threads);

}  // namespace scantune
