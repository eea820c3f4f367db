// The benchmark itself: Tune and ListRecords through the daemon for the
// timing rows, direct runs in this process for rel_err_vs_scan, fresh child
// processes (this binary with --child) for device_peak and max_len; and the
// dry run that feeds synthetic records through the same selection and rows.
// Not thread-safe: one run per process.
#pragma once

#include "bench/ssm/options.h"
#include "bench/ssm/report.h"
#include "common/status.h"

namespace scantune::ssmbench {

// The whole run. A Status error only when nothing can be measured (no
// daemon, no GPU); failures of single measurements are rows.
StatusOr<SsmReport> RunSsmBench(const SsmOptions& options);

// No GPU, no daemon: synthetic records (with a failing family, an OOM
// device_peak point and a cap-limited max_len) through BestPerFamily,
// RowsFromPicks and the writer.
SsmReport DryRunReport(const SsmOptions& options);

}  // namespace scantune::ssmbench
