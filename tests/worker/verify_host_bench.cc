// Host-side cost of verification, no GPU needed: the once-per-job work
// (inputs, encoding, float64 reference) and what each candidate costs on
// the host (its output downloads, here plain memcpy into the Verifier's
// reused buffers, and the comparison passes). Prints timings; asserts
// nothing about time. Not a ctest: at the default shape it needs ~4 GB.
//
//   worker_verify_host_bench [B L W] [--op linear_scan] [--dtype bf16] [--mode fwd_bwd] [--threads N] [--candidates K]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "worker/dtype_convert.h"
#include "worker/op_io.h"
#include "worker/output_check.h"
#include "worker/parallel.h"
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
  auto or_default = [](auto parsed, auto fallback) { return parsed.ok() ? *parsed : fallback; };
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (arg == "--candidates" && i + 1 < argc) candidates = std::atoi(argv[++i]);
    else if (arg == "--dtype" && i + 1 < argc) p.dtype = or_default(ParseDType(argv[++i]), DType::kBF16);
    else if (arg == "--mode" && i + 1 < argc) p.mode = or_default(ParseMode(argv[++i]), Mode::kFwdBwd);
    else if (arg == "--op" && i + 1 < argc) p.op = or_default(ParseOp(argv[++i]), Op::kLinearScan);
    else dims.push_back(std::atol(argv[i]));
  }
  if (dims.size() == 3) p.shape = {dims[0], dims[1], dims[2]};
  if (p.op == Op::kSelectiveScan) p.ssm.state = 16;
  p.has_h0 = p.op != Op::kSelectiveScan;
  std::optional<ScopedHostThreads> scoped;
  if (threads > 0) scoped.emplace(threads);
  std::printf("%s, %d host threads\n", p.Key().c_str(), HostThreads());

  // Once per job: inputs, encoding and the float64 references.
  auto t = Clock::now();
  const OpCase job = OpIoFor(p.op).Prepare(p, 7, /*check=*/true);
  std::printf("job: inputs and references    %9.1f ms\n", MsSince(t));

  // Fake device outputs (not timed): the references, rounded, so every check passes.
  std::vector<std::vector<uint8_t>> device(job.tensors.size());
  for (size_t i = 0; i < job.tensors.size(); ++i) {
    if (!job.reference[i].empty()) device[i] = EncodeAs(job.tensors[i].dtype, job.reference[i]);
  }
  const double tol = Tolerance(p.dtype);
  std::vector<std::vector<uint8_t>> host(job.tensors.size());
  std::vector<uint8_t> input;
  for (int c = 0; c < candidates; ++c) {
    const auto start = Clock::now();
    double copies = 0.0, checks = 0.0, input_ms = 0.0, worst = 0.0;
    bool ok = true;
    for (size_t i = 0; i < job.tensors.size(); ++i) {
      if (device[i].empty()) continue;
      t = Clock::now();
      Download(device[i], &host[i]);
      copies += MsSince(t);
      t = Clock::now();
      const OutputCheck check = CheckTensor(job.tensors[i], host[i], job.reference[i], tol);
      checks += MsSince(t);
      ok = ok && check.ok();
      worst = std::max(worst, check.rel_err);
    }
    for (const std::vector<uint8_t>& v : job.bytes) {
      if (v.empty()) continue;
      t = Clock::now();
      Download(v, &input);
      copies += MsSince(t);
      t = Clock::now();
      ok = ok && SameBytes(std::span<const uint8_t>(input).first(v.size()), v);
      input_ms += MsSince(t);
    }
    std::printf(
        "candidate %d: host total %8.1f ms (memcpy for downloads %6.1f; output checks %6.1f, inputs check %6.1f)  "
        "max rel_err %.3g  ok %d\n",
        c, MsSince(start), copies, checks, input_ms, worst, ok);
  }
  return 0;
}

}  // namespace
}  // namespace scantune

int main(int argc, char** argv) { return scantune::Main(argc, argv); }
