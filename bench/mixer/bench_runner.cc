#include "bench/mixer/bench_runner.h"

#include <cuda.h>
#include <nvrtc.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "bench/mixer/blas.h"
#include "bench/mixer/glue_kernels.h"
#include "bench/common/json_writer.h"
#include "bench/mixer/mixers.h"
#include "client/scantune_client.h"
#include "common/log.h"
#include "worker/cuda_driver.h"
#include "worker/device_info.h"
#include "worker/gpu_context.h"

namespace scantune::mixer {

using bench::JsonWriter;
namespace {

enum TimedMode { kForward = 0, kBackward = 1, kForwardBackward = 2 };
constexpr std::array<TimedMode, 3> kModes = {kForward, kBackward, kForwardBackward};
constexpr const char* kModeNames[] = {"forward", "backward", "forward_backward"};
// Below this a calibration run is dominated by event resolution and launch cost.
constexpr double kMinCalibrationMs = 0.05;
constexpr int kMaxInputSets = 64;
constexpr double kMaxMemoryShare = 0.5;
constexpr double kWaitTimeoutMs = 300000.0;

std::string VersionText(int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); }

std::vector<ProtocolEntry> Protocol(const MixerOptions& o, uint64_t l2_bytes) {
  const std::string heads = std::to_string(o.heads);
  return {
      {"scope",
       "complete mixer preparation, recurrence, input and parameter gradients. RG-LRU: block-diagonal gate "
       "projections ga, gx (" + heads + " heads, cuBLAS strided-batched GEMMs on token-major activations), bias adds "
       "and the per-forward fp32->bf16 weight cast (NVRTC glue kernels), the rglru recurrence backend; backward: "
       "the backend, dWa, dWx, dba, dbx, dLambda and dx = dx_direct + dga Wa + dgx Wx. SAMU: the samu backend "
       "alone (recurrence and its 4-parameter controller), input and parameter gradients",
       {}},
      {"dtype", "BF16 activations and gate GEMMs (FP32 accumulate), FP32 parameters (cast to bf16 each forward for "
                "the GEMMs, as autocast), FP32 recurrent carry",
       {}},
      {"input_gradient", "", true},
      {"order", "AB/BA counterbalanced", {}},
      {"compile_excluded", "", true},
      {"baseline_policy",
       "RG-LRU recurrence backend: the scantune service's selection (Select op rglru, bf16, fwd_bwd, no h0, this "
       "GPU; the strongest calibrated legal backend per shape); its name is each row's backend",
       {}},
      {"samu_policy", "SAMU backend: the scantune service's selection (Select op samu, bf16, fwd_bwd, no h0, this GPU)",
       {}},
      {"resets", "independent sequences reset at first token; no internal packed reset", {}},
      // Ours.
      {"timing",
       "CUDA events around each sample; " + std::to_string(o.warmup) +
           " warm-up launches per mode before each stint; each sample is the mean of an inner loop calibrated once "
           "per architecture and mode to >= " + JsonWriter::FormatNumber(o.target_ms) + " ms (at most " +
           std::to_string(o.max_inner) + " launches); " + std::to_string(o.samples) + " samples per mode per round, " +
           std::to_string(o.rounds) + " rounds (round r: rglru then samu for even r, samu then rglru for odd r); "
           "modes forward, backward (on the saved tensors of a forward run before the stint), forward_backward; "
           "std_ms is the population standard deviation",
       {}},
      {"l2",
       "per-token buffers rotated over input_sets sets when one set is under 2x the L2 (" +
           std::to_string(l2_bytes >> 20) + " MiB); before every sample the L2 is overwritten by a cuMemsetD8 of 2x "
           "L2 bytes, outside the events",
       {}},
      {"workspace", "each backend runs under the worker's workspace contract (client/kernel_launcher.h): "
                    "workspace_zero_bytes zeroed (cuMemsetD8Async) before each phase, inside the timing, or once per "
                    "allocation where the backend's kernels keep it ready (workspace_zero_once)",
       {}},
      {"memory",
       "no caching allocator here: each architecture is probed alone with one set. baseline_*: device memory in use "
       "(cuMemGetInfo total - free, device-wide: context, modules, cuBLAS, other processes) before its buffers. "
       "peak_allocated_bytes = baseline + the bytes its buffers requested from cuMemAlloc (activations, saved "
       "tensors, gradients, fp32 parameters and bf16 weight copies, workspace); peak_reserved_bytes = in use after "
       "those buffers and one forward + backward (nothing is freed in between, so this is the peak; includes "
       "allocation granularity and cuBLAS's lazy workspace); *_delta_bytes = peak - baseline",
       {}},
      {"gemm_check",
       "after the first forward, ga and gx of 3 heads at 4 rows against a float64 host GEMM of the same bf16 inputs "
       "(+ bias); pass when max|gpu-ref| / max|ref| <= 1e-2",
       {}},
      {"dry_run", "", o.dry_run},
  };
}

std::string SelectHint(const std::string& op, const ShapeKey& s) {
  return "run `scantune tune --op " + op + " --shape " + s.ToString() +
         " --dtype bf16 --mode fwd_bwd` first, or pass --tune-now";
}

struct Backend {
  v1::Selection selection;
  v1::KernelResponse kernel;
};

StatusOr<Backend> FetchBackend(ScantuneClient& client, const std::string& op, const ShapeKey& shape,
                               const std::string& device_uuid, bool tune_now) {
  v1::Problem problem;
  problem.set_op(op);
  problem.mutable_shape()->set_batch(static_cast<uint32_t>(shape.batch));
  problem.mutable_shape()->set_length(static_cast<uint32_t>(shape.length));
  problem.mutable_shape()->set_width(static_cast<uint32_t>(shape.width));
  problem.set_dtype(v1::BF16);
  problem.set_mode(v1::FWD_BWD);
  problem.set_has_h0(false);
  v1::SelectRequest select;
  *select.mutable_problem() = problem;
  select.set_device_uuid(device_uuid);
  select.set_on_miss(tune_now ? v1::TUNE_NOW : v1::NOT_FOUND);
  auto selection = client.Select(select);
  const std::string what = op + " " + shape.ToString() + " bf16 fwd_bwd";
  if (!selection.ok()) {
    if (selection.status().code() == StatusCode::kNotFound) {
      return NotFound("no selection for " + what + " on this GPU (" + selection.status().message() + "): " +
                      SelectHint(op, shape));
    }
    return selection.status().Annotate("Select " + what);
  }
  if (selection->variant().empty()) return NotFound("Select " + what + " answered no variant: " + SelectHint(op, shape));
  if (selection->nearest()) {
    return FailedPrecondition("Select " + what + " answered a nearest-shape selection: " + SelectHint(op, shape));
  }
  auto log = Logger("client");
  if (selection->stale()) {
    log->warn("selection for {} is stale (tuned under {}); timing it anyway", what, selection->fingerprint());
  }
  v1::GetKernelRequest request;
  *request.mutable_problem() = problem;
  request.set_variant(selection->variant());
  request.set_device_uuid(device_uuid);
  request.set_on_miss(v1::NOT_FOUND);
  auto kernel = client.GetKernel(request);
  if (!kernel.ok()) return kernel.status().Annotate("GetKernel " + what + " variant " + selection->variant());
  if (kernel->variant() != selection->variant()) {
    return Internal("GetKernel " + what + " served variant " + kernel->variant() + ", the selection is " +
                    selection->variant());
  }
  log->info("{}: backend {} (record {}, median {:.4f} ms when tuned)", what, selection->variant(),
            selection->record_id(), selection->median_ms());
  return Backend{*selection, *kernel};
}

// The timing state of one architecture at one shape.
struct Timed {
  Mixer* mixer = nullptr;
  int cursor = 0;
  std::array<int, 3> inner = {0, 0, 0};
  std::array<std::vector<double>, 3> samples;
  std::vector<RoundSamples> rounds;
};

class Stopwatch {
 public:
  Stopwatch(const GpuContext& ctx, const MixerOptions& o, CUdeviceptr flush, uint64_t flush_bytes)
      : ctx_(ctx), o_(o), flush_(flush), flush_bytes_(flush_bytes) {}
  ~Stopwatch() {
    if (start_) ctx_.api().EventDestroy(start_);
    if (stop_) ctx_.api().EventDestroy(stop_);
  }
  Status Init() {
    RETURN_IF_ERROR(ctx_.driver().Check(ctx_.api().EventCreate(&start_, CU_EVENT_DEFAULT), "cuEventCreate"));
    return ctx_.driver().Check(ctx_.api().EventCreate(&stop_, CU_EVENT_DEFAULT), "cuEventCreate");
  }

  Status Enqueue(Timed& t, TimedMode mode) {
    const int set = t.cursor;
    t.cursor = (t.cursor + 1) % t.mixer->sets();
    if (mode != kBackward) RETURN_IF_ERROR(t.mixer->EnqueueForward(set));
    if (mode != kForward) RETURN_IF_ERROR(t.mixer->EnqueueBackward(set));
    return Status::Ok();
  }

  // Mean ms per launch of `count` back-to-back launches between two events.
  StatusOr<double> Measure(Timed& t, TimedMode mode, int count) {
    const auto& api = ctx_.api();
    const auto& driver = ctx_.driver();
    RETURN_IF_ERROR(driver.Check(api.MemsetD8Async(flush_, static_cast<unsigned char>(++flushes_), flush_bytes_,
                                                   ctx_.stream()),
                                 "cuMemsetD8Async(L2 flush)"));
    RETURN_IF_ERROR(driver.Check(api.EventRecord(start_, ctx_.stream()), "cuEventRecord"));
    for (int i = 0; i < count; ++i) RETURN_IF_ERROR(Enqueue(t, mode));
    RETURN_IF_ERROR(driver.Check(api.EventRecord(stop_, ctx_.stream()), "cuEventRecord"));
    RETURN_IF_ERROR(ctx_.WaitEvent(stop_, kWaitTimeoutMs, "timing sample", nullptr));
    float ms = 0.0f;
    RETURN_IF_ERROR(driver.Check(api.EventElapsedTime(&ms, start_, stop_), "cuEventElapsedTime"));
    return static_cast<double>(ms) / count;
  }

  Status Stint(Timed& t, int round, int order_index) {
    // Every set gets a forward first, so a backward always has saved tensors.
    for (int s = 0; s < t.mixer->sets(); ++s) RETURN_IF_ERROR(Enqueue(t, kForward));
    for (TimedMode mode : kModes) {
      for (int w = 0; w < o_.warmup; ++w) RETURN_IF_ERROR(Enqueue(t, mode));
    }
    RETURN_IF_ERROR(ctx_.WaitStream(kWaitTimeoutMs, "warm-up", nullptr));
    RoundSamples record;
    record.round = round;
    record.order_index = order_index;
    for (TimedMode mode : kModes) {
      if (t.inner[mode] == 0) {
        int count = 1;
        while (true) {
          ASSIGN_OR_RETURN(double per, Measure(t, mode, count));
          if (per * count >= kMinCalibrationMs || count >= o_.max_inner) {
            const double want = std::ceil(o_.target_ms / std::max(per, 1e-6));
            t.inner[mode] = static_cast<int>(std::clamp(want, 1.0, static_cast<double>(o_.max_inner)));
            break;
          }
          count = std::min(o_.max_inner, count * 8);
        }
      }
      std::vector<double>& round_samples =
          mode == kForward ? record.forward_ms : mode == kBackward ? record.backward_ms : record.forward_backward_ms;
      for (int s = 0; s < o_.samples; ++s) {
        ASSIGN_OR_RETURN(double ms, Measure(t, mode, t.inner[mode]));
        t.samples[mode].push_back(ms);
        round_samples.push_back(ms);
      }
    }
    t.rounds.push_back(std::move(record));
    return Status::Ok();
  }

 private:
  const GpuContext& ctx_;
  const MixerOptions& o_;
  CUdeviceptr flush_;
  uint64_t flush_bytes_;
  unsigned flushes_ = 0;
  CUevent start_ = nullptr, stop_ = nullptr;
};

// The served backend in the bench's context; both phases must be there.
StatusOr<std::unique_ptr<KernelLauncher>> LoadBackend(const GpuContext& ctx, const v1::KernelResponse& kernel) {
  RETURN_IF_ERROR(ctx.MakeCurrent());
  ASSIGN_OR_RETURN(std::unique_ptr<KernelLauncher> k, KernelLauncher::Load(ctx.driver(), kernel));
  for (const char* phase : {"fwd", "bwd"}) {
    if (!k->HasPhase(phase)) return InvalidArgument("backend " + kernel.variant() + ": GetKernel returned no " + phase + " launch");
  }
  return k;
}

MixerRow RowOf(const ShapeKey& shape, const Mixer& m, const Timed& t, const MemoryFigures& memory) {
  MixerRow row;
  row.shape = shape;
  row.architecture = m.architecture();
  row.backend = m.backend();
  row.controller = m.controller();
  row.forward_ms = t.samples[kForward];
  row.backward_ms = t.samples[kBackward];
  row.forward_backward_ms = t.samples[kForwardBackward];
  row.rounds = t.rounds;
  row.memory = memory;
  row.parameters = m.parameters();
  row.parameter_bytes = 4 * m.parameters();
  row.dynamic_control_values_per_token = m.control_values_per_token();
  row.materialized_state_sized_transition = false;
  row.inner_forward = t.inner[kForward];
  row.inner_backward = t.inner[kBackward];
  row.inner_forward_backward = t.inner[kForwardBackward];
  row.input_sets = m.sets();
  return row;
}

}  // namespace

StatusOr<MixerReport> RunMixerBench(const MixerOptions& o) {
  auto log = Logger("client");
  auto driver = CudaDriver::Load();
  if (!driver.ok()) {
    return FailedPrecondition("no usable GPU (" + driver.status().message() +
                              "); run on the GPU machine, or pass --dry-run to exercise the report without one");
  }
  ASSIGN_OR_RETURN(v1::DeviceInfo info, QueryDeviceInfo(**driver, o.device));
  ASSIGN_OR_RETURN(std::unique_ptr<GpuContext> ctx, GpuContext::Open(*driver, o.device));
  log->info("device {}: {} (sm_{}{}, {} SMs, L2 {} MiB)", o.device, info.name(), info.cc_major(), info.cc_minor(),
            info.sm_count(), info.l2_bytes() >> 20);

  ClientOptions client_options;
  client_options.address = o.address;
  ScantuneClient client(client_options);
  if (Status st = client.WaitUntilServing(std::chrono::seconds(10)); !st.ok()) {
    return Unavailable(st.message() + "; start scantuned (e.g. scantuned --listen " + client.address() + ")");
  }
  // Every selection first: a missing one fails before any GPU time is spent.
  std::vector<std::pair<Backend, Backend>> backends;
  for (const ShapeKey& shape : o.shapes) {
    ASSIGN_OR_RETURN(Backend rg, FetchBackend(client, "rglru", shape, info.uuid(), o.tune_now));
    ASSIGN_OR_RETURN(Backend sa, FetchBackend(client, "samu", shape, info.uuid(), o.tune_now));
    backends.emplace_back(std::move(rg), std::move(sa));
  }

  MixerReport report;
  const uint64_t l2 = static_cast<uint64_t>(std::max(info.l2_bytes(), 1 << 20));
  report.protocol = Protocol(o, l2);
  int nvrtc_major = 0, nvrtc_minor = 0;
  nvrtcVersion(&nvrtc_major, &nvrtc_minor);
  std::string daemon_version = "unknown";
  if (auto record = client.GetRecord(backends.front().first.selection.record_id()); record.ok()) {
    daemon_version = record->daemon_version();
  } else {
    log->warn("daemon version unknown: GetRecord failed: {}", record.status().ToString());
  }

  ASSIGN_OR_RETURN(std::unique_ptr<Blas> blas, Blas::Create(*ctx));
  ASSIGN_OR_RETURN(std::unique_ptr<GlueKernels> glue,
                   GlueKernels::Compile(*ctx, info.cc_major(), info.cc_minor(), info.sm_count()));
  report.environment = {
      {"gpu", info.name()},
      {"gpu_uuid", info.uuid()},
      {"compute_capability", std::to_string(info.cc_major()) + "." + std::to_string(info.cc_minor())},
      {"driver", VersionText((*driver)->driver_version())},
      {"cuda", VersionText(CUDA_VERSION)},
      {"nvrtc", std::to_string(nvrtc_major) + "." + std::to_string(nvrtc_minor)},
      {"cublas", blas->Version()},
      {"daemon_version", daemon_version},
      {"daemon_address", client.address()},
      {"kernel_source_hash", backends.front().first.kernel.source_hash()},
  };
  const uint64_t flush_bytes = 2 * l2;
  ASSIGN_OR_RETURN(DeviceBuffer flush, DeviceBuffer::Allocate(*ctx, flush_bytes, false, nullptr));
  GpuTools tools{ctx.get(), blas.get(), glue.get()};
  bool any_check_failed = false;

  for (size_t i = 0; i < o.shapes.size(); ++i) {
    const ShapeKey& shape = o.shapes[i];
    ASSIGN_OR_RETURN(std::unique_ptr<KernelLauncher> rg_kernel, LoadBackend(*ctx, backends[i].first.kernel));
    ASSIGN_OR_RETURN(std::unique_ptr<KernelLauncher> sa_kernel, LoadBackend(*ctx, backends[i].second.kernel));
    RgLruMixer rglru(tools, shape, o.heads, rg_kernel.get());
    SamuMixer samu(tools, shape, sa_kernel.get());

    // Memory probe, each architecture alone with one set; rglru's first
    // forward is also the GEMM check.
    GemmCheck check;
    auto probe = [&](Mixer& m, bool with_check) -> StatusOr<MemoryFigures> {
      MemoryFigures f;
      RETURN_IF_ERROR(ctx->WaitStream(kWaitTimeoutMs, "before the memory probe", nullptr));
      ASSIGN_OR_RETURN(f.baseline_in_use_bytes, ctx->MemoryInUse());
      RETURN_IF_ERROR(m.Setup(1, o.seed));
      RETURN_IF_ERROR(m.EnqueueForward(0));
      if (with_check) {
        ASSIGN_OR_RETURN(check, rglru.CheckGates());
      }
      RETURN_IF_ERROR(m.EnqueueBackward(0));
      RETURN_IF_ERROR(ctx->WaitStream(kWaitTimeoutMs, "memory probe", nullptr));
      ASSIGN_OR_RETURN(f.peak_in_use_bytes, ctx->MemoryInUse());
      f.requested_bytes = m.requested_bytes();
      m.Release();
      return f;
    };
    ASSIGN_OR_RETURN(MemoryFigures rg_memory, probe(rglru, true));
    ASSIGN_OR_RETURN(MemoryFigures sa_memory, probe(samu, false));
    std::printf("%s: RG-LRU gate GEMM check %s (rel err %.3g; %s)\n", shape.ToString().c_str(),
                check.pass ? "PASS" : "FAIL", check.rel_err, check.detail.c_str());
    std::fflush(stdout);
    any_check_failed |= !check.pass;

    // Input sets: enough to exceed 2x the L2 with one architecture's buffers,
    // within half of the free memory for both.
    ASSIGN_OR_RETURN(uint64_t free_bytes, ctx->MemoryFree());
    const uint64_t per_set = rglru.set_bytes() + samu.set_bytes();
    const uint64_t smallest = std::min(rglru.set_bytes(), samu.set_bytes());
    uint64_t sets = std::clamp<uint64_t>((2 * l2 + smallest - 1) / smallest, 1, kMaxInputSets);
    const uint64_t fit = static_cast<uint64_t>(static_cast<double>(free_bytes) * kMaxMemoryShare) / per_set;
    if (fit < 1) return ResourceExhausted("shape " + shape.ToString() + ": the two mixers do not fit in memory");
    sets = std::min(sets, fit);
    RETURN_IF_ERROR(rglru.Setup(static_cast<int>(sets), o.seed));
    RETURN_IF_ERROR(samu.Setup(static_cast<int>(sets), o.seed));

    Stopwatch watch(*ctx, o, flush.ptr(), flush_bytes);
    RETURN_IF_ERROR(watch.Init());
    Timed rg_timed, sa_timed;
    rg_timed.mixer = &rglru;
    sa_timed.mixer = &samu;
    for (int round = 0; round < o.rounds; ++round) {
      std::array<Timed*, 2> order = {&rg_timed, &sa_timed};
      if (round % 2 == 1) std::swap(order[0], order[1]);
      for (int position = 0; position < 2; ++position) {
        Status st = watch.Stint(*order[position], round, position);
        if (!st.ok()) {
          return st.Annotate(std::string("timing ") + order[position]->mixer->architecture() + " " + shape.ToString() +
                             " (backend " + order[position]->mixer->backend() + ")");
        }
      }
      log->info("{}: round {} done", shape.ToString(), round);
    }
    MixerRow rg_row = RowOf(shape, rglru, rg_timed, rg_memory);
    rg_row.check = check.pass ? "pass" : "fail";
    rg_row.check_rel_err = check.rel_err;
    rg_row.selection_record_id = backends[i].first.selection.record_id();
    rg_row.selection_stale = backends[i].first.selection.stale();
    MixerRow sa_row = RowOf(shape, samu, sa_timed, sa_memory);
    sa_row.selection_record_id = backends[i].second.selection.record_id();
    sa_row.selection_stale = backends[i].second.selection.stale();
    report.rows.push_back(std::move(rg_row));
    report.rows.push_back(std::move(sa_row));
    rglru.Release();
    samu.Release();
  }
  if (any_check_failed) log->error("the RG-LRU gate GEMM check failed for at least one shape (see gemm_check)");
  return report;
}

MixerReport DryRunReport(const MixerOptions& o) {
  MixerReport report;
  report.protocol = Protocol(o, 50u << 20);
  report.environment = {{"gpu", "none (dry run)"}, {"cuda", VersionText(CUDA_VERSION)}, {"daemon_version", "not asked"}};
  for (const ShapeKey& shape : o.shapes) {
    const double scale = static_cast<double>(shape.batch * shape.length * shape.width) / (4.0 * 2048 * 2048);
    for (int a = 0; a < 2; ++a) {
      MixerRow row;
      row.shape = shape;
      row.architecture = a == 0 ? "rglru" : "samu";
      row.backend = "dry-run";
      if (a == 1) row.controller = "fp32_mean_sigmoid_coords_in_backend";
      const double base = (a == 0 ? 1.0 : 0.75) * scale;
      for (int r = 0; r < o.rounds; ++r) {
        RoundSamples round;
        round.round = r;
        round.order_index = (r % 2 == 0) ? a : 1 - a;
        for (int s = 0; s < o.samples; ++s) {
          const double jitter = 1.0 + 0.001 * ((r * o.samples + s) % 7);
          round.forward_ms.push_back(base * jitter);
          round.backward_ms.push_back(1.7 * base * jitter);
          round.forward_backward_ms.push_back(2.7 * base * jitter);
        }
        row.forward_ms.insert(row.forward_ms.end(), round.forward_ms.begin(), round.forward_ms.end());
        row.backward_ms.insert(row.backward_ms.end(), round.backward_ms.begin(), round.backward_ms.end());
        row.forward_backward_ms.insert(row.forward_backward_ms.end(), round.forward_backward_ms.begin(),
                                       round.forward_backward_ms.end());
        row.rounds.push_back(std::move(round));
      }
      row.parameters = a == 0 ? RgLruMixerParameters(shape.width, o.heads) : SamuMixerParameters(shape.width);
      row.parameter_bytes = 4 * row.parameters;
      row.dynamic_control_values_per_token = a == 0 ? 2 * static_cast<uint64_t>(shape.width) : 2;
      row.check = "not run";
      report.rows.push_back(std::move(row));
    }
  }
  return report;
}

}  // namespace scantune::mixer
