// Command-line options of scantune-ssm-bench (and of its --child mode, the
// fresh process that measures one device_peak / max_len point). Pure value
// code; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/ssm/report.h"
#include "common/problem.h"
#include "common/status.h"

namespace scantune::ssmbench {

struct SsmOptions {
  std::string address;                 // daemon; empty: $SCANTUNE_ADDRESS or the default socket
  std::vector<SsmShape> shapes;        // timing shapes (default: the 9)
  std::vector<Mode> modes = {Mode::kFwd, Mode::kFwdBwd};
  int64_t state = 16;
  std::string out = "ssm_bench.json";
  std::string seed_file;               // empty: looked up (DefaultSeedFile)
  int device = 0;                      // CUDA ordinal (and the daemon's device of that ordinal)
  uint64_t seed = 1;                   // random inputs of the direct runs
  bool tune = true;                    // false: use the newest stored job per problem (--no-tune)
  bool rel_err = true;
  std::vector<SsmShape> peak_shapes;   // device_peak rows (default seed 004's: 4x2048x512, 4x8192x512)
  bool max_len = true;
  bool max_len_all = false;            // every family, not only the best fwd_bwd one
  int64_t max_len_start = 4096;        // first L tried
  double mem_cap_gib = 24.0;           // max_len cap, GiB (2^30 bytes): seed 004's 24 GB RTX 3090
  double child_timeout_s = 300.0;
  double kernel_timeout_ms = 60000.0;
  double deadline_s = 0;               // past this, the rest is skipped (rows say so); 0: none
  std::string work_dir;                // candidates and child results; empty: a fresh /tmp dir
  bool dry_run = false;
  bool help = false;

  // --child: one fresh-process memory measurement.
  bool child = false;
  std::string candidate_file;          // serialized v1::Candidate
  std::string child_out;               // serialized v1::Record written here
  SsmShape child_shape;
  Mode child_mode = Mode::kFwd;
};

// The shapes: B = 4, N = 16, D in {256, 512, 1024} x L in {512, 2048, 8192}.
std::vector<SsmShape> DefaultShapes(int64_t state = 16);

// "4x2048x1024,4x512x256" (B x L x D) -> shapes with N = state.
StatusOr<std::vector<SsmShape>> ParseShapeList(const std::string& text, int64_t state);

// INVALID_ARGUMENT on an unknown flag or a bad value.
StatusOr<SsmOptions> ParseOptions(const std::vector<std::string>& args);
std::string Usage();

// The first readable of: $SCANTUNE_SEED_004, ../shared/seeds/004_*.txt,
// /work/shared/seeds/004_*.txt, tests/integration/data/seed_004.json (from
// the working directory, then from the source tree); empty if none.
std::string DefaultSeedFile();

}  // namespace scantune::ssmbench
