// The real NVRTC (no GPU needed): every enumerated variant compiles for every
// dtype for sm_90, every name expression gets a lowered name, the cubin is
// non-empty; embedded sources and cache keys behave. No timing assertions.
#include <chrono>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/log.h"
#include "compiler/kernel_sources.h"
#include "compiler/nvrtc_compiler.h"
#include "compiler/plan.h"

namespace scantune {
namespace {

CompileRequest Request(const char* variant, DType dtype, int cc_major = 9, int cc_minor = 0) {
  CompileRequest r;
  r.variant = *Variant::Parse(variant);
  r.dtype = dtype;
  r.cc_major = cc_major;
  r.cc_minor = cc_minor;
  return r;
}

TEST(EmbeddedSources, HoldTheKernelsAndHash) {
  std::set<std::string> names;
  for (const EmbeddedSource& s : EmbeddedSources()) {
    names.insert(s.name);
    EXPECT_GT(std::string(s.text).size(), 100u) << s.name;
  }
  EXPECT_TRUE(names.count("linear_scan.cuh"));
  EXPECT_TRUE(names.count("scan_common.cuh"));
  EXPECT_TRUE(names.count("linear_scan_params.h"));
  EXPECT_EQ(SourceHash().size(), 16u);
  EXPECT_EQ(SourceHash(), SourceHash());
}

TEST(NvrtcCompiler, Version) {
  const std::string version = NvrtcCompiler::Version();
  EXPECT_NE(version, "unknown");
  EXPECT_NE(version.find('.'), std::string::npos);
}

TEST(NvrtcCompiler, CacheKeys) {
  NvrtcCompiler compiler;
  const std::string base = compiler.CacheKey(Request("lookback_v8_t256_s8_i8", DType::kBF16));
  EXPECT_EQ(base, compiler.CacheKey(Request("lookback_v8_t256_s8_i8", DType::kBF16)));
  EXPECT_NE(base, compiler.CacheKey(Request("lookback_v8_t256_s8_i8", DType::kF16)));
  EXPECT_NE(base, compiler.CacheKey(Request("lookback_v8_t256_s8_i8", DType::kF32)));
  EXPECT_NE(base, compiler.CacheKey(Request("lookback_v8_t256_s8_i8", DType::kBF16, 8, 0)));
  EXPECT_NE(base, compiler.CacheKey(Request("lookback_v8_t256_s8_i8", DType::kBF16, 9, 1)));
  EXPECT_NE(base, compiler.CacheKey(Request("lookback_v8_t256_s8_i16", DType::kBF16)));
  EXPECT_NE(base, compiler.CacheKey(Request("lookback_v4_t256_s8_i8", DType::kBF16)));
  // One key per distinct module: variants that differ only in launch
  // geometry (lookbackpipe's blocks per SM) share their cubin.
  std::set<std::string> keys;
  std::set<std::vector<std::string>> modules;
  const std::vector<Variant> variants = EnumerateVariants(Op::kLinearScan, true);
  for (const Variant& v : variants) {
    CompileRequest r;
    r.variant = v;
    r.dtype = DType::kBF16;
    keys.insert(compiler.CacheKey(r));
    modules.insert(NameExpressions(v, Op::kLinearScan, DType::kBF16));
  }
  EXPECT_EQ(keys.size(), modules.size());
  EXPECT_EQ(compiler.CacheKey(Request("lookbackpipe_v4_t256_c64_i128_b2", DType::kBF16)),
            compiler.CacheKey(Request("lookbackpipe_v4_t256_c64_i128_b3", DType::kBF16)));
}

TEST(NvrtcCompiler, CompileOneAndKeepTheLog) {
  NvrtcCompiler compiler;
  StatusOr<CompileResult> result = compiler.Compile(Request("lookback_v8_t256_s8_i8", DType::kBF16));
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  ASSERT_EQ(result->state, v1::OK) << result->log;
  EXPECT_EQ(result->arch, "sm_90");
  EXPECT_FALSE(result->cubin.empty());
  EXPECT_EQ(result->cubin.substr(0, 4), "\x7f" "ELF");
  EXPECT_EQ(result->lowered_names.size(), 2u);
  EXPECT_EQ(result->lowered_names.at("linear_scan_fwd_lookback<__nv_bfloat16, 8, 256, 8, 8>"),
            "_Z24linear_scan_fwd_lookbackI13__nv_bfloat16Li8ELi256ELi8ELi8EEv16LinearScanParams");
  // --ptxas-options=-v: the register and spill report is in the kept log.
  EXPECT_NE(result->log.find("registers"), std::string::npos) << result->log;
  EXPECT_EQ(result->cache_key, compiler.CacheKey(Request("lookback_v8_t256_s8_i8", DType::kBF16)));
  EXPECT_GT(result->compile_ms, 0.0);
}

TEST(NvrtcCompiler, ImpossibleInstanceIsCompileFailedWithLog) {
  // Segments that do not divide threads trip a static_assert in the kernel:
  // a result with a state and the log, not an error of the compiler.
  NvrtcCompiler compiler;
  StatusOr<CompileResult> result = compiler.Compile(Request("lookback_v4_t256_s24_i8", DType::kF32));
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->state, v1::COMPILE_FAILED);
  EXPECT_NE(result->log.find("segments must divide threads"), std::string::npos) << result->log;
}

TEST(NvrtcCompiler, TimeoutIsAResult) {
  NvrtcCompiler compiler(/*timeout_ms=*/1.0);
  StatusOr<CompileResult> result = compiler.Compile(Request("lookback_v8_t256_s16_i16", DType::kF32));
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->state, v1::COMPILE_TIMEOUT);
  EXPECT_NE(result->log.find("exceeded"), std::string::npos);
}

// The whole design space, every dtype, sm_90, CompileAll with 2 threads (the
// CI machine's cores). Prints how long it took; asserts nothing about time.
TEST(NvrtcCompiler, EveryVariantEveryDtypeCompilesForSm90) {
  NvrtcCompiler compiler;
  std::vector<CompileRequest> requests;
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (const Variant& v : EnumerateVariants(Op::kLinearScan, /*include_test_variants=*/true)) {
      CompileRequest r;
      r.variant = v;
      r.dtype = dtype;
      if (v.baked != 0) r.shape = {1, 8192, 2560};  // _k1: compiled for one problem's shape
      requests.push_back(r);
    }
  }
  const auto start = std::chrono::steady_clock::now();
  const std::vector<StatusOr<CompileResult>> results = CompileAll(compiler, requests, 2);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(results.size(), requests.size());
  double compile_ms = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    const std::string what = requests[i].variant.Name() + " " + DTypeName(requests[i].dtype);
    ASSERT_TRUE(results[i].ok()) << what << ": " << results[i].status().ToString();
    const CompileResult& r = *results[i];
    ASSERT_EQ(r.state, v1::OK) << what << "\n" << r.log;
    EXPECT_FALSE(r.cubin.empty()) << what;
    const std::vector<std::string> names =
        NameExpressions(requests[i].variant, Op::kLinearScan, requests[i].dtype, {}, requests[i].shape);
    EXPECT_EQ(r.lowered_names.size(), names.size()) << what;
    for (const std::string& name : names) {
      auto it = r.lowered_names.find(name);
      ASSERT_NE(it, r.lowered_names.end()) << what << ": " << name;
      EXPECT_FALSE(it->second.empty()) << what << ": " << name;
    }
    // lookbacksmem _o3/_o4 bound their registers so as not to spill (kernels_src/linear_scan_smem.cuh).
    if (requests[i].variant.algorithm == Algorithm::kLookbackSmem && requests[i].variant.order >= 3) {
      EXPECT_FALSE(std::regex_search(r.log, std::regex("[1-9][0-9]* bytes spill"))) << what << "\n" << r.log;
    }
    compile_ms += r.compile_ms;
  }
  std::printf("compiled %zu modules in %.1f s wall (2 threads), %.1f s summed, %.2f s per module\n", results.size(),
              seconds, compile_ms / 1000, compile_ms / 1000 / results.size());
}

}  // namespace
}  // namespace scantune
