// Deterministic(variant, problem) (compiler/plan.h) is what a deterministic
// selection promises a training job: every output of the mode has the same
// bits on every run with the same inputs. Here every variant it calls
// deterministic is verified three times on one input draw, each run's outputs
// digested (Verifier::Options::digest_outputs), and the digests must agree.
// A few variants it calls nondeterministic run the same way and their
// agreement is only printed: they may agree on a given run, so nothing is
// asserted of them, but the print shows that the digests do see a
// difference where there is one. Label: gpu.
#include <cstdio>
#include <set>

#include <gtest/gtest.h>

#include "tests/worker/gpu_test_support.h"
#include "worker/verifier.h"

namespace scantune {
namespace {

constexpr int kRuns = 3;
// Nondeterministic variants run per problem, for the print.
constexpr int kObservedNondeterministic = 4;

struct Tally {
  int deterministic = 0;
  int observed = 0;
  int observed_differing = 0;
};


// Runs the variant kRuns times; false where a run was not OK (a gtest
// failure is recorded). *same: every run's digest equal to the first's.
bool RunRepeatedly(testing::TestGpu& gpu, Verifier& verifier, const Variant& variant, const Problem& problem,
                   const CompileResult& compiled, bool* same) {
  auto candidate = MakeCandidate(variant, problem, gpu.limits, compiled);
  EXPECT_TRUE(candidate.ok()) << candidate.status().ToString();
  if (!candidate.ok()) return false;
  uint64_t first = 0;
  *same = true;
  for (int run = 0; run < kRuns; ++run) {
    auto outcome = verifier.Verify(*candidate);
    EXPECT_TRUE(outcome.ok()) << outcome.status().ToString();
    if (!outcome.ok()) return false;
    EXPECT_EQ(outcome->state, v1::OK) << v1::ResultState_Name(outcome->state) << ": " << outcome->detail;
    if (!outcome->ok()) return false;
    EXPECT_NE(outcome->output_digest, 0u);
    if (run == 0) first = outcome->output_digest;
    if (outcome->output_digest != first) *same = false;
  }
  return true;
}

// Every problem shares the op, dtype and SsmOptions (one compile of each variant).
void CheckDeterminism(const std::vector<Problem>& problems, std::vector<Variant> named = {}) {
  SCANTUNE_REQUIRE_GPU(gpu);
  ASSERT_FALSE(problems.empty());
  const Problem& first = problems.front();
  std::vector<Variant> variants = EnumerateVariants(first.op, /*include_test_variants=*/false);
  variants.insert(variants.end(), named.begin(), named.end());

  // What runs: each problem's deterministic variants and a few others.
  std::set<std::string> runs;
  for (const Problem& problem : problems) {
    int observed = 0;
    for (const Variant& v : variants) {
      // _k1's modules are compiled per shape (this test compiles once for all its problems); none is
      // Deterministic (its twins' look-back forwards are not), and GatedGpuTest runs them.
      if (v.baked != 0 || !CanImplement(v, problem, gpu->limits).ok()) continue;
      if (Deterministic(v, problem)) {
        runs.insert(v.Name());
      } else if (observed < kObservedNondeterministic) {
        runs.insert(v.Name());
        ++observed;
      }
    }
  }
  std::vector<Variant> compiled_variants;
  std::vector<CompileRequest> requests;
  for (const Variant& v : variants) {
    if (!runs.contains(v.Name())) continue;
    runs.erase(v.Name());  // a named variant that is also enumerated compiles once
    compiled_variants.push_back(v);
    CompileRequest r;
    r.variant = v;
    r.op = first.op;
    r.dtype = first.dtype;
    r.ssm = first.ssm;
    r.cc_major = gpu->limits.cc_major;
    r.cc_minor = gpu->limits.cc_minor;
    requests.push_back(r);
  }
  const NvrtcCompiler compiler;
  const std::vector<StatusOr<CompileResult>> compiled = CompileAll(compiler, requests, 16);

  int deterministic_total = 0;
  for (const Problem& problem : problems) {
    Verifier::Options options;
    options.digest_outputs = true;
    Verifier verifier(*gpu->ctx, problem, /*seed=*/4321, options);
    Tally tally;
    int observed = 0;
    for (size_t i = 0; i < compiled_variants.size(); ++i) {
      const Variant& v = compiled_variants[i];
      if (!CanImplement(v, problem, gpu->limits).ok()) continue;
      const bool deterministic = Deterministic(v, problem);
      if (!deterministic && observed >= kObservedNondeterministic) continue;
      SCOPED_TRACE(v.Name() + " on " + problem.Key());
      ASSERT_TRUE(compiled[i].ok()) << compiled[i].status().ToString();
      ASSERT_EQ(compiled[i]->state, v1::OK) << compiled[i]->log;
      bool same = false;
      if (!RunRepeatedly(*gpu, verifier, v, problem, *compiled[i], &same)) continue;
      if (deterministic) {
        ++tally.deterministic;
        EXPECT_TRUE(same) << "a deterministic variant gave different bits on the same inputs";
      } else {
        ++observed;
        ++tally.observed;
        if (!same) {
          ++tally.observed_differing;
          std::printf("  %s: bits differ between runs (nondeterministic, as declared)\n", v.Name().c_str());
        }
      }
    }
    std::printf("%-48s deterministic %3d (each %d runs, same bits asserted)  nondeterministic %d, %d differed\n",
                problem.Key().c_str(), tally.deterministic, kRuns, tally.observed, tally.observed_differing);
    deterministic_total += tally.deterministic;
  }
  EXPECT_GT(deterministic_total, 0) << "no deterministic variant ran";
}

// Variants run by name (not all enumerated).
const auto Named = testing::NamedVariants;

// With h0 (the initial state's carry-in composes through every chain).
Problem Make(Op op, Shape shape, DType dtype, Mode mode) {
  return Problem{op, shape, dtype, mode, /*has_h0=*/true, /*ssm=*/{}};
}

// B = 1 with a long L chains many tiles through the look-back (where the
// nondeterministic families differ); W = 2050 gives partial blocks.
TEST(DeterminismGpuTest, LinearScanDeterministicVariantsGiveTheSameBits) {
  CheckDeterminism({Make(Op::kLinearScan, {1, 1 << 20, 8}, DType::kBF16, Mode::kFwdBwd),
                    Make(Op::kLinearScan, {2, 1000, 2050}, DType::kBF16, Mode::kFwdBwd)});
}

TEST(DeterminismGpuTest, RgLruDeterministicVariantsGiveTheSameBits) {
  CheckDeterminism({Make(Op::kRgLru, {1, 8192, 256}, DType::kBF16, Mode::kFwdBwd),
                    Make(Op::kRgLru, {2, 1000, 2050}, DType::kBF16, Mode::kFwdBwd)});
}

// samu's chunked points without the look-back forward (no _l) are
// deterministic in fwd; without _a1 also in bwd; fwd_bwd needs both. Named:
// the own-forward _y1 and _h4 points, which are not enumerated.
TEST(DeterminismGpuTest, SamuDeterministicVariantsGiveTheSameBits) {
  CheckDeterminism({Make(Op::kSamu, {1, 8192, 256}, DType::kBF16, Mode::kFwdBwd),
                    Make(Op::kSamu, {2, 1000, 2050}, DType::kBF16, Mode::kFwdBwd),
                    Make(Op::kSamu, {2, 1000, 2050}, DType::kBF16, Mode::kFwd),
                    Make(Op::kSamu, {1, 8192, 256}, DType::kBF16, Mode::kBwd)},
                   Named({"chunked_v8_t256_c32_y1", "chunked_v8_t512_c64_y1_a1", "chunked_v8_t256_c64_h4"}));
}

// selective_scan: every forward; of the backwards only tscan's _f1 (the
// others add by atomics). D = 1024 puts 64-128 channel groups' partials under
// each dBm, dCm; B = 4 four batches' under each dA. Named: an _f1 point with
// state groups, which is not enumerated.
TEST(DeterminismGpuTest, SelectiveScanDeterministicVariantsGiveTheSameBits) {
  std::vector<Problem> problems = {Make(Op::kSelectiveScan, {2, 1000, 70}, DType::kF32, Mode::kFwd),
                                   Make(Op::kSelectiveScan, {1, 8192, 256}, DType::kF32, Mode::kFwd),
                                   Make(Op::kSelectiveScan, {2, 1000, 70}, DType::kF32, Mode::kFwdBwd),
                                   Make(Op::kSelectiveScan, {4, 2048, 1024}, DType::kF32, Mode::kFwdBwd),
                                   Make(Op::kSelectiveScan, {4, 2048, 1024}, DType::kF32, Mode::kBwd)};
  for (Problem& p : problems) {
    p.ssm.state = 16;
    p.ssm.delta_bias = p.ssm.delta_softplus = p.ssm.z_gate = true;
  }
  CheckDeterminism(problems, Named({"tscan_d4_w1_i8_s2_f1"}));
}

}  // namespace
}  // namespace scantune
