#include "common/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace scantune {

double Quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const double pos = q * static_cast<double>(values.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, values.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  return values[lo] + (values[hi] - values[lo]) * frac;
}

void FillStats(const std::vector<double>& samples, v1::Stats* out) {
  out->clear_samples_ms();
  for (double s : samples) out->add_samples_ms(s);
  if (samples.empty()) return;
  const double n = static_cast<double>(samples.size());
  const double mean = std::accumulate(samples.begin(), samples.end(), 0.0) / n;
  double var = 0.0;
  for (double s : samples) var += (s - mean) * (s - mean);
  const double median = Quantile(samples, 0.5);
  std::vector<double> deviations;
  deviations.reserve(samples.size());
  for (double s : samples) deviations.push_back(std::fabs(s - median));
  out->set_median_ms(median);
  out->set_mean_ms(mean);
  out->set_std_ms(samples.size() > 1 ? std::sqrt(var / (n - 1)) : 0.0);
  out->set_mad_ms(Quantile(deviations, 0.5));
  out->set_min_ms(*std::min_element(samples.begin(), samples.end()));
  out->set_max_ms(*std::max_element(samples.begin(), samples.end()));
  out->set_q1_ms(Quantile(samples, 0.25));
  out->set_q3_ms(Quantile(samples, 0.75));
}

}  // namespace scantune
