// Worker behaviour that needs no GPU: the driver loader's errors, and the
// worker binary on a machine without a driver (--list, Hello, job refusal).
// On a machine with a GPU the same tests check the positive answers instead.
#include <cstdio>
#include <string>

#include <gtest/gtest.h>

#include "tests/worker/spawned_worker.h"
#include "worker/cuda_driver.h"

namespace scantune {
namespace {

bool HaveDriver() { return CudaDriver::Load().ok(); }

TEST(CudaDriverTest, MissingLibraryIsAClearError) {
  auto driver = CudaDriver::LoadFrom("libscantune_no_such_cuda.so.1");
  ASSERT_FALSE(driver.ok());
  EXPECT_EQ(driver.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(driver.status().message().find("libscantune_no_such_cuda.so.1"), std::string::npos)
      << driver.status().message();
}

TEST(CudaDriverTest, StubLibraryIsAClearError) {
  // The toolkit's link stub resolves but refuses cuInit: that must read as
  // "no usable driver", not crash.
  const std::string stub = "/usr/local/cuda/lib64/stubs/libcuda.so";
  if (FILE* f = std::fopen(stub.c_str(), "r")) {
    std::fclose(f);
  } else {
    GTEST_SKIP() << stub << " is not installed";
  }
  auto driver = CudaDriver::LoadFrom(stub);
  ASSERT_FALSE(driver.ok());
  EXPECT_EQ(driver.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_FALSE(driver.status().message().empty());
  std::printf("stub: %s\n", driver.status().message().c_str());
}

TEST(CudaDriverTest, DefaultLoadSaysWhy) {
  auto driver = CudaDriver::Load();
  if (driver.ok()) {
    EXPECT_GT((*driver)->driver_version(), 0);
    return;
  }
  EXPECT_EQ(driver.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(driver.status().message().find("libcuda.so.1"), std::string::npos) << driver.status().message();
}

TEST(CudaDriverTest, Classification) {
  auto state = [](CUresult r, CudaCallSite site) { return ClassifyCudaFailure({r, site, "call"}); };
  EXPECT_EQ(state(CUDA_ERROR_ILLEGAL_ADDRESS, CudaCallSite::kExecution), v1::ILLEGAL_ADDRESS);
  EXPECT_EQ(state(CUDA_ERROR_MISALIGNED_ADDRESS, CudaCallSite::kExecution), v1::ILLEGAL_ADDRESS);
  EXPECT_EQ(state(CUDA_ERROR_OUT_OF_MEMORY, CudaCallSite::kSetup), v1::OUT_OF_MEMORY);
  EXPECT_EQ(state(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, CudaCallSite::kLaunch), v1::OUT_OF_RESOURCES);
  EXPECT_EQ(state(CUDA_ERROR_INVALID_VALUE, CudaCallSite::kLaunch), v1::OUT_OF_RESOURCES);
  EXPECT_EQ(state(CUDA_ERROR_INVALID_VALUE, CudaCallSite::kModuleLoad), v1::OUT_OF_RESOURCES);
  EXPECT_EQ(state(CUDA_ERROR_NO_BINARY_FOR_GPU, CudaCallSite::kModuleLoad), v1::COMPILE_FAILED);
  EXPECT_EQ(state(CUDA_ERROR_LAUNCH_TIMEOUT, CudaCallSite::kExecution), v1::TIMEOUT);
  EXPECT_EQ(state(CUDA_ERROR_INVALID_VALUE, CudaCallSite::kSetup), v1::STATE_UNSPECIFIED);
  EXPECT_TRUE(IsStickyCudaError(CUDA_ERROR_ILLEGAL_ADDRESS));
  EXPECT_TRUE(IsStickyCudaError(CUDA_ERROR_LAUNCH_TIMEOUT));
  EXPECT_FALSE(IsStickyCudaError(CUDA_ERROR_OUT_OF_MEMORY));
  EXPECT_FALSE(IsStickyCudaError(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES));
}

struct ProcessRun {
  int status = -1;
  std::string out;
};

ProcessRun RunList() {
  ProcessRun run;
  const std::string command = std::string(SCANTUNE_WORKER_BINARY) + " --list 2>&1";
  FILE* p = ::popen(command.c_str(), "r");
  if (p == nullptr) return run;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) run.out.append(buf, n);
  run.status = ::pclose(p);
  return run;
}

TEST(WorkerBinaryTest, ListWithoutGpuSaysNoGpu) {
  const ProcessRun run = RunList();
  ASSERT_TRUE(WIFEXITED(run.status)) << run.out;
  if (HaveDriver()) {
    EXPECT_EQ(WEXITSTATUS(run.status), 0) << run.out;
    EXPECT_NE(run.out.find("\"uuid\":\"GPU-"), std::string::npos) << run.out;
    EXPECT_NE(run.out.find("\"ordinal\":0"), std::string::npos) << run.out;
    return;
  }
  EXPECT_EQ(WEXITSTATUS(run.status), 2) << run.out;
  EXPECT_EQ(run.out.rfind("no GPU: ", 0), 0u) << run.out;
  EXPECT_NE(run.out.find("libcuda.so.1"), std::string::npos) << run.out;
}

TEST(WorkerBinaryTest, WithoutGpuHelloCarriesTheErrorAndJobsAreRefused) {
  if (HaveDriver()) GTEST_SKIP() << "a CUDA driver is present: the no-GPU path cannot be exercised here";
  testing::SpawnedWorker worker;
  ASSERT_TRUE(worker.Start(SCANTUNE_WORKER_BINARY, 0));
  v1::WorkerEvent event;
  ASSERT_TRUE(worker.Receive(&event, 30000).ok());
  ASSERT_TRUE(event.has_hello());
  EXPECT_GT(event.hello().pid(), 0);
  EXPECT_EQ(event.hello().devices_size(), 0);
  EXPECT_EQ(event.hello().error().rfind("no GPU: ", 0), 0u) << event.hello().error();

  v1::WorkerCommand job;
  job.mutable_job()->set_job_id(42);
  ASSERT_TRUE(worker.Send(job).ok());
  ASSERT_TRUE(worker.Receive(&event, 30000).ok());
  ASSERT_TRUE(event.has_done());
  EXPECT_EQ(event.done().job_id(), 42u);
  EXPECT_EQ(event.done().error().rfind("no GPU: ", 0), 0u) << event.done().error();

  worker.ShutdownAndExpectCleanExit();
}

}  // namespace
}  // namespace scantune
