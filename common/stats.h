// Robust statistics over timing samples (median, quartiles, MAD, ...), filled
// into the proto Stats of a record.
#pragma once

#include <vector>

#include "proto/scantune.pb.h"

namespace scantune {

// Fills every statistic of `out` from `samples_ms` (also copied into it).
void FillStats(const std::vector<double>& samples_ms, v1::Stats* out);

// Linear-interpolated quantile, q in [0, 1]; 0 for an empty input.
double Quantile(std::vector<double> values, double q);

}  // namespace scantune
