// Poller: busy-polling, parking in epoll only with its tasks' fds, timed and untimed sleeps,
// wake-ups armed around each park, doorbells.
#include <gtest/gtest.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "dataplane/clock.hpp"
#include "dataplane/poller.hpp"

namespace daqiri::dataplane {
namespace {

// An idle poller parks; one told to spin (a busy_poll queue) never does.
TEST(Poller, ParksWhenIdleUnlessToldToSpin) {
  auto idle = Poller::start("idle", -1);
  auto spinning = Poller::start("spinning", -1);
  ASSERT_TRUE(idle && spinning);
  (*spinning)->spin_always();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((*idle)->parks() < 1 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_GE((*idle)->parks(), 1u);
  // The thread may have parked before spin_always() landed (this thread can be descheduled
  // for milliseconds on a loaded host); after the park in progress, none.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  uint64_t settled = (*spinning)->parks();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ((*spinning)->parks(), settled);
}

// Whether any epoll set of this process watches `fd` (its fdinfo lists a "tfd:" line for it).
bool watched_by_an_epoll(int fd) {
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    if (std::filesystem::read_symlink(e.path(), ec).string() != "anon_inode:[eventpoll]") continue;
    std::ifstream info("/proc/self/fdinfo/" + e.path().filename().string());
    for (std::string word; info >> word;) {
      int target = -1;
      if (word == "tfd:" && info >> target && target == fd) return true;
    }
  }
  return false;
}

// A task whose poll() reports work while told to, that needs timed wake-ups while told to,
// and counts its calls.
struct SwitchTask final : PollTask {
  bool poll() override {
    polls.fetch_add(1);
    return busy.load();
  }
  [[nodiscard]] bool needs_timed_wakeup() const override { return timed.load(); }
  [[nodiscard]] bool wakes_on_fds() const override { return fds_wake.load(); }
  std::atomic<bool> busy{false};
  std::atomic<bool> timed{true};
  std::atomic<bool> fds_wake{true};
  std::atomic<uint64_t> polls{0};
};

// Adds `task` to `poller` with a new eventfd as its wake fd; returns the fd (-1: none).
int add_with_eventfd(Poller& poller, PollTask& task) {
  int efd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (efd >= 0) poller.add_task(&task, {efd});
  return efd;
}

// A task's fd is in the poller's epoll set while the poller is parked and out of it while it
// polls: a socket left in an epoll set costs every datagram's sender an epoll wake-up
// callback, though a busy poller never waits on it.
TEST(Poller, WatchesTaskFdsOnlyWhileParked) {
  auto poller = Poller::start("parking", -1);
  ASSERT_TRUE(poller);
  SwitchTask task;
  int efd = add_with_eventfd(**poller, task);
  ASSERT_GE(efd, 0);
  // Idle, it is parked nearly all the time (one poll between quiet parks).
  bool seen = false;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!seen && std::chrono::steady_clock::now() < deadline) {
    seen = (*poller)->parks() > 0 && watched_by_an_epoll(efd);
  }
  EXPECT_TRUE(seen) << "never watched while parked";
  // Busy: once a poll has seen it, the park before that poll is over (its fds went out of
  // the set before the loop polled again) and no other park comes.
  task.busy.store(true);
  uint64_t polls = task.polls.load();
  while (task.polls.load() < polls + 2)
    std::this_thread::yield();
  uint64_t parks = (*poller)->parks();
  EXPECT_FALSE(watched_by_an_epoll(efd)) << "watched while busy";
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(watched_by_an_epoll(efd)) << "watched while busy";
  EXPECT_EQ((*poller)->parks(), parks);
  // Idle again, then removed: out of the set for good, so the fd may be closed.
  task.busy.store(false);
  (*poller)->remove_task(&task, {efd});
  EXPECT_FALSE(watched_by_an_epoll(efd));
  ::close(efd);
}

// A task whose fds are readable with work it cannot take (a flow that waits for its clients'
// releases) says so, and the poller sleeps without them: on its timer, not woken at once by
// them in a spin. Once the task takes their readiness again, they end its sleeps.
TEST(Poller, LeavesOutTheFdsOfATaskThatCannotActOnThem) {
  auto poller = Poller::start("left-out", -1);
  ASSERT_TRUE(poller);
  SwitchTask task;
  task.fds_wake.store(false);
  int efd = add_with_eventfd(**poller, task);
  ASSERT_GE(efd, 0);
  uint64_t one = 1;
  ASSERT_EQ(::write(efd, &one, sizeof one), ssize_t(sizeof one));  // readable from now on
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((*poller)->wakeups().timer < 20 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  PollerWakeups w = (*poller)->wakeups();
  EXPECT_GE(w.timer, 20u);
  EXPECT_EQ(w.io, 0u) << "woken by an fd the task said to leave out";
  EXPECT_FALSE(watched_by_an_epoll(efd));
  task.fds_wake.store(true);
  while ((*poller)->wakeups().io < 20 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_GE((*poller)->wakeups().io, 20u);
  (*poller)->remove_task(&task, {efd});
  ::close(efd);
}

// A task that says nothing reaches it but a wake-up (no clients, no timers) lets its poller
// sleep up to a second instead of a millisecond; its fd still ends the sleep at once.
TEST(Poller, SleepsLongWhenNoTaskNeedsATimedWakeup) {
  auto poller = Poller::start("untimed", -1);
  ASSERT_TRUE(poller);
  SwitchTask task;
  int efd = add_with_eventfd(**poller, task);
  ASSERT_GE(efd, 0);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((*poller)->parks() < 20 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_GE((*poller)->parks(), 20u) << "timed: a park a millisecond";
  task.timed.store(false);
  // Once the park in progress (a millisecond) is over, the next lasts up to a second.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  uint64_t parks = (*poller)->parks();
  uint64_t polls = task.polls.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_LE((*poller)->parks(), parks + 1) << "untimed: a park a second";
  // The fd readable: the poller wakes and polls on (2048 polls before it parks again).
  uint64_t one = 1;
  ASSERT_EQ(::write(efd, &one, sizeof one), 8);
  while (task.polls.load() < polls + 2048 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::yield();
  EXPECT_GE(task.polls.load(), polls + 2048);
  ASSERT_EQ(::read(efd, &one, sizeof one), 8);
  (*poller)->remove_task(&task, {efd});
  ::close(efd);
}

// A task that needs no timer but has something falling due (a client flow's next dial): the
// poller sleeps until then, neither a millisecond at a time nor a whole second past it.
struct DueTask final : PollTask {
  bool poll() override {
    uint64_t now = dataplane::monotonic_ns();
    if (now >= due.load()) {
      polled_due_at.store(now);
      due.store(kNoWakeupDue);  // done: nothing else falls due
    }
    return false;
  }
  [[nodiscard]] bool needs_timed_wakeup() const override { return false; }
  [[nodiscard]] uint64_t wakeup_due_ns() const override { return due.load(); }
  std::atomic<uint64_t> due{kNoWakeupDue};
  std::atomic<uint64_t> polled_due_at{0};
};

TEST(Poller, SleepsUntilATasksWakeupFallsDue) {
  auto poller = Poller::start("due", -1);
  ASSERT_TRUE(poller);
  DueTask task;
  uint64_t start = dataplane::monotonic_ns();
  task.due.store(start + 150'000'000);
  (*poller)->add_task(&task, {});
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (task.polled_due_at.load() == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  uint64_t at = task.polled_due_at.load();
  ASSERT_NE(at, 0u) << "not polled within 3 s";
  EXPECT_GE(at, start + 150'000'000);
  // Not a second's sleep past it (the margin is for a loaded machine).
  EXPECT_LT(at, start + 700'000'000) << (at - start) / 1000 << " us after the start";
  // The park to the due time and the long one after it (a millisecond at a time: about 150).
  EXPECT_LE((*poller)->parks(), 6u);
  (*poller)->remove_task(&task, {});
}

// A control change wakes the poller and waits for its next two loops, never for a sleep to
// time out: woken, the poller runs its idle spins and may be asleep again, a long sleep if no
// task needs a timer, before the waiting thread looks (so it must read the loop count before
// it wakes the poller). A second is what one such sleep lasts; a change takes microseconds.
TEST(Poller, ControlChangesWaitForLoopsNotForLongSleeps) {
  for (int i = 0; i < 10; ++i) {
    auto poller = Poller::start("changes", -1);
    ASSERT_TRUE(poller);
    SwitchTask visitor;  // needs timed wake-ups: parks of a millisecond while it is there
    (*poller)->add_task(&visitor, {});
    uint64_t parks = (*poller)->parks();
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while ((*poller)->parks() < parks + 20 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    auto start = std::chrono::steady_clock::now();
    (*poller)->remove_task(&visitor, {});  // then no task: the next sleeps are long
    auto took = std::chrono::steady_clock::now() - start;
    EXPECT_LT(took, std::chrono::milliseconds(900)) << "waited for a long sleep to time out";
  }
}

// Quiet, a poller polls about once a park: the 2048 empty polls come only after a park that
// something ended (here the waits of add_task and remove_task).
TEST(Poller, PollsOnceBetweenQuietParks) {
  auto poller = Poller::start("quiet", -1);
  ASSERT_TRUE(poller);
  SwitchTask task;
  (*poller)->add_task(&task, {});
  // The wake add_task sent may end the park under way: its spins are over two parks later.
  uint64_t settled = (*poller)->parks() + 2;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((*poller)->parks() < settled && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  uint64_t parks = (*poller)->parks();
  uint64_t polls = task.polls.load();
  while ((*poller)->parks() < parks + 50 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  uint64_t more_parks = (*poller)->parks() - parks;
  uint64_t more_polls = task.polls.load() - polls;
  EXPECT_GE(more_parks, 50u);
  EXPECT_LE(more_polls, 2 * more_parks + 2)
      << more_polls << " polls for " << more_parks << " parks";
  (*poller)->remove_task(&task, {});
}

// A task that counts how the poller asks for and drops wake-ups, and says work came in as it
// armed while told to.
struct ArmingTask final : PollTask {
  bool poll() override { return false; }
  bool arm_wakeups() override {
    arms.fetch_add(1);
    return !work_as_armed.load();
  }
  void disarm_wakeups() override { disarms.fetch_add(1); }
  std::atomic<bool> work_as_armed{false};
  std::atomic<uint64_t> arms{0};
  std::atomic<uint64_t> disarms{0};
};

// Before each park the poller arms its tasks' wake-ups and after it disarms them; a task
// that had work by the time it armed keeps the poller from parking at all.
TEST(Poller, ArmsWakeupsAroundEachParkAndSkipsTheParkWhenWorkCameIn) {
  auto poller = Poller::start("arming", -1);
  ASSERT_TRUE(poller);
  ArmingTask task;
  (*poller)->add_task(&task, {});
  // Parks before the task came did not arm it; the one in progress at this reading may have
  // armed before it (a park counts itself after arming).
  uint64_t parks_before = (*poller)->parks();
  uint64_t arms_before = task.arms.load();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((*poller)->parks() < parks_before + 5 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // Read in this order, each count can only have grown since the one before it was read.
  uint64_t parks = (*poller)->parks() - parks_before;
  uint64_t arms = task.arms.load();
  uint64_t disarms = task.disarms.load();
  EXPECT_GE(parks, 5u);
  EXPECT_GE(arms - arms_before + 1, parks) << "a park without arming";
  EXPECT_GE(disarms + 1, arms) << "armed " << arms << " times, disarmed " << disarms;
  task.work_as_armed.store(true);
  // Once it has armed twice more, the park that was in progress is over: none follows.
  arms = task.arms.load();
  while (task.arms.load() < arms + 2)
    std::this_thread::yield();
  parks = (*poller)->parks();
  arms = task.arms.load();
  while (task.arms.load() < arms + 100)
    std::this_thread::yield();
  EXPECT_EQ((*poller)->parks(), parks) << "parked although a task had work as it armed";
  task.work_as_armed.store(false);
  (*poller)->remove_task(&task, {});
}

// A watched doorbell (a TX client's kick eventfd) ends a park; the poller drains it and
// counts what was written; once unwatched it is out of the epoll set and counts nothing.
TEST(Poller, DrainsAndCountsAWatchedDoorbell) {
  std::atomic<uint64_t> rung{0};  // outlives the poller, whatever fails
  auto poller = Poller::start("doorbell", -1);
  ASSERT_TRUE(poller);
  SwitchTask task;  // needs timed wake-ups: parks of a millisecond
  (*poller)->add_task(&task, {});
  int efd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  ASSERT_GE(efd, 0);
  (*poller)->watch(efd, &rung);
  EXPECT_TRUE(watched_by_an_epoll(efd));
  uint64_t three = 3;
  ASSERT_EQ(::write(efd, &three, sizeof three), ssize_t(sizeof three));
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (rung.load() < 3 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(rung.load(), 3u);
  uint64_t left = 0;
  EXPECT_EQ(::read(efd, &left, sizeof left), -1) << "not drained: " << left;
  (*poller)->unwatch(efd);
  EXPECT_FALSE(watched_by_an_epoll(efd));
  ASSERT_EQ(::write(efd, &three, sizeof three), ssize_t(sizeof three));
  uint64_t parks = (*poller)->parks();
  while ((*poller)->parks() < parks + 3 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(rung.load(), 3u);
  (*poller)->remove_task(&task, {});
  ::close(efd);
}

}  // namespace
}  // namespace daqiri::dataplane
