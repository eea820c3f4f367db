// scantune-worker: one process per GPU, spawned by scantuned.
//
//   scantune-worker --fd N --device ORDINAL
//       Speaks proto/worker.proto frames on fd N (a socketpair end inherited
//       from the daemon); logs go to stderr. Without a usable GPU it still
//       says Hello (with error "no GPU: ...") and answers every job with a
//       JobDone error, so the daemon learns why instead of watching a crash.
//   scantune-worker --list
//       Prints one JSON line per device (DeviceInfo, proto field names) and
//       exits 0; without a usable GPU prints "no GPU: <why>" to stderr and
//       exits 2.
//
// Exit codes: 0 shutdown or daemon gone, 2 usage / no GPU (--list),
// 3 the CUDA context was lost (sticky fault, hung kernel): the failed
// candidate's Record was sent first.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include <google/protobuf/util/json_util.h>

#include "common/framing.h"
#include "common/log.h"
#include "compiler/kernel_sources.h"
#include "proto/worker.pb.h"
#include "worker/cuda_driver.h"
#include "worker/device_info.h"
#include "worker/gpu_context.h"
#include "worker/job_runner.h"

namespace scantune {
namespace {

constexpr int kExitUsage = 2;
constexpr int kExitContextLost = 3;

int Usage(const char* why) {
  std::fprintf(stderr, "scantune-worker: %s\nusage: scantune-worker --fd N --device ORDINAL\n       scantune-worker --list\n",
               why);
  return kExitUsage;
}

int List() {
  auto driver = CudaDriver::Load();
  if (!driver.ok()) {
    std::fprintf(stderr, "no GPU: %s\n", driver.status().message().c_str());
    return kExitUsage;
  }
  auto devices = QueryAllDevices(**driver);
  if (!devices.ok()) {
    std::fprintf(stderr, "no GPU: %s\n", devices.status().message().c_str());
    return kExitUsage;
  }
  if (devices->empty()) {
    std::fprintf(stderr, "no GPU: the driver reports no CUDA device\n");
    return kExitUsage;
  }
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;  // ordinal 0 must be printed
  options.preserve_proto_field_names = true;
  for (const v1::DeviceInfo& device : *devices) {
    std::string line;
    if (!google::protobuf::util::MessageToJsonString(device, &line, options).ok()) return Usage("cannot print JSON");
    std::cout << line << "\n";
  }
  std::cout.flush();
  return 0;
}

// No usable device: say why once, then refuse every job until told to stop.
int ServeWithoutGpu(int fd, const std::string& why) {
  auto log = Logger("worker");
  log->error("{}", why);
  v1::WorkerEvent hello;
  hello.mutable_hello()->set_pid(::getpid());
  hello.mutable_hello()->set_error(why);
  if (!WriteFrame(fd, hello).ok()) return 0;
  while (true) {
    v1::WorkerCommand command;
    if (!ReadFrame(fd, &command, -1).ok()) return 0;  // daemon gone
    if (command.has_job()) {
      v1::WorkerEvent done;
      done.mutable_done()->set_job_id(command.job().job_id());
      done.mutable_done()->set_error(why);
      if (!WriteFrame(fd, done).ok()) return 0;
    } else {
      return 0;  // shutdown
    }
  }
}

int Serve(int fd, int ordinal) {
  auto log = Logger("worker");
  auto driver = CudaDriver::Load();
  if (!driver.ok()) return ServeWithoutGpu(fd, "no GPU: " + driver.status().message());
  auto ctx = GpuContext::Open(*driver, ordinal);
  if (!ctx.ok()) return ServeWithoutGpu(fd, "no GPU: device " + std::to_string(ordinal) + ": " + ctx.status().message());
  auto info = QueryDeviceInfo(**driver, ordinal);
  if (!info.ok()) return ServeWithoutGpu(fd, "no GPU: device " + std::to_string(ordinal) + ": " + info.status().message());
  auto copy = MeasureCopyGbps(**ctx);
  if (copy.ok()) {
    info->set_copy_gbps(*copy);
  } else {
    log->warn("device {}: copy bandwidth not measured ({}); pct_of_copy stays 0", ordinal, copy.status().ToString());
  }
  log->info("device {}: {} {} cc {}.{}, {} SMs, copy {:.0f} GB/s, driver {}", ordinal, info->name(), info->uuid(),
            info->cc_major(), info->cc_minor(), info->sm_count(), info->copy_gbps(), info->driver_version());

  v1::WorkerEvent hello;
  hello.mutable_hello()->set_pid(::getpid());
  *hello.mutable_hello()->add_devices() = *info;
  if (!WriteFrame(fd, hello).ok()) return 0;

  JobRunner runner(**ctx, *info, SourceHash(), [fd](const v1::WorkerEvent& e) { return WriteFrame(fd, e); });
  while (true) {
    v1::WorkerCommand command;
    Status read = ReadFrame(fd, &command, -1);
    if (!read.ok()) {
      if (read.code() != StatusCode::kUnavailable) log->error("reading a command: {}", read.ToString());
      return 0;
    }
    if (!command.has_job()) return 0;  // shutdown
    Status st = runner.Run(command.job());
    if (st.code() == StatusCode::kAborted) {
      log->error("{}; exiting so that the daemon starts a fresh worker", st.message());
      std::fflush(stderr);
      // No destructors: freeing memory or unloading modules in a broken
      // context can block, and the process is about to go anyway.
      std::_Exit(kExitContextLost);
    }
    if (!st.ok()) {
      log->error("job {}: {}", command.job().job_id(), st.ToString());
      return 0;  // the connection to the daemon is broken
    }
  }
}

}  // namespace
}  // namespace scantune

int main(int argc, char** argv) {
  scantune::InitLogging();
  // A daemon that died must not kill us through SIGPIPE; writes then fail.
  ::signal(SIGPIPE, SIG_IGN);
  int fd = -1;
  int device = -1;
  bool list = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](int* out) -> bool {
      if (i + 1 >= argc) return false;
      char* end = nullptr;
      const long v = std::strtol(argv[++i], &end, 10);
      if (end == nullptr || *end != '\0' || v < 0 || v > 1 << 20) return false;
      *out = static_cast<int>(v);
      return true;
    };
    if (arg == "--list") {
      list = true;
    } else if (arg == "--fd") {
      if (!value(&fd)) return scantune::Usage("--fd needs a file descriptor number");
    } else if (arg == "--device") {
      if (!value(&device)) return scantune::Usage("--device needs a device ordinal");
    } else {
      return scantune::Usage(("unknown argument " + arg).c_str());
    }
  }
  if (list) return scantune::List();
  if (fd < 0 || device < 0) return scantune::Usage("--fd and --device are required");
  return scantune::Serve(fd, device);
}
