// One poller thread: busy-polls its tasks (RX flows, TX queues), and after a stretch of idle
// iterations sleeps in epoll on the tasks' fds for at most 1 ms (the Seastar contract: poll
// while there is work, park when there is none), unless a task or the configuration
// (busy_poll) says spin. Tasks that nothing can reach but a wake-up (no clients, no timers)
// let it sleep up to a second instead, or until the next time one of them names (a dial). A
// park that nothing ended is followed by one poll and the next park: a millisecond of quiet
// says no work is about to come, and an idle poller costs next to no CPU. Tasks and their fds are
// Published snapshots; waits on its Epoch end a park. The tasks' fds are in the epoll set only
// while parked: a socket in an epoll set makes every datagram the kernel queues on it run epoll's
// wake-up callback on the sender's core, although a busy poller never waits on it. A task whose fds
// are readable with work it cannot take (a flow waiting for its clients' releases) leaves them out
// of the park; its clients' kicks (watched doorbells) and its timer wake the poller instead.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "daqiri/common/result.hpp"
#include "daqiri/common/unique_fd.hpp"
#include "dataplane/snapshot.hpp"

namespace daqiri::dataplane {

class PollTask {
 public:
  virtual ~PollTask() = default;
  // Does one round of work; true if it did any.
  virtual bool poll() = 0;
  // True while the task must be polled without pause even when idle (a NIC queue with
  // clients: parking would let its descriptor ring overflow). Asked after each poll().
  [[nodiscard]] virtual bool busy_poll() const { return false; }
  // Before the poller sleeps: asks whoever feeds the task to wake the poller (NEED_WAKEUP on
  // the rings it consumes), then looks once more; false if work came in meanwhile, and then
  // the poller does not sleep. disarm_wakeups() follows either way.
  virtual bool arm_wakeups() { return true; }
  virtual void disarm_wakeups() {}
  // Whether work may come to the task with nothing to wake the poller: a timer, a client that
  // does not kick, a count to read once traffic stops. While one of its tasks says so a
  // poller's sleeps last at most 1 ms; otherwise up to a second (what ends them: the tasks'
  // fds, doorbells, and control changes, which wake the poller as they wait on its Epoch).
  // Asked as the poller parks, on its thread.
  [[nodiscard]] virtual bool needs_timed_wakeup() const { return true; }
  // When, on dataplane::monotonic_ns()'s clock, the task must be polled again although nothing
  // wakes the poller (a client flow's next dial); kNoWakeupDue: no such time. Asked as the
  // poller parks, on its thread, only while no task needs_timed_wakeup(): the sleep then ends
  // by the earliest of these (at most a second on). After a park, a task should act on what
  // fell due at its first poll.
  static constexpr uint64_t kNoWakeupDue = UINT64_MAX;
  [[nodiscard]] virtual uint64_t wakeup_due_ns() const { return kNoWakeupDue; }
  // Whether the task's fds should end the poller's sleep. False while their readiness is work
  // the task cannot take (a flow that waits for its clients' releases: its socket stays
  // readable, and the poller would spin); its kicks and timer wake it instead. Asked as the
  // poller parks, after arm_wakeups().
  [[nodiscard]] virtual bool wakes_on_fds() const { return true; }
};

// What ended a poller's sleeps, counted since start.
struct PollerWakeups {
  uint64_t parks = 0;
  uint64_t io = 0;        // a task's fd was readable
  uint64_t doorbell = 0;  // a client's kick, or a control change (the poller's own eventfd)
  uint64_t timer = 0;     // the time ran out
};

class Poller {
 public:
  // core < 0: not pinned. `on_start` runs first on the new thread (DPDK lcore registration).
  static Result<std::unique_ptr<Poller>> start(std::string name, int core,
                                               std::function<void()> on_start = {});
  ~Poller();
  Poller(const Poller&) = delete;
  Poller& operator=(const Poller&) = delete;

  // Control side (callers serialise). Removals return when the task (the doorbell) may go:
  // at once if the poller came round within Epoch::kGraceWait, else once it moves again.
  void add_task(PollTask* task, const std::vector<int>& wake_fds);
  Grace remove_task(PollTask* task, const std::vector<int>& wake_fds);
  // A doorbell: an eventfd a client writes to end a park (a TX ring's kick), in the epoll set
  // for as long as it is watched; the poller drains it and adds what it read to `rung`.
  // Once unwatch()'s Grace has passed the poller can no longer read it: it may be closed.
  void watch(int eventfd, std::atomic<uint64_t>* rung);
  Grace unwatch(int eventfd);
  [[nodiscard]] const Epoch& epoch() const { return epoch_; }
  // Asks the thread to leave its loop; stopped() once it has (the destructor joins it).
  void request_stop() {
    thread_.request_stop();
    epoch_.wake();
  }
  [[nodiscard]] bool stopped() const { return epoch_.stopped(); }
  [[nodiscard]] const std::string& name() const { return name_; }
  // Fraction of iterations that did work since start (for stats).
  [[nodiscard]] double busy_ratio() const;
  // From now on never park, idle or not: a queue with busy_poll trades the core for the
  // wake-up latency parking costs.
  void spin_always() { spin_always_.store(true, std::memory_order_relaxed); }
  // How many times it parked (slept in epoll) since start.
  [[nodiscard]] uint64_t parks() const { return parks_.load(std::memory_order_relaxed); }
  [[nodiscard]] PollerWakeups wakeups() const;

 private:
  using Tasks = std::vector<PollTask*>;
  struct TaskFd {
    PollTask* task;
    int fd;
  };
  using Fds = std::vector<TaskFd>;
  // What a drained fd's epoll entry points to; task fds carry no pointer (never read here).
  struct Doorbell {
    int fd;
    std::atomic<uint64_t>* rung;
  };
  Poller(std::string name, int core, UniqueFd epoll, UniqueFd wake, std::function<void()> on_start);
  void run(const std::stop_token& stop);
  // Sleeps until a task's fd is readable, a doorbell (wake_ among them) is written, or kParkMs
  // pass (when no task needs_timed_wakeup: until the earliest wakeup_due_ns, at most
  // kLongParkMs); true if the time ran out, false also when a task had work as it armed its
  // wakeups. The fds go into the epoll set and out again within one loop iteration, so that a
  // removed task's fds, closed only after two iterations (Epoch), are never left registered.
  bool park();

  std::string name_;
  int core_;
  std::function<void()> on_start_;
  UniqueFd epoll_;
  UniqueFd wake_;
  Doorbell wake_bell_;
  std::map<int, std::unique_ptr<Doorbell>> doorbells_;  // control side
  Epoch epoch_;
  Published<Tasks> tasks_;
  Published<Fds> fds_;  // the tasks' wake fds, registered while parked
  std::atomic<uint64_t> busy_{0};
  std::atomic<uint64_t> loops_{0};
  std::atomic<uint64_t> parks_{0};
  std::atomic<uint64_t> io_wakeups_{0};
  std::atomic<uint64_t> doorbell_wakeups_{0};
  std::atomic<uint64_t> timer_wakeups_{0};
  std::atomic<bool> spin_always_{false};
  std::jthread thread_;
};

}  // namespace daqiri::dataplane
