#include "bench/ssm/bench_runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

#include "bench/ssm/direct_run.h"
#include "bench/ssm/families.h"
#include "bench/ssm/fresh_process.h"
#include "client/scantune_client.h"
#include "common/log.h"
#include "common/variant.h"
#include "compiler/plan.h"
#include "worker/cuda_driver.h"
#include "worker/gpu_context.h"
#include "worker/op_io.h"

namespace scantune::ssmbench {
namespace {

using Clock = std::chrono::steady_clock;
double SecondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// --deadline-s: past it, what is left is skipped (and says so in its row), so
// that a bounded GPU session still gets its JSON.
struct Budget {
  Clock::time_point start = Clock::now();
  double deadline_s = 0;  // 0: none
  bool Over() const { return deadline_s > 0 && SecondsSince(start) > deadline_s; }
  std::string Why() const { return "skipped: past --deadline-s " + std::to_string(static_cast<int>(deadline_s)); }
};

std::string Fixed(double v, int digits) {
  char b[64];
  std::snprintf(b, sizeof(b), "%.*f", digits, v);
  return b;
}

// The selective_scan problem this bench asks about, as a record holds it.
bool IsOurProblem(const v1::Problem& p, int64_t state) {
  const int64_t n = p.state_dim() == 0 ? 16 : p.state_dim();
  return n == state && !p.has_h0() && !p.delta_bias() && !p.delta_softplus() && !p.z_gate();
}

// Row order: shape by shape (as given), fwd before fwd_bwd, families in seed order.
void AppendRows(std::vector<Row> rows, std::vector<Row>* out) {
  for (Row& r : rows) out->push_back(std::move(r));
}

// ------------------------------------------------------------------ daemon

class Daemon {
 public:
  explicit Daemon(const SsmOptions& o) : client_([&] {
    ClientOptions c;
    c.address = o.address;
    c.deadline = std::chrono::seconds(600);  // GetKernel of a long max_len shape compiles nothing but plans
    return c;
  }()) {}

  ScantuneClient& client() { return client_; }
  std::string uuid;

  // Every stored record of the problem (not imported ones), all pages.
  StatusOr<std::vector<v1::Record>> Records(const SsmShape& shape, Mode mode) {
    v1::ListRecordsRequest req;
    v1::RecordFilter* f = req.mutable_filter();
    f->set_op("selective_scan");
    f->mutable_shape()->set_batch(static_cast<uint32_t>(shape.batch));
    f->mutable_shape()->set_length(static_cast<uint32_t>(shape.seq));
    f->mutable_shape()->set_width(static_cast<uint32_t>(shape.dim));
    f->set_dtype(v1::FP32);
    f->set_mode(ToProto(mode));
    req.set_page_size(1000);
    std::vector<v1::Record> out;
    while (true) {
      ASSIGN_OR_RETURN(v1::ListRecordsResponse page, client_.ListRecords(req));
      for (v1::Record& r : *page.mutable_records()) {
        if (r.origin() == "imported" || !IsOurProblem(r.problem(), shape.state)) continue;
        if (!uuid.empty() && r.device().uuid() != uuid) continue;
        out.push_back(std::move(r));
      }
      if (page.next_page_token().empty()) break;
      req.set_page_token(page.next_page_token());
    }
    return out;
  }

  // The variant's cubin and plan for the problem, as the worker would get it.
  StatusOr<v1::Candidate> Candidate(const Problem& problem, const std::string& variant) {
    v1::GetKernelRequest req;
    *req.mutable_problem() = ToProto(problem);
    req.set_variant(variant);
    req.set_device_uuid(uuid);
    ASSIGN_OR_RETURN(v1::KernelResponse k, client_.GetKernel(req));
    v1::Candidate c;
    c.set_variant(k.variant());
    c.set_cubin(k.cubin());
    *c.mutable_launches() = k.launches();
    c.set_workspace_bytes(k.workspace_bytes());
    c.set_workspace_zero_bytes(k.workspace_zero_bytes());
    return c;
  }

 private:
  ScantuneClient client_;
};

// Tune (force) one problem, then this job's records: ids above what was
// stored before, of the job id the progress named. no_tune: the newest job's.
StatusOr<std::vector<v1::Record>> TuneAndCollect(Daemon& daemon, const SsmOptions& o, const SsmShape& shape, Mode mode,
                                                 std::string* tune_error) {
  auto log = Logger("client");
  ASSIGN_OR_RETURN(std::vector<v1::Record> before, daemon.Records(shape, mode));
  int64_t max_id_before = 0;
  for (const v1::Record& r : before) max_id_before = std::max(max_id_before, r.id());
  uint64_t job_id = 0;
  if (!o.tune) {
    const v1::Record* newest = nullptr;
    for (const v1::Record& r : before) {
      if (newest == nullptr || r.id() > newest->id()) newest = &r;
    }
    if (newest == nullptr) return std::vector<v1::Record>{};
    std::vector<v1::Record> out;
    for (const v1::Record& r : before) {
      if (r.job_id() == newest->job_id() && r.daemon_version() == newest->daemon_version()) out.push_back(r);
    }
    return out;
  }
  const auto start = Clock::now();
  v1::TuneRequest req;
  *req.mutable_problem() = ToProto(SsmProblem(shape, mode));
  req.set_device_uuid(daemon.uuid);
  req.set_force(true);
  auto selection = daemon.client().Tune(req, [&](const v1::TuneProgress& p) {
    if (p.job_id() != 0) job_id = p.job_id();
    if (p.stage() == v1::TuneProgress::FAILED) log->warn("tune {} {}: {}", ArgOf(shape), ModeName(mode), p.message());
  });
  if (selection.ok()) {
    log->info("tuned {} {} in {:.1f} s: {} ({:.4f} ms)", ArgOf(shape), ModeName(mode), SecondsSince(start),
              selection->variant(), selection->median_ms());
  } else {
    *tune_error = selection.status().ToString();
    log->warn("tune {} {} failed after {:.1f} s: {}", ArgOf(shape), ModeName(mode), SecondsSince(start),
              *tune_error);
  }
  ASSIGN_OR_RETURN(std::vector<v1::Record> after, daemon.Records(shape, mode));
  std::vector<v1::Record> out;
  for (v1::Record& r : after) {
    if (r.id() > max_id_before && (job_id == 0 || r.job_id() == job_id)) out.push_back(std::move(r));
  }
  return out;
}

// ------------------------------------------------------------------ stages

// rel_err_vs_scan of every timing row: each family's variant and the
// sequential family's on the same inputs, in this process.
Status MeasureRelErr(Daemon& daemon, const SsmOptions& o, const Budget& budget, std::vector<Row>* rows) {
  auto log = Logger("client");
  ASSIGN_OR_RETURN(const CudaDriver* driver, CudaDriver::Load());
  ASSIGN_OR_RETURN(std::unique_ptr<GpuContext> ctx, GpuContext::Open(driver, o.device));
  std::string lost;  // set once the context is lost: no more runs
  std::set<std::pair<SsmShape, Mode>> done;
  for (Row& first : *rows) {
    if (!first.kind.empty() || done.count({first.shape, first.mode})) continue;
    done.insert({first.shape, first.mode});
    std::vector<Row*> group;
    Row* scan = nullptr;
    for (Row& r : *rows) {
      if (!r.kind.empty() || r.shape != first.shape || r.mode != first.mode) continue;
      group.push_back(&r);
      if (r.family == "sequential") scan = &r;
    }
    auto note_all = [&](const std::string& why) {
      for (Row* r : group) {
        if (r != scan) r->rel_err_note = why;
      }
    };
    if (!lost.empty() || budget.Over()) {
      note_all(lost.empty() ? budget.Why() : lost);
      continue;
    }
    if (scan == nullptr) {
      note_all("no OK sequential (scan) row at this shape and mode");
      continue;
    }
    const Problem problem = SsmProblem(first.shape, first.mode);
    const auto start = Clock::now();
    const OpCase inputs = OpIoFor(problem.op).Prepare(problem, o.seed, /*check=*/false);
    std::vector<std::vector<double>> reference;
    // Families come in seed order, the sequential one first: its output is
    // the reference the others are compared with.
    for (Row* r : group) {
      if (r != scan && reference.empty()) break;
      auto candidate = daemon.Candidate(problem, r->variant);
      if (!candidate.ok()) {
        r->rel_err_note = "GetKernel: " + candidate.status().ToString();
        if (r == scan) note_all("the sequential run could not start: " + r->rel_err_note);
        continue;
      }
      auto run = RunCandidate(*ctx, problem, *candidate, inputs, /*download=*/true, o.kernel_timeout_ms);
      std::string failed;
      if (!run.ok()) {
        failed = run.status().ToString();
      } else if (run->state != v1::OK) {
        failed = v1::ResultState_Name(run->state) + ": " + run->error;
        if (run->context_lost) lost = "not measured: the context was lost at " + r->variant + " (" + failed + ")";
      }
      if (!failed.empty()) {
        log->warn("rel_err run of {} at {} {}: {}", r->variant, ArgOf(first.shape), ModeName(first.mode), failed);
        r->rel_err_note = "direct run failed: " + failed;
        if (r == scan) note_all("the sequential run failed: " + failed);
        if (!lost.empty()) break;
        continue;
      }
      if (r == scan) {
        reference = std::move(run->outputs);
      } else {
        r->rel_err_vs_scan = RelErrVsScan(run->outputs, reference);
      }
    }
    log->info("rel_err_vs_scan at {} {}: {} families in {:.1f} s", ArgOf(first.shape), ModeName(first.mode),
              group.size(), SecondsSince(start));
  }
  return Status::Ok();
}

// device_peak rows: one fresh process per (shape, mode, family).
void MeasureDevicePeaks(Daemon& daemon, const SsmOptions& o, const Budget& budget, const std::string& exe,
                        const std::string& dir, const std::vector<Row>& timing, int* child_index,
                        std::vector<Row>* out) {
  auto log = Logger("client");
  for (const SsmShape& shape : o.peak_shapes) {
    for (Mode mode : o.modes) {
      bool any = false;
      for (const Row& t : timing) {
        if (!t.kind.empty() || t.shape != shape || t.mode != mode) continue;
        any = true;
        Row row;
        row.kind = "device_peak";
        row.family = t.family;
        row.variant = t.variant;
        row.mode = mode;
        row.shape = shape;
        const Problem problem = SsmProblem(shape, mode);
        if (budget.Over()) {
          row.error = budget.Why();
          out->push_back(std::move(row));
          continue;
        }
        auto candidate = daemon.Candidate(problem, t.variant);
        if (!candidate.ok()) {
          row.error = "GetKernel: " + candidate.status().ToString();
          out->push_back(std::move(row));
          continue;
        }
        row.need_mb = Mib(NeedBytes(problem, candidate->workspace_bytes()));
        auto record = RunChild(o, exe, dir, (*child_index)++, *candidate, shape, mode);
        if (!record.ok()) {
          row.error = record.status().ToString();
        } else if (record->state() != v1::OK) {
          row.error = FailureText(*record);
        } else {
          row.baseline_mb = Mib(record->memory().baseline_bytes());
          row.peak_mb = Mib(record->memory().peak_bytes());
          row.delta_mb = Mib(record->memory().delta_bytes());
        }
        log->info("device_peak {} {} {}: {}", t.family, ArgOf(shape), ModeName(mode),
                  row.error.empty() ? "delta " + Fixed(row.delta_mb, 1) + " MiB" : row.error);
        out->push_back(std::move(row));
      }
      if (!any) log->warn("device_peak: {} {} was not timed; no rows", ArgOf(shape), ModeName(mode));
    }
  }
}

// max_len rows: L = 2^k upward at B = 4 (the timing shapes' B), D = 1024,
// fwd_bwd, one fresh process per L, until the need passes the cap, a run
// fails, or the service's length limit is reached.
void MeasureMaxLen(Daemon& daemon, const SsmOptions& o, const Budget& budget, const std::string& exe,
                   const std::string& dir, const std::vector<Row>& timing, int* child_index, std::vector<Row>* out) {
  auto log = Logger("client");
  const std::vector<const Row*> families = MaxLenFamilies(timing, o.max_len_all);
  if (families.empty()) {
    log->warn("max_len: no OK fwd_bwd row; skipped");
    return;
  }
  const uint64_t cap = CapBytes(o.mem_cap_gib);
  for (const Row* fam : families) {
    Row row;
    row.kind = "max_len";
    row.family = fam->family;
    row.variant = fam->variant;
    row.mode = Mode::kFwdBwd;
    row.shape = {fam->shape.batch, 0, 1024, fam->shape.state};
    row.limit = LengthLimit(row.shape);
    for (int64_t seq = o.max_len_start; seq <= row.limit; seq *= 2) {
      SsmShape shape = row.shape;
      shape.seq = seq;
      const Problem problem = SsmProblem(shape, Mode::kFwdBwd);
      auto fail = [&](const std::string& why) {
        row.first_failure = why;
        row.first_failure_seq = seq;
      };
      auto candidate = daemon.Candidate(problem, fam->variant);
      if (!candidate.ok()) {
        fail("GetKernel: " + candidate.status().ToString());
        break;
      }
      const uint64_t need = NeedBytes(problem, candidate->workspace_bytes());
      if (need > cap) {
        fail("needs " + Fixed(Mib(need), 1) + " MiB (tensors " + Fixed(Mib(need - candidate->workspace_bytes()), 1) +
             " + workspace " + Fixed(Mib(candidate->workspace_bytes()), 1) + "), over the cap of " +
             Fixed(o.mem_cap_gib, 1) + " GiB");
        break;
      }
      if (budget.Over()) {
        fail(budget.Why());
        break;
      }
      auto record = RunChild(o, exe, dir, (*child_index)++, *candidate, shape, Mode::kFwdBwd);
      if (!record.ok()) {
        fail(record.status().ToString());
        break;
      }
      if (record->state() != v1::OK) {
        fail(FailureText(*record));
        break;
      }
      if (record->memory().delta_bytes() > cap) {
        fail("used " + Fixed(Mib(record->memory().delta_bytes()), 1) + " MiB, over the cap of " +
             Fixed(o.mem_cap_gib, 1) + " GiB");
        break;
      }
      row.max_seq = seq;
      row.peak_mb_at_max = Mib(record->memory().delta_bytes());
      row.need_mb_at_max = Mib(need);
      log->info("max_len {}: L = {} ran (delta {:.1f} MiB)", fam->family, seq, row.peak_mb_at_max);
    }
    if (row.max_seq == 0 && row.first_failure.empty()) row.first_failure = "no L tried";
    log->info("max_len {}: {}{}", fam->family, row.max_seq,
              row.first_failure.empty() ? "" : " (then " + row.first_failure + ")");
    out->push_back(std::move(row));
  }
}

std::string NvidiaDriverVersion() {
  std::ifstream in("/proc/driver/nvidia/version");
  std::string line;
  return std::getline(in, line) ? ParseNvidiaDriverVersion(line) : "";
}

}  // namespace

StatusOr<SsmReport> RunSsmBench(const SsmOptions& o) {
  auto log = Logger("client");
  const auto start = Clock::now();
  Budget budget;
  budget.start = start;
  budget.deadline_s = o.deadline_s;
  SsmReport report;
  report.batch = o.shapes.empty() ? 4 : o.shapes.front().batch;
  report.state = o.state;
  report.mem_cap_gib = o.mem_cap_gib;
  AddProtocolNotes(o.mem_cap_gib, &report);

  Daemon daemon(o);
  RETURN_IF_ERROR(daemon.client().WaitUntilServing(std::chrono::seconds(30)));
  ASSIGN_OR_RETURN(v1::ListDevicesResponse devices, daemon.client().ListDevices());
  const v1::DeviceInfo* device = nullptr;
  for (const v1::DeviceInfo& d : devices.devices()) {
    if (d.ordinal() == o.device) device = &d;
  }
  if (device == nullptr) {
    return FailedPrecondition("the daemon has no GPU of ordinal " + std::to_string(o.device) +
                              (devices.note().empty() ? "" : " (" + devices.note() + ")"));
  }
  daemon.uuid = device->uuid();
  const std::string driver = NvidiaDriverVersion();
  report.device = {{"gpu", device->name()},
                   {"device_kind", device->name()},
                   {"uuid", device->uuid()},
                   {"compute_capability", std::to_string(device->cc_major()) + "." + std::to_string(device->cc_minor())},
                   {"driver", driver.empty() ? "unknown" : driver},
                   {"cuda_driver_api", std::to_string(device->driver_version() / 1000) + "." +
                                           std::to_string(device->driver_version() % 1000 / 10)},
                   {"nvrtc", device->nvrtc_version()}};
  report.device_numbers = {{"gpu_memory_gb", static_cast<double>(device->memory_bytes()) / 1073741824.0},
                           {"sm_count", static_cast<double>(device->sm_count())},
                           {"sm_clock_mhz", device->sm_clock_khz() / 1000.0},
                           {"copy_gbps", device->copy_gbps()}};

  // 1. Timing rows from the daemon.
  std::vector<Row> timing;
  std::string daemon_version, source_hash;
  for (const SsmShape& shape : o.shapes) {
    for (Mode mode : o.modes) {
      if (budget.Over()) {
        Row row;
        row.kind = "error";
        row.family = "all";
        row.mode = mode;
        row.shape = shape;
        row.state = "SKIPPED";
        row.error = budget.Why();
        timing.push_back(std::move(row));
        continue;
      }
      std::string tune_error;
      auto records = TuneAndCollect(daemon, o, shape, mode, &tune_error);
      if (!records.ok()) return records.status().Annotate("records of " + ArgOf(shape) + " " + ModeName(mode));
      for (const v1::Record& r : *records) {
        if (daemon_version.empty() && !r.daemon_version().empty()) daemon_version = r.daemon_version();
        if (source_hash.empty() && !r.source_hash().empty()) source_hash = r.source_hash();
      }
      std::vector<Row> rows = RowsFromPicks(BestPerFamily(*records, ToProto(mode)), shape, mode);
      if (rows.empty()) {
        Row row;
        row.kind = "error";
        row.family = "all";
        row.mode = mode;
        row.shape = shape;
        row.state = "ERROR";
        row.error = tune_error.empty() ? "no records of this problem" : tune_error;
        rows.push_back(std::move(row));
      }
      AppendRows(std::move(rows), &timing);
    }
  }
  report.device.push_back({"scantune_daemon", daemon_version});
  report.device.push_back({"kernel_source_hash", source_hash});
  log->info("timing rows done after {:.0f} s", SecondsSince(start));

  // 2. rel_err_vs_scan (a context in this process, closed before the children run).
  if (o.rel_err) {
    Status st = MeasureRelErr(daemon, o, budget, &timing);
    if (!st.ok()) {
      log->warn("rel_err_vs_scan not measured: {}", st.ToString());
      for (Row& r : timing) {
        if (r.kind.empty() && r.family != "sequential") r.rel_err_note = "not measured: " + st.ToString();
      }
    }
    log->info("rel_err_vs_scan done after {:.0f} s", SecondsSince(start));
  }
  report.rows = timing;

  // 3. and 4. Fresh processes.
  if (!o.peak_shapes.empty() || o.max_len) {
    const std::string exe = SelfExe();
    std::string dir = o.work_dir;
    if (dir.empty()) {
      std::string templ = (std::filesystem::temp_directory_path() / "scantune-ssm-bench-XXXXXX").string();
      if (mkdtemp(templ.data()) == nullptr) return Internal("mkdtemp failed: " + std::string(std::strerror(errno)));
      dir = templ;
    } else {
      std::error_code ec;
      std::filesystem::create_directories(dir, ec);
    }
    if (exe.empty()) return Internal("cannot find this executable (/proc/self/exe)");
    int child_index = 0;
    std::vector<Row> extra;
    MeasureDevicePeaks(daemon, o, budget, exe, dir, timing, &child_index, &extra);
    log->info("device_peak done after {:.0f} s", SecondsSince(start));
    if (o.max_len) {
      MeasureMaxLen(daemon, o, budget, exe, dir, timing, &child_index, &extra);
      log->info("max_len done after {:.0f} s", SecondsSince(start));
    }
    AppendRows(std::move(extra), &report.rows);
    if (o.work_dir.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  }
  report.notes.push_back({"wall_s", Fixed(SecondsSince(start), 1)});
  return report;
}

}  // namespace scantune::ssmbench
