// GPU smoke test of the RG-LRU mixer's cuBLAS and glue parts, with a stand-in
// rglru backend (an empty NVRTC kernel served with the rglru field layout):
// the gate GEMMs must pass the host check at small and seed-001 shapes, and
// the backward's GEMMs must run. Skips without a GPU.
#include <gtest/gtest.h>

#include <nvrtc.h>

#include "bench/mixer/blas.h"
#include "bench/mixer/glue_kernels.h"
#include "bench/mixer/mixers.h"
#include "client/kernel_launcher.h"
#include "worker/cuda_driver.h"
#include "worker/device_info.h"

namespace scantune::mixer {
namespace {

constexpr const char* kFields[] = {"x",   "ga",  "gx",      "lambda", "h",         "h0",    "h_final", "dh",    "dx",
                                   "dga", "dgx", "dlambda", "dh0",    "workspace", "batch", "length",  "width"};

v1::KernelResponse FakeRgLru(int cc_major, int cc_minor) {
  const char* src =
      "struct P { unsigned long long f[17]; };\n"
      "extern \"C\" __global__ void fake_fwd(P p) {}\n"
      "extern \"C\" __global__ void fake_bwd(P p) {}\n";
  nvrtcProgram prog;
  EXPECT_EQ(nvrtcCreateProgram(&prog, src, "fake.cu", 0, nullptr, nullptr), NVRTC_SUCCESS);
  const std::string arch = "--gpu-architecture=sm_" + std::to_string(cc_major) + std::to_string(cc_minor);
  const char* opts[] = {arch.c_str()};
  EXPECT_EQ(nvrtcCompileProgram(prog, 1, opts), NVRTC_SUCCESS);
  size_t size = 0;
  nvrtcGetCUBINSize(prog, &size);
  std::string cubin(size, '\0');
  nvrtcGetCUBIN(prog, cubin.data());
  nvrtcDestroyProgram(&prog);
  v1::KernelResponse k;
  k.set_variant("fake_rglru");
  k.set_cubin(cubin);
  for (const char* phase : {"fwd", "bwd"}) {
    v1::KernelLaunch* l = k.add_launches();
    l->set_entry(std::string("fake_") + phase);
    l->set_phase(phase);
    for (int i = 0; i < 3; ++i) l->add_grid(1), l->add_block(i == 0 ? 32 : 1);
  }
  uint32_t offset = 0;
  for (const char* name : kFields) {
    v1::ParamField* f = k.add_params();
    f->set_name(name);
    f->set_offset_bytes(offset);
    f->set_size_bytes(8);
    const std::string n = name;
    f->set_type(n == "batch" || n == "length" || n == "width" ? "i64" : "ptr");
    f->set_meaning(n == "h0" || n == "dh0" || n == "h_final" ? "optional; null: none" : "tensor");
    offset += 8;
  }
  k.set_params_size_bytes(offset);
  k.set_workspace_bytes(1024);
  k.set_workspace_zero_bytes(512);
  return k;
}

TEST(MixerGpu, GateGemmsPassTheHostCheck) {
  auto driver = CudaDriver::Load();
  if (!driver.ok()) GTEST_SKIP() << driver.status().ToString();
  auto info = QueryDeviceInfo(**driver, 0);
  ASSERT_TRUE(info.ok());
  auto ctx = GpuContext::Open(*driver, 0);
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  auto blas = Blas::Create(**ctx);
  ASSERT_TRUE(blas.ok()) << blas.status().ToString();
  auto glue = GlueKernels::Compile(**ctx, info->cc_major(), info->cc_minor(), info->sm_count());
  ASSERT_TRUE(glue.ok()) << glue.status().ToString();
  auto kernel = KernelLauncher::Load(**driver, FakeRgLru(info->cc_major(), info->cc_minor()));
  ASSERT_TRUE(kernel.ok()) << kernel.status().ToString();
  GpuTools tools{ctx->get(), blas->get(), glue->get()};
  for (ShapeKey shape : {ShapeKey{2, 64, 256}, ShapeKey{1, 8192, 2560}, ShapeKey{4, 2048, 2048}}) {
    RgLruMixer m(tools, shape, 16, kernel->get());
    ASSERT_TRUE(m.Setup(2, 7).ok());
    ASSERT_TRUE(m.EnqueueForward(0).ok());
    auto check = m.CheckGates();
    ASSERT_TRUE(check.ok()) << check.status().ToString();
    EXPECT_TRUE(check->pass) << shape.ToString() << ": rel err " << check->rel_err << "; " << check->detail;
    std::printf("%s: gate check rel err %.3g (%s)\n", shape.ToString().c_str(), check->rel_err, check->detail.c_str());
    Status bwd = m.EnqueueBackward(1);
    EXPECT_TRUE(bwd.ok()) << bwd.ToString();
    EXPECT_TRUE(m.EnqueueForward(1).ok());
    EXPECT_TRUE((*ctx)->WaitStream(60000, "test", nullptr).ok());
  }
}

}  // namespace
}  // namespace scantune::mixer
