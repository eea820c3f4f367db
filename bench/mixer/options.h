// Command-line options of scantune-mixer-bench and their parsing. Pure value
// code; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/mixer/report.h"
#include "common/status.h"

namespace scantune::mixer {

struct MixerOptions {
  std::string address;  // daemon; empty: $SCANTUNE_ADDRESS or the default socket
  std::vector<ShapeKey> shapes;
  std::string out = "mixer_bench.json";
  std::string seed_file;  // empty: looked up (see DefaultSeedFile)
  int rounds = 2;
  int samples = 5;        // per round
  int warmup = 3;         // launches per mode before a stint's samples
  double target_ms = 1.0; // inner loop sized to at least this per sample
  int max_inner = 1000;
  int heads = 16;
  int device = 0;         // CUDA ordinal
  uint64_t seed = 1;      // random inputs
  bool tune_now = false;  // Select with on_miss TUNE_NOW
  bool dry_run = false;   // no GPU, no daemon: synthetic samples through the same writer
  bool help = false;
};

// The seed-001 shapes: (4,2048,2048), (1,8192,2560), (1,32768,1024), (1,32768,2048).
std::vector<ShapeKey> Seed001Shapes();

// "4x2048x2048,1x8192x2560" -> shapes. INVALID_ARGUMENT naming the bad entry.
StatusOr<std::vector<ShapeKey>> ParseShapeList(const std::string& text);

// Parses argv[1..]; INVALID_ARGUMENT on an unknown flag, a bad value or a
// width not divisible by the number of heads.
StatusOr<MixerOptions> ParseOptions(const std::vector<std::string>& args);
std::string Usage();

// The first readable of: $SCANTUNE_SEED_001, ../shared/seeds/001_*.txt and
// /work/shared/seeds/001_*.txt, tests/integration/data/seed_001.json (from the
// working directory, then from the source tree it was built in); empty if none.
std::string DefaultSeedFile();

}  // namespace scantune::mixer
