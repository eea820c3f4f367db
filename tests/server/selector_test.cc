// Selector: the decision rule (faster only beyond noise, else simpler), shape
// distance, and Find's policies over a real Store file.
#include "server/selector.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "server/compile_cache.h"

namespace scantune {
namespace {

TEST(DecideTest, ClearWinnerIsDecidedByBeingFaster) {
  // lookback (complex) is 20% faster with tiny noise: speed wins.
  std::vector<RankedCandidate> c = {{"sequential_v2_t128_p2", 0, 1.20, 0.002},
                                    {"lookback_v4_t256_s8_i8", 2, 1.00, 0.002}};
  Decision d = Decide(c);
  EXPECT_EQ(d.winner, 1);
  EXPECT_EQ(d.runner_up, 0);
  EXPECT_EQ(d.decided_by, kDecidedFaster);
  EXPECT_NEAR(d.margin_pct, 20.0, 1e-9);
}

TEST(DecideTest, WithinNoiseTheSimplerWins) {
  // 0.5% apart: under the 1% floor, so the simpler sequential wins though slower.
  std::vector<RankedCandidate> c = {{"lookback_v4_t256_s8_i8", 2, 1.000, 0.0001},
                                    {"sequential_v2_t128_p2", 0, 1.005, 0.0001}};
  Decision d = Decide(c);
  EXPECT_EQ(d.winner, 1);
  EXPECT_EQ(d.runner_up, 0);
  EXPECT_EQ(d.decided_by, kDecidedSimpler);
  EXPECT_LT(d.margin_pct, 0.0);  // the winner is slower by a margin inside the noise
}

TEST(DecideTest, LargeMadMakesAGapNoise) {
  // 5% apart, but the MADs are 4% of the median: 2 x MAD swallows the gap.
  std::vector<RankedCandidate> c = {{"chunked_v4_t128_c64", 1, 1.00, 0.04},
                                    {"sequential_v2_t128_p2", 0, 1.05, 0.04}};
  EXPECT_FALSE(ClearlyFaster(c[0], c[1]));
  Decision d = Decide(c);
  EXPECT_EQ(c[d.winner].variant, "sequential_v2_t128_p2");
  EXPECT_EQ(d.decided_by, kDecidedSimpler);
}

TEST(DecideTest, EqualComplexityFallsBackToName) {
  std::vector<RankedCandidate> c = {{"sequential_v4_t128_p2", 0, 1.000, 0.0},
                                    {"sequential_v2_t128_p2", 0, 1.001, 0.0}};
  EXPECT_EQ(c[Decide(c).winner].variant, "sequential_v2_t128_p2");
}

TEST(DecideTest, SingleAndEmpty) {
  EXPECT_EQ(Decide({}).winner, -1);
  Decision d = Decide({{"sequential_v2_t128_p2", 0, 1.0, 0.0}});
  EXPECT_EQ(d.winner, 0);
  EXPECT_EQ(d.runner_up, -1);
  EXPECT_EQ(d.decided_by, kDecidedAlone);
}

TEST(DecideTest, OrderOfInputDoesNotChangeTheAnswer) {
  std::vector<RankedCandidate> c = {{"a_v1", 1, 1.0, 0.01}, {"b_v1", 1, 1.0, 0.01}, {"c_v1", 0, 1.3, 0.01}};
  const std::string first = c[Decide(c).winner].variant;
  std::reverse(c.begin(), c.end());
  EXPECT_EQ(c[Decide(c).winner].variant, first);
  EXPECT_EQ(first, "a_v1");
}

TEST(ShapeDistanceTest, SymmetricAndZeroOnEqual) {
  Shape a{4, 2048, 2048}, b{4, 4096, 2048};
  EXPECT_EQ(ShapeDistance(a, a), 0.0);
  EXPECT_DOUBLE_EQ(ShapeDistance(a, b), ShapeDistance(b, a));
  EXPECT_LT(ShapeDistance(a, b), ShapeDistance(a, Shape{4, 8192, 2048}));
}

TEST(LoweredNamesJsonTest, RoundTrips) {
  std::map<std::string, std::string> names = {
      {"linear_scan_fwd_lookback<__nv_bfloat16, 4, 256, 8, 8>", "_Z24linear_scan_fwd_lookbackI13__nv_bfloat16Li4EEvv"},
      {"odd \"quoted\" \\ name", "x"}};
  StatusOr<std::map<std::string, std::string>> back = LoweredNamesFromJson(LoweredNamesToJson(names));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, names);
  EXPECT_TRUE(LoweredNamesFromJson("{}").ok());
  EXPECT_FALSE(LoweredNamesFromJson("[1]").ok());
  EXPECT_FALSE(LoweredNamesFromJson("{\"a\": \"b\"").ok());
}

class SelectorFindTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/scantune-selector-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    StatusOr<std::unique_ptr<Store>> store = Store::Open(dir_ + "/t.db");
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(*store);
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  static Problem MakeProblem(int64_t b, int64_t l, int64_t w) {
    Problem p;
    p.shape = {b, l, w};
    p.dtype = DType::kBF16;
    p.mode = Mode::kFwd;
    return p;
  }

  void Put(const Problem& problem, const std::string& variant, const std::string& fingerprint,
           bool deterministic = false) {
    v1::Record record;
    record.mutable_device()->set_name("Model X");
    record.mutable_device()->set_uuid("GPU-x");
    *record.mutable_problem() = ToProto(problem);
    record.set_variant(variant);
    record.set_state(v1::OK);
    record.mutable_fwd()->set_median_ms(1.0);
    record.set_origin("tuned");
    v1::Selection selection;
    selection.set_device_model("Model X");
    *selection.mutable_problem() = ToProto(problem);
    selection.set_variant(variant);
    selection.set_median_ms(1.0);
    selection.set_fingerprint(fingerprint);
    selection.set_decided_by(kDecidedFaster);
    selection.set_deterministic(deterministic);
    ASSERT_TRUE(store_->CommitResults({record}, selection, 0).ok());
  }

  std::string dir_;
  std::unique_ptr<Store> store_;
};

TEST_F(SelectorFindTest, ExactFreshAndStale) {
  Put(MakeProblem(4, 2048, 2048), "sequential_v2_t128_p2", "fp-now");
  Selector selector(store_.get());
  StatusOr<v1::Selection> fresh = selector.Find("Model X", "fp-now", MakeProblem(4, 2048, 2048), v1::NOT_FOUND);
  ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
  EXPECT_EQ(fresh->variant(), "sequential_v2_t128_p2");
  EXPECT_FALSE(fresh->stale());
  EXPECT_FALSE(fresh->nearest());
  StatusOr<v1::Selection> stale = selector.Find("Model X", "fp-later", MakeProblem(4, 2048, 2048), v1::NOT_FOUND);
  ASSERT_TRUE(stale.ok());
  EXPECT_TRUE(stale->stale());  // kept, flagged, never silently fresh
}

TEST_F(SelectorFindTest, MissIsNotFoundNamingTheProblemAndPolicies) {
  Put(MakeProblem(4, 2048, 2048), "sequential_v2_t128_p2", "fp-now");
  StatusOr<v1::Selection> miss =
      Selector(store_.get()).Find("Model X", "fp-now", MakeProblem(4, 1024, 2048), v1::NOT_FOUND);
  ASSERT_FALSE(miss.ok());
  EXPECT_EQ(miss.status().code(), StatusCode::kNotFound);
  EXPECT_NE(miss.status().message().find("linear_scan/4x1024x2048/bf16/fwd"), std::string::npos);
  EXPECT_NE(miss.status().message().find("NEAREST"), std::string::npos);
  EXPECT_NE(miss.status().message().find("TUNE_NOW"), std::string::npos);
}

TEST_F(SelectorFindTest, NearestPicksTheClosestShapeAndFlagsIt) {
  Put(MakeProblem(4, 2048, 2048), "sequential_v2_t128_p2", "fp-now");
  Put(MakeProblem(4, 8192, 2048), "lookback_v4_t256_s8_i8", "fp-now");
  Put(MakeProblem(1, 256, 512), "chunked_v4_t128_c64", "fp-old");
  Selector selector(store_.get());
  StatusOr<v1::Selection> near = selector.Find("Model X", "fp-now", MakeProblem(4, 3000, 2048), v1::NEAREST);
  ASSERT_TRUE(near.ok()) << near.status().ToString();
  EXPECT_TRUE(near->nearest());
  EXPECT_EQ(near->variant(), "sequential_v2_t128_p2");
  EXPECT_EQ(near->tuned_shape().length(), 2048u);
  EXPECT_EQ(near->problem().shape().length(), 3000u);  // the question asked
  EXPECT_FALSE(near->stale());

  StatusOr<v1::Selection> small = selector.Find("Model X", "fp-now", MakeProblem(1, 128, 512), v1::NEAREST);
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->variant(), "chunked_v4_t128_c64");
  EXPECT_TRUE(small->stale());

  // Another dtype has nothing tuned: NEAREST has nothing to offer.
  Problem fp32 = MakeProblem(4, 2048, 2048);
  fp32.dtype = DType::kF32;
  StatusOr<v1::Selection> none = selector.Find("Model X", "fp-now", fp32, v1::NEAREST);
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
}

TEST_F(SelectorFindTest, SameQuestionSameAnswer) {
  // Two tuned shapes at the same distance from the question: the tie-break is fixed.
  Put(MakeProblem(4, 1024, 2048), "sequential_v2_t128_p2", "fp-now");
  Put(MakeProblem(4, 4096, 2048), "lookback_v4_t256_s8_i8", "fp-now");
  Selector selector(store_.get());
  std::string first;
  for (int i = 0; i < 5; ++i) {
    StatusOr<v1::Selection> s = selector.Find("Model X", "fp-now", MakeProblem(4, 2048, 2048), v1::NEAREST);
    ASSERT_TRUE(s.ok());
    if (i == 0) first = s->variant();
    EXPECT_EQ(s->variant(), first);
  }
  EXPECT_EQ(first, "sequential_v2_t128_p2");  // the smaller shape wins a tie
}

TEST_F(SelectorFindTest, DeterministicAnswersFromTheDeterministicSelection) {
  Put(MakeProblem(4, 2048, 2048), "lookback_v4_t256_s8_i8", "fp-now");
  Put(MakeProblem(4, 2048, 2048), "chunked_v4_t128_c64", "fp-now", /*deterministic=*/true);
  Selector selector(store_.get());
  StatusOr<v1::Selection> chosen =
      selector.Find("Model X", "fp-now", MakeProblem(4, 2048, 2048), v1::NOT_FOUND, /*deterministic=*/true);
  ASSERT_TRUE(chosen.ok()) << chosen.status().ToString();
  EXPECT_EQ(chosen->variant(), "chunked_v4_t128_c64");
  EXPECT_TRUE(chosen->deterministic());
  EXPECT_FALSE(chosen->stale());
  StatusOr<v1::Selection> ordinary = selector.Find("Model X", "fp-now", MakeProblem(4, 2048, 2048), v1::NOT_FOUND);
  ASSERT_TRUE(ordinary.ok());
  EXPECT_EQ(ordinary->variant(), "lookback_v4_t256_s8_i8");
  EXPECT_FALSE(ordinary->deterministic());
  StatusOr<v1::Selection> stale =
      selector.Find("Model X", "fp-later", MakeProblem(4, 2048, 2048), v1::NOT_FOUND, /*deterministic=*/true);
  ASSERT_TRUE(stale.ok());
  EXPECT_TRUE(stale->stale());
}

// A problem tuned before deterministic selections were kept has only its
// ordinary one: that answers where its variant is deterministic itself.
TEST_F(SelectorFindTest, DeterministicFallsBackToADeterministicOrdinaryVariant) {
  Put(MakeProblem(4, 2048, 2048), "sequential_v2_t128_p2", "fp-now");
  StatusOr<v1::Selection> chosen = Selector(store_.get())
                                       .Find("Model X", "fp-now", MakeProblem(4, 2048, 2048), v1::NOT_FOUND,
                                             /*deterministic=*/true);
  ASSERT_TRUE(chosen.ok()) << chosen.status().ToString();
  EXPECT_EQ(chosen->variant(), "sequential_v2_t128_p2");
  EXPECT_TRUE(chosen->deterministic());
}

TEST_F(SelectorFindTest, DeterministicMissOverANonDeterministicSelectionSaysWhy) {
  Put(MakeProblem(4, 2048, 2048), "lookback_v4_t256_s8_i8", "fp-now");
  Selector selector(store_.get());
  StatusOr<v1::Selection> miss =
      selector.Find("Model X", "fp-now", MakeProblem(4, 2048, 2048), v1::NOT_FOUND, /*deterministic=*/true);
  ASSERT_FALSE(miss.ok());
  EXPECT_EQ(miss.status().code(), StatusCode::kNotFound);
  const std::string message = miss.status().message();
  EXPECT_NE(message.find("no deterministic selection for linear_scan/4x2048x2048/bf16/fwd"), std::string::npos)
      << message;
  EXPECT_NE(message.find("lookback_v4_t256_s8_i8 is not deterministic"), std::string::npos) << message;
  EXPECT_NE(message.find("force"), std::string::npos) << message;

  // Nothing tuned at all: the ordinary miss's advice, named deterministic.
  StatusOr<v1::Selection> untuned =
      selector.Find("Model X", "fp-now", MakeProblem(4, 1024, 2048), v1::NOT_FOUND, /*deterministic=*/true);
  ASSERT_FALSE(untuned.ok());
  EXPECT_EQ(untuned.status().code(), StatusCode::kNotFound);
  EXPECT_NE(untuned.status().message().find("no deterministic selection for linear_scan/4x1024x2048/bf16/fwd"),
            std::string::npos)
      << untuned.status().message();
  EXPECT_EQ(untuned.status().message().find("is not deterministic"), std::string::npos) << untuned.status().message();
  EXPECT_NE(untuned.status().message().find("TUNE_NOW"), std::string::npos);
}

TEST_F(SelectorFindTest, DeterministicNearestLooksOnlyAtDeterministicSelections) {
  Put(MakeProblem(4, 4096, 2048), "lookback_v4_t256_s8_i8", "fp-now");
  Put(MakeProblem(4, 512, 2048), "chunked_v4_t128_c64", "fp-now", /*deterministic=*/true);
  StatusOr<v1::Selection> near = Selector(store_.get())
                                     .Find("Model X", "fp-now", MakeProblem(4, 3000, 2048), v1::NEAREST,
                                           /*deterministic=*/true);
  ASSERT_TRUE(near.ok()) << near.status().ToString();
  EXPECT_EQ(near->variant(), "chunked_v4_t128_c64");
  EXPECT_TRUE(near->nearest());
  EXPECT_TRUE(near->deterministic());
  EXPECT_EQ(near->tuned_shape().length(), 512u);
}

// A shape tuned before deterministic selections were kept answers NEAREST
// by its ordinary selection where that variant is deterministic itself (as an
// exact match does); a non-deterministic one never does.
TEST_F(SelectorFindTest, DeterministicNearestCountsOrdinarySelectionsOfDeterministicVariants) {
  Put(MakeProblem(4, 4096, 2048), "sequential_v2_t128_p2", "fp-now");
  Put(MakeProblem(4, 2048, 2048), "lookback_v4_t256_s8_i8", "fp-now");
  Put(MakeProblem(4, 512, 2048), "chunked_v4_t128_c64", "fp-now", /*deterministic=*/true);
  const Selector selector(store_.get());
  StatusOr<v1::Selection> near =
      selector.Find("Model X", "fp-now", MakeProblem(4, 3000, 2048), v1::NEAREST, /*deterministic=*/true);
  ASSERT_TRUE(near.ok()) << near.status().ToString();
  EXPECT_EQ(near->variant(), "sequential_v2_t128_p2");
  EXPECT_TRUE(near->nearest());
  EXPECT_TRUE(near->deterministic());
  EXPECT_EQ(near->tuned_shape().length(), 4096u);
  // A shape with a deterministic row answers by that row, not by its ordinary one.
  Put(MakeProblem(4, 4096, 2048), "chunked_v4_t128_c256", "fp-now", /*deterministic=*/true);
  near = selector.Find("Model X", "fp-now", MakeProblem(4, 3000, 2048), v1::NEAREST, /*deterministic=*/true);
  ASSERT_TRUE(near.ok()) << near.status().ToString();
  EXPECT_EQ(near->variant(), "chunked_v4_t128_c256");
}

}  // namespace
}  // namespace scantune
