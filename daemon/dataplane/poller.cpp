#include "dataplane/poller.hpp"

#include <pthread.h>
#include <sched.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "dataplane/attachment_state.hpp"
#include "dataplane/clock.hpp"
#include "dataplane/receive_clock.hpp"

namespace daqiri::dataplane {
namespace {

constexpr int kIdleSpins = 2048;  // empty iterations before parking
constexpr int kParkMs = 1;
// Bounded although every wake-up source is watched: one overlooked costs a second, not a hang.
constexpr int kLongParkMs = 1000;

// A sleep that ends at `due` (monotonic ns), rounded up to whole ms, within [0, kLongParkMs].
int park_ms_until(uint64_t due) {
  if (due == PollTask::kNoWakeupDue) return kLongParkMs;
  uint64_t now = monotonic_ns();
  if (due <= now) return 0;
  return static_cast<int>(std::min<uint64_t>((due - now + 999'999) / 1'000'000, kLongParkMs));
}

}  // namespace

Result<std::unique_ptr<Poller>> Poller::start(std::string name, int core,
                                              std::function<void()> on_start) {
  UniqueFd ep(::epoll_create1(EPOLL_CLOEXEC));
  if (!ep) return fail_errno("epoll_create1");
  UniqueFd wake(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake) return fail_errno("eventfd");
  std::unique_ptr<Poller> p(
      new Poller(std::move(name), core, std::move(ep), std::move(wake), std::move(on_start)));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = &p->wake_bell_;
  if (::epoll_ctl(p->epoll_.get(), EPOLL_CTL_ADD, p->wake_.get(), &ev) != 0) {
    return fail_errno("epoll_ctl");
  }
  p->thread_ = std::jthread([raw = p.get()](const std::stop_token& stop) { raw->run(stop); });
  return p;
}

Poller::Poller(std::string name, int core, UniqueFd epoll, UniqueFd wake,
               std::function<void()> on_start)
    : name_(std::move(name)),
      core_(core),
      on_start_(std::move(on_start)),
      epoll_(std::move(epoll)),
      wake_(std::move(wake)),
      wake_bell_{wake_.get(), nullptr},
      tasks_(std::make_unique<const Tasks>()),
      fds_(std::make_unique<const Fds>()) {
  epoch_.wake_with(wake_.get());
}

Poller::~Poller() {
  if (thread_.joinable()) {
    thread_.request_stop();
    epoch_.wake();
    thread_.join();
  }
}

void Poller::add_task(PollTask* task, const std::vector<int>& wake_fds) {
  if (!wake_fds.empty()) {
    auto next = std::make_unique<Fds>(fds_.load());
    for (int fd : wake_fds)
      next->push_back({task, fd});
    fds_.replace(std::move(next), epoch_);
  }
  publish_added(tasks_, task, epoch_);
}

Grace Poller::remove_task(PollTask* task, const std::vector<int>& wake_fds) {
  Grace g = publish_removed(tasks_, task, epoch_);
  if (!wake_fds.empty()) {
    auto next = std::make_unique<Fds>(fds_.load());
    std::erase_if(*next, [&](const TaskFd& e) {
      return e.task == task && std::find(wake_fds.begin(), wake_fds.end(), e.fd) != wake_fds.end();
    });
    g &= fds_.replace(std::move(next), epoch_);  // then no park holds them: they may close
  }
  return g;
}

void Poller::watch(int eventfd, std::atomic<uint64_t>* rung) {
  auto bell = std::make_unique<Doorbell>(Doorbell{eventfd, rung});
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = bell.get();
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, eventfd, &ev) != 0) {
    // Only a full kernel table gets here (ENOMEM, ENOSPC): the client's kicks are then lost
    // and its frames wait for the next timed-out park, as if it never kicked.
    spdlog::warn("poller {}: cannot watch a doorbell: {}", name_, std::strerror(errno));
    return;
  }
  doorbells_[eventfd] = std::move(bell);
}

Grace Poller::unwatch(int eventfd) {
  auto it = doorbells_.find(eventfd);
  if (it == doorbells_.end()) return {};
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, eventfd, nullptr);
  Grace g = epoch_.wait_quiescent();  // a park that already had it among its events is over
  dispose(g, std::move(it->second));
  doorbells_.erase(it);
  return g;
}

PollerWakeups Poller::wakeups() const {
  return {parks_.load(std::memory_order_relaxed), io_wakeups_.load(std::memory_order_relaxed),
          doorbell_wakeups_.load(std::memory_order_relaxed),
          timer_wakeups_.load(std::memory_order_relaxed)};
}

double Poller::busy_ratio() const {
  uint64_t loops = loops_.load(std::memory_order_relaxed);
  return loops == 0 ? 0.0 : static_cast<double>(busy_.load(std::memory_order_relaxed)) / loops;
}

void Poller::run(const std::stop_token& stop) {
  pthread_setname_np(pthread_self(), name_.substr(0, 15).c_str());
  if (core_ >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(core_, &set);
    if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0) {
      spdlog::warn("poller {}: cannot pin to core {}", name_, core_);
    }
  }
  ReceiveClock::start_thread();
  if (on_start_) on_start_();
  int idle = 0;
  uint64_t busy = 0;
  uint64_t loops = 0;
  while (!stop.stop_requested()) {
    bool work = false;
    bool spin = false;
    bool parked = false;
    for (PollTask* t : tasks_.load()) {
      work |= t->poll();
      spin |= t->busy_poll();
    }
    epoch_.advance();
    ++loops;
    if (work) {
      ++busy;
      idle = 0;
    } else if (spin || spin_always_.load(std::memory_order_relaxed)) {
      idle = 0;
    } else if (++idle >= kIdleSpins) {
      // After a park that nothing ended, one empty poll parks again: the spins before a park
      // are for work that is about to come, and a millisecond of quiet says none is.
      idle = park() ? kIdleSpins - 1 : 0;
      parked = true;
    }
    if ((loops & 1023) == 0 || parked) {  // a sleeping poller's loops can be a second apart
      busy_.store(busy, std::memory_order_relaxed);
      loops_.store(loops, std::memory_order_relaxed);
    }
  }
  epoch_.set_stopped();
}

bool Poller::park() {
  const Tasks& tasks = tasks_.load();
  bool quiet = true;
  bool timed = false;
  uint64_t due = PollTask::kNoWakeupDue;
  for (PollTask* t : tasks) {
    quiet &= t->arm_wakeups();
    timed |= t->needs_timed_wakeup();
    due = std::min(due, t->wakeup_due_ns());
  }
  if (!quiet) {
    for (PollTask* t : tasks)
      t->disarm_wakeups();
    return false;
  }
  const Fds& fds = fds_.load();
  auto unwatch_fds = [&] {
    for (const TaskFd& e : fds) {  // one never added: ENOENT, nothing done
      if (e.task->wakes_on_fds()) ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, e.fd, nullptr);
    }
  };
  // A task's answer holds for the whole park: only this thread changes what it depends on.
  for (const TaskFd& e : fds) {
    if (!e.task->wakes_on_fds()) continue;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = nullptr;
    // A ready fd ends the wait at once. One the kernel would not watch (ENOMEM, ENOSPC) would
    // leave the poller asleep while its frames wait: it polls on instead, this time.
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, e.fd, &ev) != 0) {
      unwatch_fds();
      for (PollTask* t : tasks)
        t->disarm_wakeups();
      return false;
    }
  }
  bump(parks_);
  epoll_event events[16];
  int n = ::epoll_wait(epoll_.get(), events, 16, timed ? kParkMs : park_ms_until(due));
  bool io = false;
  bool rung = false;
  for (int i = 0; i < n; ++i) {
    auto* bell = static_cast<Doorbell*>(events[i].data.ptr);
    if (bell == nullptr) {
      io = true;
      continue;
    }
    rung = true;
    uint64_t v = 0;
    if (::read(bell->fd, &v, sizeof v) == sizeof v && bell->rung != nullptr) bump(*bell->rung, v);
  }
  if (n == 0) bump(timer_wakeups_);
  if (io) bump(io_wakeups_);
  if (rung) bump(doorbell_wakeups_);
  unwatch_fds();
  for (PollTask* t : tasks)
    t->disarm_wakeups();
  return n == 0;
}

}  // namespace daqiri::dataplane
