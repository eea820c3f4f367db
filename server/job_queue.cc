#include "server/job_queue.h"

#include <utility>

namespace scantune {

JobQueue::JobQueue(std::string name) : name_(std::move(name)), thread_([this] { Loop(); }) {}

JobQueue::~JobQueue() { Stop(); }

bool JobQueue::Post(std::function<void()> run, std::function<void()> cancel) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return false;
    pending_.push_back({std::move(run), std::move(cancel)});
  }
  cv_.notify_one();
  return true;
}

void JobQueue::Stop() {
  std::deque<Job> cancelled;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    cancelled.swap(pending_);
  }
  cv_.notify_all();
  for (Job& job : cancelled) {
    if (job.cancel) job.cancel();
  }
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

void JobQueue::Loop() {
  while (true) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !pending_.empty(); });
      if (stopping_) return;  // Stop() cancels whatever is pending
      job = std::move(pending_.front());
      pending_.pop_front();
    }
    job.run();
  }
}

}  // namespace scantune
