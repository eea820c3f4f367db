// Developer tool: compiles named variants with the real NVRTC and writes each
// cubin and NVRTC log (with the ptxas register/spill report) to a directory,
// for cuobjdump --dump-sass / nvdisasm. Not a test; no GPU needed.
//   scantune_nvrtc_dump OUT_DIR DTYPE VARIANT... (DTYPE: fp32|bf16|fp16; VARIANT `all`:
//   every variant the planner enumerates for the operator)
// The operator is linear_scan unless SCANTUNE_OP names another (rglru, samu,
// selective_scan; selective_scan at N = SCANTUNE_SSM_STATE, default 16, with
// delta_bias, delta_softplus and the z gate where SCANTUNE_SSM_OPTIONS=1). SCANTUNE_SHAPE=BxLxW is the
// shape that variants baking it in (samu `_k1`) are compiled for.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "compiler/nvrtc_compiler.h"
#include "compiler/plan.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s OUT_DIR DTYPE VARIANT...\n", argv[0]);
    return 2;
  }
  const std::string out_dir = argv[1];
  auto dtype = scantune::ParseDType(argv[2]);
  if (!dtype.ok()) {
    std::fprintf(stderr, "%s\n", dtype.status().ToString().c_str());
    return 2;
  }
  scantune::Op op = scantune::Op::kLinearScan;
  if (const char* name = std::getenv("SCANTUNE_OP"); name != nullptr) {
    auto parsed = scantune::ParseOp(name);
    if (!parsed.ok()) {
      std::fprintf(stderr, "%s\n", parsed.status().ToString().c_str());
      return 2;
    }
    op = *parsed;
  }
  std::vector<std::string> names(argv + 3, argv + argc);
  if (names.size() == 1 && names[0] == "all") {
    names.clear();
    for (const scantune::Variant& v : scantune::EnumerateVariants(op, /*include_test_variants=*/false)) {
      names.push_back(v.Name());
    }
  }
  scantune::NvrtcCompiler compiler;
  int failures = 0;
  for (const std::string& name : names) {
    const char* arg = name.c_str();
    auto variant = scantune::Variant::Parse(name);
    if (!variant.ok()) {
      std::fprintf(stderr, "%s\n", variant.status().ToString().c_str());
      ++failures;
      continue;
    }
    scantune::CompileRequest request;
    request.variant = *variant;
    request.op = op;
    request.dtype = *dtype;
    if (const char* n = std::getenv("SCANTUNE_SSM_STATE"); n != nullptr) request.ssm.state = std::atoi(n);
    if (const char* o = std::getenv("SCANTUNE_SSM_OPTIONS"); o != nullptr && std::string(o) == "1") {
      request.ssm.delta_bias = request.ssm.delta_softplus = request.ssm.z_gate = true;
    }
    if (const char* shape = std::getenv("SCANTUNE_SHAPE"); shape != nullptr) {
      auto parsed = scantune::ParseShape(shape);
      if (!parsed.ok()) {
        std::fprintf(stderr, "SCANTUNE_SHAPE: %s\n", parsed.status().ToString().c_str());
        return 2;
      }
      request.shape = *parsed;
    }
    auto result = compiler.Compile(request);
    if (!result.ok()) {
      std::fprintf(stderr, "%s: %s\n", arg, result.status().ToString().c_str());
      ++failures;
      continue;
    }
    const std::string stem = out_dir + "/" + arg + "_" + argv[2];
    std::ofstream(stem + ".cubin", std::ios::binary) << result->cubin;
    std::ofstream(stem + ".log") << result->log;
    std::printf("%s %s: %s %.0f ms, cubin %zu bytes\n", arg, argv[2],
                scantune::v1::ResultState_Name(result->state).c_str(), result->compile_ms, result->cubin.size());
    for (const auto& [expr, lowered] : result->lowered_names) std::printf("  %s -> %s\n", expr.c_str(), lowered.c_str());
    if (result->state != scantune::v1::OK) {
      std::printf("%s\n", result->log.c_str());
      ++failures;
    }
  }
  return failures == 0 ? 0 : 1;
}
