// JobQueue: one thread running posted jobs one at a time, in order (the
// Engine keeps one per device, so a GPU never runs two jobs at once). Owns the
// thread and the pending jobs. On Stop, the running job finishes (the caller
// interrupts it first if it must end early) and every pending job's cancel
// function runs instead of the job, so no caller waits forever.
//
// Thread safety: Post and Stop may be called from any thread.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace scantune {

class JobQueue {
 public:
  explicit JobQueue(std::string name);
  ~JobQueue();  // Stop()
  JobQueue(const JobQueue&) = delete;
  JobQueue& operator=(const JobQueue&) = delete;

  // False (nothing queued, nothing called) once stopped.
  bool Post(std::function<void()> run, std::function<void()> cancel);
  void Stop();

 private:
  void Loop();

  struct Job {
    std::function<void()> run;
    std::function<void()> cancel;
  };
  const std::string name_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> pending_;  // guarded by mu_
  bool stopping_ = false;    // guarded by mu_
  std::thread thread_;
};

}  // namespace scantune
