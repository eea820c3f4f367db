// scantune-ssm-bench: seed 004's Mamba selective-scan table on this GPU, from
// the daemon's Tune records plus direct runs (rel_err_vs_scan) and fresh
// processes (device_peak, max_len). See bench/ssm/README.md and --help.
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "bench/common/bench_files.h"
#include "bench/ssm/bench_runner.h"
#include "bench/ssm/fresh_process.h"
#include "bench/ssm/options.h"
#include "bench/ssm/report.h"
#include "common/log.h"

namespace {

using namespace scantune;
using namespace scantune::ssmbench;

int Main(const std::vector<std::string>& args) {
  InitLogging();
  auto log = Logger("client");
  auto options = ParseOptions(args);
  if (!options.ok()) {
    std::fprintf(stderr, "%s\n\n%s", options.status().message().c_str(), Usage().c_str());
    return 64;
  }
  if (options->help) {
    std::printf("%s", Usage().c_str());
    return 0;
  }
  if (options->child) return ChildMain(*options);
  SsmReport report;
  if (options->dry_run) {
    report = DryRunReport(*options);
  } else {
    auto run = RunSsmBench(*options);
    if (!run.ok()) {
      std::fprintf(stderr, "scantune-ssm-bench: %s\n", run.status().ToString().c_str());
      return 1;
    }
    report = std::move(*run);
  }
  if (Status st = bench::WriteTextFile(options->out, ReportToJson(report)); !st.ok()) {
    std::fprintf(stderr, "scantune-ssm-bench: %s\n", st.ToString().c_str());
    return 1;
  }
  const std::string seed_path = options->seed_file.empty() ? DefaultSeedFile() : options->seed_file;
  std::optional<SeedOrdering> seed;
  if (seed_path.empty()) {
    log->warn("no seed 004 file found (pass --seed-file); the table shows no seed ordering");
  } else if (auto read = ReadSeedOrdering(seed_path); read.ok()) {
    seed = std::move(*read);
  } else {
    log->warn("seed file: {}", read.status().ToString());
  }
  std::printf("%s", FormatTable(report, seed ? &*seed : nullptr).c_str());
  std::printf("results: %s%s\n", options->out.c_str(), options->dry_run ? " (dry run: synthetic figures)" : "");
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return Main(std::vector<std::string>(argv + 1, argv + argc)); }
