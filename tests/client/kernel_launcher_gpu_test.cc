// The C++ launcher on a training job's own buffers (ctest label gpu): the
// real scantuned with the real worker serves named variants (GetKernel);
// KernelLauncher loads each into this process's context and runs it, fwd then
// bwd, on buffers the test allocated and filled with the worker's inputs
// (OpIo::Prepare). Every output, every input and parameter gradient and the
// final state must match the float64 reference within DESIGN.md's tolerance;
// outputs are poisoned (NaN) first, so an unwritten element fails. The
// variants are the seed shapes' selections (look-back, PDL, workspace zeroed
// once) and a chunked one (workspace zeroed before every phase); each runs
// twice, so the workspace left by the first run must serve the second.
// Skips without a GPU.
#include "client/kernel_launcher.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "common/problem.h"
#include "compiler/plan.h"
#include "tests/integration/test_daemon.h"
#include "worker/device_buffer.h"
#include "worker/gpu_context.h"
#include "worker/op_io.h"
#include "worker/output_check.h"
#include "worker/verifier.h"

namespace scantune {
namespace {

constexpr double kWaitMs = 60000;

struct Case {
  Op op;
  const char* variant;
  Shape shape;
  DType dtype;
};

// One served variant on one problem, run `runs` times on the same buffers.
void RunServed(ScantuneClient& client, const CudaDriver& driver, const GpuContext& ctx, const Case& c, int runs) {
  const Problem problem{c.op, c.shape, c.dtype, Mode::kFwdBwd, /*has_h0=*/true, /*ssm=*/{}};
  SCOPED_TRACE(problem.Key() + " " + c.variant);
  v1::GetKernelRequest request;
  *request.mutable_problem() = ToProto(problem);
  request.set_variant(c.variant);
  StatusOr<v1::KernelResponse> served = client.GetKernel(request);
  ASSERT_TRUE(served.ok()) << served.status().ToString();
  ASSERT_TRUE(ctx.MakeCurrent().ok());
  StatusOr<std::unique_ptr<KernelLauncher>> launcher = KernelLauncher::Load(driver, *served);
  ASSERT_TRUE(launcher.ok()) << launcher.status().ToString();

  const OpIo& io = OpIoFor(c.op);
  const OpCase data = io.Prepare(problem, /*seed=*/20261204, /*check=*/true);
  std::vector<DeviceBuffer> buffers;
  ParamValues values;
  for (size_t i = 0; i < data.tensors.size(); ++i) {
    const TensorSpec& t = data.tensors[i];
    StatusOr<DeviceBuffer> b = DeviceBuffer::Allocate(ctx, t.bytes(), /*guarded=*/false, nullptr);
    ASSERT_TRUE(b.ok()) << t.name << ": " << b.status().ToString();
    values[t.name] = ParamValue::Pointer(b->ptr());
    buffers.push_back(std::move(*b));
  }
  values["batch"] = ParamValue::Integer(c.shape.batch);
  values["length"] = ParamValue::Integer(c.shape.length);
  values["width"] = ParamValue::Integer(c.shape.width);
  for (const v1::ParamField& f : served->params()) {  // optional tensors this problem does not use
    if (!values.contains(f.name()) && f.name() != "workspace") values[f.name()] = ParamValue::Null();
  }
  StatusOr<DeviceBuffer> workspace = DeviceBuffer::Allocate(ctx, (*launcher)->workspace_bytes(), false, nullptr);
  ASSERT_TRUE(workspace.ok()) << workspace.status().ToString();
  StatusOr<std::vector<uint8_t>> params = (*launcher)->Pack(values, workspace->ptr());
  ASSERT_TRUE(params.ok()) << params.status().ToString();
  ASSERT_TRUE((*launcher)->PrepareWorkspace(workspace->ptr(), ctx.stream()).ok());

  for (int run = 0; run < runs; ++run) {
    SCOPED_TRACE("run " + std::to_string(run));
    for (size_t i = 0; i < data.tensors.size(); ++i) {
      const TensorRole role = data.tensors[i].role;
      if (role == TensorRole::kInput || role == TensorRole::kGradIn) {
        ASSERT_TRUE(buffers[i].Upload(data.bytes[i].data(), data.bytes[i].size(), nullptr).ok());
      } else {
        ASSERT_TRUE(buffers[i].Fill(DeviceBuffer::kPoisonByte, nullptr).ok());  // NaN in every float type
      }
    }
    for (const char* phase : {"fwd", "bwd"}) {
      Status queued = (*launcher)->Enqueue(phase, *params, workspace->ptr(), ctx.stream());
      ASSERT_TRUE(queued.ok()) << phase << ": " << queued.ToString();
    }
    Status done = ctx.WaitStream(kWaitMs, "launcher test", nullptr);
    ASSERT_TRUE(done.ok()) << done.ToString();
    int compared = 0;
    for (size_t i = 0; i < data.tensors.size(); ++i) {
      if (data.reference[i].empty()) continue;
      const TensorSpec& t = data.tensors[i];
      std::vector<uint8_t> raw(t.bytes());
      ASSERT_TRUE(buffers[i].Download(raw.data(), raw.size(), nullptr).ok());
      const OutputCheck check = CheckTensor(t, raw, data.reference[i], Tolerance(c.dtype));
      EXPECT_TRUE(check.ok()) << t.name << ": rel err " << check.rel_err << "; " << check.detail;
      ++compared;
    }
    EXPECT_GE(compared, 4) << "outputs, gradients and states compared";
  }
}

TEST(KernelLauncherGpuTest, ServedKernelsMatchTheReferenceOnTheJobsBuffers) {
  StatusOr<const CudaDriver*> driver = CudaDriver::Load();
  if (!driver.ok()) GTEST_SKIP() << driver.status().ToString();
  testing::TestDaemonOptions options;
  options.worker = SCANTUNE_WORKER_PATH;
  auto daemon = testing::TestDaemon::Start(options);
  ASSERT_TRUE(daemon.ok()) << daemon.status().ToString();
  std::unique_ptr<ScantuneClient> client = (*daemon)->Client();
  StatusOr<v1::ListDevicesResponse> devices = client->ListDevices();
  ASSERT_TRUE(devices.ok()) << devices.status().ToString();
  if (devices->devices_size() == 0) GTEST_SKIP() << "no GPU: " << devices->note();
  StatusOr<std::unique_ptr<GpuContext>> ctx = GpuContext::Open(*driver, 0);
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();

  const Shape odd{2, 520, 1000};  // a partial strip, a partial last tile, two sequences
  const std::vector<Case> cases = {
      {Op::kLinearScan, "lookbacksmem_v4_t256_c64_i256_o3", odd, DType::kBF16},
      {Op::kLinearScan, "chunked_v4_t256_c64", odd, DType::kF32},
      {Op::kRgLru, "lookback_v2_t256_s8_i16_o3", odd, DType::kBF16},
      {Op::kSamu, "chunked_v8_t256_c32_l64_y1", odd, DType::kBF16},
      {Op::kSamu, "chunked_v8_t512_c64_l64_y1_b4_i32_a1", Shape{1, 2048, 2560}, DType::kBF16},
  };
  for (const Case& c : cases) {
    RunServed(*client, **driver, **ctx, c, /*runs=*/2);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace scantune
