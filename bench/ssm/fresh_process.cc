#include "bench/ssm/fresh_process.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "bench/ssm/direct_run.h"
#include "common/log.h"
#include "worker/cuda_driver.h"
#include "worker/gpu_context.h"
#include "worker/op_io.h"

extern char** environ;

namespace scantune::ssmbench {
namespace {

using Clock = std::chrono::steady_clock;
double SecondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string Fixed(double v, int digits) {
  char b[64];
  std::snprintf(b, sizeof(b), "%.*f", digits, v);
  return b;
}

Status WriteBinary(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return FailedPrecondition("cannot write " + path);
  out << bytes;
  out.close();
  if (!out) return FailedPrecondition("writing " + path + " failed");
  return Status::Ok();
}

StatusOr<std::string> ReadBinary(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot read " + path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

std::string SelfExe() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : p.string();
}

StatusOr<v1::Record> RunChild(const SsmOptions& o, const std::string& exe, const std::string& dir, int index,
                              const v1::Candidate& candidate, const SsmShape& shape, Mode mode) {
  const std::string cand_path = dir + "/candidate_" + std::to_string(index) + ".pb";
  const std::string out_path = dir + "/child_" + std::to_string(index) + ".pb";
  RETURN_IF_ERROR(WriteBinary(cand_path, candidate.SerializeAsString()));
  std::error_code ec;
  std::filesystem::remove(out_path, ec);
  std::vector<std::string> args = {exe,
                                   "--child",
                                   "--candidate", cand_path,
                                   "--child-out", out_path,
                                   "--shape", ArgOf(shape),
                                   "--mode", ModeName(mode),
                                   "--state", std::to_string(shape.state),
                                   "--device", std::to_string(o.device),
                                   "--seed", std::to_string(o.seed),
                                   "--kernel-timeout-ms", Fixed(o.kernel_timeout_ms, 0)};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (int err = posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv.data(), environ); err != 0) {
    return Internal("posix_spawn " + exe + ": " + std::strerror(err));
  }
  const auto start = Clock::now();
  int status = 0;
  bool killed = false;
  while (true) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) return Internal(std::string("waitpid: ") + std::strerror(errno));
    if (!killed && SecondsSince(start) > o.child_timeout_s) {
      kill(pid, SIGKILL);  // our own child, by its id
      killed = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  v1::Record record;
  record.set_variant(candidate.variant());
  if (auto bytes = ReadBinary(out_path); bytes.ok() && record.ParseFromString(*bytes)) return record;
  record.set_state(killed ? v1::TIMEOUT : v1::STATE_UNSPECIFIED);
  if (killed) {
    record.set_detail("fresh process killed after " + Fixed(o.child_timeout_s, 0) + " s");
  } else if (WIFSIGNALED(status)) {
    record.set_detail("fresh process died of signal " + std::to_string(WTERMSIG(status)) + " (" +
                      strsignal(WTERMSIG(status)) + ")");
  } else {
    record.set_detail("fresh process exited with code " + std::to_string(WEXITSTATUS(status)) +
                      " without a result (its log is on stderr)");
  }
  return record;
}

std::string FailureText(const v1::Record& r) {
  const std::string state = r.state() == v1::STATE_UNSPECIFIED ? "ERROR" : v1::ResultState_Name(r.state());
  return state + ": " + r.detail();
}


int ChildMain(const SsmOptions& o) {
  auto log = Logger("client");
  v1::Record record;
  auto finish = [&]() {
    Status st = WriteBinary(o.child_out, record.SerializeAsString());
    if (!st.ok()) {
      log->error("child: {}", st.ToString());
      return 1;
    }
    return 0;
  };
  v1::Candidate candidate;
  auto bytes = ReadBinary(o.candidate_file);
  if (!bytes.ok() || !candidate.ParseFromString(*bytes)) {
    record.set_detail("cannot read the candidate " + o.candidate_file);
    return finish();
  }
  record.set_variant(candidate.variant());
  auto driver = CudaDriver::Load();
  if (!driver.ok()) {
    record.set_detail(driver.status().ToString());
    return finish();
  }
  auto ctx = GpuContext::Open(*driver, o.device);
  if (!ctx.ok()) {
    record.set_detail(ctx.status().ToString());
    return finish();
  }
  const Problem problem = SsmProblem(o.child_shape, o.child_mode);
  const auto start = Clock::now();
  const OpCase inputs = OpIoFor(problem.op).Prepare(problem, o.seed, /*check=*/false);
  auto run = RunCandidate(**ctx, problem, candidate, inputs, /*download=*/false, o.kernel_timeout_ms);
  if (!run.ok()) {
    record.set_detail(run.status().ToString());
    return finish();
  }
  record.set_state(run->state);
  record.set_detail(run->error);
  v1::Memory* m = record.mutable_memory();
  m->set_baseline_bytes(run->in_use_before);
  m->set_peak_bytes(run->in_use_peak);
  m->set_delta_bytes(run->in_use_peak - run->in_use_before);
  m->set_workspace_bytes(candidate.workspace_bytes());
  log->info("child {} {} {}: {} in {:.1f} s, delta {:.1f} MiB", candidate.variant(), ArgOf(o.child_shape),
            ModeName(o.child_mode), v1::ResultState_Name(run->state), SecondsSince(start),
            Mib(m->delta_bytes()));
  return finish();
}

}  // namespace scantune::ssmbench
