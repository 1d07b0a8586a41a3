// Work a layer hands to the step's helper (models/side_job.h): every item runs
// once, in its slot, on the thread the slot belongs to; prepared items are
// consumed in order, each after its preparation, never in a slot still in use;
// an error on either thread reaches the caller, and leaves no job running.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "models/side_job.h"
#include "tests/step_helpers.h"

namespace vg {
namespace {

using test::DecliningHelper;
using test::LateHelper;
using test::ThreadHelper;

// Spins until `flag` is set or ~10 s pass (a helper that never came: the
// assertions after it say so).
void await(const std::atomic<bool>& flag) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!flag.load() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
}

TEST(SideJob, ForItemsRunsEachItemOnceOnTheThreadItsSlotBelongsTo) {
  const int n = 37;
  ThreadHelper helper(0);
  SideJob side;
  for (int round = 0; round < 3; ++round) {  // one SideJob serves call after call
    SCOPED_TRACE(round);
    std::vector<std::atomic<int>> runs(n);
    std::vector<std::thread::id> by(n);
    std::atomic<bool> helper_ran{false};
    const std::thread::id me = std::this_thread::get_id();
    for_items(side, &helper, n, [&](int i, int slot) {
      runs[size_t(i)]++;
      by[size_t(i)] = std::this_thread::get_id();
      EXPECT_EQ(slot == 0, std::this_thread::get_id() == me) << "item " << i;
      if (slot == 1) helper_ran = true;
      else await(helper_ran);  // this thread leaves items for the helper
    });
    for (int i = 0; i < n; ++i) EXPECT_EQ(runs[size_t(i)].load(), 1) << "item " << i;
    EXPECT_TRUE(helper_ran.load());
  }
}

TEST(SideJob, ForItemsWithoutAHelperRunsEverythingHere) {
  SideJob side;
  DecliningHelper declining;
  for (StepHelper* h : {static_cast<StepHelper*>(nullptr), static_cast<StepHelper*>(&declining)}) {
    std::vector<int> order;
    for_items(side, h, 5, [&](int i, int slot) {
      EXPECT_EQ(slot, 0);
      order.push_back(i);
    });
    EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
  }
  EXPECT_EQ(declining.offers, 1);
}

// Slot discipline: prepare(i) writes slot i % K, which consume(i - K) must be
// done with, and consume(i) finds its item prepared there. Each item takes
// long enough that the helper's turn comes.
template <int K>
void check_prepared_in_order(int n, int delay_us) {
  SCOPED_TRACE("K = " + std::to_string(K) + ", delay " + std::to_string(delay_us) + " us");
  constexpr int kNone = -100;
  std::atomic<int> in_slot[K], consuming[K];
  for (int k = 0; k < K; ++k) in_slot[k] = kNone, consuming[k] = kNone;
  std::vector<std::atomic<int>> prepared(static_cast<size_t>(n));
  std::vector<int> consumed;
  std::atomic<int> on_helper{0};
  std::atomic<bool> helper_prepared{false};
  ThreadHelper helper(delay_us);
  SideJob side;
  const std::thread::id me = std::this_thread::get_id();
  prepared_in_order<K>(
      side, &helper, n,
      [&](int i, int slot) {
        EXPECT_EQ(slot, i % K);
        EXPECT_NE(consuming[slot].load(), i - K) << "item " << i << " prepared while " << i - K << " is consumed";
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        in_slot[slot] = i;
        prepared[size_t(i)]++;
        if (std::this_thread::get_id() != me) on_helper++, helper_prepared = true;
      },
      [&](int i, int slot) {
        consuming[slot] = i;
        EXPECT_EQ(in_slot[slot].load(), i);
        if (i == 0) await(helper_prepared);  // the helper's turn comes
        std::this_thread::sleep_for(std::chrono::microseconds(100));
        consumed.push_back(i);
        consuming[slot] = kNone;
      });
  std::vector<int> all(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    all[size_t(i)] = i;
    EXPECT_EQ(prepared[size_t(i)].load(), 1) << "item " << i;
  }
  EXPECT_EQ(consumed, all);
  EXPECT_GT(on_helper.load(), 0);
}

TEST(SideJob, PreparedItemsAreConsumedInOrderEachAfterItsPreparation) {
  for (int delay_us : {0, 300}) {
    check_prepared_in_order<2>(25, delay_us);
    check_prepared_in_order<3>(25, delay_us);
  }
}

TEST(SideJob, AnErrorOnEitherThreadReachesTheCallerAndLeavesNothingRunning) {
  ThreadHelper helper(0);
  SideJob side;
  const std::thread::id me = std::this_thread::get_id();
  // Thrown by prepare on the helper: rethrown here when its item comes.
  std::atomic<bool> thrown{false};
  EXPECT_THROW(prepared_in_order<2>(
                   side, &helper, 6,
                   [&](int, int) {
                     if (std::this_thread::get_id() != me) {
                       thrown = true;
                       throw std::runtime_error("prepare");
                     }
                   },
                   [&](int i, int) {
                     if (i == 0) await(thrown);
                   }),
               std::runtime_error);
  EXPECT_TRUE(thrown.load());
  // Thrown by consume here: the helper stops before the caller's frame is gone.
  EXPECT_THROW(prepared_in_order<2>(
                   side, &helper, 6, [](int, int) { std::this_thread::sleep_for(std::chrono::microseconds(100)); },
                   [](int i, int) {
                     if (i == 2) throw std::runtime_error("consume");
                   }),
               std::runtime_error);
  // Thrown by an item on the helper, or here. Each thread takes one item at
  // least: it says so, then waits until the other has too.
  for (int where : {0, 1}) {
    SCOPED_TRACE(where);
    std::atomic<bool> ran[2] = {false, false};
    EXPECT_THROW(for_items(side, &helper, 8,
                           [&](int, int slot) {
                             ran[slot] = true;
                             await(ran[1 - slot]);
                             if (slot == where) throw std::runtime_error("item");
                           }),
                 std::runtime_error);
    EXPECT_TRUE(ran[0].load() && ran[1].load());
  }
  // The SideJob still serves calls.
  std::atomic<int> count{0};
  for_items(side, &helper, 10, [&](int, int) { count++; });
  EXPECT_EQ(count.load(), 10);
}

// A helper that runs the offers only after the calls, and after the SideJob
// is gone: each finds its offer claimed (ASan sees any touch of a dead frame).
TEST(SideJob, AnOfferPoppedLateTouchesNothing) {
  LateHelper late;
  {
    SideJob side;
    int sum = 0;
    for_items(side, &late, 4, [&](int i, int) { sum += i; });
    prepared_in_order<3>(side, &late, 3, [&](int i, int) { sum += i; }, [&](int i, int) { sum += 10 * i; });
    EXPECT_EQ(sum, 6 + 3 + 30);
  }
  EXPECT_EQ(late.jobs.size(), 2u);
  for (const auto& job : late.jobs) job();
}

}  // namespace
}  // namespace vg
