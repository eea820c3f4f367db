// The seed-004 report of scantune-ssm-bench: its rows (timing, error,
// device_peak, max_len), the JSON writer in seed 004's layout, the floors and
// DEVICE.md's reference figures, the reader of seed 004's per-shape ordering,
// and the printed table. Pure value code; thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/problem.h"
#include "common/status.h"

namespace scantune::ssmbench {

// MiB, as seed 004's *_mb fields (2.0 for a 2 MiB y at 4x512x256 fp32).
inline double Mib(uint64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

struct SsmShape {
  int64_t batch = 4;
  int64_t seq = 0;
  int64_t dim = 0;
  int64_t state = 16;
  auto operator<=>(const SsmShape&) const = default;
  std::string ToString() const;  // "4x2048x1024 N16"
};

// The selective_scan problem of a shape (fp32, no options, no h0).
Problem SsmProblem(const SsmShape& shape, Mode mode);

// Bytes of the tensors the mode reads (inputs; dy when it has a backward)
// and writes (y, h_final when it has a forward; gradients when a backward).
struct TensorBytes {
  uint64_t args = 0;
  uint64_t outs = 0;
};
TensorBytes TensorBytesOf(const Problem& problem);

// What a direct run of the problem allocates: its mode's tensors and the workspace.
uint64_t NeedBytes(const Problem& problem, uint64_t workspace_bytes);

// GiB (2^30 bytes) -> bytes.
uint64_t CapBytes(double gib);

// The largest L the service accepts at (B, D): ProblemLimits' length and
// element caps (262144 at B = 4, D = 1024, as seed 004's limit).
int64_t LengthLimit(const SsmShape& shape);

// The driver version in the first line of /proc/driver/nvidia/version ("NVRM
// version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release
// Build ...") : the first word of digits and dots; empty if none.
std::string ParseNvidiaDriverVersion(const std::string& line);

// "4x2048x1024" (B x L x D), as --shape takes it.
std::string ArgOf(const SsmShape& shape);

// One result row. kind: "" (a timing row), "error", "device_peak", "max_len".
struct Row {
  std::string kind;
  std::string family;           // written as "impl"
  std::string variant;
  Mode mode = Mode::kFwd;
  SsmShape shape;
  // timing rows
  double median_ms = 0, q1_ms = 0, q3_ms = 0;
  int inner = 0;
  double compile_s = 0;
  double workspace_mb = 0, arg_mb = 0, out_mb = 0;
  std::optional<double> rel_err_vs_scan;
  std::string rel_err_note;     // why rel_err_vs_scan is missing (not for the sequential family itself)
  double rel_err_vs_ref = 0;
  int64_t record_id = 0;
  int variants = 0, variants_ok = 0;
  // error rows (and failures of the others)
  std::string state;            // ResultState name or "ERROR"
  std::string error;
  // device_peak rows: device-wide memory in use (cuMemGetInfo) in a fresh process
  double baseline_mb = 0, peak_mb = 0, delta_mb = 0, need_mb = 0;
  // max_len rows (shape.seq unused)
  int64_t max_seq = 0;
  double peak_mb_at_max = 0;    // delta (what the run added to its fresh context) at max_seq
  double need_mb_at_max = 0;
  int64_t limit = 0;
  std::string first_failure;
  int64_t first_failure_seq = 0;
};

struct SsmReport {
  std::vector<std::pair<std::string, std::string>> device;   // written as strings, in order
  std::vector<std::pair<std::string, double>> device_numbers;
  int64_t batch = 4, state = 16;
  std::string dtype = "float32";
  double mem_cap_gib = 24;
  std::vector<std::pair<std::string, std::string>> notes;    // config notes, in order
  std::vector<Row> rows;
  bool dry_run = false;
};

// The config notes that describe the protocol (and report->batch) into report->notes.
void AddProtocolNotes(double mem_cap_gib, SsmReport* report);

// JSON in seed 004's layout: {"device": {...}, "config": {...}, "results": [...]}.
std::string ReportToJson(const SsmReport& report);

// ---------------------------------------------------------------- floors

struct FloorModel {
  double copy_gbps = 4250.0;     // DEVICE.md: 2 GB D2D copy, read + write
  double sm_count = 132;
  double exp_per_clock = 16;     // MUFU.EX2 per SM per clock
  double clock_ghz = 1.98;
};

struct Floor {
  double bytes_ms = 0;   // FloorBytes / copy bandwidth
  double exp_ms = 0;     // B*L*D*N exps (twice with a backward: it recomputes them) / exp throughput
  double ms() const { return bytes_ms > exp_ms ? bytes_ms : exp_ms; }
  const char* bound() const { return bytes_ms > exp_ms ? "bytes" : "exp"; }
};
Floor FloorOf(const Problem& problem, const FloorModel& model = {});

// DEVICE.md's reference (a widely used CUDA kernel, H200, fp32, B = 4, N = 16)
// in ms, for D in {256, 512, 1024} x L in {512, 2048, 8192}, fwd and fwd_bwd.
std::optional<double> ReferenceMs(const SsmShape& shape, Mode mode);

// ---------------------------------------------------------------- seed 004

struct SeedEntry {
  std::string impl;
  std::optional<double> median_ms;  // none: an error row
  std::string error;
};
struct SeedOrdering {
  std::string gpu;
  // (mode, seq, dim) -> impls, fastest first, error rows last.
  std::map<std::tuple<std::string, int64_t, int64_t>, std::vector<SeedEntry>> entries;
  const std::vector<SeedEntry>* Find(Mode mode, const SsmShape& shape) const;
};
StatusOr<SeedOrdering> ParseSeedOrdering(const std::string& json);
StatusOr<SeedOrdering> ReadSeedOrdering(const std::string& path);

// "pallas 0.639 < assoc 5.618 < chunked 9.751 < scan 13.987", error rows as "scan: OOM".
std::string FormatSeedOrdering(const std::vector<SeedEntry>& entries);

// Per shape and mode our families ranked beside seed 004's ordering, then per
// shape our best fwd / fwd_bwd against DEVICE.md's reference and the floor,
// then the device_peak and max_len rows.
std::string FormatTable(const SsmReport& report, const SeedOrdering* seed, const FloorModel& floor = {});

}  // namespace scantune::ssmbench
