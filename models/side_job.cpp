#include "models/side_job.h"

#include <stdexcept>
#include <utility>

namespace vg {

// `state` is (generation << 2 | phase), so a helper claims only the offer its
// job was made for; the block outlives the SideJob while a job still holds it
// (refs), since a helper may pop a job late.
struct SideJob::Block {
  enum Phase : uint32_t { kOffered = 0, kHelper = 1, kDone = 2, kOwner = 3 };
  std::atomic<uint32_t> state{kDone};
  std::atomic<int> refs{1};
  void* job = nullptr;
  void (*call)(void*) = nullptr;
  std::exception_ptr error;  // what the job threw on the helper
  static void release(Block* b) {
    if (b->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete b;
  }
};

SideJob::SideJob() : b_(new Block) {}

SideJob::~SideJob() {
  settle();
  Block::release(b_);
}

void SideJob::start(StepHelper* helper, void* job, void (*call)(void*)) {
  if (pending_) throw std::logic_error("SideJob::start: the last job is not finished");
  const uint32_t gen = ++gen_ << 2;
  b_->job = job;
  b_->call = call;
  b_->error = nullptr;
  b_->state.store(gen | Block::kOffered, std::memory_order_release);
  pending_ = true;
  if (!helper) return;
  Block* b = b_;
  b->refs.fetch_add(1, std::memory_order_relaxed);
  // Two words: std::function keeps the job without allocating.
  const bool taken = helper->offer([b, gen] {
    uint32_t expected = gen | Block::kOffered;
    if (b->state.compare_exchange_strong(expected, gen | Block::kHelper, std::memory_order_acq_rel)) {
      try {
        b->call(b->job);
      } catch (...) {
        b->error = std::current_exception();  // the owner rethrows it
      }
      b->state.store(gen | Block::kDone, std::memory_order_release);
      b->state.notify_one();
    }
    Block::release(b);
  });
  if (!taken) Block::release(b);  // never queued: finish() runs it here
}

void SideJob::finish() {
  if (!pending_) return;
  const uint32_t gen = gen_ << 2;
  uint32_t expected = gen | Block::kOffered;
  if (b_->state.compare_exchange_strong(expected, gen | Block::kOwner, std::memory_order_acq_rel)) {
    pending_ = false;
    b_->call(b_->job);
    return;
  }
  spin_then_wait(b_->state, [&] { return b_->state.load(std::memory_order_acquire) == (gen | Block::kDone); });
  pending_ = false;
  if (b_->error) std::rethrow_exception(std::exchange(b_->error, nullptr));
}

void SideJob::settle() noexcept {
  if (!pending_) return;
  pending_ = false;
  const uint32_t gen = gen_ << 2;
  uint32_t expected = gen | Block::kOffered;
  if (b_->state.compare_exchange_strong(expected, gen | Block::kOwner, std::memory_order_acq_rel)) return;
  spin_then_wait(b_->state, [&] { return b_->state.load(std::memory_order_acquire) == (gen | Block::kDone); });
  b_->error = nullptr;
}

}  // namespace vg
