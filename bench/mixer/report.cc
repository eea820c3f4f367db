#include "bench/mixer/report.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <sstream>

#include "bench/common/json_writer.h"
#include "common/stats.h"

namespace scantune::mixer {

using bench::JsonWriter;

ModeSummary Summarize(const std::vector<double>& samples_ms) {
  ModeSummary s;
  s.samples_ms = samples_ms;
  if (samples_ms.empty()) return s;
  v1::Stats stats;
  FillStats(samples_ms, &stats);
  const double n = static_cast<double>(samples_ms.size());
  double var = 0.0;
  for (double x : samples_ms) var += (x - stats.mean_ms()) * (x - stats.mean_ms());
  s.median_ms = stats.median_ms();
  s.mean_ms = stats.mean_ms();
  s.std_ms = std::sqrt(var / n);
  s.minimum_ms = stats.min_ms();
  s.maximum_ms = stats.max_ms();
  return s;
}

std::string ShapeKey::ToString() const {
  return std::to_string(batch) + "x" + std::to_string(length) + "x" + std::to_string(width);
}

namespace {

void WriteMode(JsonWriter& w, const char* key, const std::vector<double>& samples) {
  const ModeSummary s = Summarize(samples);
  w.Key(key);
  w.BeginObject();
  w.FieldNumbers("samples_ms", s.samples_ms);
  w.Field("median_ms", s.median_ms);
  w.Field("mean_ms", s.mean_ms);
  w.Field("std_ms", s.std_ms);
  w.Field("minimum_ms", s.minimum_ms);
  w.Field("maximum_ms", s.maximum_ms);
  w.EndObject();
}

void WriteRow(JsonWriter& w, const MixerRow& r) {
  w.BeginObject();
  w.Key("shape");
  w.BeginObject();
  w.FieldInt("batch", r.shape.batch);
  w.FieldInt("length", r.shape.length);
  w.FieldInt("width", r.shape.width);
  w.EndObject();
  w.Field("architecture", r.architecture);
  w.Field("backend", r.backend);
  w.Key("controller");
  if (r.controller) w.String(*r.controller);
  else w.Null();
  WriteMode(w, "forward", r.forward_ms);
  WriteMode(w, "backward", r.backward_ms);
  WriteMode(w, "forward_backward", r.forward_backward_ms);
  w.Key("rounds");
  w.BeginArray();
  for (const RoundSamples& round : r.rounds) {
    w.BeginObject();
    w.FieldInt("round", round.round);
    w.FieldInt("order_index", round.order_index);
    w.FieldNumbers("forward_ms", round.forward_ms);
    w.FieldNumbers("backward_ms", round.backward_ms);
    w.FieldNumbers("forward_backward_ms", round.forward_backward_ms);
    w.EndObject();
  }
  w.EndArray();
  const MemoryFigures& m = r.memory;
  const uint64_t reserved_peak = std::max(m.peak_in_use_bytes, m.baseline_in_use_bytes);
  w.FieldUint("peak_allocated_delta_bytes", m.requested_bytes);
  w.FieldUint("peak_reserved_delta_bytes", reserved_peak - m.baseline_in_use_bytes);
  w.FieldUint("peak_allocated_bytes", m.baseline_in_use_bytes + m.requested_bytes);
  w.FieldUint("peak_reserved_bytes", reserved_peak);
  w.FieldUint("baseline_allocated_bytes", m.baseline_in_use_bytes);
  w.FieldUint("baseline_reserved_bytes", m.baseline_in_use_bytes);
  w.FieldUint("parameters", r.parameters);
  w.FieldUint("parameter_bytes", r.parameter_bytes);
  w.FieldUint("dynamic_control_values_per_token", r.dynamic_control_values_per_token);
  w.Field("materialized_state_sized_transition", r.materialized_state_sized_transition);
  // Ours, after the seed's fields.
  w.Key("inner_count");
  w.BeginObject();
  w.FieldInt("forward", r.inner_forward);
  w.FieldInt("backward", r.inner_backward);
  w.FieldInt("forward_backward", r.inner_forward_backward);
  w.EndObject();
  w.FieldInt("input_sets", r.input_sets);
  w.Field("gemm_check", r.check);
  w.Field("gemm_check_rel_err", r.check_rel_err);
  w.FieldInt("selection_record_id", r.selection_record_id);
  w.Field("selection_stale", r.selection_stale);
  w.EndObject();
}

const google::protobuf::Value* Member(const google::protobuf::Struct& s, const char* key) {
  auto it = s.fields().find(key);
  return it == s.fields().end() ? nullptr : &it->second;
}

std::optional<double> NumberAt(const google::protobuf::Struct& s, const char* key) {
  const google::protobuf::Value* v = Member(s, key);
  if (v == nullptr || v->kind_case() != google::protobuf::Value::kNumberValue) return std::nullopt;
  return v->number_value();
}

std::string Ms(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f", ms);
  return buf;
}

}  // namespace

std::string ReportToJson(const MixerReport& report) {
  JsonWriter w;
  w.BeginObject();
  w.FieldInt("schema_version", 1);
  w.Key("protocol");
  w.BeginObject();
  for (const ProtocolEntry& e : report.protocol) {
    if (e.flag) w.Field(e.key, *e.flag);
    else w.Field(e.key, e.text);
  }
  w.EndObject();
  w.Key("environment");
  w.BeginObject();
  for (const auto& [key, value] : report.environment) w.Field(key, value);
  w.EndObject();
  w.Key("rows");
  w.BeginArray();
  for (const MixerRow& row : report.rows) WriteRow(w, row);
  w.EndArray();
  w.EndObject();
  return w.str() + "\n";
}

std::optional<double> SeedFigures::Ratio(const ShapeKey& shape) const {
  auto it = fwd_bwd_median_ms.find(shape);
  if (it == fwd_bwd_median_ms.end()) return std::nullopt;
  auto rg = it->second.find("rglru");
  auto sa = it->second.find("samu");
  if (rg == it->second.end() || sa == it->second.end() || rg->second <= 0) return std::nullopt;
  return sa->second / rg->second;
}

StatusOr<SeedFigures> ParseSeedFigures(const std::string& json) {
  google::protobuf::Struct doc;
  auto parsed = google::protobuf::util::JsonStringToMessage(json, &doc);
  if (!parsed.ok()) return InvalidArgument("seed file is not JSON: " + std::string(parsed.message()));
  const google::protobuf::Value* rows = Member(doc, "rows");
  if (rows == nullptr || rows->kind_case() != google::protobuf::Value::kListValue) {
    return InvalidArgument("seed file has no rows[] (not seed 001's schema)");
  }
  SeedFigures seed;
  if (const auto* env = Member(doc, "environment"); env && env->has_struct_value()) {
    if (const auto* gpu = Member(env->struct_value(), "gpu"); gpu && gpu->has_string_value()) {
      seed.gpu = gpu->string_value();
    }
  }
  for (const google::protobuf::Value& row : rows->list_value().values()) {
    if (!row.has_struct_value()) continue;
    const google::protobuf::Struct& r = row.struct_value();
    const auto* shape = Member(r, "shape");
    const auto* arch = Member(r, "architecture");
    const auto* fb = Member(r, "forward_backward");
    if (!shape || !shape->has_struct_value() || !arch || !arch->has_string_value() || !fb ||
        !fb->has_struct_value()) {
      continue;
    }
    auto b = NumberAt(shape->struct_value(), "batch");
    auto l = NumberAt(shape->struct_value(), "length");
    auto wd = NumberAt(shape->struct_value(), "width");
    auto median = NumberAt(fb->struct_value(), "median_ms");
    if (!b || !l || !wd || !median) continue;
    ShapeKey key{static_cast<int64_t>(*b), static_cast<int64_t>(*l), static_cast<int64_t>(*wd)};
    seed.fwd_bwd_median_ms[key][arch->string_value()] = *median;
  }
  if (seed.fwd_bwd_median_ms.empty()) return InvalidArgument("seed file has no readable forward_backward rows");
  return seed;
}

StatusOr<SeedFigures> ReadSeedFigures(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot read seed file " + path);
  std::ostringstream text;
  text << in.rdbuf();
  auto seed = ParseSeedFigures(text.str());
  if (!seed.ok()) return seed.status().Annotate(path);
  return seed;
}

std::string FormatTable(const MixerReport& report, const SeedFigures* seed) {
  std::ostringstream o;
  std::vector<ShapeKey> shapes;
  for (const MixerRow& r : report.rows) {
    if (std::find(shapes.begin(), shapes.end(), r.shape) == shapes.end()) shapes.push_back(r.shape);
  }
  char line[256];
  for (const ShapeKey& shape : shapes) {
    o << "shape " << shape.ToString() << " (B x L x W), medians in ms\n";
    // The check is the RG-LRU gate GEMMs' (cuBLAS, outside the service); the scans themselves were verified
    // by the daemon before it selected them, and the SAMU mixer has no GEMM: "-" there.
    std::snprintf(line, sizeof(line), "  %-6s %-58s %9s %9s %9s  %s\n", "arch", "backend", "fwd", "bwd", "fwd_bwd",
                  "gemm check");
    o << line;
    const MixerRow* rglru = nullptr;
    const MixerRow* samu = nullptr;
    for (const MixerRow& r : report.rows) {
      if (r.shape != shape) continue;
      if (r.architecture == "rglru") rglru = &r;
      if (r.architecture == "samu") samu = &r;
      std::snprintf(line, sizeof(line), "  %-6s %-58s %9s %9s %9s  %s\n", r.architecture.c_str(), r.backend.c_str(),
                    Ms(Summarize(r.forward_ms).median_ms).c_str(), Ms(Summarize(r.backward_ms).median_ms).c_str(),
                    Ms(Summarize(r.forward_backward_ms).median_ms).c_str(),
                    r.architecture == "samu" ? "-" : r.check.c_str());
      o << line;
    }
    std::string ours = "n/a", theirs = "n/a";
    if (rglru && samu) {
      const double rg = Summarize(rglru->forward_backward_ms).median_ms;
      if (rg > 0) {
        std::snprintf(line, sizeof(line), "%.3f", Summarize(samu->forward_backward_ms).median_ms / rg);
        ours = line;
      }
    }
    if (seed) {
      if (auto r = seed->Ratio(shape)) {
        std::snprintf(line, sizeof(line), "%.3f", *r);
        theirs = line;
      }
    }
    o << "  SAMU / RG-LRU fwd_bwd: " << ours << "   seed 001" << (seed && !seed->gpu.empty() ? " (" + seed->gpu + ")" : "")
      << ": " << theirs << "\n\n";
  }
  return o.str();
}

}  // namespace scantune::mixer
