// scantune-mixer-bench: seed 001's RG-LRU vs SAMU mixer table on this GPU,
// with the recurrence backends the scantune service selected. See
// bench/mixer/README.md and `scantune-mixer-bench --help`.
#include <cstdio>
#include <string>
#include <vector>

#include "bench/common/bench_files.h"
#include "bench/mixer/bench_runner.h"
#include "bench/mixer/options.h"
#include "bench/mixer/report.h"
#include "common/log.h"

namespace {

using namespace scantune;
using namespace scantune::mixer;

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
  MixerReport report;
  if (options->dry_run) {
    report = DryRunReport(*options);
  } else {
    auto run = RunMixerBench(*options);
    if (!run.ok()) {
      std::fprintf(stderr, "scantune-mixer-bench: %s\n", run.status().ToString().c_str());
      return 1;
    }
    report = std::move(*run);
  }
  if (Status st = bench::WriteTextFile(options->out, ReportToJson(report)); !st.ok()) {
    std::fprintf(stderr, "scantune-mixer-bench: %s\n", st.ToString().c_str());
    return 1;
  }
  const std::string seed_path = options->seed_file.empty() ? DefaultSeedFile() : options->seed_file;
  std::optional<SeedFigures> seed;
  if (seed_path.empty()) {
    log->warn("no seed 001 file found (pass --seed-file); the table shows no reference ratio");
  } else if (auto read = ReadSeedFigures(seed_path); read.ok()) {
    seed = std::move(*read);
  } else {
    log->warn("seed file: {}", read.status().ToString());
  }
  std::printf("%s", FormatTable(report, seed ? &*seed : nullptr).c_str());
  std::printf("results: %s%s\n", options->out.c_str(), options->dry_run ? " (dry run: synthetic timings)" : "");
  for (const MixerRow& row : report.rows) {
    if (row.check == "fail") return 2;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return Main(std::vector<std::string>(argv + 1, argv + argc)); }
