// The mixer benchmark's results and their presentation: seed 001's JSON
// schema (schema_version, protocol, environment, rows[] with per-mode
// statistics, rounds, memory and parameter figures, plus a few fields of ours
// under names the seed does not use), the per-shape table beside seed 001's
// SAMU / RG-LRU ratio, and the reading of that seed file.
//
// Pure value code (the seed file is read by ReadSeedRatios only); thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common/status.h"

namespace scantune::mixer {

// Seed 001's per-mode statistics: std_ms is the population standard
// deviation (numpy's default, which the seed used; common/stats' FillStats
// gives the sample one).
struct ModeSummary {
  std::vector<double> samples_ms;
  double median_ms = 0, mean_ms = 0, std_ms = 0, minimum_ms = 0, maximum_ms = 0;
};
ModeSummary Summarize(const std::vector<double>& samples_ms);

struct RoundSamples {
  int round = 0;
  int order_index = 0;  // position of this architecture within the round
  std::vector<double> forward_ms, backward_ms, forward_backward_ms;
};

struct ShapeKey {
  int64_t batch = 0, length = 0, width = 0;
  auto operator<=>(const ShapeKey&) const = default;
  std::string ToString() const;  // "4x2048x2048"
};

// What the memory probe measured (see the protocol's "memory" text).
struct MemoryFigures {
  uint64_t baseline_in_use_bytes = 0;  // cuMemGetInfo total - free before the architecture's buffers
  uint64_t requested_bytes = 0;        // sum of the bytes its own buffers asked cuMemAlloc for
  uint64_t peak_in_use_bytes = 0;      // in use after its buffers and one forward + backward
};

struct MixerRow {
  ShapeKey shape;
  std::string architecture;                // "rglru" or "samu"
  std::string backend;                     // the service's selected variant
  std::optional<std::string> controller;   // null for rglru
  std::vector<double> forward_ms, backward_ms, forward_backward_ms;  // all samples, in time order
  std::vector<RoundSamples> rounds;
  MemoryFigures memory;
  uint64_t parameters = 0;
  uint64_t parameter_bytes = 0;
  uint64_t dynamic_control_values_per_token = 0;
  bool materialized_state_sized_transition = false;
  // Ours (not in the seed):
  int inner_forward = 0, inner_backward = 0, inner_forward_backward = 0;  // launches averaged per sample
  int input_sets = 1;
  std::string check = "not run";   // "pass", "fail", "not run": the GEMM stride check (rglru)
  double check_rel_err = 0;
  int64_t selection_record_id = 0;
  bool selection_stale = false;
};

// Ordered key -> value pairs; a value is a string or a bool.
struct ProtocolEntry {
  std::string key;
  std::string text;
  std::optional<bool> flag;  // set: written as a JSON bool instead of text
};

struct MixerReport {
  std::vector<ProtocolEntry> protocol;
  std::vector<std::pair<std::string, std::string>> environment;
  std::vector<MixerRow> rows;
};

// The JSON document (2-space indent, seed 001's key order).
std::string ReportToJson(const MixerReport& report);

// Seed 001's forward_backward medians per shape and architecture.
struct SeedFigures {
  std::map<ShapeKey, std::map<std::string, double>> fwd_bwd_median_ms;  // shape -> architecture -> ms
  std::string gpu;
  // samu / rglru, when the seed has both.
  std::optional<double> Ratio(const ShapeKey& shape) const;
};
StatusOr<SeedFigures> ParseSeedFigures(const std::string& json);
StatusOr<SeedFigures> ReadSeedFigures(const std::string& path);

// One block per shape: rglru and samu fwd / bwd / fwd_bwd medians, the
// SAMU / RG-LRU fwd_bwd ratio and seed 001's ratio for the same shape.
std::string FormatTable(const MixerReport& report, const SeedFigures* seed);

}  // namespace scantune::mixer
