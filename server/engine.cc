// Engine::Impl: request validation, device resolution and the per-device job
// queues; the work itself is the Tuner's (jobs), the Selector's (answers) and
// the CompileCache's (GetKernel). See engine.h for the contract.
#include "server/engine.h"

#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <mutex>
#include <set>

#include "common/log.h"
#include "common/variant.h"
#include "compiler/kernel_sources.h"
#include "compiler/nvrtc_compiler.h"
#include "compiler/plan.h"
#include "db/store.h"
#include "server/compile_cache.h"
#include "server/job_queue.h"
#include "server/record_json.h"
#include "server/selector.h"
#include "server/tuner.h"
#include "server/worker_pool.h"

namespace scantune {

class Engine::Impl {
 public:
  explicit Impl(const EngineOptions& options) : options_(options) {}
  ~Impl();

  Status Init();

  StatusOr<v1::ListDevicesResponse> ListDevices();
  StatusOr<v1::Selection> Select(const v1::SelectRequest& request, const ProgressFn& progress,
                                 const std::string& client);
  StatusOr<v1::KernelResponse> GetKernel(const v1::GetKernelRequest& request, const std::string& client);
  StatusOr<v1::Selection> Tune(const v1::TuneRequest& request, const ProgressFn& progress, const std::string& client);
  StatusOr<v1::BenchmarkResponse> Benchmark(const v1::BenchmarkRequest& request, const std::string& client);
  StatusOr<v1::Record> GetRecord(int64_t id) { return store_->GetRecord(id); }
  StatusOr<v1::ListRecordsResponse> ListRecords(const v1::ListRecordsRequest& request);
  StatusOr<v1::ListSelectionsResponse> ListSelections(const v1::ListSelectionsRequest& request);
  StatusOr<v1::ExportResponse> Export(const v1::ExportRequest& request);
  StatusOr<v1::ImportResponse> Import(const v1::ImportRequest& request);

 private:
  StatusOr<Problem> ParseProblem(const v1::Problem& proto) const;
  // Parsed, deduplicated, capped; test variants refused unless enabled.
  StatusOr<std::vector<Variant>> ParseVariants(const google::protobuf::RepeatedPtrField<std::string>& names) const;
  StatusOr<Variant> ParseVariant(const std::string& name) const;
  // A live GPU for a job: NOT_FOUND for an unknown uuid, FAILED_PRECONDITION "no GPU".
  StatusOr<TuneDevice> LiveDevice(const std::string& uuid, const char* what) const;
  // The device a question is about: a live GPU, else one the database knows
  // (so selections are served without a GPU); nullopt when there is none.
  StatusOr<std::optional<TuneDevice>> KnownDevice(const std::string& uuid) const;
  TuneDevice MakeTuneDevice(int index, v1::DeviceInfo info) const;
  std::string NoGpuMessage(const char* what) const;

  // Runs fn on the device's job thread and waits for it, once admitted: at
  // most max_queued_jobs at once, and max_jobs_per_client of one client's.
  // `admitted` (may be null) runs once the job holds its place, before it runs.
  template <typename T>
  StatusOr<T> RunOnDevice(int index, const std::string& client, std::function<StatusOr<T>()> fn,
                          const std::function<void()>& admitted = nullptr);
  Status Admit(const std::string& client);
  void Release(const std::string& client);

  const EngineOptions options_;
  std::unique_ptr<Store> store_;
  NvrtcCompiler compiler_;
  std::unique_ptr<CompileCache> cache_;
  std::unique_ptr<WorkerPool> pool_;
  std::vector<TuneDevice> devices_;  // live GPUs, fixed after Init
  std::vector<std::unique_ptr<JobQueue>> queues_;
  std::unique_ptr<Tuner> tuner_;
  std::atomic<uint64_t> next_job_id_{1};
  std::mutex jobs_mu_;
  int jobs_in_queue_ = 0;                      // admitted and not yet finished, all devices; guarded by jobs_mu_
  std::map<std::string, int> client_jobs_;     // the same per named client (none at 0); guarded by jobs_mu_
};

Status Engine::Impl::Init() {
  InitLogging();
  auto log = Logger("server");
  ASSIGN_OR_RETURN(store_, Store::Open(options_.db_path));
  cache_ = std::make_unique<CompileCache>(&compiler_, store_.get());
  // Job ids stay unique across daemon restarts: they start at the clock.
  next_job_id_ = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());

  WorkerPoolOptions pool_options;
  pool_options.worker_path = options_.worker_path;
  pool_options.worker_args = options_.worker_args;
  pool_options.candidate_timeout_s = options_.candidate_timeout_s;
  pool_ = WorkerPool::Create(pool_options);
  for (int i = 0; i < pool_->device_count(); ++i) {
    TuneDevice device = MakeTuneDevice(i, pool_->device(i));
    Status stored = store_->UpsertDevice(device.info);
    if (!stored.ok()) log->warn("storing device {} failed: {}", device.info.uuid(), stored.ToString());
    devices_.push_back(std::move(device));
    queues_.push_back(std::make_unique<JobQueue>("device " + std::to_string(i)));
  }
  if (devices_.empty()) log->info("{}", pool_->note());
  tuner_ = std::make_unique<Tuner>(options_, store_.get(), cache_.get(), pool_.get());
  return Status::Ok();
}

Engine::Impl::~Impl() {
  // Order matters: no new jobs, interrupt the running ones (kills busy
  // workers), let the job threads finish, then stop the idle workers.
  if (pool_) pool_->Interrupt();
  for (auto& queue : queues_) queue->Stop();
  queues_.clear();
  pool_.reset();
}

TuneDevice Engine::Impl::MakeTuneDevice(int index, v1::DeviceInfo info) const {
  // The daemon compiles every cubin, so the NVRTC in the fingerprint is the daemon's.
  info.set_nvrtc_version(NvrtcCompiler::Version());
  TuneDevice device;
  device.index = index;
  device.fingerprint = Fingerprint(info, SourceHash());
  device.info = std::move(info);
  return device;
}

std::string Engine::Impl::NoGpuMessage(const char* what) const {
  std::string note = pool_->note();
  if (note.rfind("no GPU: ", 0) == 0) note = note.substr(8);
  return std::string("no GPU: ") + what + " needs a GPU; " + note;
}

StatusOr<Problem> Engine::Impl::ParseProblem(const v1::Problem& proto) const {
  StatusOr<Problem> problem = ProblemFromProto(proto);
  if (!problem.ok()) return problem.status().Annotate("invalid problem");
  RETURN_IF_ERROR(Validate(*problem, options_.limits).Annotate("invalid problem"));
  return problem;
}

StatusOr<Variant> Engine::Impl::ParseVariant(const std::string& name) const {
  ASSIGN_OR_RETURN(Variant v, Variant::Parse(name));
  if (v.IsTestOnly() && !options_.enable_test_variants) {
    return InvalidArgument("variant '" + name + "' is test-only; start scantuned with test variants enabled to use it");
  }
  return v;
}

StatusOr<std::vector<Variant>> Engine::Impl::ParseVariants(
    const google::protobuf::RepeatedPtrField<std::string>& names) const {
  if (names.size() > options_.max_variants_per_request) {
    return InvalidArgument("too many variants: " + std::to_string(names.size()) + " given, at most " +
                           std::to_string(options_.max_variants_per_request) + " per request");
  }
  std::vector<Variant> variants;
  std::set<std::string> seen;
  for (const std::string& name : names) {
    ASSIGN_OR_RETURN(Variant v, ParseVariant(name));
    if (seen.insert(v.Name()).second) variants.push_back(v);
  }
  return variants;
}

StatusOr<TuneDevice> Engine::Impl::LiveDevice(const std::string& uuid, const char* what) const {
  if (devices_.empty()) return FailedPrecondition(NoGpuMessage(what));
  if (uuid.empty()) return devices_[0];
  for (const TuneDevice& d : devices_) {
    if (d.info.uuid() == uuid) return d;
  }
  std::string known;
  for (const TuneDevice& d : devices_) known += (known.empty() ? "" : ", ") + d.info.uuid();
  return NotFound("no device with uuid '" + uuid + "' (devices: " + known + ")");
}

StatusOr<std::optional<TuneDevice>> Engine::Impl::KnownDevice(const std::string& uuid) const {
  if (!devices_.empty()) {
    ASSIGN_OR_RETURN(TuneDevice d, LiveDevice(uuid, "this"));
    return std::optional<TuneDevice>(std::move(d));
  }
  ASSIGN_OR_RETURN(std::vector<v1::DeviceInfo> stored, store_->ListDevices());
  for (const v1::DeviceInfo& info : stored) {
    // Without a GPU the fingerprint cannot know the driver; the stored device's
    // driver stands in, with this daemon's NVRTC and kernel sources.
    if (uuid.empty() || info.uuid() == uuid) return std::optional<TuneDevice>(MakeTuneDevice(-1, info));
  }
  if (!uuid.empty()) return NotFound("no device with uuid '" + uuid + "' (no GPU, and the database does not know it)");
  return std::optional<TuneDevice>();
}

Status Engine::Impl::Admit(const std::string& client) {
  std::lock_guard<std::mutex> lock(jobs_mu_);
  if (jobs_in_queue_ >= options_.max_queued_jobs) {
    return ResourceExhausted("job queue full (" + std::to_string(options_.max_queued_jobs) +
                             " jobs queued or running); try again later");
  }
  if (!client.empty() && client_jobs_[client] >= options_.max_jobs_per_client) {
    return ResourceExhausted("client '" + client + "' already has " + std::to_string(client_jobs_[client]) +
                             " jobs queued or running (at most " + std::to_string(options_.max_jobs_per_client) +
                             " per client); wait for one to finish");
  }
  ++jobs_in_queue_;
  if (!client.empty()) ++client_jobs_[client];
  return Status::Ok();
}

void Engine::Impl::Release(const std::string& client) {
  std::lock_guard<std::mutex> lock(jobs_mu_);
  --jobs_in_queue_;
  if (!client.empty() && --client_jobs_[client] == 0) client_jobs_.erase(client);
}

template <typename T>
StatusOr<T> Engine::Impl::RunOnDevice(int index, const std::string& client, std::function<StatusOr<T>()> fn,
                                      const std::function<void()>& admitted) {
  RETURN_IF_ERROR(Admit(client));
  if (admitted) admitted();
  auto promise = std::make_shared<std::promise<StatusOr<T>>>();
  std::future<StatusOr<T>> result = promise->get_future();
  const bool posted = queues_[index]->Post(
      [this, client, promise, fn = std::move(fn)] {
        StatusOr<T> value = fn();
        Release(client);
        promise->set_value(std::move(value));
      },
      [this, client, promise] {
        Release(client);
        promise->set_value(Aborted("daemon shutting down"));
      });
  if (!posted) {
    Release(client);
    return Aborted("daemon shutting down");
  }
  return result.get();
}

StatusOr<v1::ListDevicesResponse> Engine::Impl::ListDevices() {
  v1::ListDevicesResponse response;
  for (const TuneDevice& d : devices_) *response.add_devices() = d.info;
  response.set_note(pool_->note());
  return response;
}

StatusOr<v1::Selection> Engine::Impl::Tune(const v1::TuneRequest& request, const ProgressFn& progress,
                                           const std::string& client) {
  ASSIGN_OR_RETURN(Problem problem, ParseProblem(request.problem()));
  ASSIGN_OR_RETURN(std::vector<Variant> variants, ParseVariants(request.variants()));
  ASSIGN_OR_RETURN(TuneDevice device, LiveDevice(request.device_uuid(), "tuning"));
  const DeviceLimits limits = DeviceLimits::FromProto(device.info);
  // Named variants that cannot run the problem: an error, or (skip_unfit) left out and named.
  std::vector<Variant> fit;
  std::string left_out;
  for (const Variant& v : variants) {
    Status can = CanImplement(v, problem, limits);
    if (can.ok()) {
      fit.push_back(v);
      continue;
    }
    const std::string why = "variant " + v.Name() + " cannot run " + problem.Key() + " on " + device.info.name() +
                            ": " + can.message();
    if (!request.skip_unfit()) return InvalidArgument(why);
    left_out += (left_out.empty() ? "" : "; ") + why;
  }
  if (!variants.empty() && fit.empty()) {
    return InvalidArgument("none of the " + std::to_string(variants.size()) + " named variants can run " +
                           problem.Key() + ": " + left_out);
  }
  variants = std::move(fit);
  const uint64_t job_id = next_job_id_++;
  if (!request.force()) {
    // Answer a fresh selection without taking a queue slot (the job checks again).
    StatusOr<v1::Selection> fresh =
        Selector(store_.get()).Find(device.info.name(), device.fingerprint, problem, v1::NOT_FOUND);
    if (fresh.ok() && !fresh->stale()) {
      if (progress) {
        v1::TuneProgress done;
        done.set_stage(v1::TuneProgress::DONE);
        done.set_job_id(job_id);
        done.set_message("a fresh selection exists; not re-tuned (force re-tunes)");
        *done.mutable_selection() = *fresh;
        progress(done);
      }
      return fresh;
    }
  }
  // QUEUED once the job holds its place in the queue (a refused one never sees it).
  auto queued = [&] {
    if (!progress) return;
    v1::TuneProgress update;
    update.set_stage(v1::TuneProgress::QUEUED);
    update.set_job_id(job_id);
    update.set_message(problem.Key() + " on " + device.info.name() + " (" + device.info.uuid() + ")" +
                       (left_out.empty() ? "" : "; left out: " + left_out));
    progress(update);
  };
  const bool force = request.force();
  return RunOnDevice<v1::Selection>(
      device.index, client,
      [this, job_id, device, problem, variants, force, progress] {
        return tuner_->Tune(job_id, device, problem, variants, force, progress);
      },
      queued);
}

StatusOr<v1::BenchmarkResponse> Engine::Impl::Benchmark(const v1::BenchmarkRequest& request,
                                                        const std::string& client) {
  if (!options_.enable_benchmark) {
    return FailedPrecondition("remote benchmarks are disabled; start scantuned with --enable-benchmark");
  }
  if (request.problems_size() == 0) return InvalidArgument("benchmark: at least one problem is required");
  if (request.problems_size() > options_.max_problems_per_benchmark) {
    return InvalidArgument("benchmark: too many problems: " + std::to_string(request.problems_size()) +
                           " given, at most " + std::to_string(options_.max_problems_per_benchmark));
  }
  if (request.variants_size() == 0) return InvalidArgument("benchmark: name at least one variant");
  std::vector<Problem> problems;
  for (const v1::Problem& p : request.problems()) {
    ASSIGN_OR_RETURN(Problem problem, ParseProblem(p));
    problems.push_back(problem);
  }
  ASSIGN_OR_RETURN(std::vector<Variant> variants, ParseVariants(request.variants()));
  ASSIGN_OR_RETURN(TuneDevice device, LiveDevice(request.device_uuid(), "benchmarking"));
  const DeviceLimits limits = DeviceLimits::FromProto(device.info);
  for (const Problem& problem : problems) {
    for (const Variant& v : variants) {
      Status can = CanImplement(v, problem, limits);
      if (!can.ok()) {
        return InvalidArgument("variant " + v.Name() + " cannot run " + problem.Key() + " on " + device.info.name() +
                               ": " + can.message());
      }
    }
  }
  const uint64_t job_id = next_job_id_++;
  const uint64_t seed = request.seed();
  ASSIGN_OR_RETURN(std::vector<v1::Record> records,
                   RunOnDevice<std::vector<v1::Record>>(device.index, client, [this, job_id, device, problems, variants, seed] {
                     return tuner_->Benchmark(job_id, device, problems, variants, seed);
                   }));
  v1::BenchmarkResponse response;
  for (v1::Record& r : records) *response.add_records() = std::move(r);
  return response;
}

StatusOr<v1::Selection> Engine::Impl::Select(const v1::SelectRequest& request, const ProgressFn& progress,
                                             const std::string& client) {
  ASSIGN_OR_RETURN(Problem problem, ParseProblem(request.problem()));
  ASSIGN_OR_RETURN(std::optional<TuneDevice> device, KnownDevice(request.device_uuid()));
  const v1::MissPolicy policy = request.on_miss() == v1::MISS_POLICY_UNSPECIFIED ? v1::NOT_FOUND : request.on_miss();
  if (!device) {
    if (policy == v1::TUNE_NOW) return FailedPrecondition(NoGpuMessage("on_miss=TUNE_NOW"));
    return NotFound("no selection for " + problem.Key() +
                    ": there is no GPU and the database knows no device; tune on a GPU first");
  }
  Selector selector(store_.get());
  const bool deterministic = request.deterministic();
  if (policy != v1::TUNE_NOW) {
    return selector.Find(device->info.name(), device->fingerprint, problem, policy, deterministic);
  }

  // TUNE_NOW: a fresh exact answer, else tune (a stale one is re-tuned on
  // demand when a GPU is there, and served flagged when not).
  StatusOr<v1::Selection> exact =
      selector.Find(device->info.name(), device->fingerprint, problem, v1::NOT_FOUND, deterministic);
  if (exact.ok() && !exact->stale()) return exact;
  if (!exact.ok() && exact.status().code() != StatusCode::kNotFound) return exact.status();
  if (devices_.empty() || device->index < 0) {
    if (exact.ok()) return exact;  // stale, flagged
    return FailedPrecondition(NoGpuMessage("on_miss=TUNE_NOW"));
  }
  v1::TuneRequest tune;
  *tune.mutable_problem() = request.problem();
  tune.set_device_uuid(device->info.uuid());
  // A deterministic miss on a problem whose fresh selection predates the
  // deterministic ones: re-tune it rather than answer NOT_FOUND.
  if (deterministic) {
    StatusOr<v1::Selection> ordinary =
        selector.Find(device->info.name(), device->fingerprint, problem, v1::NOT_FOUND, false);
    tune.set_force(ordinary.ok() && !ordinary->stale());
  }
  ASSIGN_OR_RETURN(v1::Selection tuned, Tune(tune, progress, client));
  if (!deterministic) return tuned;
  // Tune commits both selections; the deterministic one is the answer.
  return selector.Find(device->info.name(), device->fingerprint, problem, v1::NOT_FOUND, true);
}

StatusOr<v1::KernelResponse> Engine::Impl::GetKernel(const v1::GetKernelRequest& request, const std::string& client) {
  auto log = Logger("server");
  ASSIGN_OR_RETURN(Problem problem, ParseProblem(request.problem()));
  v1::KernelResponse response;
  Variant variant;
  if (!request.variant().empty()) {
    ASSIGN_OR_RETURN(variant, ParseVariant(request.variant()));
  } else {
    v1::SelectRequest select;
    *select.mutable_problem() = request.problem();
    select.set_device_uuid(request.device_uuid());
    select.set_on_miss(request.on_miss());
    select.set_deterministic(request.deterministic());
    ASSIGN_OR_RETURN(v1::Selection selection, Select(select, nullptr, client));
    ASSIGN_OR_RETURN(variant, Variant::Parse(selection.variant()));
    *response.mutable_selection() = std::move(selection);
  }
  ASSIGN_OR_RETURN(std::optional<TuneDevice> device, KnownDevice(request.device_uuid()));
  DeviceLimits limits;  // defaults: H200, sm_90
  std::string target = "the default target " + limits.Arch() + " (no GPU known)";
  if (device) {
    limits = DeviceLimits::FromProto(device->info);
    target = device->info.name() + " (" + limits.Arch() + ")";
  } else {
    log->info("GetKernel {}: no GPU known; compiling for the default {}", problem.Key(), limits.Arch());
  }
  Status can = CanImplement(variant, problem, limits);
  if (!can.ok()) {
    return InvalidArgument("variant " + variant.Name() + " cannot run " + problem.Key() + " on " + target + ": " +
                           can.message());
  }
  ASSIGN_OR_RETURN(CompileResult compiled,
                   cache_->Compile(
                       {variant, problem.op, problem.dtype, problem.ssm, limits.cc_major, limits.cc_minor, problem.shape}));
  if (compiled.state != v1::OK) {
    return FailedPrecondition("variant " + variant.Name() + " does not compile for " + target + " (" +
                              v1::ResultState_Name(compiled.state) + "): " + compiled.log.substr(0, 4000));
  }
  ASSIGN_OR_RETURN(v1::Candidate candidate, MakeCandidate(variant, problem, limits, compiled));
  response.set_variant(variant.Name());
  response.set_cubin(std::move(*candidate.mutable_cubin()));
  response.set_arch(compiled.arch.empty() ? limits.Arch() : compiled.arch);
  *response.mutable_launches() = candidate.launches();
  for (const v1::ParamField& field : ParamLayout(problem.op)) *response.add_params() = field;
  response.set_params_size_bytes(ParamSize(problem.op));
  response.set_workspace_bytes(candidate.workspace_bytes());
  response.set_workspace_zero_bytes(candidate.workspace_zero_bytes());
  response.set_workspace_zero_once(candidate.workspace_zero_once());
  response.set_source_hash(SourceHash());
  *response.mutable_problem() = ToProto(problem);
  return response;
}

StatusOr<v1::ListRecordsResponse> Engine::Impl::ListRecords(const v1::ListRecordsRequest& request) {
  int page_size = request.page_size();
  if (page_size <= 0) page_size = 100;
  page_size = std::min(page_size, 1000);
  ASSIGN_OR_RETURN(RecordPage page, store_->ListRecords(request.filter(), page_size, request.page_token()));
  v1::ListRecordsResponse response;
  for (v1::Record& r : page.records) *response.add_records() = std::move(r);
  response.set_next_page_token(page.next_page_token);
  return response;
}

StatusOr<v1::ListSelectionsResponse> Engine::Impl::ListSelections(const v1::ListSelectionsRequest& request) {
  ASSIGN_OR_RETURN(SelectionPage page, store_->ListAllSelections(request));
  // Stale as Select judges it: against the fingerprint of a device of the
  // selection's model, a live GPU's first, else one the database knows.
  std::map<std::string, std::string> fingerprints;
  for (const TuneDevice& d : devices_) fingerprints.emplace(d.info.name(), d.fingerprint);
  ASSIGN_OR_RETURN(std::vector<v1::DeviceInfo> stored, store_->ListDevices());
  for (const v1::DeviceInfo& info : stored) {
    if (!fingerprints.count(info.name())) fingerprints.emplace(info.name(), MakeTuneDevice(-1, info).fingerprint);
  }
  v1::ListSelectionsResponse response;
  for (v1::Selection& s : page.selections) {
    auto current = fingerprints.find(s.device_model());
    s.set_stale(current == fingerprints.end() || s.fingerprint() != current->second);
    *response.add_selections() = std::move(s);
  }
  response.set_next_page_token(page.next_page_token);
  return response;
}

StatusOr<v1::ExportResponse> Engine::Impl::Export(const v1::ExportRequest& request) {
  if (!request.format().empty() && request.format() != "seed001") {
    return InvalidArgument("export: unknown format '" + request.format() + "' (known: seed001)");
  }
  if (request.max_records() < 0) {
    return InvalidArgument("export: max_records must not be negative, got " + std::to_string(request.max_records()));
  }
  // The cap keeps one response (and the daemon's memory for it) bounded.
  constexpr int kDefaultMaxRecords = 1000;
  constexpr int kMaxMaxRecords = 10000;
  const int cap = std::min(request.max_records() == 0 ? kDefaultMaxRecords : request.max_records(), kMaxMaxRecords);
  std::vector<v1::Record> records;
  std::string token;
  do {
    ASSIGN_OR_RETURN(RecordPage page,
                     store_->ListRecords(request.filter(), std::min(1000, cap - static_cast<int>(records.size())),
                                         token));
    for (v1::Record& r : page.records) records.push_back(std::move(r));
    token = page.next_page_token;
  } while (!token.empty() && static_cast<int>(records.size()) < cap);
  v1::ExportResponse response;
  ASSIGN_OR_RETURN(*response.mutable_json(), RecordsToSeedJson(records));
  response.set_records(static_cast<int32_t>(records.size()));
  return response;
}

StatusOr<v1::ImportResponse> Engine::Impl::Import(const v1::ImportRequest& request) {
  StatusOr<ImportedRecords> parsed = RecordsFromSeedJson(request.json(), request.source_name());
  if (!parsed.ok()) return parsed.status().Annotate("import");
  v1::ImportResponse response;
  if (!parsed->records.empty()) {
    // No selection: imported records are facts about other machines and
    // other code, never an answer to Select.
    ASSIGN_OR_RETURN(std::vector<int64_t> ids, store_->CommitResults(parsed->records, std::nullopt, -1));
    response.set_imported(static_cast<int32_t>(ids.size()));
  }
  response.set_skipped(parsed->skipped);
  for (std::string& w : parsed->warnings) response.add_warnings(std::move(w));
  Logger("server")->info("import from '{}': {} records imported, {} rows skipped", request.source_name(),
                         response.imported(), response.skipped());
  return response;
}

// --- Engine: forwards to Impl -------------------------------------------------

StatusOr<std::unique_ptr<Engine>> Engine::Create(const EngineOptions& options) {
  if (options.max_queued_jobs < 1) return InvalidArgument("max_queued_jobs must be >= 1");
  if (options.max_jobs_per_client < 1) return InvalidArgument("max_jobs_per_client must be >= 1");
  if (options.candidate_timeout_s <= 0) return InvalidArgument("candidate_timeout_s must be > 0");
  auto impl = std::make_unique<Impl>(options);
  RETURN_IF_ERROR(impl->Init());
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

StatusOr<v1::ListDevicesResponse> Engine::ListDevices() { return impl_->ListDevices(); }
StatusOr<v1::Selection> Engine::Select(const v1::SelectRequest& request, const ProgressFn& progress,
                                       const std::string& client) {
  return impl_->Select(request, progress, client);
}
StatusOr<v1::KernelResponse> Engine::GetKernel(const v1::GetKernelRequest& request, const std::string& client) {
  return impl_->GetKernel(request, client);
}
StatusOr<v1::Selection> Engine::Tune(const v1::TuneRequest& request, const ProgressFn& progress,
                                     const std::string& client) {
  return impl_->Tune(request, progress, client);
}
StatusOr<v1::BenchmarkResponse> Engine::Benchmark(const v1::BenchmarkRequest& request, const std::string& client) {
  return impl_->Benchmark(request, client);
}
StatusOr<v1::Record> Engine::GetRecord(int64_t id) { return impl_->GetRecord(id); }
StatusOr<v1::ListSelectionsResponse> Engine::ListSelections(const v1::ListSelectionsRequest& request) {
  return impl_->ListSelections(request);
}
StatusOr<v1::ListRecordsResponse> Engine::ListRecords(const v1::ListRecordsRequest& request) {
  return impl_->ListRecords(request);
}

StatusOr<v1::ExportResponse> Engine::Export(const v1::ExportRequest& request) { return impl_->Export(request); }
StatusOr<v1::ImportResponse> Engine::Import(const v1::ImportRequest& request) { return impl_->Import(request); }

}  // namespace scantune
