#include "client/cli.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <tuple>

#include <google/protobuf/util/json_util.h>

#include "client/plot.h"
#include "client/table_printer.h"
#include "common/file_util.h"
#include "common/problem.h"

namespace scantune {

struct Cli::Command {
  const char* name;
  const char* summary;
  std::function<void(ArgParser&)> flags;
  int (Cli::*run)(const ArgParser&);
};

namespace {

void AddProblemFlags(ArgParser& p) {
  p.AddFlag("op", "NAME", "operator: linear_scan (default), rglru, samu, selective_scan");
  p.AddFlag("shape", "BxLxW", "batch x length x width, e.g. 4x2048x2048 (selective_scan: W is D)");
  p.AddFlag("dtype", "fp32|bf16|fp16", "input/output dtype (the carry is always fp32)");
  p.AddFlag("mode", "fwd|bwd|fwd_bwd", "what is timed and ranked");
  p.AddBool("h0", "with an initial state h0 (B, W)");
  p.AddFlag("state", "N", "selective_scan: state size N, 8|16|32|64 (default 16)");
  p.AddBool("delta-bias", "selective_scan: delta += delta_bias (D)");
  p.AddBool("delta-softplus", "selective_scan: delta = softplus(delta)");
  p.AddBool("z-gate", "selective_scan: y *= silu(z)");
  p.AddFlag("device", "UUID", "device (default: the first)");
}

// The filter flags of a problem's key, shared by records, export and selections.
void AddKeyFilterFlags(ArgParser& p) {
  p.AddFlag("op", "NAME", "operator");
  p.AddFlag("shape", "BxLxW", "shape");
  p.AddFlag("dtype", "fp32|bf16|fp16", "dtype");
  p.AddFlag("mode", "fwd|bwd|fwd_bwd", "mode");
  p.AddFlag("variant", "NAME", "variant");
  p.AddFlag("device-model", "NAME", "device model, e.g. 'NVIDIA H200'");
}

// The filter flags of records and export.
void AddRecordFilterFlags(ArgParser& p) {
  AddKeyFilterFlags(p);
  p.AddFlag("state", "STATE", "OK, ILLEGAL_ADDRESS, TIMEOUT, WRONG_RESULT, ...");
  p.AddFlag("origin", "ORIGIN", "tuned, benchmark, retime or imported");
}

// A positive number flag up to `max`; `fallback` when it is not given.
StatusOr<int32_t> PositiveFlag(const ArgParser& args, const char* flag, int32_t fallback, int32_t max) {
  auto text = args.Get(flag);
  if (!text) return fallback;
  int32_t n = 0;
  auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), n);
  if (ec != std::errc() || end != text->data() + text->size() || n <= 0 || n > max) {
    return InvalidArgument(std::string("--") + flag + " needs a positive number up to " + std::to_string(max) +
                           ", got '" + *text + "'");
  }
  return n;
}

// --limit as a page size (records, selections) or a cap (export); 0: the daemon's default.
StatusOr<int32_t> LimitFlag(const ArgParser& args) { return PositiveFlag(args, "limit", 0, 1000000); }

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    if (!item.empty()) items.push_back(item);
  }
  return items;
}

StatusOr<v1::Shape> ShapeFlag(const std::string& text) {
  ASSIGN_OR_RETURN(Shape shape, ParseShape(text));
  constexpr int64_t kMax = std::numeric_limits<uint32_t>::max();
  if (shape.batch > kMax || shape.length > kMax || shape.width > kMax) {
    return InvalidArgument("shape '" + text + "' has a dimension beyond 2^32-1");
  }
  v1::Shape proto;
  proto.set_batch(static_cast<uint32_t>(shape.batch));
  proto.set_length(static_cast<uint32_t>(shape.length));
  proto.set_width(static_cast<uint32_t>(shape.width));
  return proto;
}

StatusOr<v1::DType> DTypeFlag(const std::string& text) {
  ASSIGN_OR_RETURN(DType dtype, ParseDType(text));
  return ToProto(dtype);
}

StatusOr<v1::Mode> ModeFlag(const std::string& text) {
  ASSIGN_OR_RETURN(Mode mode, ParseMode(text));
  return ToProto(mode);
}

// The operator is passed through unchecked: the daemon knows which it serves
// and says so. Shape, dtype and mode are parsed here because the wire needs
// numbers and enums.
StatusOr<v1::Problem> ProblemFlags(const ArgParser& args, const std::string& shape_text) {
  v1::Problem problem;
  problem.set_op(args.GetOr("op", "linear_scan"));
  if (shape_text.empty()) return InvalidArgument("--shape is required");
  ASSIGN_OR_RETURN(*problem.mutable_shape(), ShapeFlag(shape_text));
  auto dtype = args.Get("dtype");
  if (!dtype) return InvalidArgument("--dtype is required");
  ASSIGN_OR_RETURN(v1::DType d, DTypeFlag(*dtype));
  problem.set_dtype(d);
  auto mode = args.Get("mode");
  if (!mode) return InvalidArgument("--mode is required");
  ASSIGN_OR_RETURN(v1::Mode m, ModeFlag(*mode));
  problem.set_mode(m);
  problem.set_has_h0(args.GetBool("h0"));
  if (auto state = args.Get("state")) {
    uint32_t n = 0;
    auto [end, ec] = std::from_chars(state->data(), state->data() + state->size(), n);
    if (ec != std::errc() || end != state->data() + state->size()) {
      return InvalidArgument("--state must be a number (8, 16, 32 or 64), got '" + *state + "'");
    }
    problem.set_state_dim(n);
  }
  problem.set_delta_bias(args.GetBool("delta-bias"));
  problem.set_delta_softplus(args.GetBool("delta-softplus"));
  problem.set_z_gate(args.GetBool("z-gate"));
  return problem;
}

// The filter of records and export; INVALID_ARGUMENT for a bad value (a usage error).
StatusOr<v1::RecordFilter> RecordFilterFlags(const ArgParser& args) {
  v1::RecordFilter filter;
  filter.set_op(args.GetOr("op", ""));
  if (auto shape = args.Get("shape")) {
    ASSIGN_OR_RETURN(*filter.mutable_shape(), ShapeFlag(*shape));
  }
  if (auto dtype = args.Get("dtype")) {
    ASSIGN_OR_RETURN(v1::DType parsed, DTypeFlag(*dtype));
    filter.set_dtype(parsed);
  }
  if (auto mode = args.Get("mode")) {
    ASSIGN_OR_RETURN(v1::Mode parsed, ModeFlag(*mode));
    filter.set_mode(parsed);
  }
  filter.set_variant(args.GetOr("variant", ""));
  if (auto state = args.Get("state")) {
    v1::ResultState parsed;
    std::string upper = *state;
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (!v1::ResultState_Parse(upper, &parsed) || parsed == v1::STATE_UNSPECIFIED) {
      return InvalidArgument("unknown --state '" + *state + "' (OK, COMPILE_FAILED, ILLEGAL_ADDRESS, TIMEOUT, ...)");
    }
    filter.set_state(parsed);
  }
  filter.set_origin(args.GetOr("origin", ""));
  filter.set_device_model(args.GetOr("device-model", ""));
  return filter;
}

// The filter, --limit and --page-token of a paged listing (records, selections).
template <typename Request>
Status PagedListingFlags(const ArgParser& args, Request& request) {
  ASSIGN_OR_RETURN(*request.mutable_filter(), RecordFilterFlags(args));
  ASSIGN_OR_RETURN(const int32_t limit, LimitFlag(args));
  request.set_page_size(limit);
  request.set_page_token(args.GetOr("page-token", ""));
  return Status::Ok();
}

StatusOr<v1::MissPolicy> MissPolicyFlag(const std::string& text) {
  if (text == "not_found") return v1::NOT_FOUND;
  if (text == "nearest") return v1::NEAREST;
  if (text == "tune") return v1::TUNE_NOW;
  return InvalidArgument("--on-miss must be not_found, nearest or tune, got '" + text + "'");
}

std::string ShapeText(const v1::Shape& s) {
  return std::to_string(s.batch()) + "x" + std::to_string(s.length()) + "x" + std::to_string(s.width());
}

std::string Lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

std::string ProblemText(const v1::Problem& p) {
  std::string dtype = p.dtype() == v1::DTYPE_UNSPECIFIED ? "?" : Lower(v1::DType_Name(p.dtype()));
  std::string text = p.op() + " " + ShapeText(p.shape()) + " " + dtype + " " + Lower(v1::Mode_Name(p.mode()));
  if (p.has_h0()) text += " h0";
  if (p.op() == "selective_scan") text += " n" + std::to_string(p.state_dim() == 0 ? 16 : p.state_dim());
  if (p.delta_bias()) text += " +bias";
  if (p.delta_softplus()) text += " +softplus";
  if (p.z_gate()) text += " +z";
  return text;
}

std::string Ms(double value) { return TablePrinter::Fixed(value, 4); }

std::string Dim3(const google::protobuf::RepeatedField<uint32_t>& v) {
  std::string text;
  for (int i = 0; i < v.size(); ++i) text += (i ? "x" : "") + std::to_string(v[i]);
  return text.empty() ? "-" : text;
}

std::string Join(const google::protobuf::RepeatedField<double>& values, int digits) {
  std::string text;
  char buffer[64];
  for (int i = 0; i < values.size(); ++i) {
    std::snprintf(buffer, sizeof(buffer), "%.*f", digits, values[i]);
    text += (i ? " " : "") + std::string(buffer);
  }
  return text.empty() ? "-" : text;
}

std::string Num(double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.6g", value);
  return buffer;
}

// Two aligned columns: name, value.
void PrintFields(std::ostream& out, const std::vector<std::pair<std::string, std::string>>& fields,
                 const std::string& indent = "") {
  size_t width = 0;
  for (const auto& f : fields) width = std::max(width, f.first.size());
  for (const auto& [name, value] : fields) {
    out << indent << name << std::string(width - name.size() + 2, ' ') << value << "\n";
  }
}

}  // namespace

Cli::Cli(std::ostream& out, std::ostream& err) : out_(out), err_(err) {}
Cli::~Cli() = default;

const std::vector<Cli::Command>& Cli::Commands() {
  static const std::vector<Command> commands = {
      {"devices", "list the daemon's GPUs", [](ArgParser&) {}, &Cli::Devices},
      {"tune", "tune a problem now (live progress on stderr), print the selection",
       [](ArgParser& p) {
         AddProblemFlags(p);
         p.AddFlag("variants", "A,B,...", "only these variants (default: every one that can run the problem)");
         p.AddBool("force", "re-tune even if a fresh selection exists (with --variants: timed beside that selection)");
         p.AddBool("skip-unfit", "leave out the named variants that cannot run this problem (named in the progress)");
         p.AddBool("quiet", "no progress display");
       },
       &Cli::Tune},
      {"select", "the best legal variant for a problem",
       [](ArgParser& p) {
         AddProblemFlags(p);
         p.AddFlag("on-miss", "not_found|nearest|tune", "when the shape was never tuned (default not_found)");
         p.AddBool("deterministic", "only a variant whose outputs have the same bits on every run");
       },
       &Cli::Select},
      {"kernel", "the compiled kernel of a variant or the selection: launches, parameters, cubin",
       [](ArgParser& p) {
         AddProblemFlags(p);
         p.AddFlag("variant", "NAME", "this variant (default: the selection)");
         p.AddFlag("on-miss", "not_found|nearest|tune", "when no variant is named and none is selected");
         p.AddBool("deterministic", "without --variant: the deterministic selection");
         p.AddFlag("out", "FILE", "write the cubin to FILE");
       },
       &Cli::Kernel},
      {"bench", "remote benchmark: time named variants at the given shapes",
       [](ArgParser& p) {
         AddProblemFlags(p);
         p.AddFlag("shapes", "S1,S2,...", "shapes, e.g. 4x2048x2048,1x8192x2560 (or --shape)");
         p.AddFlag("variants", "A,B,...", "variants to time (required)");
         p.AddFlag("seed", "N", "draw the inputs from seed N, e.g. a record's seed, to repeat them (default: fresh)");
       },
       &Cli::Bench},
      {"records", "list benchmark records",
       [](ArgParser& p) {
         AddRecordFilterFlags(p);
         p.AddFlag("limit", "N", "records per page (default 100, at most 1000)");
         p.AddFlag("page-token", "T", "continue a listing");
       },
       &Cli::Records},
      {"selections", "every stored selection: what the database would serve for each problem",
       [](ArgParser& p) {
         AddKeyFilterFlags(p);
         p.AddBool("deterministic", "only the selections made among the deterministic variants");
         p.AddBool("history", "every decision ever made, newest first, replaced ones marked superseded");
         p.AddFlag("limit", "N", "selections per page (default 100, at most 1000)");
         p.AddFlag("page-token", "T", "continue a listing");
       },
       &Cli::Selections},
      {"plot", "one problem's variants as bars of their median (without --shape: the selections across shapes)",
       [](ArgParser& p) {
         AddProblemFlags(p);
         p.AddBool("deterministic", "without --shape: the deterministic selections");
         p.AddFlag("device-model", "NAME", "records of this device model (default: the newest record's)");
         p.AddFlag("top", "N", "the N fastest variants (default 30)");
         p.AddFlag("bar-width", "N", "characters of the longest bar (default 50)");
         p.AddFlag("svg", "FILE", "write the plot as an SVG file instead of printing it");
       },
       &Cli::Plot},
      {"export", "records as JSON in the seeds' schema (seed 001 plus scantune's fields)",
       [](ArgParser& p) {
         AddRecordFilterFlags(p);
         p.AddFlag("limit", "N", "at most N records, newest first (default 1000, at most 10000)");
         p.AddFlag("out", "FILE", "write the JSON to FILE instead of stdout");
       },
       &Cli::Export},
      {"import", "store a seed-schema JSON file (or an export) as imported records",
       [](ArgParser& p) {
         p.AddPositional("FILE", "JSON file: a scantune export or seed 000 / 001 / 004 schema");
         p.AddFlag("source", "NAME", "where the records came from (default: the file name)");
       },
       &Cli::Import},
      {"record", "one record with every field, samples included",
       [](ArgParser& p) { p.AddPositional("ID", "record id"); }, &Cli::Record},
      {"health", "check that the daemon is serving", [](ArgParser&) {}, &Cli::Health},
  };
  return commands;
}

void Cli::PrintUsage(std::ostream& out) const {
  out << "usage: scantune [--address ADDR] [--tls-ca PATH] [--token-file PATH] [--json] COMMAND [flags]\n\n"
         "  --address ADDR   daemon address (default $SCANTUNE_ADDRESS or unix:///tmp/scantune.sock)\n"
         "  --tls-ca PATH    a daemon with TLS: the PEM certificate of the CA that signed its certificate\n"
         "                   (default $SCANTUNE_TLS_CA)\n"
         "  --token-file PATH  its bearer token, the file's first token line (default $SCANTUNE_TOKEN_FILE)\n"
         "  --json           machine output: the RPC's response as protobuf JSON, one object per line\n\n"
         "commands:\n";
  for (const Command& c : Commands()) {
    out << "  " << c.name << std::string(12 - std::string(c.name).size(), ' ') << c.summary << "\n";
  }
  out << "\n'scantune COMMAND --help' shows a command's flags.\n";
}

int Cli::UsageError(const std::string& message) {
  err_ << "scantune" << (command_ ? std::string(" ") + command_->name : "") << ": " << message << "\n";
  if (command_ && parser_) {
    err_ << "usage: scantune " << command_->name << parser_->Synopsis() << "\n" << parser_->Help();
  } else {
    PrintUsage(err_);
  }
  return kExitUsage;
}

int Cli::RpcError(const char* what, const Status& status) {
  err_ << "scantune: " << what << " failed: " << StatusCodeName(status.code()) << ": " << status.message() << "\n";
  return kExitRpcError;
}

void Cli::PrintJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;  // a zero (cc_minor 0) is a value too
  std::string json;
  auto status = google::protobuf::util::MessageToJsonString(message, &json, options);
  if (!status.ok()) {
    err_ << "scantune: cannot print JSON: " << status.ToString() << "\n";
    return;
  }
  out_ << json << "\n";
}

int Cli::Run(const std::vector<std::string>& args) {
  // Global flags may come before or after the subcommand.
  std::vector<std::string> rest;
  const Command* command = nullptr;
  bool help = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--json") {
      json_ = true;
    } else if (arg == "--help" || arg == "-h") {
      help = true;
    } else if (arg == "--address") {
      if (i + 1 >= args.size()) return UsageError("--address needs a value");
      address_ = args[++i];
    } else if (arg.rfind("--address=", 0) == 0) {
      address_ = arg.substr(10);
    } else if (arg == "--tls-ca" || arg == "--token-file") {
      if (i + 1 >= args.size()) return UsageError(arg + " needs a value");
      (arg == "--tls-ca" ? tls_ca_file_ : token_file_) = args[++i];
    } else if (arg.rfind("--tls-ca=", 0) == 0) {
      tls_ca_file_ = arg.substr(9);
    } else if (arg.rfind("--token-file=", 0) == 0) {
      token_file_ = arg.substr(13);
    } else if (!command) {
      if (!arg.empty() && arg[0] == '-') return UsageError("unknown flag '" + arg + "'");
      for (const Command& c : Commands()) {
        if (arg == c.name) command = &c;
      }
      if (!command) return UsageError("unknown command '" + arg + "'");
    } else {
      rest.push_back(arg);
    }
  }
  if (!command) {
    if (help) {
      PrintUsage(out_);
      return kExitOk;
    }
    return UsageError("no command given");
  }
  ArgParser parser;
  command->flags(parser);
  command_ = command;
  parser_ = &parser;
  if (help) {
    out_ << "usage: scantune " << command->name << parser.Synopsis() << "\n" << command->summary << "\n"
         << parser.Help();
    return kExitOk;
  }
  if (Status st = parser.Parse(rest); !st.ok()) return UsageError(st.message());

  ClientOptions options;
  options.address = address_;
  options.tls_ca_file = tls_ca_file_;
  options.token_file = token_file_;
  client_ = std::make_unique<ScantuneClient>(options);
  if (!client_->status().ok()) {
    err_ << "scantune: " << client_->status().message() << "\n";
    return kExitUsage;
  }
  return (this->*(command->run))(parser);
}

int Cli::Health(const ArgParser&) {
  if (Status st = client_->CheckHealth(); !st.ok()) return RpcError("health check", st);
  if (json_) {
    out_ << "{\"status\":\"SERVING\"}\n";
  } else {
    out_ << "SERVING (" << client_->address() << (client_->tls() ? ", TLS" : "") << ")\n";
  }
  return kExitOk;
}

int Cli::Devices(const ArgParser&) {
  StatusOr<v1::ListDevicesResponse> devices = client_->ListDevices();
  if (!devices.ok()) return RpcError("devices", devices.status());
  if (json_) {
    PrintJson(*devices);
    return kExitOk;
  }
  if (devices->devices_size() == 0) {
    const std::string& note = devices->note();
    out_ << (note.rfind("no GPU", 0) == 0 ? note : "no GPU" + (note.empty() ? "" : ": " + note)) << "\n";
    return kExitOk;
  }
  TablePrinter table({"ordinal", "name", "uuid", "cc", "SMs", "memory GiB", "SM MHz", "mem MHz", "L2 MiB",
                      "copy GB/s", "driver", "nvrtc"});
  for (const v1::DeviceInfo& d : devices->devices()) {
    table.AddRow({std::to_string(d.ordinal()), d.name(), d.uuid(),
                  std::to_string(d.cc_major()) + "." + std::to_string(d.cc_minor()), std::to_string(d.sm_count()),
                  TablePrinter::Fixed(d.memory_bytes() / double(1ull << 30), 1),
                  std::to_string(d.sm_clock_khz() / 1000), std::to_string(d.memory_clock_khz() / 1000),
                  TablePrinter::Fixed(d.l2_bytes() / double(1 << 20), 1), TablePrinter::Fixed(d.copy_gbps(), 0),
                  std::to_string(d.driver_version()),
                  d.nvrtc_version()});
  }
  table.Print(out_);
  if (!devices->note().empty()) out_ << devices->note() << "\n";
  return kExitOk;
}

void Cli::PrintSelection(const v1::Selection& s) {
  std::string flags;
  if (s.stale()) flags += "STALE (tuned under another driver/NVRTC/kernel source) ";
  if (s.nearest()) flags += "NEAREST (tuned at " + ShapeText(s.tuned_shape()) + ") ";
  if (s.deterministic()) {
    if (flags.empty()) flags = "fresh ";
    flags += "DETERMINISTIC (chosen among the variants whose outputs have the same bits every run)";
  }
  PrintFields(out_, {
                        {"device", s.device_model()},
                        {"problem", ProblemText(s.problem())},
                        {"variant", s.variant()},
                        {"median ms", Ms(s.median_ms())},
                        {"runner-up", s.runner_up().empty() ? "-" : s.runner_up()},
                        {"margin %", TablePrinter::Fixed(s.margin_pct(), 2)},
                        {"decided by", s.decided_by().empty() ? "-" : s.decided_by()},
                        {"record", std::to_string(s.record_id())},
                        {"updated at", s.updated_at()},
                        {"fingerprint", s.fingerprint()},
                        {"flags", flags.empty() ? "fresh" : flags},
                    });
}

int Cli::Tune(const ArgParser& args) {
  StatusOr<v1::Problem> problem = ProblemFlags(args, args.GetOr("shape", ""));
  if (!problem.ok()) return UsageError(problem.status().message());
  v1::TuneRequest request;
  *request.mutable_problem() = *problem;
  request.set_device_uuid(args.GetOr("device", ""));
  for (const std::string& v : SplitList(args.GetOr("variants", ""))) request.add_variants(v);
  request.set_force(args.GetBool("force"));
  request.set_skip_unfit(args.GetBool("skip-unfit"));

  const bool quiet = args.GetBool("quiet");
  const bool tty = isatty(STDERR_FILENO);
  bool line_open = false;
  auto show = [&](const v1::TuneProgress& p) {
    if (quiet) return;
    std::string stage = v1::TuneProgress::Stage_Name(p.stage());
    char counter[32];
    std::snprintf(counter, sizeof(counter), "%d/%d", p.done(), p.total());
    std::string line = "[" + stage + std::string(stage.size() < 9 ? 9 - stage.size() : 0, ' ') + " " + counter +
                       "]";
    if (!p.variant().empty()) line += " " + p.variant();
    bool finished_candidate = p.state() != v1::STATE_UNSPECIFIED;
    if (finished_candidate) line += " " + v1::ResultState_Name(p.state());
    if (p.median_ms() > 0) line += " " + Ms(p.median_ms()) + " ms";
    if (!p.message().empty()) line += "  " + p.message();
    if (tty) {
      // The running candidate overwrites one status line; finished ones and
      // stage changes stay in the scrollback.
      err_ << "\r\033[K" << line;
      line_open = true;
      if (finished_candidate || p.stage() == v1::TuneProgress::DONE || p.stage() == v1::TuneProgress::FAILED) {
        err_ << "\n";
        line_open = false;
      }
      err_.flush();
    } else {
      err_ << line << "\n";
    }
  };
  StatusOr<v1::Selection> selection = client_->Tune(request, show);
  if (line_open) err_ << "\n";
  if (!selection.ok()) return RpcError("tune", selection.status());
  if (json_) {
    PrintJson(*selection);
  } else {
    PrintSelection(*selection);
  }
  return kExitOk;
}

int Cli::Select(const ArgParser& args) {
  StatusOr<v1::Problem> problem = ProblemFlags(args, args.GetOr("shape", ""));
  if (!problem.ok()) return UsageError(problem.status().message());
  v1::SelectRequest request;
  *request.mutable_problem() = *problem;
  request.set_device_uuid(args.GetOr("device", ""));
  StatusOr<v1::MissPolicy> policy = MissPolicyFlag(args.GetOr("on-miss", "not_found"));
  if (!policy.ok()) return UsageError(policy.status().message());
  request.set_on_miss(*policy);
  request.set_deterministic(args.GetBool("deterministic"));
  StatusOr<v1::Selection> selection = client_->Select(request);
  if (!selection.ok()) return RpcError("select", selection.status());
  if (json_) {
    PrintJson(*selection);
  } else {
    PrintSelection(*selection);
  }
  return kExitOk;
}

int Cli::Kernel(const ArgParser& args) {
  StatusOr<v1::Problem> problem = ProblemFlags(args, args.GetOr("shape", ""));
  if (!problem.ok()) return UsageError(problem.status().message());
  v1::GetKernelRequest request;
  *request.mutable_problem() = *problem;
  request.set_variant(args.GetOr("variant", ""));
  request.set_device_uuid(args.GetOr("device", ""));
  StatusOr<v1::MissPolicy> policy = MissPolicyFlag(args.GetOr("on-miss", "not_found"));
  if (!policy.ok()) return UsageError(policy.status().message());
  request.set_on_miss(*policy);
  request.set_deterministic(args.GetBool("deterministic"));
  StatusOr<v1::KernelResponse> kernel = client_->GetKernel(request);
  if (!kernel.ok()) return RpcError("kernel", kernel.status());
  if (auto out = args.Get("out")) {
    std::ofstream file(*out, std::ios::binary | std::ios::trunc);
    file.write(kernel->cubin().data(), static_cast<std::streamsize>(kernel->cubin().size()));
    if (!file.good()) {
      err_ << "scantune: cannot write " << *out << "\n";
      return kExitRpcError;
    }
  }
  if (json_) {
    PrintJson(*kernel);
    return kExitOk;
  }
  const v1::Problem& served = kernel->problem();
  PrintFields(out_, {
                        {"variant", kernel->variant()},
                        {"problem", served.op() + " " + ShapeText(served.shape()) + " " +
                                        Lower(v1::DType_Name(served.dtype())) + " " +
                                        Lower(v1::Mode_Name(served.mode())) + " (the launches run this shape only)"},
                        {"arch", kernel->arch()},
                        {"cubin bytes", std::to_string(kernel->cubin().size()) +
                                            (args.Has("out") ? " (written to " + *args.Get("out") + ")" : "")},
                        {"source hash", kernel->source_hash()},
                        {"params bytes", std::to_string(kernel->params_size_bytes())},
                        {"workspace bytes", std::to_string(kernel->workspace_bytes())},
                        {"workspace zeroed", std::to_string(kernel->workspace_zero_bytes()) +
                                                 (kernel->workspace_zero_once()
                                                      ? " bytes once, at allocation (kept between launches)"
                                                      : " bytes before each phase")},
                    });
  if (kernel->has_selection()) out_ << "selection: record " << kernel->selection().record_id() << "\n";
  out_ << "\nlaunches (in order):\n";
  TablePrinter launches({"#", "phase", "entry", "name expression", "grid", "block", "shared B", "PDL", "cluster"});
  int index = 0;
  for (const v1::KernelLaunch& l : kernel->launches()) {
    launches.AddRow({std::to_string(index++), l.phase(), l.entry(), l.name_expression(), Dim3(l.grid()),
                     Dim3(l.block()), std::to_string(l.shared_bytes()), l.dependent_launch() ? "yes" : "no",
                     l.cluster_x() > 1 ? std::to_string(l.cluster_x()) : "-"});
  }
  launches.Print(out_);
  out_ << "\nparameter struct (passed by value):\n";
  TablePrinter params({"offset", "size", "type", "name", "meaning"});
  for (const v1::ParamField& f : kernel->params()) {
    params.AddRow({std::to_string(f.offset_bytes()), std::to_string(f.size_bytes()), f.type(), f.name(), f.meaning()});
  }
  params.Print(out_);
  return kExitOk;
}

void Cli::PrintRecordTable(const google::protobuf::RepeatedPtrField<v1::Record>& records) {
  TablePrinter table({"id", "op", "variant", "state", "shape", "dtype", "mode", "fwd ms", "bwd ms", "fwd_bwd ms",
                      "GB/s", "% of copy", "rel_err", "created_at"});
  for (const v1::Record& r : records) {
    char rel_err[32];
    std::snprintf(rel_err, sizeof(rel_err), "%.2e", r.rel_err());
    table.AddRow({std::to_string(r.id()), r.problem().op(), r.variant(), v1::ResultState_Name(r.state()),
                  ShapeText(r.problem().shape()), Lower(v1::DType_Name(r.problem().dtype())),
                  Lower(v1::Mode_Name(r.problem().mode())), Ms(r.fwd().median_ms()), Ms(r.bwd().median_ms()),
                  Ms(r.fwd_bwd().median_ms()), TablePrinter::Fixed(r.gbps(), 1),
                  TablePrinter::Fixed(r.pct_of_copy(), 1), r.state() == v1::OK ? rel_err : "-", r.created_at()});
  }
  table.Print(out_);
}

int Cli::Bench(const ArgParser& args) {
  std::string shapes = args.GetOr("shapes", args.GetOr("shape", ""));
  if (shapes.empty()) return UsageError("--shapes is required");
  std::vector<std::string> variants = SplitList(args.GetOr("variants", ""));
  if (variants.empty()) return UsageError("--variants is required");
  v1::BenchmarkRequest request;
  for (const std::string& shape : SplitList(shapes)) {
    StatusOr<v1::Problem> problem = ProblemFlags(args, shape);
    if (!problem.ok()) return UsageError(problem.status().message());
    *request.add_problems() = *problem;
  }
  for (const std::string& v : variants) request.add_variants(v);
  request.set_device_uuid(args.GetOr("device", ""));
  if (auto seed = args.Get("seed")) {
    uint64_t n = 0;
    const char* end = seed->data() + seed->size();
    auto [ptr, ec] = std::from_chars(seed->data(), end, n);
    if (ec != std::errc() || ptr != end || n == 0) {
      return UsageError("--seed needs a positive integer below 2^64, got '" + *seed + "'");
    }
    request.set_seed(n);
  }
  StatusOr<v1::BenchmarkResponse> response = client_->Benchmark(request);
  if (!response.ok()) return RpcError("bench", response.status());
  if (json_) {
    PrintJson(*response);
  } else {
    PrintRecordTable(response->records());
  }
  return kExitOk;
}

int Cli::Records(const ArgParser& args) {
  v1::ListRecordsRequest request;
  if (Status flags = PagedListingFlags(args, request); !flags.ok()) return UsageError(flags.message());
  StatusOr<v1::ListRecordsResponse> response = client_->ListRecords(request);
  if (!response.ok()) return RpcError("records", response.status());
  if (json_) {
    PrintJson(*response);
    return kExitOk;
  }
  PrintRecordTable(response->records());
  if (!response->next_page_token().empty()) {
    err_ << "more records: --page-token " << response->next_page_token() << "\n";
  }
  return kExitOk;
}

int Cli::Selections(const ArgParser& args) {
  v1::ListSelectionsRequest request;
  if (Status flags = PagedListingFlags(args, request); !flags.ok()) return UsageError(flags.message());
  request.set_deterministic_only(args.GetBool("deterministic"));
  request.set_history(args.GetBool("history"));
  StatusOr<v1::ListSelectionsResponse> response = client_->ListSelections(request);
  if (!response.ok()) return RpcError("selections", response.status());
  if (json_) {
    PrintJson(*response);
    return kExitOk;
  }
  if (response->selections_size() == 0) {
    out_ << "no selections match (tune a problem to make one)\n";
    return kExitOk;
  }
  // The page in reading order: device, operator, dtype, mode, then shape (the
  // history keeps its order, newest first).
  std::vector<const v1::Selection*> rows;
  for (const v1::Selection& s : response->selections()) rows.push_back(&s);
  auto key = [](const v1::Selection* s) {
    const v1::Problem& p = s->problem();
    return std::make_tuple(s->device_model(), p.op(), static_cast<int>(p.dtype()), static_cast<int>(p.mode()),
                           p.state_dim(), p.shape().batch(), p.shape().length(), p.shape().width(), p.has_h0(),
                           p.delta_bias(), p.delta_softplus(), p.z_gate(), s->deterministic());
  };
  if (!request.history()) std::stable_sort(rows.begin(), rows.end(), [&](auto* a, auto* b) { return key(a) < key(b); });
  TablePrinter table({"device", "problem", "kind", "variant", "median ms", "margin %", "decided by", "record",
                      "updated at", "state"});
  for (const v1::Selection* s : rows) {
    table.AddRow({s->device_model(), ProblemText(s->problem()), s->deterministic() ? "deterministic" : "fastest",
                  s->variant(), Ms(s->median_ms()), TablePrinter::Fixed(s->margin_pct(), 2),
                  s->decided_by().empty() ? "-" : s->decided_by(), std::to_string(s->record_id()), s->updated_at(),
                  std::string(s->stale() ? "STALE" : "fresh") + (s->superseded() ? ", superseded" : "")});
  }
  table.Print(out_);
  if (!response->next_page_token().empty()) {
    err_ << "more selections: --page-token " << response->next_page_token() << "\n";
  }
  return kExitOk;
}

int Cli::Plot(const ArgParser& args) {
  if (json_) return UsageError("plot draws; its data as JSON: records --json and selections --json");
  // Without --shape: every selection of the problem's other fields, one bar per shape.
  const bool across_shapes = !args.Get("shape").has_value();
  StatusOr<v1::Problem> problem = ProblemFlags(args, args.GetOr("shape", "1x1x1"));
  if (!problem.ok()) return UsageError(problem.status().message());
  if (across_shapes) problem->clear_shape();
  StatusOr<int32_t> top = PositiveFlag(args, "top", 30, 10000);
  if (!top.ok()) return UsageError(top.status().message());
  StatusOr<int32_t> bar_width = PositiveFlag(args, "bar-width", 50, 1000);
  if (!bar_width.ok()) return UsageError(bar_width.status().message());

  v1::RecordFilter filter;
  filter.set_op(problem->op());
  if (!across_shapes) *filter.mutable_shape() = problem->shape();
  filter.set_dtype(problem->dtype());
  filter.set_mode(problem->mode());
  filter.set_device_model(args.GetOr("device-model", ""));
  if (across_shapes) return PlotSelections(args, *problem, filter, *bar_width);
  // Newest first, as CandidatePlot wants them; a bounded number of pages.
  constexpr int kMaxPages = 10;
  std::vector<v1::Record> records;
  v1::ListRecordsRequest list;
  *list.mutable_filter() = filter;
  list.mutable_filter()->set_state(v1::OK);
  list.set_page_size(1000);
  for (int page = 0; page < kMaxPages; ++page) {
    StatusOr<v1::ListRecordsResponse> response = client_->ListRecords(list);
    if (!response.ok()) return RpcError("plot", response.status());
    records.insert(records.end(), response->records().begin(), response->records().end());
    if (response->next_page_token().empty()) break;
    list.set_page_token(response->next_page_token());
  }
  v1::ListSelectionsRequest select;
  *select.mutable_filter() = filter;
  select.set_page_size(1000);
  StatusOr<v1::ListSelectionsResponse> selections = client_->ListSelections(select);
  if (!selections.ok()) return RpcError("plot", selections.status());

  BarPlot plot = CandidatePlot(*problem, filter.device_model(), records,
                               {selections->selections().begin(), selections->selections().end()}, *top);
  plot.title = ProblemText(*problem) + " on " + (plot.device_model.empty() ? "-" : plot.device_model) + ": " +
               Lower(v1::Mode_Name(problem->mode())) + " median of each variant's newest OK record";
  return DrawPlot(args, plot, *bar_width);
}

int Cli::PlotSelections(const ArgParser& args, const v1::Problem& problem, const v1::RecordFilter& filter,
                        int bar_width) {
  v1::ListSelectionsRequest request;
  *request.mutable_filter() = filter;
  request.set_deterministic_only(args.GetBool("deterministic"));
  request.set_page_size(1000);
  StatusOr<v1::ListSelectionsResponse> response = client_->ListSelections(request);
  if (!response.ok()) return RpcError("plot", response.status());
  std::vector<v1::Selection> selections;
  std::vector<v1::Record> winners;
  std::string model = filter.device_model();
  for (const v1::Selection& s : response->selections()) {
    v1::Problem same = problem;
    *same.mutable_shape() = s.problem().shape();
    if (s.deterministic() != args.GetBool("deterministic") || !SameProblem(s.problem(), same)) continue;
    if (model.empty()) model = s.device_model();
    if (s.device_model() != model) continue;
    StatusOr<v1::Record> winner = client_->GetRecord(s.record_id());
    if (!winner.ok()) return RpcError("plot", winner.status());
    selections.push_back(s);
    winners.push_back(*std::move(winner));
  }
  BarPlot plot = SelectionPlot(selections, winners);
  std::string what = ProblemText(problem);  // the shape field is cleared: "op 0x0x0 dtype mode ..."
  what.replace(what.find(" 0x0x0"), 6, " (every shape)");
  plot.title = what + " on " + (model.empty() ? "-" : model) + ": the " +
               (args.GetBool("deterministic") ? "deterministic selections" : "selections") + ", " +
               Lower(v1::Mode_Name(problem.mode())) + " median of each winning record";
  return DrawPlot(args, plot, bar_width);
}

int Cli::DrawPlot(const ArgParser& args, const BarPlot& plot, int bar_width) {
  if (auto svg = args.Get("svg")) {
    std::ofstream file(*svg, std::ios::binary | std::ios::trunc);
    file << RenderSvg(plot);
    if (!file.good()) {
      err_ << "scantune: cannot write " << *svg << "\n";
      return kExitRpcError;
    }
    err_ << plot.bars.size() << " bars plotted to " << *svg << "\n";
    return kExitOk;
  }
  out_ << RenderText(plot, bar_width);
  return kExitOk;
}

int Cli::Export(const ArgParser& args) {
  v1::ExportRequest request;
  StatusOr<v1::RecordFilter> filter = RecordFilterFlags(args);
  if (!filter.ok()) return UsageError(filter.status().message());
  *request.mutable_filter() = *filter;
  request.set_format("seed001");
  StatusOr<int32_t> limit = LimitFlag(args);
  if (!limit.ok()) return UsageError(limit.status().message());
  request.set_max_records(*limit);
  StatusOr<v1::ExportResponse> response = client_->Export(request);
  if (!response.ok()) return RpcError("export", response.status());
  if (auto out = args.Get("out")) {
    std::ofstream file(*out, std::ios::binary | std::ios::trunc);
    file << response->json();
    if (!file.good()) {
      err_ << "scantune: cannot write " << *out << "\n";
      return kExitRpcError;
    }
    err_ << response->records() << " records written to " << *out << "\n";
    return kExitOk;
  }
  // The export is JSON already; --json changes nothing.
  out_ << response->json() << "\n";
  return kExitOk;
}

int Cli::Import(const ArgParser& args) {
  const std::string& path = args.positionals().at(0);
  StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) return UsageError(text.status().message());
  v1::ImportRequest request;
  request.set_json(*text);
  std::string source = args.GetOr("source", "");
  if (source.empty()) source = path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1);
  request.set_source_name(source);
  StatusOr<v1::ImportResponse> response = client_->Import(request);
  if (!response.ok()) return RpcError("import", response.status());
  if (json_) {
    PrintJson(*response);
    return kExitOk;
  }
  out_ << "imported " << response->imported() << " records, skipped " << response->skipped() << " rows\n";
  for (const std::string& w : response->warnings()) out_ << "warning: " << w << "\n";
  return kExitOk;
}

void Cli::PrintRecordDetail(const v1::Record& r) {
  const v1::DeviceInfo& d = r.device();
  PrintFields(out_, {
                        {"id", std::to_string(r.id())},
                        {"variant", r.variant()},
                        {"state", v1::ResultState_Name(r.state())},
                        {"detail", r.detail().empty() ? "-" : r.detail()},
                        {"problem", ProblemText(r.problem())},
                        {"origin", r.origin()},
                        {"job id", std::to_string(r.job_id())},
                        {"seed", r.seed() != 0 ? std::to_string(r.seed()) + " (bench --seed repeats its inputs)" : "-"},
                        {"created at", r.created_at()},
                        {"source hash", r.source_hash()},
                        {"daemon version", r.daemon_version()},
                        {"compile ms", Num(r.compile_ms())},
                        {"rel_err", Num(r.rel_err())},
                        {"bytes moved", std::to_string(r.bytes_moved())},
                        {"GB/s", Num(r.gbps())},
                        {"% of copy", Num(r.pct_of_copy())},
                        {"parameters", std::to_string(r.parameters())},
                        {"dynamic control values/token", std::to_string(r.dynamic_control_values_per_token())},
                        {"materialized state-sized transition", r.materialized_state_sized_transition() ? "yes" : "no"},
                    });
  out_ << "device:\n";
  PrintFields(out_,
              {
                  {"name", d.name()},
                  {"uuid", d.uuid()},
                  {"ordinal", std::to_string(d.ordinal())},
                  {"compute capability", std::to_string(d.cc_major()) + "." + std::to_string(d.cc_minor())},
                  {"SMs", std::to_string(d.sm_count())},
                  {"memory bytes", std::to_string(d.memory_bytes())},
                  {"SM clock kHz", std::to_string(d.sm_clock_khz())},
                  {"memory clock kHz", std::to_string(d.memory_clock_khz())},
                  {"memory bus bits", std::to_string(d.memory_bus_width_bits())},
                  {"L2 bytes", std::to_string(d.l2_bytes())},
                  {"max shared/block bytes", std::to_string(d.max_shared_per_block_bytes())},
                  {"max registers/block", std::to_string(d.max_registers_per_block())},
                  {"driver", std::to_string(d.driver_version())},
                  {"nvrtc", d.nvrtc_version()},
                  {"copy GB/s", Num(d.copy_gbps())},
              },
              "  ");
  out_ << "memory:\n";
  PrintFields(out_,
              {
                  {"baseline bytes", std::to_string(r.memory().baseline_bytes())},
                  {"peak bytes", std::to_string(r.memory().peak_bytes())},
                  {"delta bytes", std::to_string(r.memory().delta_bytes())},
                  {"workspace bytes", std::to_string(r.memory().workspace_bytes())},
              },
              "  ");
  auto stats = [&](const char* mode, const v1::Stats& s) {
    if (s.samples_ms_size() == 0 && s.median_ms() == 0) return;
    out_ << mode << " (ms):\n";
    PrintFields(out_,
                {
                    {"median", Num(s.median_ms())},
                    {"mean", Num(s.mean_ms())},
                    {"std", Num(s.std_ms())},
                    {"MAD", Num(s.mad_ms())},
                    {"min", Num(s.min_ms())},
                    {"max", Num(s.max_ms())},
                    {"q1", Num(s.q1_ms())},
                    {"q3", Num(s.q3_ms())},
                    {"inner count", std::to_string(s.inner_count())},
                    {"input sets", std::to_string(s.input_sets())},
                    {"samples", Join(s.samples_ms(), 5)},
                },
                "  ");
  };
  stats("fwd", r.fwd());
  stats("bwd", r.bwd());
  stats("fwd_bwd", r.fwd_bwd());
  if (r.rounds_size() > 0) {
    out_ << "rounds:\n";
    TablePrinter rounds({"round", "order", "fwd ms", "bwd ms", "fwd_bwd ms"});
    for (const v1::Round& round : r.rounds()) {
      rounds.AddRow({std::to_string(round.round()), std::to_string(round.order_index()), Join(round.fwd_ms(), 5),
                     Join(round.bwd_ms(), 5), Join(round.fwd_bwd_ms(), 5)});
    }
    rounds.Print(out_);
  }
}

int Cli::Record(const ArgParser& args) {
  const std::string& text = args.positionals().at(0);
  char* end = nullptr;
  long long id = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0') return UsageError("record ID must be a number, got '" + text + "'");
  StatusOr<v1::Record> record = client_->GetRecord(id);
  if (!record.ok()) return RpcError("record", record.status());
  if (json_) {
    PrintJson(*record);
  } else {
    PrintRecordDetail(*record);
  }
  return kExitOk;
}

}  // namespace scantune
