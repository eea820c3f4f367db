#include "bench/ssm/report.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include "bench/common/json_writer.h"
#include "bench/ssm/families.h"
#include "worker/op_io.h"

namespace scantune::ssmbench {

using bench::JsonWriter;

namespace {

std::string Fixed(double v, int digits = 3) {
  char b[64];
  std::snprintf(b, sizeof(b), "%.*f", digits, v);
  return b;
}
std::string Sci(double v) {
  char b[64];
  std::snprintf(b, sizeof(b), "%.2e", v);
  return b;
}
std::string Short(const std::string& s, size_t n) { return s.size() <= n ? s : s.substr(0, n - 3) + "..."; }

// Our tail of an error for one table cell: "OUT_OF_MEMORY" or the first words.
std::string ErrorWord(const std::string& error) {
  if (error.find("Out of memory") != std::string::npos || error.find("RESOURCE_EXHAUSTED") != std::string::npos) {
    return "OOM";
  }
  return Short(error, 24);
}

}  // namespace

std::string SsmShape::ToString() const {
  return std::to_string(batch) + "x" + std::to_string(seq) + "x" + std::to_string(dim) + " N" + std::to_string(state);
}

Problem SsmProblem(const SsmShape& shape, Mode mode) {
  Problem p;
  p.op = Op::kSelectiveScan;
  p.shape = {shape.batch, shape.seq, shape.dim};
  p.dtype = DType::kF32;
  p.mode = mode;
  p.ssm.state = static_cast<int>(shape.state);
  return p;
}

TensorBytes TensorBytesOf(const Problem& problem) {
  const bool fwd = problem.mode != Mode::kBwd, bwd = problem.mode != Mode::kFwd;
  TensorBytes t;
  for (const TensorSpec& s : OpIoFor(problem.op).Tensors(problem)) {
    switch (s.role) {
      case TensorRole::kInput: t.args += s.bytes(); break;
      case TensorRole::kGradIn: if (bwd) t.args += s.bytes(); break;
      case TensorRole::kFwdOut:
      case TensorRole::kSaved: if (fwd) t.outs += s.bytes(); break;
      case TensorRole::kBwdOut: if (bwd) t.outs += s.bytes(); break;
    }
  }
  return t;
}

uint64_t NeedBytes(const Problem& problem, uint64_t workspace_bytes) {
  const TensorBytes t = TensorBytesOf(problem);
  return t.args + t.outs + workspace_bytes;
}

uint64_t CapBytes(double gib) { return static_cast<uint64_t>(gib * 1073741824.0); }

int64_t LengthLimit(const SsmShape& shape) {
  const ProblemLimits limits;
  return std::min(limits.max_length, limits.max_elements / (shape.batch * shape.dim));
}

std::string ParseNvidiaDriverVersion(const std::string& line) {
  std::istringstream words(line);
  std::string w;
  while (words >> w) {
    const bool digits_and_dots = w.find_first_not_of("0123456789.") == std::string::npos;
    if (digits_and_dots && w.find('.') != std::string::npos && std::isdigit(static_cast<unsigned char>(w[0]))) return w;
  }
  return "";
}

std::string ArgOf(const SsmShape& s) {
  return std::to_string(s.batch) + "x" + std::to_string(s.seq) + "x" + std::to_string(s.dim);
}

// ---------------------------------------------------------------- JSON

namespace {

void WriteShape(JsonWriter& w, const SsmShape& s, bool with_seq) {
  w.Key("shape");
  w.BeginObject();
  w.FieldInt("batch", s.batch);
  if (with_seq) w.FieldInt("seq", s.seq);
  w.FieldInt("dim", s.dim);
  w.FieldInt("state", s.state);
  w.EndObject();
}

// Seed 004's field order: impl, mode, shape, memory, compile_s, inner,
// median_ms, q1_ms, q3_ms, rel_err_vs_scan; ours (seed_impl, variant, ...) after.
void WriteRow(JsonWriter& w, const Row& r) {
  w.BeginObject();
  w.Field("impl", r.family);
  w.Field("mode", ModeName(r.mode));
  if (r.kind == "max_len") {
    w.Field("kind", "max_len");
    WriteShape(w, r.shape, false);
    w.FieldInt("max_seq", r.max_seq);
    w.Field("peak_mb_at_max", r.peak_mb_at_max);
    w.Field("need_mb_at_max", r.need_mb_at_max);
    w.FieldInt("limit", r.limit);
    w.Key("first_failure");
    if (r.first_failure.empty()) {
      w.Null();
    } else {
      w.String(r.first_failure);
    }
    w.FieldInt("first_failure_seq", r.first_failure_seq);
  } else if (r.kind == "device_peak") {
    WriteShape(w, r.shape, true);
    w.Field("kind", "device_peak");
    if (r.error.empty()) {
      w.Field("peak_mb", r.peak_mb);
      w.Field("baseline_mb", r.baseline_mb);
      w.Field("delta_mb", r.delta_mb);
    } else {
      w.Field("error", r.error);
    }
    w.Field("need_mb", r.need_mb);
  } else if (r.kind == "error") {
    WriteShape(w, r.shape, true);
    w.Field("error", r.state + ": " + r.error);
    w.Field("state", r.state);
    w.FieldInt("variants", r.variants);
  } else {
    WriteShape(w, r.shape, true);
    w.Field("workspace_mb", r.workspace_mb);
    w.Field("arg_mb", r.arg_mb);
    w.Field("out_mb", r.out_mb);
    w.Field("compile_s", r.compile_s);
    w.FieldInt("inner", r.inner);
    w.Field("median_ms", r.median_ms);
    w.Field("q1_ms", r.q1_ms);
    w.Field("q3_ms", r.q3_ms);
    if (r.rel_err_vs_scan) w.Field("rel_err_vs_scan", *r.rel_err_vs_scan);
    if (!r.rel_err_note.empty()) w.Field("rel_err_note", r.rel_err_note);
    w.Field("rel_err_vs_ref", r.rel_err_vs_ref);
    w.FieldInt("record_id", r.record_id);
    w.FieldInt("variants", r.variants);
    w.FieldInt("variants_ok", r.variants_ok);
  }
  w.Field("seed_impl", SeedImplOf(r.family));
  w.Field("variant", r.variant);
  w.EndObject();
}

}  // namespace

void AddProtocolNotes(double mem_cap_gib, SsmReport* report) {
  report->notes = {
      {"note", "rel_err_vs_scan = max over the compared tensors (y in fwd; every gradient in fwd_bwd) of "
               "max|out - scan| / max|scan|, scan = the sequential family's best variant run on the same random "
               "inputs in the same process; rel_err_vs_ref = the daemon's verification against the float64 CPU "
               "reference (max over all outputs)"},
      {"note_runs",
       "timing rows: scantuned Tune (force) per shape and mode over every variant CanImplement admits, then "
       "ListRecords of that job; each family's row is its fastest OK first-pass record (the pass that timed every "
       "variant in the same counterbalanced rounds). The Tune request carries no timing config, so the daemon's "
       "defaults hold: 3 warm-up launches, 2 counterbalanced rounds (forward, then reversed) x 5 samples, each "
       "sample the mean of an inner loop sized to >= 1 ms (at most 1000 launches) between CUDA events, input sets "
       "rotated beyond 2x L2, compile excluded. device_peak rows from fresh child processes (this binary, --child): "
       "baseline_mb = device memory in use (cuMemGetInfo, device-wide) after context creation, peak_mb = the most in "
       "use after allocating the mode's tensors and workspace and after each phase, delta_mb = peak - baseline (what "
       "seed 004's per-process peak_mb compares with). max_len = largest power-of-two L (B=" +
           std::to_string(report->batch) +
           ", D=1024, fwd_bwd) whose fresh-process run succeeded with tensors + workspace within the cap of " +
           Fixed(mem_cap_gib, 1) +
           " GiB (mirrors seed 004's 24 GB RTX 3090; checked before allocating and against the measured delta); "
           "peak_mb_at_max is the delta there"},
      {"impl_map", "impl = our variant family; seed_impl = seed 004's counterpart: sequential~scan, chunked~chunked, "
                   "assoc~assoc, fused/fusedseg~pallas (the fused single-pass path)"},
      {"memory_fields", "MiB (2^20 bytes). workspace_mb = the variant's scratch beyond inputs/outputs "
                        "(record.memory.workspace_bytes); arg_mb = tensors the mode reads (u, delta, A, Bm, Cm, Dv; "
                        "+ dy with bwd); out_mb = tensors it writes (y, h_final; + du, ddelta, dA, dBm, dCm, dDv "
                        "with bwd)"},
      {"floor", "max of FloorBytes / 4.25 TB/s and B*L*D*N exps (x2 in fwd_bwd: the backward recomputes them) at "
                "132 SMs x 16/clk x 1.98 GHz"},
  };
}

std::string ReportToJson(const SsmReport& report) {
  JsonWriter w;
  w.BeginObject();
  w.Key("device");
  w.BeginObject();
  for (const auto& [key, value] : report.device) w.Field(key, value);
  for (const auto& [key, value] : report.device_numbers) w.Field(key, value);
  w.EndObject();
  w.Key("config");
  w.BeginObject();
  w.FieldInt("batch", report.batch);
  w.FieldInt("state", report.state);
  w.Field("dtype", report.dtype);
  w.Field("mem_cap_gb", report.mem_cap_gib);
  w.Field("dry_run", report.dry_run);
  for (const auto& [key, value] : report.notes) w.Field(key, value);
  w.EndObject();
  w.Key("results");
  w.BeginArray();
  for (const Row& r : report.rows) WriteRow(w, r);
  w.EndArray();
  w.EndObject();
  return w.str() + "\n";
}

// ---------------------------------------------------------------- floors

Floor FloorOf(const Problem& problem, const FloorModel& model) {
  Floor f;
  f.bytes_ms = static_cast<double>(FloorBytes(problem, problem.mode)) / (model.copy_gbps * 1e9) * 1e3;
  const double exps = static_cast<double>(problem.shape.elements()) * problem.ssm.state *
                      (problem.mode == Mode::kFwdBwd ? 2.0 : 1.0);
  f.exp_ms = exps / (model.sm_count * model.exp_per_clock * model.clock_ghz * 1e9) * 1e3;
  return f;
}

std::optional<double> ReferenceMs(const SsmShape& shape, Mode mode) {
  if (shape.batch != 4 || shape.state != 16 || mode == Mode::kBwd) return std::nullopt;
  // DEVICE.md, fwd / fwd_bwd in ms; rows D, columns L.
  static const std::map<std::pair<int64_t, int64_t>, std::pair<double, double>> kRef = {
      {{256, 512}, {0.071, 0.316}},  {{256, 2048}, {0.123, 0.466}},  {{256, 8192}, {0.356, 1.323}},
      {{512, 512}, {0.096, 0.331}},  {{512, 2048}, {0.203, 0.702}},  {{512, 8192}, {0.680, 2.453}},
      {{1024, 512}, {0.127, 0.495}}, {{1024, 2048}, {0.349, 1.168}}, {{1024, 8192}, {1.209, 4.355}}};
  auto it = kRef.find({shape.dim, shape.seq});
  if (it == kRef.end()) return std::nullopt;
  return mode == Mode::kFwd ? it->second.first : it->second.second;
}

// ---------------------------------------------------------------- seed 004

namespace {

const google::protobuf::Value* Member(const google::protobuf::Struct& s, const char* key) {
  auto it = s.fields().find(key);
  return it == s.fields().end() ? nullptr : &it->second;
}
std::optional<double> NumberAt(const google::protobuf::Struct& s, const char* key) {
  const auto* v = Member(s, key);
  if (v == nullptr || v->kind_case() != google::protobuf::Value::kNumberValue) return std::nullopt;
  return v->number_value();
}
std::string StringAt(const google::protobuf::Struct& s, const char* key) {
  const auto* v = Member(s, key);
  return v && v->has_string_value() ? v->string_value() : "";
}

}  // namespace

const std::vector<SeedEntry>* SeedOrdering::Find(Mode mode, const SsmShape& shape) const {
  auto it = entries.find({ModeName(mode), shape.seq, shape.dim});
  return it == entries.end() ? nullptr : &it->second;
}

StatusOr<SeedOrdering> ParseSeedOrdering(const std::string& json) {
  google::protobuf::Struct doc;
  auto parsed = google::protobuf::util::JsonStringToMessage(json, &doc);
  if (!parsed.ok()) return InvalidArgument("seed file is not JSON: " + std::string(parsed.message()));
  const auto* results = Member(doc, "results");
  if (results == nullptr || results->kind_case() != google::protobuf::Value::kListValue) {
    return InvalidArgument("seed file has no results[] (not seed 004's schema)");
  }
  SeedOrdering seed;
  if (const auto* dev = Member(doc, "device"); dev && dev->has_struct_value()) {
    seed.gpu = StringAt(dev->struct_value(), "gpu");
  }
  for (const auto& value : results->list_value().values()) {
    if (!value.has_struct_value()) continue;
    const auto& r = value.struct_value();
    if (!StringAt(r, "kind").empty()) continue;  // device_peak, max_len
    const auto* shape = Member(r, "shape");
    const std::string impl = StringAt(r, "impl"), mode = StringAt(r, "mode");
    if (impl.empty() || mode.empty() || shape == nullptr || !shape->has_struct_value()) continue;
    auto seq = NumberAt(shape->struct_value(), "seq");
    auto dim = NumberAt(shape->struct_value(), "dim");
    if (!seq || !dim) continue;
    SeedEntry e;
    e.impl = impl;
    e.median_ms = NumberAt(r, "median_ms");
    e.error = StringAt(r, "error");
    if (!e.median_ms && e.error.empty()) continue;
    seed.entries[{mode, static_cast<int64_t>(*seq), static_cast<int64_t>(*dim)}].push_back(std::move(e));
  }
  if (seed.entries.empty()) return InvalidArgument("seed file has no readable timing rows");
  for (auto& [key, list] : seed.entries) {
    std::stable_sort(list.begin(), list.end(), [](const SeedEntry& a, const SeedEntry& b) {
      if (a.median_ms.has_value() != b.median_ms.has_value()) return a.median_ms.has_value();
      return a.median_ms && *a.median_ms < *b.median_ms;
    });
  }
  return seed;
}

StatusOr<SeedOrdering> ReadSeedOrdering(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot read seed file " + path);
  std::ostringstream text;
  text << in.rdbuf();
  auto seed = ParseSeedOrdering(text.str());
  if (!seed.ok()) return seed.status().Annotate(path);
  return seed;
}


std::string FormatSeedOrdering(const std::vector<SeedEntry>& entries) {
  std::string out;
  bool first_error = true;
  for (const SeedEntry& e : entries) {
    if (e.median_ms) {
      out += (out.empty() ? "" : " < ") + e.impl + " " + Fixed(*e.median_ms);
    } else {
      out += std::string(out.empty() ? "" : first_error ? "; " : ", ") + e.impl + ": " + ErrorWord(e.error);
      first_error = false;
    }
  }
  return out;
}

std::string FormatTable(const SsmReport& report, const SeedOrdering* seed, const FloorModel& floor_model) {
  std::ostringstream o;
  char line[512];
  std::string gpu = "this GPU";
  for (const auto& [k, v] : report.device) {
    if (k == "gpu") gpu = v;
  }
  o << "selective_scan " << report.dtype << ", B = " << report.batch << ", N = " << report.state << " on " << gpu
    << (report.dry_run ? " (DRY RUN: synthetic figures)" : "") << "; medians in ms";
  if (seed) o << "; seed 004 on " << (seed->gpu.empty() ? "its GPU" : seed->gpu);
  o << "\n";

  std::vector<std::pair<SsmShape, Mode>> groups;
  for (const Row& r : report.rows) {
    if (r.kind == "device_peak" || r.kind == "max_len") continue;
    const auto key = std::make_pair(r.shape, r.mode);
    if (std::find(groups.begin(), groups.end(), key) == groups.end()) groups.push_back(key);
  }
  // Best OK median per (shape, mode), for the summary below.
  std::map<std::pair<SsmShape, Mode>, const Row*> best;
  for (const auto& [shape, mode] : groups) {
    std::vector<const Row*> ok, failed;
    for (const Row& r : report.rows) {
      if (r.shape != shape || r.mode != mode || r.kind == "device_peak" || r.kind == "max_len") continue;
      (r.kind == "error" ? failed : ok).push_back(&r);
    }
    std::sort(ok.begin(), ok.end(), [](const Row* a, const Row* b) { return a->median_ms < b->median_ms; });
    if (!ok.empty()) best[{shape, mode}] = ok.front();
    o << "\nL=" << shape.seq << " D=" << shape.dim << "  " << ModeName(mode) << "\n";
    std::snprintf(line, sizeof(line), "  %-2s %-11s %-8s %-30s %9s %9s %9s %6s %9s %9s %10s\n", "#", "family", "~seed",
                  "variant", "median", "q1", "q3", "inner", "ws_MiB", "compile_s", "err_vs_scan");
    o << line;
    int rank = 0;
    for (const Row* r : ok) {
      std::snprintf(line, sizeof(line), "  %-2d %-11s %-8s %-30s %9.4f %9.4f %9.4f %6d %9.2f %9.3f %10s\n", ++rank,
                    r->family.c_str(), SeedImplOf(r->family).c_str(), Short(r->variant, 30).c_str(), r->median_ms,
                    r->q1_ms, r->q3_ms, r->inner, r->workspace_mb, r->compile_s,
                    r->rel_err_vs_scan ? Sci(*r->rel_err_vs_scan).c_str() : "-");
      o << line;
    }
    for (const Row* r : failed) {
      o << "  -  " << r->family << " (" << SeedImplOf(r->family) << "): " << r->state << ": "
        << Short(r->error, 120) << "\n";
    }
    std::string ours, as_seed;
    for (const Row* r : ok) {
      ours += (ours.empty() ? "" : " < ") + r->family;
      as_seed += (as_seed.empty() ? "" : " < ") + SeedImplOf(r->family);
    }
    for (const Row* r : failed) ours += std::string(ours.empty() ? "" : "; ") + r->family + ": " + r->state;
    o << "  ours:     " << (ours.empty() ? "-" : ours) << (as_seed.empty() ? "" : "   (as seed impls: " + as_seed + ")")
      << "\n";
    if (seed) {
      const auto* entries = seed->Find(mode, shape);
      o << "  seed 004: " << (entries ? FormatSeedOrdering(*entries) : std::string("(no row for this shape)")) << "\n";
    }
  }

  // Against DEVICE.md's reference and the floor.
  std::vector<SsmShape> shapes;
  for (const auto& [shape, mode] : groups) {
    if (std::find(shapes.begin(), shapes.end(), shape) == shapes.end()) shapes.push_back(shape);
  }
  if (!shapes.empty()) {
    o << "\nbest per shape vs DEVICE.md's reference kernel (speedup = ref / ours; targets fwd >= 2x, fwd_bwd >= "
         "1.5x)\nand vs the floor (max of FloorBytes at "
      << Fixed(floor_model.copy_gbps / 1000.0, 2) << " TB/s and B*L*D*N exps (x2 with bwd) at "
      << static_cast<int>(floor_model.sm_count) << " SMs x " << static_cast<int>(floor_model.exp_per_clock) << "/clk x "
      << Fixed(floor_model.clock_ghz, 2) << " GHz)\n";
    std::snprintf(line, sizeof(line), "  %-5s %-5s %-8s %9s %7s %8s %7s %10s %8s   %s\n", "D", "L", "mode", "ours_ms",
                  "ref_ms", "speedup", "target", "floor_ms", "x_floor", "best");
    o << line;
    for (const SsmShape& shape : shapes) {
      for (Mode mode : {Mode::kFwd, Mode::kFwdBwd}) {
        auto it = best.find({shape, mode});
        const auto ref = ReferenceMs(shape, mode);
        const Floor fl = FloorOf(SsmProblem(shape, mode), floor_model);
        const double target = mode == Mode::kFwd ? 2.0 : 1.5;
        if (it == best.end()) {
          if (std::find(groups.begin(), groups.end(), std::make_pair(shape, mode)) == groups.end()) continue;
          std::snprintf(line, sizeof(line), "  %-5lld %-5lld %-8s %9s %7s %8s %7s %10.4f %8s   %s\n",
                        static_cast<long long>(shape.dim), static_cast<long long>(shape.seq), ModeName(mode), "-",
                        ref ? Fixed(*ref).c_str() : "-", "-", "-", fl.ms(), "-", "no OK row");
          o << line;
          continue;
        }
        const Row& r = *it->second;
        const double speedup = ref ? *ref / r.median_ms : 0.0;
        std::string met = ref ? (speedup >= target ? "met" : "MISSED") : "-";
        std::snprintf(line, sizeof(line), "  %-5lld %-5lld %-8s %9.4f %7s %8s %7s %10.4f %8.2f   %s (%s-bound floor)\n",
                      static_cast<long long>(shape.dim), static_cast<long long>(shape.seq), ModeName(mode), r.median_ms,
                      ref ? Fixed(*ref).c_str() : "-", ref ? (Fixed(speedup, 2) + "x").c_str() : "-", met.c_str(),
                      fl.ms(), r.median_ms / fl.ms(), r.variant.c_str(), fl.bound());
        o << line;
      }
    }
  }

  bool header = false;
  for (const Row& r : report.rows) {
    if (r.kind != "device_peak") continue;
    if (!header) {
      o << "\ndevice_peak (fresh process each; device memory in use per cuMemGetInfo, MiB; delta = what the run "
           "added)\n";
      std::snprintf(line, sizeof(line), "  %-11s %-8s %-18s %10s %10s %10s %10s  %s\n", "family", "mode", "shape",
                    "baseline", "peak", "delta", "need", "variant");
      o << line;
      header = true;
    }
    std::string shape = std::to_string(r.shape.seq) + "x" + std::to_string(r.shape.dim);
    if (r.error.empty()) {
      std::snprintf(line, sizeof(line), "  %-11s %-8s %-18s %10.1f %10.1f %10.1f %10.1f  %s\n", r.family.c_str(),
                    ModeName(r.mode), ("L x D " + shape).c_str(), r.baseline_mb, r.peak_mb, r.delta_mb, r.need_mb,
                    r.variant.c_str());
    } else {
      std::snprintf(line, sizeof(line), "  %-11s %-8s %-18s  error: %s\n", r.family.c_str(), ModeName(r.mode),
                    ("L x D " + shape).c_str(), Short(r.error, 100).c_str());
    }
    o << line;
  }
  for (const Row& r : report.rows) {
    if (r.kind != "max_len") continue;
    o << "\nmax_len (" << r.family << ", " << r.variant << ", fwd_bwd, B = " << r.shape.batch << ", D = " << r.shape.dim
      << ", cap " << Fixed(report.mem_cap_gib, 1) << " GiB): largest power-of-two L = " << r.max_seq << " (delta "
      << Fixed(r.peak_mb_at_max, 1) << " MiB, needs " << Fixed(r.need_mb_at_max, 1) << " MiB)";
    if (!r.first_failure.empty()) {
      o << "; first failure at L = " << r.first_failure_seq << ": " << Short(r.first_failure, 160);
    } else {
      o << "; no failure up to the limit L = " << r.limit;
    }
    o << "\n";
  }
  return o.str();
}

}  // namespace scantune::ssmbench
