#include "worker/job_runner.h"

#include <chrono>
#include <ctime>
#include <memory>

#include "common/log.h"
#include "common/problem.h"
#include "worker/candidate_module.h"
#include "worker/timer.h"
#include "worker/verifier.h"

namespace scantune {

JobRunner::JobRunner(const GpuContext& ctx, v1::DeviceInfo device, std::string source_hash, Emit emit)
    : ctx_(ctx), device_(std::move(device)), source_hash_(std::move(source_hash)), emit_(std::move(emit)) {}

std::string JobRunner::NowIso8601() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t secs = std::chrono::system_clock::to_time_t(now);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm utc{};
  gmtime_r(&secs, &utc);
  char buf[40];
  const size_t len = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &utc);
  std::snprintf(buf + len, sizeof buf - len, ".%03dZ", static_cast<int>(ms));
  return buf;
}

v1::Record JobRunner::BaseRecord(const v1::Job& job, const v1::Candidate& candidate) const {
  v1::Record r;
  *r.mutable_device() = device_;
  r.set_source_hash(source_hash_);  // daemon_version is the daemon's to fill
  *r.mutable_problem() = job.problem();
  r.set_variant(candidate.variant());
  r.set_compile_ms(candidate.compile_ms());
  r.set_origin(job.origin());
  r.set_job_id(job.job_id());
  r.set_created_at(NowIso8601());
  auto problem = ProblemFromProto(job.problem());
  if (problem.ok()) {
    r.set_parameters(ParameterCount(*problem));
    r.set_dynamic_control_values_per_token(ControlValuesPerToken(*problem));
  }
  // No kernel of ours writes a (B, L, W) transition tensor: the operators'
  // tensors (worker/op_io.h) are the only buffers besides the workspace.
  r.set_materialized_state_sized_transition(false);
  return r;
}

Status JobRunner::Started(const v1::Job& job, const v1::Candidate& candidate, const char* phase) {
  v1::WorkerEvent event;
  event.mutable_started()->set_job_id(job.job_id());
  event.mutable_started()->set_variant(candidate.variant());
  event.mutable_started()->set_phase(phase);
  return emit_(event);
}

Status JobRunner::Run(const v1::Job& job) {
  auto log = Logger("worker");
  auto done = [&](const std::string& error) -> Status {
    if (!error.empty()) log->error("job {}: {}", job.job_id(), error);
    v1::WorkerEvent event;
    event.mutable_done()->set_job_id(job.job_id());
    event.mutable_done()->set_error(error);
    return emit_(event);
  };
  auto send_record = [&](v1::Record record) -> Status {
    v1::WorkerEvent event;
    *event.mutable_record() = std::move(record);
    return emit_(event);
  };
  auto problem_or = ProblemFromProto(job.problem());
  if (!problem_or.ok()) return done("invalid problem: " + problem_or.status().message());
  const Problem problem = *problem_or;
  RETURN_IF_ERROR(ctx_.MakeCurrent());
  const double kernel_timeout_ms = job.kernel_timeout_ms() > 0 ? job.kernel_timeout_ms() : kDefaultKernelTimeoutMs;
  log->info("job {}: {} candidates on {} (verify {}, time {})", job.job_id(), job.candidates_size(), problem.Key(),
            job.verify(), job.time());

  // Verification, or for a time-only job a run without comparison, which
  // still catches faults and hangs before timing and measures memory.
  Verifier verifier(ctx_, problem, job.seed(), {kernel_timeout_ms, /*check=*/job.verify()});
  std::vector<int> legal;
  std::vector<CandidateOutcome> outcomes(job.candidates_size());
  for (int i = 0; i < job.candidates_size(); ++i) {
    const v1::Candidate& candidate = job.candidates(i);
    if (!job.verify() && !job.time()) break;
    RETURN_IF_ERROR(Started(job, candidate, "verify"));
    auto outcome = verifier.Verify(candidate);
    if (!outcome.ok()) return done("verifying " + candidate.variant() + ": " + outcome.status().message());
    outcomes[i] = *outcome;
    log->info("job {}: {} {} rel_err {:.3g}{}{}", job.job_id(), candidate.variant(),
              v1::ResultState_Name(outcome->state), outcome->rel_err, outcome->detail.empty() ? "" : ": ",
              outcome->detail);
    if (outcome->ok()) {
      legal.push_back(i);
      continue;
    }
    v1::Record record = BaseRecord(job, candidate);
    record.set_state(outcome->state);
    record.set_detail(outcome->detail);
    record.set_rel_err(outcome->rel_err);
    *record.mutable_memory() = outcome->memory;
    RETURN_IF_ERROR(send_record(std::move(record)));
    if (outcome->context_lost) return Aborted("context lost on " + candidate.variant() + ": " + outcome->detail);
  }

  auto ok_record = [&](int i) {
    v1::Record record = BaseRecord(job, job.candidates(i));
    record.set_state(v1::OK);
    record.set_rel_err(outcomes[i].rel_err);
    *record.mutable_memory() = outcomes[i].memory;
    record.set_bytes_moved(FloorBytes(problem, problem.mode));
    return record;
  };
  if (!job.time() || legal.empty()) {
    for (int i : legal) RETURN_IF_ERROR(send_record(ok_record(i)));
    return done("");
  }

  // Timing: all legal candidates together, in counterbalanced rounds.
  std::vector<std::unique_ptr<CandidateModule>> modules;
  std::vector<TimedCandidate> timed;
  for (int i : legal) {
    CudaFailure failure;
    auto module = CandidateModule::Load(ctx_, job.candidates(i), &failure);
    if (!module.ok()) return done("reloading " + job.candidates(i).variant() + ": " + module.status().message());
    timed.push_back({&job.candidates(i), module->get()});
    modules.push_back(std::move(*module));
  }
  Timer timer(ctx_, problem, TimingSettings::FromProto(job.timing(), job.has_timing()), job.seed(), kernel_timeout_ms,
              device_.copy_gbps(), static_cast<uint64_t>(device_.l2_bytes()), verifier.prepared());
  auto results = timer.Run(timed, [&](size_t k) { return Started(job, job.candidates(legal[k]), "time"); });
  if (!results.ok()) return done("timing: " + results.status().message());
  for (size_t k = 0; k < legal.size(); ++k) {
    const TimingResult& t = (*results)[k];
    if (t.outcome.state == v1::STATE_UNSPECIFIED) continue;  // not reached: the context was lost before it
    v1::Record record = ok_record(legal[k]);
    if (!t.outcome.ok()) {
      record.set_state(t.outcome.state);
      record.set_detail(t.outcome.detail);
      RETURN_IF_ERROR(send_record(std::move(record)));
      if (t.outcome.context_lost) return Aborted("context lost while timing " + job.candidates(legal[k]).variant());
      continue;
    }
    *record.mutable_fwd() = t.fwd;
    *record.mutable_bwd() = t.bwd;
    *record.mutable_fwd_bwd() = t.fwd_bwd;
    for (const v1::Round& round : t.rounds) *record.add_rounds() = round;
    record.set_bytes_moved(t.bytes_moved);
    record.set_gbps(t.gbps);
    record.set_pct_of_copy(t.pct_of_copy);
    RETURN_IF_ERROR(send_record(std::move(record)));
  }
  return done("");
}

}  // namespace scantune
