#include "server/record_json.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <optional>
#include <set>

namespace scantune {
namespace {

using google::protobuf::ListValue;
using google::protobuf::Struct;
using google::protobuf::Value;

constexpr char kFormatSeed001[] = "seed001";
constexpr double kMiB = 1024.0 * 1024.0;

// --- building (export) --------------------------------------------------------

Value Num(double v) {
  Value value;
  value.set_number_value(v);
  return value;
}
Value Str(const std::string& v) {
  Value value;
  value.set_string_value(v);
  return value;
}
Value Bool(bool v) {
  Value value;
  value.set_bool_value(v);
  return value;
}
Value Obj(Struct s) {
  Value value;
  *value.mutable_struct_value() = std::move(s);
  return value;
}
Value Numbers(const google::protobuf::RepeatedField<double>& values) {
  Value value;
  ListValue* list = value.mutable_list_value();
  for (double v : values) *list->add_values() = Num(v);
  return value;
}

void Set(Struct& s, const std::string& key, Value v) { (*s.mutable_fields())[key] = std::move(v); }

bool HasStats(const v1::Stats& s) { return s.samples_ms_size() > 0 || s.median_ms() > 0; }

// Seed 001 names (minimum_ms, maximum_ms) where the seed has one; ours otherwise.
Struct StatsToStruct(const v1::Stats& s) {
  Struct out;
  Set(out, "samples_ms", Numbers(s.samples_ms()));
  Set(out, "median_ms", Num(s.median_ms()));
  Set(out, "mean_ms", Num(s.mean_ms()));
  Set(out, "std_ms", Num(s.std_ms()));
  Set(out, "mad_ms", Num(s.mad_ms()));
  Set(out, "minimum_ms", Num(s.min_ms()));
  Set(out, "maximum_ms", Num(s.max_ms()));
  Set(out, "q1_ms", Num(s.q1_ms()));
  Set(out, "q3_ms", Num(s.q3_ms()));
  Set(out, "inner_count", Num(s.inner_count()));
  Set(out, "input_sets", Num(s.input_sets()));
  return out;
}

Struct RecordToRow(const v1::Record& r) {
  Struct row;
  Struct shape;
  Set(shape, "batch", Num(r.problem().shape().batch()));
  Set(shape, "length", Num(r.problem().shape().length()));
  Set(shape, "width", Num(r.problem().shape().width()));
  Set(row, "shape", Obj(std::move(shape)));
  Set(row, "architecture", Str(r.problem().op()));
  Set(row, "backend", Str(r.variant()));
  if (HasStats(r.fwd())) Set(row, "forward", Obj(StatsToStruct(r.fwd())));
  if (HasStats(r.bwd())) Set(row, "backward", Obj(StatsToStruct(r.bwd())));
  if (HasStats(r.fwd_bwd())) Set(row, "forward_backward", Obj(StatsToStruct(r.fwd_bwd())));
  if (r.rounds_size() > 0) {
    Value rounds;
    for (const v1::Round& round : r.rounds()) {
      Struct entry;
      Set(entry, "round", Num(round.round()));
      Set(entry, "order_index", Num(round.order_index()));
      Set(entry, "forward_ms", Numbers(round.fwd_ms()));
      Set(entry, "backward_ms", Numbers(round.bwd_ms()));
      Set(entry, "forward_backward_ms", Numbers(round.fwd_bwd_ms()));
      *rounds.mutable_list_value()->add_values() = Obj(std::move(entry));
    }
    Set(row, "rounds", std::move(rounds));
  }
  // The seed's allocator figures are the nearest names for our device memory.
  if (r.has_memory()) {
    Set(row, "baseline_allocated_bytes", Num(static_cast<double>(r.memory().baseline_bytes())));
    Set(row, "peak_allocated_bytes", Num(static_cast<double>(r.memory().peak_bytes())));
    Set(row, "peak_allocated_delta_bytes", Num(static_cast<double>(r.memory().delta_bytes())));
    Set(row, "workspace_bytes", Num(static_cast<double>(r.memory().workspace_bytes())));
  }
  Set(row, "parameters", Num(static_cast<double>(r.parameters())));
  Set(row, "dynamic_control_values_per_token", Num(r.dynamic_control_values_per_token()));
  Set(row, "materialized_state_sized_transition", Bool(r.materialized_state_sized_transition()));
  // Ours, where the seed has no field.
  Set(row, "record_id", Num(static_cast<double>(r.id())));
  Set(row, "state", Str(v1::ResultState_Name(r.state())));
  if (!r.detail().empty()) Set(row, "detail", Str(r.detail()));
  Set(row, "dtype", Str(v1::DType_Name(r.problem().dtype())));
  Set(row, "mode", Str(v1::Mode_Name(r.problem().mode())));
  Set(row, "has_h0", Bool(r.problem().has_h0()));
  Set(row, "rel_err", Num(r.rel_err()));
  Struct device;
  Set(device, "name", Str(r.device().name()));
  Set(device, "uuid", Str(r.device().uuid()));
  Set(device, "driver_version", Num(r.device().driver_version()));
  Set(device, "nvrtc_version", Str(r.device().nvrtc_version()));
  Set(row, "device", Obj(std::move(device)));
  Set(row, "source_hash", Str(r.source_hash()));
  Set(row, "daemon_version", Str(r.daemon_version()));
  Set(row, "origin", Str(r.origin()));
  Set(row, "created_at", Str(r.created_at()));
  Set(row, "compile_ms", Num(r.compile_ms()));
  // 64 bits: a string (a JSON number keeps 53).
  if (r.seed() != 0) Set(row, "input_seed", Str(std::to_string(r.seed())));
  Set(row, "bytes_moved", Num(static_cast<double>(r.bytes_moved())));
  Set(row, "gbps", Num(r.gbps()));
  Set(row, "pct_of_copy", Num(r.pct_of_copy()));
  return row;
}

// --- reading (import) ---------------------------------------------------------

const Value* Field(const Struct& s, const std::string& key) {
  auto it = s.fields().find(key);
  if (it == s.fields().end() || it->second.kind_case() == Value::kNullValue) return nullptr;
  return &it->second;
}
const Struct* ObjField(const Struct& s, const std::string& key) {
  const Value* v = Field(s, key);
  return v && v->kind_case() == Value::kStructValue ? &v->struct_value() : nullptr;
}
std::string StrField(const Struct& s, const std::string& key) {
  const Value* v = Field(s, key);
  return v && v->kind_case() == Value::kStringValue ? v->string_value() : std::string();
}
std::optional<double> NumField(const Struct& s, const std::string& key) {
  const Value* v = Field(s, key);
  if (v && v->kind_case() == Value::kNumberValue && std::isfinite(v->number_value())) return v->number_value();
  return std::nullopt;
}
double NumOr(const Struct& s, const std::string& key, double fallback = 0.0) {
  return NumField(s, key).value_or(fallback);
}
uint64_t CountOr(const Struct& s, const std::string& key) {
  double v = NumOr(s, key);
  return v > 0 && v < 1.8e19 ? static_cast<uint64_t>(v) : 0;
}
bool BoolField(const Struct& s, const std::string& key) {
  const Value* v = Field(s, key);
  return v && v->kind_case() == Value::kBoolValue && v->bool_value();
}

std::string Upper(std::string text) {
  for (char& c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return text;
}
bool Contains(const std::string& haystack, const char* needle) {
  return Upper(haystack).find(Upper(needle)) != std::string::npos;
}

// A shape dimension: a whole number in [0, 2^32).
StatusOr<uint32_t> Dim(const Struct& s, const std::string& key, const std::string& where) {
  std::optional<double> v = NumField(s, key);
  if (!v) return InvalidArgument(where + "." + key + " is missing or not a number");
  if (*v < 0 || *v > 4294967295.0 || std::floor(*v) != *v) {
    return InvalidArgument(where + "." + key + " is not a whole number in [0, 2^32)");
  }
  return static_cast<uint32_t>(*v);
}

StatusOr<std::vector<double>> NumberList(const Struct& s, const std::string& key, const std::string& where) {
  std::vector<double> out;
  const Value* v = Field(s, key);
  if (!v) return out;
  if (v->kind_case() != Value::kListValue) return InvalidArgument(where + "." + key + " is not an array");
  for (int i = 0; i < v->list_value().values_size(); ++i) {
    const Value& item = v->list_value().values(i);
    if (item.kind_case() != Value::kNumberValue) {
      return InvalidArgument(where + "." + key + "[" + std::to_string(i) + "] is not a number");
    }
    out.push_back(item.number_value());
  }
  return out;
}

// Free-text dtypes of the seeds' protocols ("BF16 autocast ...", "float32").
v1::DType DTypeFromText(const std::string& text) {
  v1::DType parsed;
  if (v1::DType_Parse(Upper(text), &parsed)) return parsed;
  if (Contains(text, "bf16") || Contains(text, "bfloat16")) return v1::BF16;
  if (Contains(text, "fp16") || Contains(text, "float16")) return v1::FP16;
  if (Contains(text, "fp32") || Contains(text, "float32")) return v1::FP32;
  return v1::DTYPE_UNSPECIFIED;
}

std::optional<v1::Mode> ModeFromText(const std::string& text) {
  v1::Mode parsed;
  if (!text.empty() && v1::Mode_Parse(Upper(text), &parsed)) return parsed;
  return std::nullopt;
}

// The seeds record failures as free text; the nearest state of ours.
v1::ResultState StateFromError(const std::string& error) {
  if (Contains(error, "out of memory") || Contains(error, "RESOURCE_EXHAUSTED")) return v1::OUT_OF_MEMORY;
  if (Contains(error, "timed out") || Contains(error, "timeout")) return v1::TIMEOUT;
  if (Contains(error, "illegal address")) return v1::ILLEGAL_ADDRESS;
  if (Contains(error, "compil")) return v1::COMPILE_FAILED;
  return v1::STATE_UNSPECIFIED;
}

Status ReadStats(const Struct& row, const std::string& key, const std::string& where, v1::Stats* stats) {
  const Struct* s = ObjField(row, key);
  if (!s) return Status::Ok();
  ASSIGN_OR_RETURN(std::vector<double> samples, NumberList(*s, "samples_ms", where + "." + key));
  for (double v : samples) stats->add_samples_ms(v);
  stats->set_median_ms(NumOr(*s, "median_ms"));
  stats->set_mean_ms(NumOr(*s, "mean_ms"));
  stats->set_std_ms(NumOr(*s, "std_ms"));
  stats->set_mad_ms(NumOr(*s, "mad_ms"));
  stats->set_min_ms(NumOr(*s, "minimum_ms", NumOr(*s, "min_ms")));
  stats->set_max_ms(NumOr(*s, "maximum_ms", NumOr(*s, "max_ms")));
  stats->set_q1_ms(NumOr(*s, "q1_ms"));
  stats->set_q3_ms(NumOr(*s, "q3_ms"));
  stats->set_inner_count(static_cast<int32_t>(NumOr(*s, "inner_count")));
  stats->set_input_sets(static_cast<int32_t>(NumOr(*s, "input_sets")));
  return Status::Ok();
}

// What the whole document says about every row.
struct DocContext {
  std::string device_name;
  v1::DType dtype = v1::DTYPE_UNSPECIFIED;
  std::string source_name;
};

v1::Record NewRecord(const DocContext& doc, const Struct& row) {
  v1::Record r;
  r.set_origin("imported");
  r.set_state(v1::OK);
  // Only name and uuid: without driver and NVRTC the fingerprint of an
  // imported record never equals a live device's, so imported failures can
  // never stop our tuner from trying a variant.
  r.mutable_device()->set_name(doc.device_name);
  if (const Struct* device = ObjField(row, "device")) {
    if (!StrField(*device, "name").empty()) r.mutable_device()->set_name(StrField(*device, "name"));
    r.mutable_device()->set_uuid(StrField(*device, "uuid"));
  }
  r.mutable_problem()->set_dtype(doc.dtype);
  return r;
}

std::string Provenance(const DocContext& doc, const std::string& where) {
  return "imported from " + (doc.source_name.empty() ? std::string("(unnamed)") : doc.source_name) + " " + where;
}

// A row of seed 001 (and of seed 000's cases, with the case's shape), or of
// our own export.
StatusOr<v1::Record> RowToRecord(const DocContext& doc, const Struct& row, const std::string& where,
                                 const std::optional<v1::Shape>& case_shape) {
  v1::Record r = NewRecord(doc, row);
  const std::string op = StrField(row, "architecture");
  if (op.empty()) return InvalidArgument(where + ".architecture is missing or not a string");
  r.mutable_problem()->set_op(op);
  const std::string backend = StrField(row, "backend");
  r.set_variant(backend.empty() ? op : backend);

  if (case_shape) {
    *r.mutable_problem()->mutable_shape() = *case_shape;
  } else {
    const Struct* shape = ObjField(row, "shape");
    if (!shape) return InvalidArgument(where + ".shape is missing or not an object");
    ASSIGN_OR_RETURN(uint32_t batch, Dim(*shape, "batch", where + ".shape"));
    ASSIGN_OR_RETURN(uint32_t length, Dim(*shape, "length", where + ".shape"));
    ASSIGN_OR_RETURN(uint32_t width, Dim(*shape, "width", where + ".shape"));
    r.mutable_problem()->mutable_shape()->set_batch(batch);
    r.mutable_problem()->mutable_shape()->set_length(length);
    r.mutable_problem()->mutable_shape()->set_width(width);
  }

  RETURN_IF_ERROR(ReadStats(row, "forward", where, r.mutable_fwd()));
  RETURN_IF_ERROR(ReadStats(row, "backward", where, r.mutable_bwd()));
  RETURN_IF_ERROR(ReadStats(row, "forward_backward", where, r.mutable_fwd_bwd()));
  // The seeds time all three modes and compare forward+backward; ours say which.
  if (auto mode = ModeFromText(StrField(row, "mode"))) {
    r.mutable_problem()->set_mode(*mode);
  } else if (HasStats(r.fwd_bwd())) {
    r.mutable_problem()->set_mode(v1::FWD_BWD);
  } else if (HasStats(r.bwd())) {
    r.mutable_problem()->set_mode(v1::BWD);
  } else if (HasStats(r.fwd())) {
    r.mutable_problem()->set_mode(v1::FWD);
  }
  if (!StrField(row, "dtype").empty()) r.mutable_problem()->set_dtype(DTypeFromText(StrField(row, "dtype")));
  r.mutable_problem()->set_has_h0(BoolField(row, "has_h0"));

  if (const Value* rounds = Field(row, "rounds")) {
    if (rounds->kind_case() != Value::kListValue) return InvalidArgument(where + ".rounds is not an array");
    for (int i = 0; i < rounds->list_value().values_size(); ++i) {
      const Value& item = rounds->list_value().values(i);
      const std::string at = where + ".rounds[" + std::to_string(i) + "]";
      if (item.kind_case() != Value::kStructValue) return InvalidArgument(at + " is not an object");
      const Struct& s = item.struct_value();
      v1::Round* round = r.add_rounds();
      round->set_round(static_cast<int32_t>(NumOr(s, "round")));
      round->set_order_index(static_cast<int32_t>(NumOr(s, "order_index")));
      ASSIGN_OR_RETURN(std::vector<double> fwd, NumberList(s, "forward_ms", at));
      ASSIGN_OR_RETURN(std::vector<double> bwd, NumberList(s, "backward_ms", at));
      ASSIGN_OR_RETURN(std::vector<double> fwd_bwd, NumberList(s, "forward_backward_ms", at));
      for (double v : fwd) round->add_fwd_ms(v);
      for (double v : bwd) round->add_bwd_ms(v);
      for (double v : fwd_bwd) round->add_fwd_bwd_ms(v);
    }
  }

  if (NumField(row, "peak_allocated_bytes") || NumField(row, "baseline_allocated_bytes")) {
    v1::Memory* memory = r.mutable_memory();
    memory->set_baseline_bytes(CountOr(row, "baseline_allocated_bytes"));
    memory->set_peak_bytes(CountOr(row, "peak_allocated_bytes"));
    memory->set_delta_bytes(CountOr(row, "peak_allocated_delta_bytes"));
    memory->set_workspace_bytes(CountOr(row, "workspace_bytes"));
  }
  r.set_parameters(CountOr(row, "parameters"));
  r.set_dynamic_control_values_per_token(static_cast<int32_t>(NumOr(row, "dynamic_control_values_per_token")));
  r.set_materialized_state_sized_transition(BoolField(row, "materialized_state_sized_transition"));

  std::string detail = StrField(row, "detail");
  if (const std::string state = StrField(row, "state"); !state.empty()) {
    v1::ResultState parsed;
    if (!v1::ResultState_Parse(Upper(state), &parsed)) {
      return InvalidArgument(where + ".state '" + state + "' is not a result state");
    }
    r.set_state(parsed);
  } else if (const std::string error = StrField(row, "error"); !error.empty()) {
    r.set_state(StateFromError(error));
    detail = error;
  }
  r.set_rel_err(NumOr(row, "rel_err"));
  r.set_source_hash(StrField(row, "source_hash"));
  r.set_daemon_version(StrField(row, "daemon_version"));
  r.set_created_at(StrField(row, "created_at"));
  r.set_compile_ms(NumOr(row, "compile_ms"));
  if (const std::string seed = StrField(row, "input_seed"); !seed.empty()) {
    uint64_t n = 0;
    const char* end = seed.data() + seed.size();
    auto [ptr, ec] = std::from_chars(seed.data(), end, n);
    if (ec != std::errc() || ptr != end) return InvalidArgument(where + ".input_seed '" + seed + "' is not a seed");
    r.set_seed(n);
  }
  r.set_bytes_moved(CountOr(row, "bytes_moved"));
  r.set_gbps(NumOr(row, "gbps"));
  r.set_pct_of_copy(NumOr(row, "pct_of_copy"));

  std::string origin = Provenance(doc, where);
  if (NumField(row, "record_id")) origin += " (record " + std::to_string(CountOr(row, "record_id")) + ")";
  r.set_detail(detail.empty() ? origin : detail + "; " + origin);
  return r;
}

// A result of seed 004: one implementation, one mode, quartiles only; or a
// failure (error), or a memory probe (kind device_peak / max_len).
StatusOr<v1::Record> ResultToRecord(const DocContext& doc, const Struct& row, const std::string& where) {
  v1::Record r = NewRecord(doc, row);
  const std::string impl = StrField(row, "impl");
  if (impl.empty()) return InvalidArgument(where + ".impl is missing or not a string");
  r.mutable_problem()->set_op(impl);
  r.set_variant(impl);
  const std::string mode_text = StrField(row, "mode");
  std::optional<v1::Mode> mode = ModeFromText(mode_text);
  if (!mode) return InvalidArgument(where + ".mode '" + mode_text + "' is not fwd, bwd or fwd_bwd");
  r.mutable_problem()->set_mode(*mode);

  const Struct* shape = ObjField(row, "shape");
  if (!shape) return InvalidArgument(where + ".shape is missing or not an object");
  ASSIGN_OR_RETURN(uint32_t batch, Dim(*shape, "batch", where + ".shape"));
  ASSIGN_OR_RETURN(uint32_t width, Dim(*shape, "dim", where + ".shape"));
  // A max_len probe has no seq: its length is the longest that ran.
  uint32_t length = 0;
  if (NumField(*shape, "seq")) {
    ASSIGN_OR_RETURN(length, Dim(*shape, "seq", where + ".shape"));
  } else if (NumField(row, "max_seq")) {
    ASSIGN_OR_RETURN(length, Dim(row, "max_seq", where));
  }
  r.mutable_problem()->mutable_shape()->set_batch(batch);
  r.mutable_problem()->mutable_shape()->set_length(length);
  r.mutable_problem()->mutable_shape()->set_width(width);

  v1::Stats* stats = *mode == v1::FWD ? r.mutable_fwd() : *mode == v1::BWD ? r.mutable_bwd() : r.mutable_fwd_bwd();
  stats->set_median_ms(NumOr(row, "median_ms"));
  stats->set_q1_ms(NumOr(row, "q1_ms"));
  stats->set_q3_ms(NumOr(row, "q3_ms"));
  stats->set_inner_count(static_cast<int32_t>(NumOr(row, "inner")));
  r.set_rel_err(NumOr(row, "rel_err_vs_scan"));
  r.set_compile_ms(NumOr(row, "compile_s") * 1000.0);
  const double peak_mb = NumOr(row, "peak_mb", NumOr(row, "peak_mb_at_max"));
  if (peak_mb > 0 || NumField(row, "xla_temp_mb")) {
    r.mutable_memory()->set_peak_bytes(static_cast<uint64_t>(peak_mb * kMiB));
    r.mutable_memory()->set_workspace_bytes(static_cast<uint64_t>(NumOr(row, "xla_temp_mb") * kMiB));
  }

  std::string detail;
  if (NumField(*shape, "state")) detail = "state=" + std::to_string(static_cast<int64_t>(NumOr(*shape, "state")));
  auto add = [&detail](const std::string& part) { detail += (detail.empty() ? "" : "; ") + part; };
  if (const std::string kind = StrField(row, "kind"); !kind.empty()) add("kind=" + kind);
  if (NumField(row, "limit")) add("limit=" + std::to_string(static_cast<int64_t>(NumOr(row, "limit"))));
  if (const std::string failure = StrField(row, "first_failure"); !failure.empty()) add("first failure: " + failure);
  if (const std::string error = StrField(row, "error"); !error.empty()) {
    r.set_state(StateFromError(error));
    add(error);
  }
  add(Provenance(doc, where));
  r.set_detail(detail);
  return r;
}

class Importer {
 public:
  explicit Importer(ImportedRecords* out) : out_(out) {}

  void Take(StatusOr<v1::Record> record) {
    if (record.ok()) {
      out_->records.push_back(std::move(*record));
      return;
    }
    ++out_->skipped;
    Warn("skipped " + record.status().message());
  }
  void Warn(const std::string& warning) {
    if (static_cast<int>(out_->warnings.size()) < kMaxImportWarnings) {
      out_->warnings.push_back(warning);
    } else {
      ++suppressed_;
    }
  }
  void Finish() {
    if (suppressed_ > 0) out_->warnings.push_back("... and " + std::to_string(suppressed_) + " more warnings");
  }

 private:
  ImportedRecords* out_;
  int suppressed_ = 0;
};

// The array under `key`, or nullptr; INVALID_ARGUMENT if it is something else.
StatusOr<const ListValue*> TopList(const Struct& doc, const char* key) {
  const Value* v = Field(doc, key);
  if (!v) return static_cast<const ListValue*>(nullptr);
  if (v->kind_case() != Value::kListValue) return InvalidArgument(std::string("field '") + key + "' is not an array");
  return &v->list_value();
}

}  // namespace

StatusOr<std::string> RecordsToSeedJson(const std::vector<v1::Record>& records) {
  Struct doc;
  Set(doc, "schema_version", Num(1));
  Struct protocol;
  Set(protocol, "scope", Str("scantune records, newest first"));
  Set(protocol, "format", Str(kFormatSeed001));
  Set(protocol, "exporter", Str("scantuned"));
  Set(protocol, "samples",
      Str("each sample is the mean of inner_count back-to-back launches between two CUDA events"));
  Set(protocol, "extra_fields",
      Str("record_id, state, detail, dtype, mode, has_h0, rel_err, device, source_hash, origin, created_at: "
          "scantune fields the seed schema has no name for"));
  Set(doc, "protocol", Obj(std::move(protocol)));
  // The seed has one device per file; an export may span several, so each row
  // names its own and the environment names the first (or "mixed").
  std::set<std::string> names;
  for (const v1::Record& r : records) names.insert(r.device().name());
  Struct environment;
  Set(environment, "gpu", Str(names.size() == 1 ? *names.begin() : names.empty() ? "" : "mixed"));
  Set(doc, "environment", Obj(std::move(environment)));
  Value rows;
  rows.mutable_list_value();  // an empty export still has rows: []
  for (const v1::Record& r : records) *rows.mutable_list_value()->add_values() = Obj(RecordToRow(r));
  Set(doc, "rows", std::move(rows));

  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  std::string json;
  auto status = google::protobuf::util::MessageToJsonString(doc, &json, options);
  if (!status.ok()) return Internal("printing the export: " + std::string(status.message()));
  return json;
}

StatusOr<ImportedRecords> RecordsFromSeedJson(const std::string& json, const std::string& source_name) {
  if (json.size() > kMaxImportJsonBytes) {
    return ResourceExhausted("import JSON is " + std::to_string(json.size()) + " bytes, over the limit of " +
                             std::to_string(kMaxImportJsonBytes) + " bytes (16 MiB); split it");
  }
  Struct doc;
  google::protobuf::util::JsonParseOptions options;
  auto parsed = google::protobuf::util::JsonStringToMessage(json, &doc, options);
  if (!parsed.ok()) {
    // The parser names the offending token and where it stands.
    return InvalidArgument("malformed JSON (a top-level object is expected): " + std::string(parsed.message()));
  }

  DocContext context;
  context.source_name = source_name;
  const Struct* environment = ObjField(doc, "environment");
  const Struct* device = ObjField(doc, "device");
  if (environment) context.device_name = StrField(*environment, "gpu");
  if (context.device_name.empty() && device) {
    context.device_name = StrField(*device, "gpu");
    if (context.device_name.empty()) context.device_name = StrField(*device, "device_kind");
  }
  const Struct* protocol = ObjField(doc, "protocol");
  const Struct* config = ObjField(doc, "config");
  if (protocol) context.dtype = DTypeFromText(StrField(*protocol, "dtype"));
  if (context.dtype == v1::DTYPE_UNSPECIFIED && config) context.dtype = DTypeFromText(StrField(*config, "dtype"));

  ASSIGN_OR_RETURN(const ListValue* rows, TopList(doc, "rows"));
  ASSIGN_OR_RETURN(const ListValue* cases, TopList(doc, "cases"));
  ASSIGN_OR_RETURN(const ListValue* results, TopList(doc, "results"));
  if (!rows && !cases && !results) {
    return InvalidArgument(
        "unknown layout: expected rows[] (seed 001 or a scantune export), cases[] (seed 000) or results[] "
        "(seed 004) at the top level");
  }

  ImportedRecords out;
  Importer importer(&out);
  if (context.device_name.empty()) importer.Warn("the file names no GPU (environment.gpu or device.gpu)");
  auto each_object = [&](const ListValue* list, const std::string& name, auto&& fn) {
    if (!list) return;
    for (int i = 0; i < list->values_size(); ++i) {
      const std::string where = name + "[" + std::to_string(i) + "]";
      const Value& item = list->values(i);
      if (item.kind_case() != Value::kStructValue) {
        importer.Take(InvalidArgument(where + " is not an object"));
        continue;
      }
      fn(item.struct_value(), where);
    }
  };
  each_object(rows, "rows", [&](const Struct& row, const std::string& where) {
    importer.Take(RowToRecord(context, row, where, std::nullopt));
  });
  each_object(cases, "cases", [&](const Struct& c, const std::string& case_where) {
    // Seed 000 gives the shape once per case; its rows share it.
    const Struct* case_config = ObjField(c, "config");
    StatusOr<uint32_t> batch = Dim(c, "batch", case_where);
    StatusOr<uint32_t> length = Dim(c, "length", case_where);
    StatusOr<uint32_t> width = case_config ? Dim(*case_config, "width", case_where + ".config")
                                           : StatusOr<uint32_t>(InvalidArgument(case_where + ".config is missing"));
    StatusOr<const ListValue*> case_rows = TopList(c, "rows");
    for (const Status& s : {batch.status(), length.status(), width.status(), case_rows.status()}) {
      if (!s.ok()) {
        importer.Take(s);
        return;
      }
    }
    v1::Shape shape;
    shape.set_batch(*batch);
    shape.set_length(*length);
    shape.set_width(*width);
    each_object(*case_rows, case_where + ".rows", [&](const Struct& row, const std::string& where) {
      StatusOr<v1::Record> record = RowToRecord(context, row, where, shape);
      if (record.ok() && !StrField(c, "case").empty()) {
        record->set_detail("case " + StrField(c, "case") + "; " + record->detail());
      }
      importer.Take(std::move(record));
    });
  });
  each_object(results, "results", [&](const Struct& row, const std::string& where) {
    importer.Take(ResultToRecord(context, row, where));
  });
  importer.Finish();
  return out;
}

}  // namespace scantune
