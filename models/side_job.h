// Work a layer hands to another core for the length of one call: the step's
// helper (StepHelper, an idle thread of the run) runs part of it while the
// calling thread goes on. Which thread runs a piece changes none of its
// arithmetic, so results keep their bits with or without a helper.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>

#include "models/model.h"

namespace vg {

// In a spin-wait: tells the core (and its hyperthread sibling) that this one is waiting.
inline void cpu_relax() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Waits until done() holds: spins first (~0.1-0.3 ms, a piece's usual
// remainder), then sleeps on `word`, which whoever makes done() true changes
// and notifies.
template <class Done>
void spin_then_wait(const std::atomic<uint32_t>& word, Done&& done) {
  for (int spin = 0;; ++spin) {
    const uint32_t w = word.load(std::memory_order_acquire);
    if (done()) return;
    if (spin < 16384) cpu_relax();
    else word.wait(w, std::memory_order_acquire);
  }
}

// One job at a time, offered to a helper: start() returns at once; finish()
// runs the job here if no helper has begun it, else waits until the helper's
// run ends, and rethrows what the job threw there. The job runs exactly once.
// A helper may pop the offer late, after finish() (or after the SideJob is
// gone): it then finds the offer claimed and touches nothing else.
class SideJob {
 public:
  SideJob();
  ~SideJob();
  SideJob(const SideJob&) = delete;
  SideJob& operator=(const SideJob&) = delete;
  // `job` must live until finish() or settle(); helper nullptr: none.
  template <class F>
  void start(StepHelper* helper, F& job) {
    start(helper, &job, [](void* f) { (*static_cast<F*>(f))(); });
  }
  void finish();
  // When unwinding: claims the job without running it, or waits for the helper's run to end.
  void settle() noexcept;

 private:
  struct Block;
  void start(StepHelper* helper, void* job, void (*call)(void*));
  Block* b_;
  uint32_t gen_ = 0;
  bool pending_ = false;
};

// Runs f when the scope ends, however it ends.
template <class F>
struct OnExit {
  F f;
  ~OnExit() { f(); }
};
template <class F>
OnExit(F) -> OnExit<F>;

// f(i, slot) for every item i in [0, n), items independent of each other:
// slot 0 on this thread, 1 on the helper's (each slot's buffers belong to one
// thread for the call). The helper takes items while there are any left.
template <class F>
void for_items(SideJob& side, StepHelper* helper, int n, F&& f) {
  std::atomic<int> next{0};
  auto take = [&](int slot) {
    for (int i; (i = next.fetch_add(1, std::memory_order_relaxed)) < n;) f(i, slot);
  };
  auto on_helper = [&] { take(1); };
  if (helper && n > 1) side.start(helper, on_helper);
  const OnExit settle{[&] {  // however this thread leaves, the helper is done with the locals
    next.store(n, std::memory_order_relaxed);
    side.settle();
  }};
  take(0);
  side.finish();
}

// Items [0, n) consumed here in order, consume(i, i % K), each after
// prepare(i, i % K), which either thread runs: K slots of buffers, and
// prepare(i) reuses the slot consume(i - K) is done with. While the next item
// to consume is not ready, this thread prepares the next free one itself, so
// neither thread waits while there is an item it could prepare.
template <int K, class P, class C>
void prepared_in_order(SideJob& side, StepHelper* helper, int n, P&& prepare, C&& consume) {
  static_assert(K >= 2, "one slot being consumed, another prepared");
  std::atomic<uint32_t> next{0};      // the next item to prepare, claimed by whoever swaps it
  std::atomic<uint32_t> consumed{0};  // items consumed; also the helper's stop sign (n)
  std::atomic<uint32_t> ready[K] = {};  // per slot: 1 + the item prepared there
  std::exception_ptr error[K];        // per slot: what prepare threw there on the helper
  const uint32_t N = uint32_t(n);
  auto slot_free = [&](uint32_t i) { return consumed.load(std::memory_order_acquire) + K > i; };
  auto claim = [&](uint32_t i) { return next.compare_exchange_strong(i, i + 1, std::memory_order_acq_rel); };
  auto on_helper = [&] {
    for (uint32_t i; (i = next.load(std::memory_order_acquire)) < N;) {
      spin_then_wait(consumed, [&] { return slot_free(i); });
      if (consumed.load(std::memory_order_acquire) >= N) return;
      if (!claim(i)) continue;
      bool ok = true;
      try {
        prepare(int(i), int(i % K));
      } catch (...) {
        error[i % K] = std::current_exception();
        ok = false;
      }
      ready[i % K].store(i + 1, std::memory_order_release);
      ready[i % K].notify_one();
      if (!ok) return;  // this thread rethrows it
    }
  };
  if (helper && n > 1) side.start(helper, on_helper);
  const OnExit settle{[&] {  // the helper stops, and is done with the locals
    consumed.store(N, std::memory_order_release);
    consumed.notify_all();
    side.settle();
  }};
  for (uint32_t i = 0; i < N; ++i) {
    std::atomic<uint32_t>& r = ready[i % K];
    while (r.load(std::memory_order_acquire) != i + 1) {
      const uint32_t j = next.load(std::memory_order_acquire);
      if (j < N && slot_free(j)) {
        if (claim(j)) {
          prepare(int(j), int(j % K));
          ready[j % K].store(j + 1, std::memory_order_release);
        }
        continue;
      }
      // Item i is the helper's (j > i) and no slot is free: only it can move.
      spin_then_wait(r, [&] { return r.load(std::memory_order_acquire) == i + 1; });
    }
    if (error[i % K]) std::rethrow_exception(error[i % K]);  // written before r, by the helper
    consume(int(i), int(i % K));
    consumed.store(i + 1, std::memory_order_release);
    consumed.notify_all();
  }
  side.finish();
}

}  // namespace vg
