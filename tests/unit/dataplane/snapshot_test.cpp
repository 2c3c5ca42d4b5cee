// Snapshots published to a poller thread: a replaced one is freed only once the poller can no
// longer hold it, and the control side's barrier is there wherever the kernel offers it.
#include <gtest/gtest.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "dataplane/process_barrier.hpp"
#include "dataplane/snapshot.hpp"

namespace daqiri::dataplane {
namespace {

// The kernel refuses an unregistered private expedited membarrier (EPERM): the barrier must
// register the process before its first use.
TEST(ProcessBarrier, FencesEveryThreadWhereTheKernelOffersIt) {
  long commands = ::syscall(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
  if (commands < 0 || (commands & MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) {
    EXPECT_FALSE(process_barrier_available());
    EXPECT_FALSE(process_barrier());
    GTEST_SKIP() << "this kernel offers no private expedited membarrier";
  }
  EXPECT_TRUE(process_barrier_available());
  EXPECT_TRUE(process_barrier());
  EXPECT_TRUE(process_barrier()) << "registered once, used again";
}

// A snapshot that says when it has been destroyed. Its memory outlives it (operator delete
// keeps it until the test ends), so that a poller still holding a freed one reads `alive`
// false, not the fields of whatever the allocator put there next.
struct Marked {
  explicit Marked(uint64_t n) : number(n) {}
  Marked(const Marked&) = delete;
  Marked& operator=(const Marked&) = delete;
  ~Marked() { alive.store(false, std::memory_order_relaxed); }
  static void operator delete(void* p) { graveyard().push_back(p); }  // control threads only
  static std::vector<void*>& graveyard() {
    static std::vector<void*> kept;
    return kept;
  }
  uint64_t number;
  std::atomic<bool> alive{true};
};

// A poller that reads its snapshot through a whole loop iteration while a control thread
// replaces it again and again never reads one that has been destroyed.
TEST(Published, APollerNeverReadsAFreedSnapshot) {
  constexpr uint64_t kReplaces = 3000;
  std::atomic<uint64_t> dead_reads{0};
  {
    Epoch epoch;
    Published<Marked> published(std::make_unique<const Marked>(0));
    std::atomic<bool> stop{false};
    std::thread poller([&] {
      while (!stop.load(std::memory_order_relaxed)) {
        const Marked& m = published.load();
        for (int i = 0; i < 64; ++i) {  // an iteration's worth of reads of the one snapshot
          if (!m.alive.load(std::memory_order_relaxed)) dead_reads.fetch_add(1);
        }
        epoch.advance();
      }
      epoch.set_stopped();
    });
    epoch.wait_quiescent();  // the poller is looping
    for (uint64_t n = 1; n <= kReplaces; ++n)
      published.replace(std::make_unique<const Marked>(n), epoch);
    stop.store(true);
    poller.join();
    EXPECT_EQ(published.load().number, kReplaces);
  }
  EXPECT_EQ(dead_reads.load(), 0u);
  EXPECT_EQ(Marked::graveyard().size(), kReplaces + 1);
  for (void* p : Marked::graveyard())
    ::operator delete(p);
  Marked::graveyard().clear();
}

}  // namespace
}  // namespace daqiri::dataplane
