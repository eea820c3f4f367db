// The float64 references of rglru and samu against brute force: each forward
// against an independently written closed form (products of a as exp of sums
// of log a, sqrt(1 - a^2) as sqrt(2 sinh(-la) exp(la)), plain sigmoid and
// softplus), and every gradient against central finite differences of the
// loss sum(out * w) + sum(h_final * w2). Deterministic: fixed seeds.
#include "worker/reference_gated.h"

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "worker/parallel.h"

namespace scantune {
namespace {

size_t At(const Shape& s, int64_t b, int64_t t, int64_t c) {
  return static_cast<size_t>((b * s.length + t) * s.width + c);
}

// ---- independent scalar math (deliberately not the header's forms) --------

double NaiveSigmoid(double z) { return 1.0 / (1.0 + std::exp(-z)); }
// Valid for the |z| < 700 the closed-form tests use (log1p keeps the tail
// exp(z) of z ~ -30, which log(1 + exp(z)) would round to 1e-3 relative).
double NaiveSoftplus(double z) { return z > 30 ? z + std::exp(-z) : std::log1p(std::exp(z)); }
// sqrt(1 - exp(2 la)) = sqrt(exp(la) * (exp(-la) - exp(la))) = sqrt(2 sinh(-la) exp(la)).
double NaiveScale(double la) { return std::sqrt(2.0 * std::sinh(-la) * std::exp(la)); }

// h_t = sum_k exp(sum_{j=k+1..t} la_j) s_k u_k + exp(sum_{j=0..t} la_j) h0.
double ClosedForm(const std::vector<double>& la, const std::vector<double>& u, double h0, int64_t t) {
  double h = 0.0;
  for (int64_t k = 0; k <= t; ++k) {
    double sum = 0.0;
    for (int64_t j = k + 1; j <= t; ++j) sum += la[j];
    h += std::exp(sum) * NaiveScale(la[k]) * u[k];
  }
  double sum = 0.0;
  for (int64_t j = 0; j <= t; ++j) sum += la[j];
  return h + std::exp(sum) * h0;
}

// ---- finite differences ---------------------------------------------------

// Fourth-order central difference of f in v[i] (step 1e-4: truncation
// ~1e-16 relative, rounding ~3e-12 of the loss's magnitude).
double Central(const std::function<double()>& f, double& v) {
  const double keep = v, step = 1e-4;
  auto at = [&](double d) {
    v = keep + d;
    return f();
  };
  const double d = (-at(2 * step) + 8 * at(step) - 8 * at(-step) + at(-2 * step)) / (12 * step);
  v = keep;
  return d;
}

// |analytic - fd| <= 1e-6 |analytic| + 1e-8 * scale, scale = sum of |terms|
// of the loss (what bounds the finite difference's rounding). Without h0 in
// the a -> 1 cases the loss is tiny, so the bound stays relative there.
void ExpectGrad(double analytic, double fd, double scale, const std::string& what) {
  ASSERT_TRUE(std::isfinite(analytic)) << what;
  EXPECT_NEAR(analytic, fd, 1e-6 * std::fabs(analytic) + 1e-8 * scale) << what;
}

struct Case {
  Shape shape;
  bool has_h0;
};

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  const Shape& s = info.param.shape;
  return std::to_string(s.batch) + "x" + std::to_string(s.length) + "x" + std::to_string(s.width) +
         (info.param.has_h0 ? "_h0" : "");
}

const auto kCases = ::testing::Values(Case{{1, 1, 1}, false}, Case{{1, 1, 1}, true}, Case{{2, 1, 3}, true},
                                      Case{{2, 7, 5}, false}, Case{{2, 7, 5}, true}, Case{{1, 9, 1}, true},
                                      Case{{2, 6, 4}, false});

// How the edge cases draw their values (the normal ones use defaults).
struct Ranges {
  double lambda_lo = -2.0, lambda_hi = 3.0;  // Lambda / lambda
  double ga_mean = 0.0, ga_sd = 1.5;         // rglru ga
  double br_mean = 0.0;                      // samu b_r
};

std::vector<double> Normal(std::mt19937& rng, int64_t n, double mean = 0.0, double sd = 1.0) {
  std::normal_distribution<double> d(mean, sd);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = d(rng);
  return v;
}

std::vector<double> Uniform(std::mt19937& rng, int64_t n, double lo, double hi) {
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = d(rng);
  return v;
}

// ============================== rglru =======================================

struct RgLruData {
  std::vector<double> x, ga, gx, lambda, h0, w, w2;
  RgLruInputs In() const { return {x, ga, gx, lambda, h0}; }
};

RgLruData MakeRgLru(const Case& c, uint32_t seed, const Ranges& r = {}) {
  std::mt19937 rng(seed);
  const Shape& s = c.shape;
  RgLruData d;
  d.x = Normal(rng, s.elements());
  d.ga = Normal(rng, s.elements(), r.ga_mean, r.ga_sd);
  d.gx = Normal(rng, s.elements(), 0.0, 1.5);
  d.lambda = Uniform(rng, s.width, r.lambda_lo, r.lambda_hi);
  if (c.has_h0) d.h0 = Normal(rng, s.batch * s.width);
  d.w = Normal(rng, s.elements());
  d.w2 = Normal(rng, s.batch * s.width);
  return d;
}

// The loss and the sum of |its terms|.
std::pair<double, double> RgLruLoss(const Shape& s, const RgLruData& d) {
  const StatusOr<RgLruForwardRef> f = RgLruForward(s, d.In());
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  double loss = 0.0, scale = 0.0;
  for (size_t i = 0; i < f->h.size(); ++i) {
    loss += f->h[i] * d.w[i];
    scale += std::fabs(f->h[i] * d.w[i]);
  }
  for (size_t i = 0; i < f->h_final.size(); ++i) {
    loss += f->h_final[i] * d.w2[i];
    scale += std::fabs(f->h_final[i] * d.w2[i]);
  }
  return {loss, scale};
}

void CheckRgLruForward(const Shape& s, const RgLruData& d, double rel) {
  const StatusOr<RgLruForwardRef> f = RgLruForward(s, d.In());
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_EQ(f->h.size(), static_cast<size_t>(s.elements()));
  ASSERT_EQ(f->h_final.size(), static_cast<size_t>(s.batch * s.width));
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t ch = 0; ch < s.width; ++ch) {
      std::vector<double> la, u;
      for (int64_t t = 0; t < s.length; ++t) {
        const size_t k = At(s, b, t, ch);
        la.push_back(-8.0 * NaiveSoftplus(d.lambda[ch]) * NaiveSigmoid(d.ga[k]));
        u.push_back(NaiveSigmoid(d.gx[k]) * d.x[k]);
      }
      const double h0 = d.h0.empty() ? 0.0 : d.h0[static_cast<size_t>(b * s.width + ch)];
      for (int64_t t = 0; t < s.length; ++t) {
        const double want = ClosedForm(la, u, h0, t);
        EXPECT_NEAR(f->h[At(s, b, t, ch)], want, rel * std::fabs(want) + 1e-300)
            << "h(" << b << "," << t << "," << ch << ")";
      }
      EXPECT_EQ(f->h_final[static_cast<size_t>(b * s.width + ch)], f->h[At(s, b, s.length - 1, ch)]);
    }
  }
}

void CheckRgLruBackward(const Shape& s, RgLruData d) {
  const StatusOr<RgLruForwardRef> f = RgLruForward(s, d.In());
  ASSERT_TRUE(f.ok());
  const StatusOr<RgLruBackwardRef> g = RgLruBackward(s, d.In(), f->h, d.w, d.w2);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_EQ(g->dlambda.size(), static_cast<size_t>(s.width));
  ASSERT_EQ(g->dh0.size(), static_cast<size_t>(s.batch * s.width));
  const double scale = RgLruLoss(s, d).second;
  const std::function<double()> loss = [&] { return RgLruLoss(s, d).first; };
  for (size_t i = 0; i < d.x.size(); ++i) {
    ExpectGrad(g->dx[i], Central(loss, d.x[i]), scale, "dx[" + std::to_string(i) + "]");
    ExpectGrad(g->dga[i], Central(loss, d.ga[i]), scale, "dga[" + std::to_string(i) + "]");
    ExpectGrad(g->dgx[i], Central(loss, d.gx[i]), scale, "dgx[" + std::to_string(i) + "]");
  }
  for (size_t c = 0; c < d.lambda.size(); ++c) {
    ExpectGrad(g->dlambda[c], Central(loss, d.lambda[c]), scale, "dLambda[" + std::to_string(c) + "]");
  }
  if (!d.h0.empty()) {
    for (size_t i = 0; i < d.h0.size(); ++i) {
      ExpectGrad(g->dh0[i], Central(loss, d.h0[i]), scale, "dh0[" + std::to_string(i) + "]");
    }
  }
}

class RgLruTest : public ::testing::TestWithParam<Case> {};

TEST_P(RgLruTest, ForwardMatchesClosedForm) { CheckRgLruForward(GetParam().shape, MakeRgLru(GetParam(), 1), 1e-12); }

TEST_P(RgLruTest, BackwardMatchesFiniteDifferences) { CheckRgLruBackward(GetParam().shape, MakeRgLru(GetParam(), 2)); }

// a -> 1: Lambda very negative (softplus ~ 1e-13) and ga very negative
// (r ~ 1e-11): sqrt(1 - a^2) ~ 1e-6 and its derivative in log a ~ 1e6.
TEST_P(RgLruTest, EdgeLambdaVeryNegative) {
  const Ranges r{.lambda_lo = -32, .lambda_hi = -28};
  CheckRgLruForward(GetParam().shape, MakeRgLru(GetParam(), 3, r), 1e-10);
  CheckRgLruBackward(GetParam().shape, MakeRgLru(GetParam(), 3, r));
}
TEST_P(RgLruTest, EdgeGateVeryNegative) {
  const Ranges r{.ga_mean = -25, .ga_sd = 1.0};
  CheckRgLruForward(GetParam().shape, MakeRgLru(GetParam(), 4, r), 1e-10);
  CheckRgLruBackward(GetParam().shape, MakeRgLru(GetParam(), 4, r));
}
// a -> 0: Lambda large (softplus ~ Lambda), h_t ~ i_t x_t.
TEST_P(RgLruTest, EdgeLambdaLarge) {
  const Ranges r{.lambda_lo = 20, .lambda_hi = 40};
  CheckRgLruForward(GetParam().shape, MakeRgLru(GetParam(), 5, r), 1e-12);
  CheckRgLruBackward(GetParam().shape, MakeRgLru(GetParam(), 5, r));
}

INSTANTIATE_TEST_SUITE_P(Shapes, RgLruTest, kCases, CaseName);

TEST(RgLruEdgeTest, ExactlyOneAKeepsTheInputScale) {
  // ga = -40: |log a| ~ 2e-17, so a == 1.0 in double and 1 - a*a == 0, yet
  // sqrt(1 - a^2) ~ 6.6e-9: h must carry it (a naive form gives h == 0).
  const Shape s{1, 3, 2};
  const Case c{s, false};
  RgLruData d = MakeRgLru(c, 6);
  for (double& v : d.ga) v = -40.0;
  for (double& v : d.lambda) v = 0.0;
  const StatusOr<RgLruForwardRef> f = RgLruForward(s, d.In());
  ASSERT_TRUE(f.ok());
  const double la = -8.0 * std::log(2.0) * std::exp(-40.0);
  ASSERT_EQ(std::exp(la), 1.0);
  for (int64_t ch = 0; ch < s.width; ++ch) {
    double want = 0.0;
    for (int64_t t = 0; t < s.length; ++t) {
      const size_t k = At(s, 0, t, ch);
      want += NaiveScale(la) * NaiveSigmoid(d.gx[k]) * d.x[k];
      EXPECT_NEAR(f->h[k], want, 1e-9 * std::fabs(want));
      EXPECT_NE(f->h[k], 0.0);
    }
  }
  CheckRgLruForward(s, d, 1e-9);
  CheckRgLruBackward(s, d);
}

TEST(RgLruEdgeTest, ExtremeLambdaStaysFinite) {
  // Lambda = -800: softplus underflows to 0, a = 1, sqrt(1 - a^2) = 0: h just
  // carries h0 and no gradient is NaN (la / s taken as 0). Lambda = 800:
  // softplus = 800 without overflow, a = 0, h = i x.
  const Shape s{2, 4, 2};
  RgLruData d = MakeRgLru(Case{s, true}, 7);
  d.lambda = {-800.0, 800.0};
  const StatusOr<RgLruForwardRef> f = RgLruForward(s, d.In());
  ASSERT_TRUE(f.ok());
  const StatusOr<RgLruBackwardRef> g = RgLruBackward(s, d.In(), f->h, d.w, d.w2);
  ASSERT_TRUE(g.ok());
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t t = 0; t < s.length; ++t) {
      EXPECT_EQ(f->h[At(s, b, t, 0)], d.h0[static_cast<size_t>(b * s.width)]);
      const size_t k = At(s, b, t, 1);
      EXPECT_DOUBLE_EQ(f->h[k], NaiveSigmoid(d.gx[k]) * d.x[k]);
    }
  }
  for (const std::vector<double>* v : {&g->dx, &g->dga, &g->dgx, &g->dlambda, &g->dh0}) {
    for (double x : *v) EXPECT_TRUE(std::isfinite(x));
  }
  EXPECT_EQ(g->dlambda[0], 0.0);
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t t = 0; t < s.length; ++t) {
      EXPECT_EQ(g->dga[At(s, b, t, 0)], 0.0);
      EXPECT_EQ(g->dx[At(s, b, t, 0)], 0.0);
    }
  }
}

// ============================== samu ========================================

struct SamuData {
  std::vector<double> x, lambda, beta, gamma, h0, w, w2;
  SamuController ctrl;
  SamuInputs In() const { return {x, lambda, beta, gamma, ctrl, h0}; }
};

SamuData MakeSamu(const Case& c, uint32_t seed, const Ranges& r = {}) {
  std::mt19937 rng(seed);
  const Shape& s = c.shape;
  SamuData d;
  // An offset per token so that m_t is not ~0 at the larger widths.
  d.x = Normal(rng, s.elements());
  const std::vector<double> offset = Normal(rng, s.batch * s.length);
  for (int64_t token = 0; token < s.batch * s.length; ++token) {
    for (int64_t ch = 0; ch < s.width; ++ch) d.x[static_cast<size_t>(token * s.width + ch)] += offset[token];
  }
  d.lambda = Uniform(rng, s.width, r.lambda_lo, r.lambda_hi);
  d.beta = Normal(rng, s.width);
  d.gamma = Normal(rng, s.width);
  const std::vector<double> ctrl = Normal(rng, 4, 0.0, 1.5);
  d.ctrl = {ctrl[0], ctrl[1] + r.br_mean, ctrl[2], ctrl[3]};
  if (c.has_h0) d.h0 = Normal(rng, s.batch * s.width);
  d.w = Normal(rng, s.elements());
  d.w2 = Normal(rng, s.batch * s.width);
  return d;
}

std::pair<double, double> SamuLoss(const Shape& s, const SamuData& d) {
  const StatusOr<SamuForwardRef> f = SamuForward(s, d.In());
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  double loss = 0.0, scale = 0.0;
  for (size_t i = 0; i < f->y.size(); ++i) {
    loss += f->y[i] * d.w[i];
    scale += std::fabs(f->y[i] * d.w[i]);
  }
  for (size_t i = 0; i < f->h_final.size(); ++i) {
    loss += f->h_final[i] * d.w2[i];
    scale += std::fabs(f->h_final[i] * d.w2[i]);
  }
  return {loss, scale};
}

void CheckSamuForward(const Shape& s, const SamuData& d, double rel) {
  const StatusOr<SamuForwardRef> f = SamuForward(s, d.In());
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_EQ(f->y.size(), static_cast<size_t>(s.elements()));
  ASSERT_EQ(f->h.size(), static_cast<size_t>(s.elements()));
  ASSERT_EQ(f->h_final.size(), static_cast<size_t>(s.batch * s.width));
  ASSERT_EQ(f->control.size(), static_cast<size_t>(2 * s.batch * s.length));
  for (int64_t b = 0; b < s.batch; ++b) {
    std::vector<double> r(static_cast<size_t>(s.length)), in(r.size());
    for (int64_t t = 0; t < s.length; ++t) {
      double m = 0.0;
      for (int64_t ch = 0; ch < s.width; ++ch) m += d.x[At(s, b, t, ch)] / static_cast<double>(s.width);
      r[t] = NaiveSigmoid(d.ctrl.w_r * m + d.ctrl.b_r);
      in[t] = NaiveSigmoid(d.ctrl.w_i * m + d.ctrl.b_i);
      const size_t token = static_cast<size_t>(b * s.length + t);
      EXPECT_NEAR(f->control[2 * token], r[t], 1e-14 * r[t]) << "r at token " << token;
      EXPECT_NEAR(f->control[2 * token + 1], in[t], 1e-14 * in[t]) << "i at token " << token;
    }
    for (int64_t ch = 0; ch < s.width; ++ch) {
      std::vector<double> la, u;
      for (int64_t t = 0; t < s.length; ++t) {
        la.push_back(-8.0 * NaiveSoftplus(d.lambda[ch]) * r[t]);
        u.push_back(in[t] * d.beta[ch] * d.x[At(s, b, t, ch)]);
      }
      const double h0 = d.h0.empty() ? 0.0 : d.h0[static_cast<size_t>(b * s.width + ch)];
      for (int64_t t = 0; t < s.length; ++t) {
        const double want = ClosedForm(la, u, h0, t);
        const size_t k = At(s, b, t, ch);
        EXPECT_NEAR(f->h[k], want, rel * std::fabs(want) + 1e-300) << "h(" << b << "," << t << "," << ch << ")";
        EXPECT_NEAR(f->y[k], d.gamma[ch] * want, rel * std::fabs(d.gamma[ch] * want) + 1e-300)
            << "y(" << b << "," << t << "," << ch << ")";
      }
      EXPECT_EQ(f->h_final[static_cast<size_t>(b * s.width + ch)], f->h[At(s, b, s.length - 1, ch)]);
    }
  }
}

void CheckSamuBackward(const Shape& s, SamuData d) {
  const StatusOr<SamuForwardRef> f = SamuForward(s, d.In());
  ASSERT_TRUE(f.ok());
  const StatusOr<SamuBackwardRef> g = SamuBackward(s, d.In(), f->h, d.w, d.w2);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_EQ(g->dx.size(), static_cast<size_t>(s.elements()));
  ASSERT_EQ(g->dlambda.size(), static_cast<size_t>(s.width));
  ASSERT_EQ(g->dbeta.size(), static_cast<size_t>(s.width));
  ASSERT_EQ(g->dgamma.size(), static_cast<size_t>(s.width));
  ASSERT_EQ(g->dh0.size(), static_cast<size_t>(s.batch * s.width));
  const double scale = SamuLoss(s, d).second;
  const std::function<double()> loss = [&] { return SamuLoss(s, d).first; };
  for (size_t i = 0; i < d.x.size(); ++i) {
    ExpectGrad(g->dx[i], Central(loss, d.x[i]), scale, "dx[" + std::to_string(i) + "]");
  }
  for (size_t c = 0; c < d.lambda.size(); ++c) {
    ExpectGrad(g->dlambda[c], Central(loss, d.lambda[c]), scale, "dlambda[" + std::to_string(c) + "]");
    ExpectGrad(g->dbeta[c], Central(loss, d.beta[c]), scale, "dbeta[" + std::to_string(c) + "]");
    ExpectGrad(g->dgamma[c], Central(loss, d.gamma[c]), scale, "dgamma[" + std::to_string(c) + "]");
  }
  ExpectGrad(g->dctrl.w_r, Central(loss, d.ctrl.w_r), scale, "dw_r");
  ExpectGrad(g->dctrl.b_r, Central(loss, d.ctrl.b_r), scale, "db_r");
  ExpectGrad(g->dctrl.w_i, Central(loss, d.ctrl.w_i), scale, "dw_i");
  ExpectGrad(g->dctrl.b_i, Central(loss, d.ctrl.b_i), scale, "db_i");
  if (!d.h0.empty()) {
    for (size_t i = 0; i < d.h0.size(); ++i) {
      ExpectGrad(g->dh0[i], Central(loss, d.h0[i]), scale, "dh0[" + std::to_string(i) + "]");
    }
  }
}

class SamuTest : public ::testing::TestWithParam<Case> {};

TEST_P(SamuTest, ForwardMatchesClosedForm) { CheckSamuForward(GetParam().shape, MakeSamu(GetParam(), 11), 1e-12); }

TEST_P(SamuTest, BackwardMatchesFiniteDifferences) { CheckSamuBackward(GetParam().shape, MakeSamu(GetParam(), 12)); }

TEST_P(SamuTest, EdgeLambdaVeryNegative) {
  const Ranges r{.lambda_lo = -32, .lambda_hi = -28};
  CheckSamuForward(GetParam().shape, MakeSamu(GetParam(), 13, r), 1e-10);
  CheckSamuBackward(GetParam().shape, MakeSamu(GetParam(), 13, r));
}
// b_r very negative: r_t ~ 1e-11, a -> 1 for every channel.
TEST_P(SamuTest, EdgeControllerGateVeryNegative) {
  const Ranges r{.br_mean = -25};
  CheckSamuForward(GetParam().shape, MakeSamu(GetParam(), 14, r), 1e-10);
  CheckSamuBackward(GetParam().shape, MakeSamu(GetParam(), 14, r));
}
TEST_P(SamuTest, EdgeLambdaLarge) {
  const Ranges r{.lambda_lo = 20, .lambda_hi = 40};
  CheckSamuForward(GetParam().shape, MakeSamu(GetParam(), 15, r), 1e-12);
  CheckSamuBackward(GetParam().shape, MakeSamu(GetParam(), 15, r));
}

INSTANTIATE_TEST_SUITE_P(Shapes, SamuTest, kCases, CaseName);

TEST(SamuEdgeTest, ExtremeLambdaStaysFinite) {
  const Shape s{2, 4, 3};
  SamuData d = MakeSamu(Case{s, true}, 16);
  d.lambda = {-800.0, 800.0, 0.5};
  const StatusOr<SamuForwardRef> f = SamuForward(s, d.In());
  ASSERT_TRUE(f.ok());
  const StatusOr<SamuBackwardRef> g = SamuBackward(s, d.In(), f->h, d.w, d.w2);
  ASSERT_TRUE(g.ok());
  for (const std::vector<double>* v : {&f->y, &f->h, &g->dx, &g->dlambda, &g->dbeta, &g->dgamma, &g->dh0}) {
    for (double x : *v) EXPECT_TRUE(std::isfinite(x));
  }
  for (double x : {g->dctrl.w_r, g->dctrl.b_r, g->dctrl.w_i, g->dctrl.b_i}) EXPECT_TRUE(std::isfinite(x));
  EXPECT_EQ(g->dlambda[0], 0.0);
  EXPECT_EQ(g->dbeta[0], 0.0);  // sqrt(1 - a^2) == 0 for channel 0
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t t = 0; t < s.length; ++t) EXPECT_EQ(f->h[At(s, b, t, 0)], d.h0[static_cast<size_t>(b * s.width)]);
  }
  // The channel with lambda = 0.5 is still checked by finite differences with
  // the extreme channels present (their gates are flat, so FD is exact there).
  CheckSamuBackward(s, d);
}

// ============================== shared ======================================

TEST(GatedReferenceTest, StoredAndRecomputedHAgree) {
  // An empty h recomputes the forward in double: bit-identical to passing it.
  const Shape s{2, 5, 3};
  const RgLruData rd = MakeRgLru(Case{s, true}, 21);
  const StatusOr<RgLruForwardRef> rf = RgLruForward(s, rd.In());
  ASSERT_TRUE(rf.ok());
  const StatusOr<RgLruBackwardRef> stored = RgLruBackward(s, rd.In(), rf->h, rd.w, {});
  const StatusOr<RgLruBackwardRef> recomputed = RgLruBackward(s, rd.In(), {}, rd.w, {});
  ASSERT_TRUE(stored.ok() && recomputed.ok());
  EXPECT_EQ(stored->dx, recomputed->dx);
  EXPECT_EQ(stored->dga, recomputed->dga);
  EXPECT_EQ(stored->dlambda, recomputed->dlambda);

  const SamuData sd = MakeSamu(Case{s, true}, 22);
  const StatusOr<SamuForwardRef> sf = SamuForward(s, sd.In());
  ASSERT_TRUE(sf.ok());
  const StatusOr<SamuBackwardRef> s_stored = SamuBackward(s, sd.In(), sf->h, sd.w, sd.w2);
  const StatusOr<SamuBackwardRef> s_recomputed = SamuBackward(s, sd.In(), {}, sd.w, sd.w2);
  ASSERT_TRUE(s_stored.ok() && s_recomputed.ok());
  EXPECT_EQ(s_stored->dx, s_recomputed->dx);
  EXPECT_EQ(s_stored->dlambda, s_recomputed->dlambda);
  EXPECT_EQ(s_stored->dctrl.w_r, s_recomputed->dctrl.w_r);
}

TEST(GatedReferenceTest, BackwardUsesTheGivenH) {
  // Like LinearScanBackward: the h passed in is what h_{t-1} reads. Changing
  // h changes dga (through a h_{t-1}) but not dx (which needs only g).
  const Shape s{1, 3, 2};
  const RgLruData d = MakeRgLru(Case{s, false}, 23);
  const StatusOr<RgLruForwardRef> f = RgLruForward(s, d.In());
  ASSERT_TRUE(f.ok());
  std::vector<double> other = f->h;
  for (double& v : other) v += 1.0;
  const StatusOr<RgLruBackwardRef> a = RgLruBackward(s, d.In(), f->h, d.w, {});
  const StatusOr<RgLruBackwardRef> b = RgLruBackward(s, d.In(), other, d.w, {});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->dx, b->dx);
  EXPECT_NE(a->dga[At(s, 0, 1, 0)], b->dga[At(s, 0, 1, 0)]);
  EXPECT_EQ(a->dga[At(s, 0, 0, 0)], b->dga[At(s, 0, 0, 0)]);  // t = 0 reads h0 (zero), not h
}

TEST(GatedReferenceTest, ResultsDoNotDependOnThreadCount) {
  // B*W = 2*131 pairs and 2*37 tokens split into several chunks.
  const Shape s{2, 37, 131};
  const RgLruData rd = MakeRgLru(Case{s, true}, 31);
  const SamuData sd = MakeSamu(Case{s, true}, 32);
  auto run = [&](int threads) {
    ScopedHostThreads scoped(threads);
    std::vector<std::vector<double>> out;
    const StatusOr<RgLruForwardRef> rf = RgLruForward(s, rd.In());
    const StatusOr<RgLruBackwardRef> rb = RgLruBackward(s, rd.In(), {}, rd.w, rd.w2);
    const StatusOr<SamuForwardRef> sf = SamuForward(s, sd.In());
    const StatusOr<SamuBackwardRef> sb = SamuBackward(s, sd.In(), {}, sd.w, sd.w2);
    EXPECT_TRUE(rf.ok() && rb.ok() && sf.ok() && sb.ok());
    for (const auto* v : {&rf->h, &rf->h_final, &rb->dx, &rb->dga, &rb->dgx, &rb->dlambda, &rb->dh0, &sf->y,
                          &sf->h_final, &sf->control, &sb->dx, &sb->dlambda, &sb->dbeta, &sb->dgamma, &sb->dh0}) {
      out.push_back(*v);
    }
    out.push_back({sb->dctrl.w_r, sb->dctrl.b_r, sb->dctrl.w_i, sb->dctrl.b_i});
    return out;
  };
  const auto one = run(1);
  EXPECT_EQ(one, run(3));
  EXPECT_EQ(one, run(8));
}

TEST(GatedReferenceTest, ShapeMismatchIsInvalidArgument) {
  const Shape s{2, 3, 4};
  RgLruData rd = MakeRgLru(Case{s, true}, 41);
  EXPECT_EQ(RgLruForward(Shape{2, 3, 5}, rd.In()).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(RgLruForward(Shape{0, 3, 4}, rd.In()).status().code(), StatusCode::kInvalidArgument);
  std::vector<double> short_lambda(3, 0.0);
  RgLruInputs bad = rd.In();
  bad.lambda = short_lambda;
  const StatusOr<RgLruForwardRef> e = RgLruForward(s, bad);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("lambda"), std::string::npos) << e.status().message();
  EXPECT_EQ(RgLruBackward(s, rd.In(), {}, std::span<const double>(rd.w).first(5), {}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(RgLruBackward(s, rd.In(), {}, rd.w, std::span<const double>(rd.w2).first(3)).status().code(),
            StatusCode::kInvalidArgument);

  SamuData sd = MakeSamu(Case{s, false}, 42);
  SamuInputs sbad = sd.In();
  sbad.gamma = short_lambda;
  EXPECT_EQ(SamuForward(s, sbad).status().code(), StatusCode::kInvalidArgument);
  sbad = sd.In();
  sbad.h0 = short_lambda;
  EXPECT_EQ(SamuForward(s, sbad).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(SamuBackward(s, sd.In(), std::span<const double>(sd.w).first(7), sd.w, {}).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(GatedReferenceTest, FloorBytes) {
  using enum GatedBwdStrategy;
  static_assert(RgLruBytesPerElement(Mode::kFwd, 2, kStoreH) == 8);
  static_assert(RgLruBytesPerElement(Mode::kBwd, 2, kStoreH) == 16);
  static_assert(RgLruBytesPerElement(Mode::kBwd, 2, kRecompute) == 14);
  static_assert(RgLruBytesPerElement(Mode::kFwdBwd, 4, kRecompute) == 44);
  static_assert(SamuBytesPerElement(Mode::kFwd, 2, kStoreH) == 4);
  static_assert(SamuBytesPerElement(Mode::kBwd, 2, kStoreH) == 8);
  static_assert(SamuBytesPerElement(Mode::kBwd, 2, kRecompute) == 6);
  static_assert(SamuBytesPerElement(Mode::kFwdBwd, 2, kStoreH) == 4 + 2 + 8);
  static_assert(SamuBytesPerElement(Mode::kFwdBwd, 2, kRecompute) == 4 + 6);
  // 1x32768x2048 bf16 with h0, by hand.
  const Shape s{1, 32768, 2048};
  const uint64_t n = 32768ull * 2048, state = 2048 * 4;
  EXPECT_EQ(RgLruFloorBytes(s, Mode::kFwd, 2, kStoreH, true, false), 8 * n + 2048 * 2 + 2 * state);
  EXPECT_EQ(RgLruFloorBytes(s, Mode::kBwd, 2, kRecompute, true, true),
            14 * n + 2048 * 2 + 2048 * 4 + 3 * state);
  EXPECT_EQ(SamuFloorBytes(s, Mode::kFwd, 2, kStoreH, false, false), 4 * n + 3 * 2048 * 2 + 16 + 32768 * 8 + state);
  EXPECT_EQ(SamuFloorBytes(s, Mode::kBwd, 2, kStoreH, false, false), 8 * n + 3 * 2048 * 2 + 3 * 2048 * 4 + 32);
  EXPECT_EQ(SamuFloorBytes(s, Mode::kFwdBwd, 2, kStoreH, false, false),
            SamuFloorBytes(s, Mode::kFwd, 2, kStoreH, false, false) + 2 * n +
                SamuFloorBytes(s, Mode::kBwd, 2, kStoreH, false, false));
}

}  // namespace
}  // namespace scantune
