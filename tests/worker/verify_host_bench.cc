// Host-side cost of verification, no GPU needed: the once-per-job work
// (inputs, encoding, float64 reference) and what each candidate costs on
// the host (its output downloads, here plain memcpy into the Verifier's
// reused buffers, and the comparison passes). Prints timings; asserts
// nothing about time. Not a ctest: at the default shape it needs ~4 GB.
//
//   worker_verify_host_bench [B L W] [--dtype bf16] [--mode fwd_bwd] [--threads N] [--candidates K]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "worker/dtype_convert.h"
#include "worker/input_generator.h"
#include "worker/output_check.h"
#include "worker/parallel.h"
#include "worker/reference.h"
#include "worker/verifier.h"

namespace scantune {
namespace {

using Clock = std::chrono::steady_clock;
double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Stands in for cuMemcpyDtoH into a host buffer that lives across candidates.
void Download(const std::vector<uint8_t>& device, std::vector<uint8_t>* host) {
  if (host->size() < device.size()) host->resize(device.size());
  std::memcpy(host->data(), device.data(), device.size());
}

int Main(int argc, char** argv) {
  Problem p{Op::kLinearScan, {1, 32768, 2048}, DType::kBF16, Mode::kFwdBwd, true};
  int threads = 0, candidates = 3;
  std::vector<long> dims;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (arg == "--candidates" && i + 1 < argc) candidates = std::atoi(argv[++i]);
    else if (arg == "--dtype" && i + 1 < argc) {
      const std::string d = argv[++i];
      p.dtype = d == "f32" ? DType::kF32 : d == "f16" ? DType::kF16 : DType::kBF16;
    }
    else if (arg == "--mode" && i + 1 < argc) p.mode = std::string(argv[++i]) == "bwd" ? Mode::kBwd : Mode::kFwdBwd;
    else dims.push_back(std::atol(argv[i]));
  }
  if (dims.size() == 3) p.shape = {dims[0], dims[1], dims[2]};
  std::optional<ScopedHostThreads> scoped;
  if (threads > 0) scoped.emplace(threads);
  const Shape& s = p.shape;
  const DType dt = p.dtype;
  std::printf("%s, %d host threads\n", p.Key().c_str(), HostThreads());

  // Once per job, piece by piece (what PrepareVerification does).
  auto t = Clock::now();
  LinearScanInputs in = GenerateInputs(p, 7);
  std::printf("job: generate inputs          %9.1f ms\n", MsSince(t));
  t = Clock::now();
  VerificationData job;
  job.a = EncodeAs(dt, in.a), job.x = EncodeAs(dt, in.x), job.dh = EncodeAs(dt, in.dh);
  job.h0 = EncodeAs(DType::kF32, in.h0);
  std::printf("job: encode inputs            %9.1f ms\n", MsSince(t));
  t = Clock::now();
  job.forward = LinearScanForward(s, in.a, in.x, in.h0);
  std::printf("job: forward reference        %9.1f ms\n", MsSince(t));
  t = Clock::now();
  job.reverse = LinearScanReverse(s, in.a, in.dh);
  std::printf("job: reverse scan (g, dh0)    %9.1f ms\n", MsSince(t));
  job.h0_values = in.h0;

  // Fake device outputs (not timed): the reference, rounded, so every check passes.
  const std::vector<uint8_t> dev_h = EncodeAs(dt, job.forward.h);
  const std::vector<uint8_t> dev_hf = EncodeAs(DType::kF32, job.forward.h_final);
  const LinearScanBackwardRef bwd =
      LinearScanBackward(s, in.a, DecodeFrom(dt, dev_h.data(), in.a.size()), in.h0, in.dh);
  const std::vector<uint8_t> dev_da = EncodeAs(dt, bwd.da), dev_dx = EncodeAs(dt, bwd.dx);
  const std::vector<uint8_t> dev_dh0 = EncodeAs(DType::kF32, bwd.dh0);
  in = {};

  const double tol = Tolerance(dt);
  std::vector<uint8_t> h, hf, da, dx, dh0, h_after, input;
  for (int c = 0; c < candidates; ++c) {
    const auto start = Clock::now();
    double copies = 0.0;
    t = Clock::now();
    Download(dev_h, &h), Download(dev_hf, &hf);
    copies += MsSince(t);
    t = Clock::now();
    const OutputCheck ch = CheckOutput({"h", dt}, h, job.forward.h, s, tol);
    const OutputCheck chf = CheckOutput({"h_final", DType::kF32, true}, hf, job.forward.h_final, s, tol);
    const double fwd_ms = MsSince(t);
    t = Clock::now();
    Download(dev_h, &h_after), Download(dev_da, &da), Download(dev_dx, &dx), Download(dev_dh0, &dh0);
    copies += MsSince(t);
    t = Clock::now();
    const BackwardCheck cb = CheckBackward(dt, dx, da, job.reverse.g, h, h_after, job.h0_values, s, tol);
    const OutputCheck cdh0 = CheckOutput({"dh0", DType::kF32, true}, dh0, job.reverse.dh0, s, tol);
    const double bwd_ms = MsSince(t);
    double input_ms = 0.0;
    bool inputs_same = true;
    for (const std::vector<uint8_t>* v : {&job.a, &job.x, &job.dh, &job.h0}) {
      t = Clock::now();
      Download(*v, &input);
      copies += MsSince(t);
      t = Clock::now();
      inputs_same = inputs_same && SameBytes(std::span<const uint8_t>(input).first(v->size()), *v);
      input_ms += MsSince(t);
    }
    std::printf(
        "candidate %d: host total %8.1f ms (memcpy for downloads %6.1f; fwd check %6.1f, bwd check %6.1f, "
        "inputs check %6.1f)  rel_err h %.3g h_final %.3g dx %.3g da %.3g dh0 %.3g  ok %d\n",
        c, MsSince(start), copies, fwd_ms, bwd_ms, input_ms, ch.rel_err, chf.rel_err, cb.dx.rel_err, cb.da.rel_err,
        cdh0.rel_err,
        ch.ok() && chf.ok() && cb.dx.ok() && cb.da.ok() && cdh0.ok() && !cb.h_changed && inputs_same);
  }
  return 0;
}

}  // namespace
}  // namespace scantune

int main(int argc, char** argv) { return scantune::Main(argc, argv); }
