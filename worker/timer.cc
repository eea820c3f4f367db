#include "worker/timer.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include "common/log.h"
#include "common/stats.h"
#include "worker/device_buffer.h"
#include "worker/dtype_convert.h"

namespace scantune {
namespace {

// More sets than this buy nothing (the L2 is long flushed) and cost memory.
constexpr uint64_t kMaxInputSets = 256;
// Timing buffers may take at most this share of the free device memory.
constexpr double kMaxMemoryShare = 0.5;
// Below this a calibration run is dominated by event resolution and launch cost.
constexpr double kMinCalibrationMs = 0.05;

// One copy of every tensor of the operator (worker/op_io.h).
struct InputSet {
  std::vector<DeviceBuffer> tensors;
  std::vector<CUdeviceptr> pointers;
};

std::vector<const char*> PhasesOf(Mode mode) {
  switch (mode) {
    case Mode::kFwd: return {"fwd"};
    case Mode::kBwd: return {"bwd"};
    case Mode::kFwdBwd: return {"fwd", "bwd"};
  }
  return {};
}

std::vector<Mode> TimedModes(Mode problem_mode) {
  if (problem_mode == Mode::kFwdBwd) return {Mode::kFwd, Mode::kBwd, Mode::kFwdBwd};
  return {problem_mode};
}

v1::Stats* StatsOf(TimingResult& r, Mode mode) {
  switch (mode) {
    case Mode::kFwd: return &r.fwd;
    case Mode::kBwd: return &r.bwd;
    case Mode::kFwdBwd: return &r.fwd_bwd;
  }
  return &r.fwd;
}

google::protobuf::RepeatedField<double>* RoundSamplesOf(v1::Round& round, Mode mode) {
  switch (mode) {
    case Mode::kFwd: return round.mutable_fwd_ms();
    case Mode::kBwd: return round.mutable_bwd_ms();
    case Mode::kFwdBwd: return round.mutable_fwd_bwd_ms();
  }
  return round.mutable_fwd_ms();
}

}  // namespace

TimingSettings TimingSettings::FromProto(const v1::TimingConfig& c, bool config_given) {
  TimingSettings s;
  if (c.warmup_launches() > 0) s.warmup_launches = c.warmup_launches();
  if (c.rounds() > 0) s.rounds = c.rounds();
  if (c.samples_per_round() > 0) s.samples_per_round = c.samples_per_round();
  if (c.target_sample_ms() > 0) s.target_sample_ms = c.target_sample_ms();
  if (c.max_inner() > 0) s.max_inner = c.max_inner();
  // A proto3 bool cannot say "unset": without a TimingConfig at all the
  // protocol's default (rotate) holds; with one, its flag decides.
  s.rotate_inputs = config_given ? c.rotate_inputs() : true;
  return s;
}

Timer::Timer(const GpuContext& ctx, const Problem& problem, TimingSettings settings, uint64_t seed,
             double kernel_timeout_ms, double copy_gbps, uint64_t l2_bytes, const OpCase* prepared)
    : ctx_(ctx),
      problem_(problem),
      settings_(settings),
      seed_(seed),
      kernel_timeout_ms_(kernel_timeout_ms),
      copy_gbps_(copy_gbps),
      l2_bytes_(l2_bytes),
      prepared_(prepared) {}

StatusOr<std::vector<TimingResult>> Timer::Run(const std::vector<TimedCandidate>& candidates,
                                               const StintCallback& on_stint) {
  auto log = Logger("worker");
  const auto& api = ctx_.api();
  const auto& driver = ctx_.driver();
  std::vector<TimingResult> results(candidates.size());
  for (TimingResult& r : results) r.outcome.state = v1::STATE_UNSPECIFIED;
  if (candidates.empty()) return results;

  const OpIo& io = OpIoFor(problem_.op);
  // The job's inputs as the Verifier already encoded them (generating them
  // is the costly part); generated here when no Verifier ran.
  std::optional<OpCase> generated;
  if (prepared_ == nullptr) generated = io.Prepare(problem_, seed_, /*check=*/false);
  const OpCase& job = prepared_ != nullptr ? *prepared_ : *generated;
  const std::vector<TensorSpec>& tensors = job.tensors;
  uint64_t set_bytes = 0;
  for (const TensorSpec& t : tensors) set_bytes += t.bytes();

  // Each candidate's workspace, allocated for the whole run (its stints are
  // spread over the rounds). A candidate whose workspace does not fit is
  // OUT_OF_MEMORY; it is not timed.
  std::vector<DeviceBuffer> workspaces(candidates.size());
  for (size_t i = 0; i < candidates.size(); ++i) {
    CudaFailure failure;
    auto ws = DeviceBuffer::Allocate(ctx_, candidates[i].module->workspace_bytes(), false, &failure);
    if (!ws.ok()) {
      results[i].outcome = CandidateOutcome::FromCudaFailure(failure, ws.status().Annotate("workspace for timing"));
      if (results[i].outcome.state == v1::STATE_UNSPECIFIED) return ws.status();
      continue;
    }
    workspaces[i] = std::move(*ws);
    RETURN_IF_ERROR(candidates[i].module->PrepareWorkspace(workspaces[i].ptr(), &failure));
  }

  // k input sets whose total exceeds 2x the L2, within half the free memory.
  ASSIGN_OR_RETURN(uint64_t free_bytes, ctx_.MemoryFree());
  uint64_t want = settings_.rotate_inputs ? (2 * l2_bytes_ + set_bytes - 1) / set_bytes : 1;
  const uint64_t fit = static_cast<uint64_t>(static_cast<double>(free_bytes) * kMaxMemoryShare) / std::max<uint64_t>(set_bytes, 1);
  const uint64_t k_target = std::max<uint64_t>(1, std::min({want, fit, kMaxInputSets}));
  if (k_target < want) {
    log->warn("{}: {} input sets fit in memory, {} wanted; the L2 may serve part of the inputs", problem_.Key(),
              k_target, want);
  }
  std::vector<InputSet> sets;
  for (uint64_t k = 0; k < k_target; ++k) {
    InputSet set;
    CudaFailure failure;
    Status st;
    for (const TensorSpec& t : tensors) {
      auto r = DeviceBuffer::Allocate(ctx_, t.bytes(), false, &failure);
      if (!r.ok()) {
        st = r.status();
        break;
      }
      set.pointers.push_back(r->ptr());
      set.tensors.push_back(std::move(*r));
    }
    if (!st.ok()) {
      if (failure.result == CUDA_ERROR_OUT_OF_MEMORY && !sets.empty()) break;  // time with fewer sets
      if (failure.result == CUDA_ERROR_OUT_OF_MEMORY) {
        for (TimingResult& r : results) {
          if (r.outcome.state != v1::STATE_UNSPECIFIED) continue;
          r.outcome.state = v1::OUT_OF_MEMORY;
          r.outcome.detail = "no memory for one input set of the timing run: " + st.message();
        }
        return results;
      }
      return st;
    }
    // Inputs from the job (the first set uploads, the others copy it);
    // everything else starts as zeros, finite values the bwd may read
    // before any fwd has written its saved tensors.
    for (size_t i = 0; i < tensors.size(); ++i) {
      DeviceBuffer& b = set.tensors[i];
      if (job.bytes[i].empty()) {
        RETURN_IF_ERROR(b.Fill(0, nullptr));
      } else if (sets.empty()) {
        RETURN_IF_ERROR(b.Upload(job.bytes[i].data(), job.bytes[i].size(), nullptr));
      } else {
        const DeviceBuffer& from = sets.front().tensors[i];
        RETURN_IF_ERROR(driver.Check(api.MemcpyDtoD(b.ptr(), from.ptr(), from.bytes()), "cuMemcpyDtoD"));
      }
    }
    sets.push_back(std::move(set));
  }
  // The parameter struct of every (set, candidate) pair, packed once: the
  // timing loop only passes pointers.
  std::vector<std::vector<std::vector<uint8_t>>> params(sets.size());
  for (size_t k = 0; k < sets.size(); ++k) {
    for (size_t i = 0; i < candidates.size(); ++i) {
      params[k].push_back(io.Params(problem_, sets[k].pointers, workspaces[i].ptr()));
    }
  }
  const int input_sets = static_cast<int>(sets.size());

  CUevent start = nullptr, stop = nullptr;
  RETURN_IF_ERROR(driver.Check(api.EventCreate(&start, CU_EVENT_DEFAULT), "cuEventCreate"));
  RETURN_IF_ERROR(driver.Check(api.EventCreate(&stop, CU_EVENT_DEFAULT), "cuEventCreate"));
  struct EventGuard {
    const CudaDriver::Api& api;
    CUevent a, b;
    ~EventGuard() {
      api.EventDestroy(a);
      api.EventDestroy(b);
    }
  } event_guard{api, start, stop};

  const std::vector<Mode> modes = TimedModes(problem_.mode);
  // SCANTUNE_DIAG_SKIP_KERNEL (diagnosis only, e.g. scripts of bench/results): times every launch without the
  // kernels whose entry contains it, after verification ran them all, so that the difference to a normal run
  // is what that kernel costs inside its PDL chain; "!NAME" times those kernels alone (the rest left out).
  // Such timings are ablations, not the variant's.
  static const std::string skip = [] {
    const char* env = std::getenv("SCANTUNE_DIAG_SKIP_KERNEL");
    return std::string(env != nullptr ? env : "");
  }();
  if (!skip.empty()) log->warn("SCANTUNE_DIAG_SKIP_KERNEL={}: timing without those kernels (an ablation)", skip);
  size_t cursor = 0;
  // Queues one launch of `mode` (all its phases) on the next input set.
  auto enqueue = [&](size_t i, Mode mode, CudaFailure* failure) -> Status {
    const std::vector<uint8_t>& packed = params[cursor][i];
    cursor = (cursor + 1) % sets.size();
    for (const char* phase : PhasesOf(mode)) {
      RETURN_IF_ERROR(candidates[i].module->Enqueue(phase, packed.data(), workspaces[i].ptr(), failure, skip));
    }
    return Status::Ok();
  };
  const double sample_timeout_ms = kernel_timeout_ms_ + 100.0 * settings_.target_sample_ms;
  // Mean ms per launch over `count` back-to-back launches between two events.
  auto measure = [&](size_t i, Mode mode, int count, CudaFailure* failure) -> StatusOr<double> {
    RETURN_IF_ERROR(driver.Check(api.EventRecord(start, ctx_.stream()), "cuEventRecord", CudaCallSite::kSetup, failure));
    for (int j = 0; j < count; ++j) RETURN_IF_ERROR(enqueue(i, mode, failure));
    RETURN_IF_ERROR(driver.Check(api.EventRecord(stop, ctx_.stream()), "cuEventRecord", CudaCallSite::kSetup, failure));
    RETURN_IF_ERROR(ctx_.WaitEvent(stop, sample_timeout_ms, "timing sample", failure));
    float ms = 0.0f;
    RETURN_IF_ERROR(driver.Check(api.EventElapsedTime(&ms, start, stop), "cuEventElapsedTime", CudaCallSite::kSetup,
                                 failure));
    return static_cast<double>(ms) / count;
  };

  std::vector<std::map<Mode, int>> inner(candidates.size());
  std::vector<std::map<Mode, std::vector<double>>> samples(candidates.size());
  auto stint = [&](size_t i, int round, int order_index, CudaFailure* failure) -> Status {
    for (Mode mode : modes) {
      for (int w = 0; w < settings_.warmup_launches; ++w) RETURN_IF_ERROR(enqueue(i, mode, failure));
    }
    // The kernel timeout bounds each phase; the warm-up queued up to
    // 2 phases per launch for every mode.
    const int phases_queued = settings_.warmup_launches * 2 * static_cast<int>(modes.size());
    RETURN_IF_ERROR(ctx_.WaitStream(kernel_timeout_ms_ * std::max(1, phases_queued), "warm-up", failure));
    v1::Round record;
    record.set_round(round);
    record.set_order_index(order_index);
    for (Mode mode : modes) {
      if (inner[i].count(mode) == 0) {
        // Calibrate once: grow the count until a run is long enough to
        // measure, then size the loop to the target sample length.
        int count = 1;
        while (true) {
          ASSIGN_OR_RETURN(double per_launch, measure(i, mode, count, failure));
          if (per_launch * count >= kMinCalibrationMs || count >= settings_.max_inner) {
            const double want = std::ceil(settings_.target_sample_ms / std::max(per_launch, 1e-6));
            inner[i][mode] = static_cast<int>(std::clamp(want, 1.0, static_cast<double>(settings_.max_inner)));
            break;
          }
          count = std::min(settings_.max_inner, count * 8);
        }
      }
      for (int s = 0; s < settings_.samples_per_round; ++s) {
        ASSIGN_OR_RETURN(double ms, measure(i, mode, inner[i][mode], failure));
        samples[i][mode].push_back(ms);
        RoundSamplesOf(record, mode)->Add(ms);
      }
    }
    results[i].rounds.push_back(std::move(record));
    return Status::Ok();
  };

  for (int round = 0; round < settings_.rounds; ++round) {
    std::vector<size_t> order;
    for (size_t i = 0; i < candidates.size(); ++i) order.push_back(i);
    if (round % 2 == 1) std::reverse(order.begin(), order.end());
    int position = 0;
    for (size_t i : order) {
      // Failed candidates (no workspace, a fault) sit out the remaining rounds.
      if (results[i].outcome.state != v1::STATE_UNSPECIFIED) continue;
      RETURN_IF_ERROR(on_stint(i));
      CudaFailure failure;
      Status st = stint(i, round, position++, &failure);
      if (st.ok()) continue;
      if (!failure.failed()) return st;
      results[i].outcome = CandidateOutcome::FromCudaFailure(failure, st.Annotate("timing"));
      if (results[i].outcome.state == v1::STATE_UNSPECIFIED) return st;
      if (results[i].outcome.context_lost) {
        ctx_.MarkLost();  // the sets and workspaces below must not be freed
        return results;
      }
    }
  }

  const Mode ranked = problem_.mode;
  for (size_t i = 0; i < candidates.size(); ++i) {
    TimingResult& r = results[i];
    if (r.outcome.state != v1::STATE_UNSPECIFIED) continue;
    r.outcome.state = v1::OK;
    for (Mode mode : modes) {
      v1::Stats* stats = StatsOf(r, mode);
      FillStats(samples[i][mode], stats);
      stats->set_inner_count(inner[i][mode]);
      stats->set_input_sets(input_sets);
    }
    r.bytes_moved = FloorBytes(problem_, ranked);
    const double median_ms = StatsOf(r, ranked)->median_ms();
    if (median_ms > 0.0) r.gbps = static_cast<double>(r.bytes_moved) / (median_ms * 1e-3) / 1e9;
    if (copy_gbps_ > 0.0) r.pct_of_copy = 100.0 * r.gbps / copy_gbps_;
  }
  return results;
}

}  // namespace scantune
