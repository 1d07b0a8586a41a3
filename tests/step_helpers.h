// Step helpers (StepHelper) for the tests of work handed to another thread.
#pragma once

#include <omp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "models/model.h"

namespace vg::test {

// ThreadHelper: a thread of its own, idle whenever it has no job, taking
// every offer, each after `delay_us` (so its claims land at different points
// of the owner's work). Declines: takes
// none, so the step runs every offer itself. Late: accepts every offer and
// runs the jobs only when told, after the step, the Trainer and the model are
// gone: each must find its offer claimed and touch nothing else (ASan).
class ThreadHelper final : public StepHelper {
 public:
  explicit ThreadHelper(int delay_us) : delay_us_(delay_us), thread_([this] { loop(); }) {}
  ~ThreadHelper() { stop(); }
  void stop() {  // runs what is queued, then ends the thread
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  bool offer(std::function<void()> job) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs_.push_back(std::move(job));
    }
    cv_.notify_all();
    return true;
  }
  std::atomic<int> ran{0};  // jobs popped (a job the step claimed first included)

 private:
  void loop() {
    omp_set_num_threads(1);  // as the run's threads
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
        if (jobs_.empty()) return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      if (delay_us_) std::this_thread::sleep_for(std::chrono::microseconds(delay_us_));
      job();
      ++ran;
    }
  }
  const int delay_us_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stop_ = false;
  std::thread thread_;
};

class DecliningHelper final : public StepHelper {
 public:
  bool offer(std::function<void()>) override {
    ++offers;
    return false;
  }
  int offers = 0;
};

class LateHelper final : public StepHelper {
 public:
  bool offer(std::function<void()> job) override {
    jobs.push_back(std::move(job));
    return true;
  }
  std::vector<std::function<void()>> jobs;
};

}  // namespace vg::test
