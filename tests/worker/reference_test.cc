// The float64 reference against brute force: the closed form of the forward
// scan and central finite differences of the loss sum(h * w) for the backward.
#include "worker/reference.h"

#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace scantune {
namespace {

struct Case {
  Shape shape;
  bool has_h0;
};

struct Data {
  std::vector<double> a, x, h0, w;
};

Data MakeData(const Case& c, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> ua(0.5, 1.0);
  std::normal_distribution<double> n01;
  Data d;
  const size_t n = static_cast<size_t>(c.shape.elements());
  for (size_t i = 0; i < n; ++i) {
    d.a.push_back(ua(rng));
    d.x.push_back(n01(rng));
    d.w.push_back(n01(rng));
  }
  if (c.has_h0) {
    for (int64_t i = 0; i < c.shape.batch * c.shape.width; ++i) d.h0.push_back(n01(rng));
  }
  return d;
}

size_t At(const Shape& s, int64_t b, int64_t t, int64_t c) { return static_cast<size_t>((b * s.length + t) * s.width + c); }

// h_t = sum_k (prod_{j=k+1..t} a_j) x_k + (prod_{j=0..t} a_j) h0.
double ClosedForm(const Shape& s, const Data& d, int64_t b, int64_t t, int64_t c) {
  double h = 0.0;
  for (int64_t k = 0; k <= t; ++k) {
    double prod = 1.0;
    for (int64_t j = k + 1; j <= t; ++j) prod *= d.a[At(s, b, j, c)];
    h += prod * d.x[At(s, b, k, c)];
  }
  if (!d.h0.empty()) {
    double prod = 1.0;
    for (int64_t j = 0; j <= t; ++j) prod *= d.a[At(s, b, j, c)];
    h += prod * d.h0[static_cast<size_t>(b * s.width + c)];
  }
  return h;
}

double Loss(const Shape& s, const Data& d) {
  const LinearScanForwardRef f = LinearScanForward(s, d.a, d.x, d.h0);
  double loss = 0.0;
  for (size_t i = 0; i < f.h.size(); ++i) loss += f.h[i] * d.w[i];
  return loss;
}

class ReferenceTest : public ::testing::TestWithParam<Case> {};

TEST_P(ReferenceTest, ForwardMatchesClosedForm) {
  const Case c = GetParam();
  const Data d = MakeData(c, 1);
  const Shape& s = c.shape;
  const LinearScanForwardRef f = LinearScanForward(s, d.a, d.x, d.h0);
  ASSERT_EQ(f.h.size(), static_cast<size_t>(s.elements()));
  ASSERT_EQ(f.h_final.size(), static_cast<size_t>(s.batch * s.width));
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t t = 0; t < s.length; ++t) {
      for (int64_t ch = 0; ch < s.width; ++ch) {
        EXPECT_NEAR(f.h[At(s, b, t, ch)], ClosedForm(s, d, b, t, ch), 1e-12) << b << "," << t << "," << ch;
      }
    }
    for (int64_t ch = 0; ch < s.width; ++ch) {
      EXPECT_EQ(f.h_final[static_cast<size_t>(b * s.width + ch)], f.h[At(s, b, s.length - 1, ch)]);
    }
  }
}

TEST_P(ReferenceTest, BackwardMatchesFiniteDifferences) {
  const Case c = GetParam();
  Data d = MakeData(c, 2);
  const Shape& s = c.shape;
  const LinearScanForwardRef f = LinearScanForward(s, d.a, d.x, d.h0);
  // dL/dh = w for L = sum(h * w).
  const LinearScanBackwardRef g = LinearScanBackward(s, d.a, f.h, d.h0, d.w);
  const double eps = 1e-6;
  auto central = [&](std::vector<double>& v, size_t i) {
    const double keep = v[i];
    v[i] = keep + eps;
    const double up = Loss(s, d);
    v[i] = keep - eps;
    const double down = Loss(s, d);
    v[i] = keep;
    return (up - down) / (2 * eps);
  };
  for (size_t i = 0; i < d.a.size(); ++i) {
    EXPECT_NEAR(g.da[i], central(d.a, i), 1e-6 * (1 + std::fabs(g.da[i]))) << "da[" << i << "]";
    EXPECT_NEAR(g.dx[i], central(d.x, i), 1e-6 * (1 + std::fabs(g.dx[i]))) << "dx[" << i << "]";
  }
  if (c.has_h0) {
    for (size_t i = 0; i < d.h0.size(); ++i) {
      EXPECT_NEAR(g.dh0[i], central(d.h0, i), 1e-6 * (1 + std::fabs(g.dh0[i]))) << "dh0[" << i << "]";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, ReferenceTest,
                         ::testing::Values(Case{{1, 1, 1}, false}, Case{{1, 1, 1}, true}, Case{{2, 1, 3}, true},
                                           Case{{2, 7, 5}, false}, Case{{2, 7, 5}, true}, Case{{3, 13, 1}, true},
                                           Case{{1, 33, 7}, false}));

TEST(ReferenceTest, BackwardUsesTheGivenH) {
  // da_t = g_t * h_{t-1}: the h passed in (what a kernel's backward reads),
  // not a recomputed one.
  const Shape s{1, 2, 1};
  const std::vector<double> a = {0.5, 0.25}, h = {3.0, 100.0}, dh = {1.0, 2.0};
  const LinearScanBackwardRef g = LinearScanBackward(s, a, h, {}, dh);
  EXPECT_DOUBLE_EQ(g.dx[1], 2.0);
  EXPECT_DOUBLE_EQ(g.dx[0], 1.0 + 0.25 * 2.0);
  EXPECT_DOUBLE_EQ(g.da[1], 2.0 * 3.0);
  EXPECT_DOUBLE_EQ(g.da[0], 0.0);  // h_{-1} = 0 without h0
  EXPECT_DOUBLE_EQ(g.dh0[0], 0.5 * 1.5);
}

}  // namespace
}  // namespace scantune
