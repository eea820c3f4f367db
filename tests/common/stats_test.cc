#include "common/stats.h"

#include <gtest/gtest.h>

namespace scantune {
namespace {

TEST(StatsTest, FillsEveryStatistic) {
  v1::Stats s;
  FillStats({5.0, 1.0, 3.0, 2.0, 4.0}, &s);
  EXPECT_EQ(s.samples_ms_size(), 5);
  EXPECT_DOUBLE_EQ(s.samples_ms(0), 5.0);  // order kept
  EXPECT_DOUBLE_EQ(s.median_ms(), 3.0);
  EXPECT_DOUBLE_EQ(s.mean_ms(), 3.0);
  EXPECT_DOUBLE_EQ(s.min_ms(), 1.0);
  EXPECT_DOUBLE_EQ(s.max_ms(), 5.0);
  EXPECT_DOUBLE_EQ(s.q1_ms(), 2.0);
  EXPECT_DOUBLE_EQ(s.q3_ms(), 4.0);
  EXPECT_DOUBLE_EQ(s.mad_ms(), 1.0);
  EXPECT_NEAR(s.std_ms(), 1.5811388300841898, 1e-12);
}

TEST(StatsTest, MedianAndMadResistAnOutlier) {
  v1::Stats s;
  FillStats({1.0, 1.0, 1.1, 0.9, 100.0}, &s);
  EXPECT_DOUBLE_EQ(s.median_ms(), 1.0);
  EXPECT_NEAR(s.mad_ms(), 0.1, 1e-12);
  EXPECT_GT(s.mean_ms(), 20.0);
}

TEST(StatsTest, QuantileInterpolatesAndHandlesEdges) {
  EXPECT_DOUBLE_EQ(Quantile({}, 0.5), 0.0);
  EXPECT_DOUBLE_EQ(Quantile({7.0}, 0.25), 7.0);
  EXPECT_DOUBLE_EQ(Quantile({1.0, 2.0}, 0.5), 1.5);
  EXPECT_DOUBLE_EQ(Quantile({4.0, 1.0, 3.0, 2.0}, 1.0), 4.0);
}

}  // namespace
}  // namespace scantune
