// JobRunner: runs the daemon's jobs on the worker's device and reports each
// step as WorkerEvents: CandidateStarted before the GPU touches a candidate
// (so the daemon can blame it if the worker dies or hangs), a Record per
// failed candidate as soon as it failed, a Record per legal candidate after
// timing, then JobDone. It owns nothing on the device between jobs.
//
// Thread safety: not thread-safe; the worker's one thread calls Run.
#pragma once

#include <functional>
#include <string>

#include "common/status.h"
#include "proto/worker.pb.h"
#include "worker/gpu_context.h"

namespace scantune {

class JobRunner {
 public:
  using Emit = std::function<Status(const v1::WorkerEvent&)>;
  static constexpr double kDefaultKernelTimeoutMs = 10000.0;

  JobRunner(const GpuContext& ctx, v1::DeviceInfo device, std::string source_hash, Emit emit);

  // OK when the job ran to its JobDone (a job-level failure travels in
  // JobDone.error). ABORTED when the context was lost (sticky fault or hung
  // kernel): the failed candidate's Record has been sent, no JobDone follows,
  // and the worker must exit so the daemon starts a fresh one. Other errors:
  // the daemon connection failed.
  Status Run(const v1::Job& job);

  // "2026-11-29T19:50:30.123Z"
  static std::string NowIso8601();

 private:
  v1::Record BaseRecord(const v1::Job& job, const v1::Candidate& candidate) const;
  Status Started(const v1::Job& job, const v1::Candidate& candidate, const char* phase);

  const GpuContext& ctx_;
  v1::DeviceInfo device_;
  std::string source_hash_;
  Emit emit_;
};

}  // namespace scantune
