// scantune-fake-worker: a TEST DOUBLE standing in for scantune-worker in CI
// (no GPU, no CUDA). It speaks the same protocol (proto/worker.proto frames
// over the fd given by --fd) and takes the same flags, and it behaves like a
// worker driving one fake device:
//
//   --list                 one JSON device line on stdout (nothing + stderr note without GPU)
//   --fd N --device I      Hello{the fake device}, then serve Jobs until shutdown/EOF
//   --no-gpu               (or SCANTUNE_FAKE_NO_GPU=1) Hello{error "no GPU: ..."}
//
// Candidates, by variant name:
//   test_fault     CandidateStarted, then abort() (as a real fault kills a worker)
//   test_hang      CandidateStarted, then sleeps forever (the watchdog must fire)
//   names in SCANTUNE_FAKE_WRONG (comma-separated)   a WRONG_RESULT record
//   names in SCANTUNE_FAKE_RETIME_TIMEOUT             a TIMEOUT record in re-timing jobs only
//                                                     (origin "retime"; OK in the first pass)
//   anything else  an OK record with deterministic synthetic timings derived
//                  from a hash of the name (all Stats fields, rounds, rel_err 0)
// SCANTUNE_FAKE_TIMES="name=ms,name=ms" pins the median of named variants (ms,
// the ranked mode's fwd part); SCANTUNE_FAKE_JITTER_PCT (default 0.2) sets the
// sample spread, so tests can make two variants tie within noise.
// Nothing here measures anything: it exists so the daemon's supervision,
// tuning and selection logic can be tested without a GPU.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/framing.h"
#include "common/problem.h"
#include "common/stats.h"
#include "proto/worker.pb.h"

namespace {

using namespace scantune;

constexpr double kCopyGbps = 4000.0;  // the fake device's copy bandwidth (for pct_of_copy)

v1::DeviceInfo FakeDevice() {
  v1::DeviceInfo d;
  d.set_name("Fake GPU (test double)");
  d.set_uuid("GPU-fake-0");
  d.set_ordinal(0);
  d.set_cc_major(9);
  d.set_cc_minor(0);
  d.set_sm_count(132);
  d.set_memory_bytes(uint64_t{141} * 1000 * 1000 * 1000);
  d.set_sm_clock_khz(1980000);
  d.set_memory_clock_khz(2619000);
  d.set_memory_bus_width_bits(6144);
  d.set_l2_bytes(60 * 1024 * 1024);
  d.set_max_shared_per_block_bytes(227 * 1024);
  d.set_max_registers_per_block(65536);
  d.set_driver_version(13000);
  d.set_nvrtc_version("fake");
  d.set_copy_gbps(kCopyGbps);
  return d;
}

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    if (comma > start) out.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

uint64_t Fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string NowIso() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

double BaseMs(const std::string& variant) {
  for (const std::string& item : SplitList(Env("SCANTUNE_FAKE_TIMES"))) {
    const size_t eq = item.find('=');
    if (eq != std::string::npos && item.substr(0, eq) == variant) return std::atof(item.c_str() + eq + 1);
  }
  // 0.2 .. 1.0 ms, spread widely enough by the hash that neighbours differ clearly.
  return 0.2 + static_cast<double>(Fnv1a(variant) % 10007) / 10007.0 * 0.8;
}

// Deterministic samples around `median`: a fixed zig-zag of +-jitter.
std::vector<double> Samples(double median, int count, double jitter_pct) {
  static const double kPattern[] = {0.0, 1.0, -1.0, 0.5, -0.5, 0.25, -0.25, 0.75, -0.75};
  std::vector<double> out;
  for (int i = 0; i < count; ++i) out.push_back(median * (1.0 + kPattern[i % 9] * jitter_pct / 100.0));
  return out;
}

class FakeWorker {
 public:
  explicit FakeWorker(int fd) : fd_(fd) {
    for (const std::string& v : SplitList(Env("SCANTUNE_FAKE_WRONG"))) wrong_.insert(v);
    for (const std::string& v : SplitList(Env("SCANTUNE_FAKE_RETIME_TIMEOUT"))) retime_timeout_.insert(v);
    const std::string jitter = Env("SCANTUNE_FAKE_JITTER_PCT");
    if (!jitter.empty()) jitter_pct_ = std::atof(jitter.c_str());
  }

  int Serve() {
    while (true) {
      v1::WorkerCommand command;
      Status read = ReadFrame(fd_, &command, -1);
      if (!read.ok()) return read.code() == StatusCode::kUnavailable ? 0 : 1;
      if (command.has_shutdown()) return 0;
      if (command.has_job()) RunJob(command.job());
    }
  }

 private:
  void Send(const v1::WorkerEvent& event) {
    if (!WriteFrame(fd_, event).ok()) std::_Exit(1);  // the daemon is gone
  }

  void Started(const v1::Job& job, const std::string& variant, const char* phase) {
    v1::WorkerEvent event;
    event.mutable_started()->set_job_id(job.job_id());
    event.mutable_started()->set_variant(variant);
    event.mutable_started()->set_phase(phase);
    Send(event);
  }

  v1::Record BaseRecord(const v1::Job& job, const v1::Candidate& c, v1::ResultState state) {
    v1::Record r;
    *r.mutable_device() = FakeDevice();
    *r.mutable_problem() = job.problem();
    r.set_variant(c.variant());
    r.set_state(state);
    r.set_compile_ms(c.compile_ms());
    r.set_created_at(NowIso());
    r.set_origin(job.origin());
    r.set_job_id(job.job_id());
    r.mutable_memory()->set_workspace_bytes(c.workspace_bytes());
    return r;
  }

  void RunJob(const v1::Job& job) {
    const int rounds = job.timing().rounds() > 0 ? job.timing().rounds() : 2;
    const int per_round = job.timing().samples_per_round() > 0 ? job.timing().samples_per_round() : 5;
    StatusOr<Problem> problem = ProblemFromProto(job.problem());
    for (const v1::Candidate& c : job.candidates()) {
      if (job.verify() || !job.time()) {
        Started(job, c.variant(), "verify");
        if (c.variant() == "test_fault") std::abort();
        if (c.variant() == "test_hang") {
          while (true) std::this_thread::sleep_for(std::chrono::hours(1));
        }
        if (wrong_.count(c.variant())) {
          v1::Record r = BaseRecord(job, c, v1::WRONG_RESULT);
          r.set_rel_err(0.5);
          r.set_detail("test double: listed in SCANTUNE_FAKE_WRONG; max rel err 0.5 at index 0");
          Send(Event(r));
          continue;
        }
      }
      if (!job.time()) {
        Send(Event(BaseRecord(job, c, v1::OK)));
        continue;
      }
      Started(job, c.variant(), "time");
      if (job.origin() == "retime" && retime_timeout_.count(c.variant())) {
        v1::Record r = BaseRecord(job, c, v1::TIMEOUT);
        r.set_detail("test double: listed in SCANTUNE_FAKE_RETIME_TIMEOUT");
        Send(Event(r));
        continue;
      }
      if (c.variant() == "test_fault") std::abort();
      if (c.variant() == "test_hang") {
        while (true) std::this_thread::sleep_for(std::chrono::hours(1));
      }
      v1::Record r = BaseRecord(job, c, v1::OK);
      const double fwd = BaseMs(c.variant());
      const double bwd = fwd * 1.5;
      const int n = rounds * per_round;
      const v1::Mode mode = job.problem().mode();
      const bool has_fwd = mode != v1::BWD;
      const bool has_bwd = mode != v1::FWD;
      std::vector<double> fwd_s = Samples(fwd, n, jitter_pct_), bwd_s = Samples(bwd, n, jitter_pct_);
      std::vector<double> both_s;
      for (int i = 0; i < n; ++i) both_s.push_back(fwd_s[i] + bwd_s[i]);
      auto fill = [&](const std::vector<double>& s, v1::Stats* stats) {
        FillStats(s, stats);
        stats->set_inner_count(10);
        stats->set_input_sets(2);
      };
      if (has_fwd) fill(fwd_s, r.mutable_fwd());
      if (has_bwd) fill(bwd_s, r.mutable_bwd());
      if (mode == v1::FWD_BWD) fill(both_s, r.mutable_fwd_bwd());
      for (int round = 0; round < rounds; ++round) {
        v1::Round* out = r.add_rounds();
        out->set_round(round);
        out->set_order_index(0);
        for (int i = round * per_round; i < (round + 1) * per_round; ++i) {
          if (has_fwd) out->add_fwd_ms(fwd_s[i]);
          if (has_bwd) out->add_bwd_ms(bwd_s[i]);
          if (mode == v1::FWD_BWD) out->add_fwd_bwd_ms(both_s[i]);
        }
      }
      r.mutable_memory()->set_baseline_bytes(512u << 20);
      r.mutable_memory()->set_peak_bytes((512u << 20) + (64u << 20) + c.workspace_bytes());
      r.mutable_memory()->set_delta_bytes((64u << 20) + c.workspace_bytes());
      r.set_rel_err(0.0);
      if (problem.ok()) {
        const double ranked = mode == v1::FWD ? fwd : mode == v1::BWD ? bwd : fwd + bwd;
        r.set_bytes_moved(FloorBytes(*problem, problem->mode));
        r.set_gbps(static_cast<double>(r.bytes_moved()) / (ranked * 1e-3) / 1e9);
        r.set_pct_of_copy(r.gbps() / kCopyGbps * 100.0);
        r.set_parameters(ParameterCount(*problem));
      }
      Send(Event(r));
    }
    v1::WorkerEvent done;
    done.mutable_done()->set_job_id(job.job_id());
    Send(done);
  }

  static v1::WorkerEvent Event(const v1::Record& r) {
    v1::WorkerEvent e;
    *e.mutable_record() = r;
    return e;
  }

  int fd_;
  std::set<std::string> wrong_;
  std::set<std::string> retime_timeout_;
  double jitter_pct_ = 0.2;
};

}  // namespace

int main(int argc, char** argv) {
  int fd = -1;
  int device = 0;
  bool list = false;
  bool no_gpu = Env("SCANTUNE_FAKE_NO_GPU") == "1";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--fd" && i + 1 < argc) {
      fd = std::atoi(argv[++i]);
    } else if (arg == "--device" && i + 1 < argc) {
      device = std::atoi(argv[++i]);
    } else if (arg == "--list") {
      list = true;
    } else if (arg == "--no-gpu") {
      no_gpu = true;
    }  // other flags belong to the real worker; ignored
  }
  if (list) {
    if (no_gpu) {
      std::fprintf(stderr, "scantune-fake-worker: no GPU (test double without device)\n");
      return 0;
    }
    const v1::DeviceInfo d = FakeDevice();
    std::printf(
        "{\"ordinal\": 0, \"name\": \"%s\", \"uuid\": \"%s\", \"cc_major\": %d, \"cc_minor\": %d, "
        "\"sm_count\": %d, \"memory_bytes\": %llu}\n",
        d.name().c_str(), d.uuid().c_str(), d.cc_major(), d.cc_minor(), d.sm_count(),
        static_cast<unsigned long long>(d.memory_bytes()));
    return 0;
  }
  if (fd < 0) {
    std::fprintf(stderr, "usage: scantune-fake-worker --fd N --device I [--no-gpu] | --list\n");
    return 2;
  }
  v1::WorkerEvent hello;
  hello.mutable_hello()->set_pid(static_cast<int32_t>(getpid()));
  if (no_gpu) {
    hello.mutable_hello()->set_error("no GPU: test double without device");
  } else if (device != 0) {
    hello.mutable_hello()->set_error("no device with ordinal " + std::to_string(device) +
                                     " (the test double has one device)");
  } else {
    *hello.mutable_hello()->add_devices() = FakeDevice();
  }
  if (!WriteFrame(fd, hello).ok()) return 1;
  if (!hello.hello().error().empty()) return 0;
  return FakeWorker(fd).Serve();
}
