// WorkerPool: GPU discovery and one supervised scantune-worker per GPU.
// Owns the WorkerProcess of every device, the watchdog and the restart
// policy. Discovery never initialises CUDA in the daemon: `worker --list` (best
// effort) says how many devices there are, and each device's worker says in
// its Hello what it drives ("no GPU" in Hello.error means no devices).
//
// RunJob sends a Job and collects one Record per candidate. Every event from
// the worker resets a deadline of candidate_timeout_s; silence past it means
// the worker hangs: it is killed and the candidate named by the last
// CandidateStarted is recorded TIMEOUT. A worker that dies while a candidate
// is started gets that candidate recorded ILLEGAL_ADDRESS (detail: how it
// died). Either way the worker is restarted (with backoff) and the unfinished
// candidates are resubmitted. A worker that cannot start makes its device
// unavailable (an error for that job), never the daemon.
//
// Thread safety: the device list is fixed at Create. RunJob calls for one
// device are serialized (the Engine runs one job at a time per device anyway);
// calls for different devices run in parallel. Interrupt() may be called from
// any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"
#include "proto/worker.pb.h"
#include "server/worker_process.h"

namespace scantune {

struct WorkerPoolOptions {
  std::string worker_path;                // empty: no workers, no devices
  std::vector<std::string> worker_args;   // appended to every worker's command line
  double candidate_timeout_s = 60.0;      // watchdog: silence this long means hung
  int hello_timeout_ms = 60000;           // a worker initialising CUDA may take a while
  int list_timeout_ms = 30000;
  int max_devices = 16;
  int start_attempts = 3;                 // per (re)start, with doubling backoff
  int backoff_initial_ms = 100;
  int max_crashes_without_progress = 2;   // a worker dying outside any candidate this often fails the job
  int stop_grace_ms = 1000;               // polite shutdown before SIGKILL
};

class WorkerPool {
 public:
  // Discovers the devices and starts their workers. Never fails for a missing
  // GPU or a broken worker binary: the pool then has no devices and note() says why.
  static std::unique_ptr<WorkerPool> Create(const WorkerPoolOptions& options);
  ~WorkerPool();  // stops every worker (shutdown command, then SIGKILL) and reaps it
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  int device_count() const { return static_cast<int>(devices_.size()); }
  // As reported in the worker's Hello.
  const v1::DeviceInfo& device(int index) const { return devices_[index]->info; }
  // Why there are no devices ("no GPU: ..."), or which devices are unavailable; may be empty.
  std::string note() const;
  bool available(int index) const { return devices_[index]->available.load(); }
  // How often the device's worker was restarted after a crash or hang.
  int restarts(int index) const { return devices_[index]->restarts.load(); }
  pid_t worker_pid(int index) const { return devices_[index]->process.pid(); }

  using EventFn = std::function<void(const v1::WorkerEvent&)>;
  // One record per candidate, in candidate order. Worker events are passed to
  // on_event (on the calling thread) as they arrive; so are the synthesized
  // TIMEOUT / ILLEGAL_ADDRESS records. Errors: UNAVAILABLE when the worker cannot
  // be (re)started, ABORTED after Interrupt(), INTERNAL when the worker breaks protocol.
  StatusOr<std::vector<v1::Record>> RunJob(int index, const v1::Job& job, const EventFn& on_event);

  // Makes running and future RunJob calls return ABORTED promptly (kills busy
  // workers). Used on daemon shutdown before the job threads are joined.
  void Interrupt();

 private:
  struct Device {
    v1::DeviceInfo info;
    int ordinal = 0;
    std::mutex job_mu;              // serializes RunJob on this device
    WorkerProcess process;          // used under job_mu (Kill excepted)
    std::atomic<bool> available{true};
    std::atomic<bool> busy{false};
    std::atomic<int> restarts{0};
    std::string problem;            // why unavailable; guarded by pool mu_
  };

  explicit WorkerPool(const WorkerPoolOptions& options) : options_(options) {}
  void Discover();
  // Starts the device's worker if it is not running; job_mu held.
  Status EnsureRunning(Device& device);
  // Sleeps ms unless interrupted; false when interrupted.
  bool Backoff(int ms);

  const WorkerPoolOptions options_;
  std::vector<std::unique_ptr<Device>> devices_;
  mutable std::mutex mu_;
  std::condition_variable interrupted_cv_;
  std::atomic<bool> interrupted_{false};
  std::string no_device_note_;      // guarded by mu_
};

// Ordinals named in `worker --list` output (one JSON object per line, each
// with an "ordinal" field; a line without one counts as the next ordinal).
std::vector<int> ParseListOrdinals(const std::string& list_output);

}  // namespace scantune
