#include "server/service.h"

#include <algorithm>
#include <deque>
#include <memory>
#include <optional>
#include <thread>
#include <utility>

#include "common/log.h"
#include "server/grpc_status.h"

namespace scantune {
namespace {

// Who a call is from, for the per-client job bound: the `scantune-client`
// metadata our clients send (host:pid), else the transport's peer (over a
// Unix socket every anonymous caller shares one peer name). It is not an
// identity check (callers are local, or proved a token before the call got
// here: server/listen_security.h); it keeps one client's jobs from filling
// the queue others wait on.
std::string ClientId(const grpc::CallbackServerContext* context) {
  const auto& metadata = context->client_metadata();
  if (auto it = metadata.find(kClientMetadataKey); it != metadata.end() && !it->second.empty()) {
    constexpr size_t kMaxIdBytes = 128;
    return std::string(it->second.data(), std::min(it->second.size(), kMaxIdBytes));
  }
  return context->peer();
}

// Progress is advisory: a client that reads slower than the job advances
// loses the oldest queued updates rather than growing the daemon's memory.
constexpr size_t kMaxQueuedProgress = 4096;

// Streams one Tune job's progress. Two parties hold it: gRPC (from Tune()
// until OnDone) and the job thread (until the Engine call returns); the
// object lives until both let go, so the job thread may post after the client
// went away. Every decision is taken under mu_; StartWrite and Finish are
// called after unlocking, so a reaction run inline cannot deadlock.
// Invariants: at most one write in flight; Finish is called exactly once, and
// only when no write is in flight.
class TuneReactor final : public grpc::ServerWriteReactor<v1::TuneProgress> {
 public:
  static std::shared_ptr<TuneReactor> Create() {
    auto reactor = std::shared_ptr<TuneReactor>(new TuneReactor());
    reactor->self_ = reactor;
    return reactor;
  }

  // From the job thread.
  void Post(const v1::TuneProgress& progress) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (finished_ || cancelled_) return;
      if (queue_.size() >= kMaxQueuedProgress) queue_.pop_front();
      queue_.push_back(progress);
    }
    Pump();
  }

  // From the job thread, once: the stream ends with `status` after the queued
  // progress has been written.
  void Complete(const grpc::Status& status) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      final_status_ = status;
    }
    Pump();
  }

  void OnWriteDone(bool ok) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      writing_ = false;
      // A failed write means the stream is broken; nothing more can be sent.
      if (!ok) cancelled_ = true;
    }
    Pump();
  }

  void OnCancel() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      cancelled_ = true;
      queue_.clear();
    }
    Pump();
  }

  void OnDone() override {
    // Drops gRPC's share; the job thread may still hold the other one.
    std::shared_ptr<TuneReactor> self = std::move(self_);
  }

 private:
  TuneReactor() = default;

  void Pump() {
    enum class Action { kNone, kWrite, kFinish } action = Action::kNone;
    grpc::Status status;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (writing_ || finished_) return;
      if (cancelled_) {
        finished_ = true;
        action = Action::kFinish;
        status = grpc::Status(grpc::StatusCode::CANCELLED, "cancelled; the tuning job goes on and its results are stored");
      } else if (!queue_.empty()) {
        in_flight_ = std::move(queue_.front());
        queue_.pop_front();
        writing_ = true;
        action = Action::kWrite;
      } else if (final_status_) {
        finished_ = true;
        action = Action::kFinish;
        status = *final_status_;
      }
    }
    // in_flight_ is only replaced while no write is in flight, so it stays
    // valid until OnWriteDone.
    if (action == Action::kWrite) StartWrite(&in_flight_);
    if (action == Action::kFinish) Finish(status);
  }

  std::mutex mu_;
  std::deque<v1::TuneProgress> queue_;
  v1::TuneProgress in_flight_;
  bool writing_ = false;
  bool finished_ = false;
  bool cancelled_ = false;
  std::optional<grpc::Status> final_status_;
  std::shared_ptr<TuneReactor> self_;
};

void LogCall(const char* rpc, const Status& status) {
  auto log = Logger("server");
  if (status.ok()) {
    log->debug("{}: OK", rpc);
  } else if (status.code() == StatusCode::kInternal) {
    log->error("{}: {}", rpc, status.ToString());
  } else {
    log->info("{}: {}", rpc, status.ToString());
  }
}

}  // namespace

ScantuneService::ScantuneService(Engine* engine, int max_concurrent_calls)
    : engine_(engine), max_concurrent_calls_(max_concurrent_calls) {}

ScantuneService::~ScantuneService() { WaitForCalls(); }

void ScantuneService::WaitForCalls() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_.wait(lock, [this] { return calls_in_flight_ == 0; });
}

int ScantuneService::CallsInFlight() const {
  std::lock_guard<std::mutex> lock(mu_);
  return calls_in_flight_;
}

bool ScantuneService::Offload(std::function<void()> work) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (calls_in_flight_ >= max_concurrent_calls_) return false;
    ++calls_in_flight_;
  }
  std::thread([this, work = std::move(work)]() mutable {
    work();
    // Whatever the call holds (a Tune reactor, say) goes before the service
    // may be destroyed.
    work = nullptr;
    // Notifying under the lock keeps the service (and mu_) alive until the
    // notification is done: the destructor cannot return before we unlock.
    std::lock_guard<std::mutex> lock(mu_);
    if (--calls_in_flight_ == 0) idle_.notify_all();
  }).detach();
  return true;
}

static grpc::Status Busy(int limit) {
  return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                      "server busy: " + std::to_string(limit) + " calls already running; retry later");
}

grpc::ServerUnaryReactor* ScantuneService::RunUnary(grpc::CallbackServerContext* context, const char* rpc,
                                                    std::function<Status()> call) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  bool started = Offload([reactor, rpc, call = std::move(call)] {
    Status status = call();
    LogCall(rpc, status);
    reactor->Finish(ToGrpcStatus(status));
  });
  if (!started) reactor->Finish(Busy(max_concurrent_calls_));
  return reactor;
}

grpc::ServerUnaryReactor* ScantuneService::Select(grpc::CallbackServerContext* context,
                                                  const v1::SelectRequest* request, v1::SelectResponse* response) {
  return RunUnary(context, "Select", [this, request, response, client = ClientId(context)]() -> Status {
    ASSIGN_OR_RETURN(*response->mutable_selection(), engine_->Select(*request, nullptr, client));
    return Status::Ok();
  });
}

grpc::ServerUnaryReactor* ScantuneService::GetKernel(grpc::CallbackServerContext* context,
                                                     const v1::GetKernelRequest* request,
                                                     v1::KernelResponse* response) {
  return RunUnary(context, "GetKernel", [this, request, response, client = ClientId(context)]() -> Status {
    ASSIGN_OR_RETURN(*response, engine_->GetKernel(*request, client));
    return Status::Ok();
  });
}

grpc::ServerUnaryReactor* ScantuneService::Benchmark(grpc::CallbackServerContext* context,
                                                     const v1::BenchmarkRequest* request,
                                                     v1::BenchmarkResponse* response) {
  return RunUnary(context, "Benchmark", [this, request, response, client = ClientId(context)]() -> Status {
    ASSIGN_OR_RETURN(*response, engine_->Benchmark(*request, client));
    return Status::Ok();
  });
}

grpc::ServerUnaryReactor* ScantuneService::ListRecords(grpc::CallbackServerContext* context,
                                                       const v1::ListRecordsRequest* request,
                                                       v1::ListRecordsResponse* response) {
  return RunUnary(context, "ListRecords", [this, request, response]() -> Status {
    ASSIGN_OR_RETURN(*response, engine_->ListRecords(*request));
    return Status::Ok();
  });
}

grpc::ServerUnaryReactor* ScantuneService::GetRecord(grpc::CallbackServerContext* context,
                                                     const v1::GetRecordRequest* request, v1::Record* response) {
  return RunUnary(context, "GetRecord", [this, request, response]() -> Status {
    ASSIGN_OR_RETURN(*response, engine_->GetRecord(request->id()));
    return Status::Ok();
  });
}

grpc::ServerUnaryReactor* ScantuneService::ListSelections(grpc::CallbackServerContext* context,
                                                          const v1::ListSelectionsRequest* request,
                                                          v1::ListSelectionsResponse* response) {
  return RunUnary(context, "ListSelections", [this, request, response]() -> Status {
    ASSIGN_OR_RETURN(*response, engine_->ListSelections(*request));
    return Status::Ok();
  });
}

grpc::ServerUnaryReactor* ScantuneService::ListDevices(grpc::CallbackServerContext* context,
                                                       const v1::ListDevicesRequest* request,
                                                       v1::ListDevicesResponse* response) {
  return RunUnary(context, "ListDevices", [this, response]() -> Status {
    ASSIGN_OR_RETURN(*response, engine_->ListDevices());
    return Status::Ok();
  });
}

// Export and Import read or write the whole database in one call (up to
// 16 MiB of JSON), so they run off the reactor threads like every other call.
grpc::ServerUnaryReactor* ScantuneService::Export(grpc::CallbackServerContext* context,
                                                  const v1::ExportRequest* request, v1::ExportResponse* response) {
  return RunUnary(context, "Export", [this, request, response]() -> Status {
    ASSIGN_OR_RETURN(*response, engine_->Export(*request));
    return Status::Ok();
  });
}

grpc::ServerUnaryReactor* ScantuneService::Import(grpc::CallbackServerContext* context,
                                                  const v1::ImportRequest* request, v1::ImportResponse* response) {
  return RunUnary(context, "Import", [this, request, response]() -> Status {
    ASSIGN_OR_RETURN(*response, engine_->Import(*request));
    return Status::Ok();
  });
}

grpc::ServerWriteReactor<v1::TuneProgress>* ScantuneService::Tune(grpc::CallbackServerContext* context,
                                                                  const v1::TuneRequest* request) {
  std::shared_ptr<TuneReactor> reactor = TuneReactor::Create();
  // The job thread gets its own copy of the request: it may outlive the call.
  bool started = Offload([this, reactor, request = *request, client = ClientId(context)] {
    bool saw_done = false;
    StatusOr<v1::Selection> selection = engine_->Tune(
        request,
        [&](const v1::TuneProgress& progress) {
          if (progress.stage() == v1::TuneProgress::DONE && progress.has_selection()) saw_done = true;
          reactor->Post(progress);
        },
        client);
    LogCall("Tune", selection.status());
    if (selection.ok() && !saw_done) {
      // Every successful stream ends with DONE carrying the selection.
      v1::TuneProgress done;
      done.set_stage(v1::TuneProgress::DONE);
      *done.mutable_selection() = *selection;
      done.set_variant(selection->variant());
      done.set_median_ms(selection->median_ms());
      reactor->Post(done);
    }
    reactor->Complete(ToGrpcStatus(selection.status()));
  });
  if (!started) reactor->Complete(Busy(max_concurrent_calls_));
  return reactor.get();
}

}  // namespace scantune
