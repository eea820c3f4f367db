#include "server/worker_pool.h"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "common/log.h"

namespace scantune {
namespace {

std::string Seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", s);
  return buf;
}

v1::Record BlameRecord(const v1::Job& job, const std::string& variant, v1::ResultState state,
                       const std::string& detail) {
  v1::Record record;
  record.set_variant(variant);
  record.set_state(state);
  record.set_detail(detail);
  *record.mutable_problem() = job.problem();
  record.set_origin(job.origin());
  record.set_job_id(job.job_id());
  return record;
}

}  // namespace

std::vector<int> ParseListOrdinals(const std::string& list_output) {
  std::vector<int> ordinals;
  std::istringstream lines(list_output);
  std::string line;
  while (std::getline(lines, line)) {
    const size_t open = line.find('{');
    if (open == std::string::npos) continue;  // not a device line (banner, blank)
    int ordinal = static_cast<int>(ordinals.size());
    const size_t key = line.find("\"ordinal\"", open);
    if (key != std::string::npos) {
      size_t pos = line.find(':', key);
      if (pos != std::string::npos) {
        ++pos;
        while (pos < line.size() && (line[pos] == ' ' || line[pos] == '"')) ++pos;
        int value = 0;
        bool digits = false;
        while (pos < line.size() && line[pos] >= '0' && line[pos] <= '9') {
          value = value * 10 + (line[pos] - '0');
          digits = true;
          ++pos;
        }
        if (digits) ordinal = value;
      }
    }
    if (std::find(ordinals.begin(), ordinals.end(), ordinal) == ordinals.end()) ordinals.push_back(ordinal);
  }
  return ordinals;
}

std::unique_ptr<WorkerPool> WorkerPool::Create(const WorkerPoolOptions& options) {
  // Writing to a worker that just died must fail with EPIPE, not kill the daemon.
  ::signal(SIGPIPE, SIG_IGN);
  std::unique_ptr<WorkerPool> pool(new WorkerPool(options));
  pool->Discover();
  return pool;
}

void WorkerPool::Discover() {
  auto log = Logger("server");
  if (options_.worker_path.empty()) {
    no_device_note_ = "no GPU: no worker binary configured; serving the database and compiling only";
    return;
  }
  // --list is best effort: it only tells how many devices to try. Each
  // worker's Hello is what counts.
  std::vector<int> ordinals;
  StatusOr<std::string> listed = RunWorkerList(options_.worker_path, options_.worker_args, options_.list_timeout_ms);
  if (listed.ok()) {
    ordinals = ParseListOrdinals(*listed);
  } else {
    log->warn("{} --list failed: {}", options_.worker_path, listed.status().ToString());
  }
  const bool probe = ordinals.empty();
  if (probe) {
    // Nothing listed: probe ordinals 0, 1, ... until a worker says there is no such device.
    for (int i = 0; i < options_.max_devices; ++i) ordinals.push_back(i);
  }
  std::set<std::string> uuids;
  std::string first_error;
  for (int ordinal : ordinals) {
    if (static_cast<int>(devices_.size()) >= options_.max_devices) break;
    auto device = std::make_unique<Device>();
    device->ordinal = ordinal;
    StatusOr<v1::Hello> hello =
        device->process.Start(options_.worker_path, ordinal, options_.worker_args, options_.hello_timeout_ms);
    std::string error;
    if (!hello.ok()) {
      error = hello.status().message();
    } else if (!hello->error().empty()) {
      error = hello->error();
    } else if (hello->devices_size() == 0) {
      error = "worker's Hello names no device";
    }
    if (error.empty()) {
      v1::DeviceInfo info = hello->devices(0);
      info.set_ordinal(ordinal);
      if (!uuids.insert(info.uuid()).second) {
        // A worker that ignored --device; this GPU is already driven.
        device->process.Stop(options_.stop_grace_ms);
        if (probe) break;
        continue;
      }
      log->info("device {}: {} ({}), worker pid {}", ordinal, info.name(), info.uuid(), device->process.pid());
      device->info = std::move(info);
      devices_.push_back(std::move(device));
      continue;
    }
    if (device->process.running()) device->process.Stop(options_.stop_grace_ms);
    if (first_error.empty()) first_error = error;
    if (probe) {
      if (ordinal == 0) log->info("no GPU: worker says: {}", error);
      break;
    }
    log->warn("device {} skipped: {}", ordinal, error);
  }
  if (devices_.empty()) {
    // The worker's own message already starts with "no GPU: "; say it once.
    std::string why = first_error.empty() ? std::string("worker lists no device") : first_error;
    if (why.rfind("no GPU: ", 0) == 0) why = why.substr(8);
    no_device_note_ = "no GPU: serving the database and compiling only (" + why + ")";
  }
}

WorkerPool::~WorkerPool() {
  for (auto& device : devices_) {
    std::lock_guard<std::mutex> lock(device->job_mu);
    device->process.Stop(options_.stop_grace_ms);
  }
}

std::string WorkerPool::note() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string note = no_device_note_;
  for (const auto& device : devices_) {
    if (device->available.load()) continue;
    if (!note.empty()) note += "; ";
    note += "device " + std::to_string(device->ordinal) + " (" + device->info.uuid() +
            ") unavailable: " + device->problem;
  }
  return note;
}

void WorkerPool::Interrupt() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    interrupted_ = true;
  }
  interrupted_cv_.notify_all();
  for (auto& device : devices_) {
    // Killing a busy worker makes its RunJob see EOF and return at once.
    if (device->busy.load()) device->process.Kill();
  }
}

bool WorkerPool::Backoff(int ms) {
  std::unique_lock<std::mutex> lock(mu_);
  return !interrupted_cv_.wait_for(lock, std::chrono::milliseconds(ms), [&] { return interrupted_.load(); });
}

Status WorkerPool::EnsureRunning(Device& device) {
  if (device.process.running()) return Status::Ok();
  auto log = Logger("server");
  std::string error;
  int backoff_ms = options_.backoff_initial_ms;
  for (int attempt = 0; attempt < options_.start_attempts; ++attempt) {
    if (interrupted_) return Aborted("daemon shutting down");
    if (attempt > 0 && !Backoff(backoff_ms)) return Aborted("daemon shutting down");
    if (attempt > 0) backoff_ms *= 2;
    StatusOr<v1::Hello> hello =
        device.process.Start(options_.worker_path, device.ordinal, options_.worker_args, options_.hello_timeout_ms);
    if (!hello.ok()) {
      error = hello.status().message();
    } else if (!hello->error().empty()) {
      error = hello->error();
      device.process.Stop(options_.stop_grace_ms);
    } else {
      if (hello->devices_size() > 0 && hello->devices(0).uuid() != device.info.uuid()) {
        log->warn("device {}: restarted worker reports {} instead of {}", device.ordinal, hello->devices(0).uuid(),
                  device.info.uuid());
      }
      log->info("device {}: worker started, pid {}", device.ordinal, device.process.pid());
      if (!device.available.exchange(true)) log->info("device {} available again", device.ordinal);
      return Status::Ok();
    }
    log->warn("device {}: worker start attempt {} failed: {}", device.ordinal, attempt + 1, error);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    device.problem = "its worker cannot start: " + error;
  }
  device.available = false;
  return Unavailable("device " + std::to_string(device.ordinal) + " (" + device.info.name() + ", " +
                     device.info.uuid() + ") is unavailable: its worker cannot start: " + error);
}

StatusOr<std::vector<v1::Record>> WorkerPool::RunJob(int index, const v1::Job& job, const EventFn& on_event) {
  if (index < 0 || index >= device_count()) return NotFound("no device with index " + std::to_string(index));
  Device& device = *devices_[index];
  std::lock_guard<std::mutex> job_lock(device.job_mu);
  struct BusyGuard {
    std::atomic<bool>& busy;
    ~BusyGuard() { busy = false; }
  } busy_guard{device.busy};
  device.busy = true;
  auto log = Logger("server");
  const int timeout_ms = static_cast<int>(options_.candidate_timeout_s * 1000.0);

  std::map<std::string, v1::Record> finished;
  std::vector<std::string> order;
  for (const v1::Candidate& c : job.candidates()) order.push_back(c.variant());
  int crashes_without_progress = 0;

  auto emit = [&](const v1::Record& record) {
    if (!on_event) return;
    v1::WorkerEvent event;
    *event.mutable_record() = record;
    on_event(event);
  };

  while (finished.size() < static_cast<size_t>(job.candidates_size())) {
    if (interrupted_) return Aborted("daemon shutting down");
    RETURN_IF_ERROR(EnsureRunning(device));
    // Interrupt() may have come between the check and the start: it could not kill this worker.
    if (interrupted_) return Aborted("daemon shutting down");

    v1::WorkerCommand command;
    v1::Job* sub = command.mutable_job();
    *sub = job;
    sub->clear_candidates();
    for (const v1::Candidate& c : job.candidates()) {
      if (!finished.count(c.variant())) *sub->add_candidates() = c;
    }
    const int submitted = sub->candidates_size();
    size_t finished_before = finished.size();

    std::string started;        // the variant named by the last CandidateStarted, unfinished
    std::string started_phase;
    bool job_done = false;
    std::string done_error;
    std::string failure;        // how the worker was lost, empty while it lives
    Status sent = device.process.Send(command);
    if (!sent.ok()) failure = "could not send the job: " + sent.message();

    while (failure.empty() && !job_done) {
      v1::WorkerEvent event;
      Status read = device.process.Read(&event, timeout_ms);
      if (read.code() == StatusCode::kDeadlineExceeded) {
        // Hung: the watchdog fires. SIGKILL, reap, blame the started candidate.
        device.process.Kill();
        const std::string how = device.process.Reap();
        failure = "hung (silent for " + Seconds(options_.candidate_timeout_s) + "), killed: " + how;
        if (!started.empty() && !interrupted_) {
          v1::Record record = BlameRecord(job, started, v1::TIMEOUT,
                                          "no word from the worker for " + Seconds(options_.candidate_timeout_s) + " during " +
                                              started_phase + "; worker killed");
          emit(record);
          finished[started] = std::move(record);
        }
        break;
      }
      if (!read.ok()) {
        // EOF or a broken frame: the worker is gone (or must go).
        device.process.Kill();
        const std::string how = device.process.Reap();
        failure = "died (" + how + ")";
        if (!started.empty() && !interrupted_) {
          v1::Record record = BlameRecord(job, started, v1::ILLEGAL_ADDRESS,
                                          "worker died during " + started_phase + ": " + how +
                                              (read.code() == StatusCode::kUnavailable ? "" : "; " + read.message()));
          emit(record);
          finished[started] = std::move(record);
        }
        break;
      }
      if (event.has_started()) {
        if (!finished.count(event.started().variant())) {
          started = event.started().variant();
          started_phase = event.started().phase();
        }
      } else if (event.has_record()) {
        const std::string& variant = event.record().variant();
        if (std::find(order.begin(), order.end(), variant) == order.end()) {
          log->warn("device {}: worker sent a record for '{}', not in job {}", device.ordinal, variant, job.job_id());
        } else {
          finished[variant] = event.record();
        }
        if (variant == started) started.clear();
      } else if (event.has_done()) {
        if (event.done().job_id() == job.job_id()) {
          job_done = true;
          done_error = event.done().error();
        }
      }
      if (on_event) on_event(event);
    }

    if (interrupted_) return Aborted("daemon shutting down");
    if (!failure.empty()) {
      device.restarts++;
      log->warn("device {}: worker {} during job {}; restarting ({} of {} candidates left)", device.ordinal, failure,
                job.job_id(), job.candidates_size() - finished.size(), job.candidates_size());
      if (finished.size() == finished_before) {
        if (++crashes_without_progress > options_.max_crashes_without_progress) {
          return Unavailable("device " + std::to_string(device.ordinal) + ": worker keeps failing outside any candidate (" +
                             failure + ")");
        }
      } else {
        crashes_without_progress = 0;
      }
      continue;
    }
    if (!done_error.empty()) return Internal("worker failed job " + std::to_string(job.job_id()) + ": " + done_error);
    if (finished.size() < static_cast<size_t>(job.candidates_size())) {
      std::string missing;
      for (const std::string& v : order) {
        if (!finished.count(v)) missing += (missing.empty() ? "" : ", ") + v;
      }
      return Internal("worker ended job " + std::to_string(job.job_id()) + " without a record for: " + missing +
                      " (" + std::to_string(submitted) + " submitted)");
    }
  }

  std::vector<v1::Record> records;
  records.reserve(order.size());
  for (const std::string& v : order) records.push_back(finished[v]);
  return records;
}

}  // namespace scantune
