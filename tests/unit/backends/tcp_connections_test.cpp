// TcpConnections: the table a socket interface's TCP flows and tcp TX queues share. One writer
// at a time; connection 0 is the one opened first; a connection the flow ends while a writer
// holds it keeps its fd until the writer lets go; an id outlives its connection only as a
// refusal.
#include "backends/socket/tcp_connections.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/eventfd.h>

#include <atomic>
#include <thread>
#include <vector>

namespace daqiri::backends::socket {
namespace {

using Claim = TcpConnections::Claim;

UniqueFd some_fd() {
  return UniqueFd(::eventfd(0, EFD_CLOEXEC));
}
bool is_open(int fd) {
  return ::fcntl(fd, F_GETFD) != -1;
}

TEST(TcpConnections, WritersTakeTurnsAndTheFirstOpenIsConnectionZero) {
  TcpConnections t;
  uint16_t dialling = t.add(some_fd(), false);  // a dial in progress: not writable yet
  uint16_t a = t.add(some_fd(), true);
  uint16_t b = t.add(some_fd(), true);
  EXPECT_EQ(dialling, 1);
  EXPECT_EQ(a, 2);
  EXPECT_EQ(b, 3);
  uint16_t s = dialling;
  EXPECT_EQ(t.claim(s), Claim::kNone);
  s = 0;
  ASSERT_EQ(t.claim(s), Claim::kClaimed);
  EXPECT_EQ(s, a);
  uint16_t again = a;
  EXPECT_EQ(t.claim(again), Claim::kBusy);
  t.opened(dialling);  // now it is the first open
  t.let_go(a);
  s = 0;
  ASSERT_EQ(t.claim(s), Claim::kClaimed);
  EXPECT_EQ(s, dialling);
  t.let_go(dialling);
  EXPECT_EQ(t.open_count(), 3u);
}

TEST(TcpConnections, AConnectionEndedUnderItsWriterClosesWhenTheWriterLetsGo) {
  TcpConnections t;
  uint16_t s = t.add(some_fd(), true);
  int fd = t.fd(s);
  uint16_t claimed = s;
  ASSERT_EQ(t.claim(claimed), Claim::kClaimed);
  t.remove(s);
  EXPECT_TRUE(t.ended(s));
  EXPECT_TRUE(is_open(fd)) << "closed under its writer";
  uint16_t other = s;
  EXPECT_EQ(t.claim(other), Claim::kNone);
  t.let_go(s);
  EXPECT_FALSE(is_open(fd));
  // Without a writer, remove() closes at once.
  uint16_t u = t.add(some_fd(), true);
  fd = t.fd(u);
  t.remove(u);
  EXPECT_FALSE(is_open(fd));
  EXPECT_EQ(t.open_count(), 0u);
}

// Ids run on: a writer naming a connection that closed finds nothing, not its slot's next.
TEST(TcpConnections, AStaleIdIsRefusedAfterItsSlotIsReused) {
  TcpConnections t;
  uint16_t first = t.add(some_fd(), true);
  t.remove(first);
  uint16_t later = 0;
  for (uint32_t i = 0; i < TcpConnections::kSlots; ++i) {
    later = t.add(some_fd(), true);
    if (later % TcpConnections::kSlots == first % TcpConnections::kSlots) break;
    t.remove(later);
  }
  ASSERT_EQ(later % TcpConnections::kSlots, first % TcpConnections::kSlots);
  EXPECT_NE(later, first);
  uint16_t stale = first;
  EXPECT_EQ(t.claim(stale), Claim::kNone);
  uint16_t fresh = later;
  EXPECT_EQ(t.claim(fresh), Claim::kClaimed);
  t.let_go(later);
}

TEST(TcpConnections, AFullTableRefusesAndClosesTheFd) {
  TcpConnections t;
  for (uint32_t i = 1; i < TcpConnections::kSlots; ++i)
    ASSERT_NE(t.add(some_fd(), true), 0);
  UniqueFd extra = some_fd();
  int fd = extra.get();
  EXPECT_EQ(t.add(std::move(extra), true), 0);
  EXPECT_FALSE(is_open(fd));
}

// Writers on two threads, and the flow ending the connection meanwhile: never two writers at
// once, and the connection is gone once the flow ended it and the last writer let go.
TEST(TcpConnections, WritersOnTwoThreadsNeverOverlap) {
  TcpConnections t;
  uint16_t s = t.add(some_fd(), true);
  std::atomic<int> inside{0};
  std::atomic<bool> overlap{false};
  std::atomic<uint32_t> turns{0};
  auto writer = [&] {
    for (int i = 0; i < 20000; ++i) {
      uint16_t c = s;
      Claim r = t.claim(c);
      if (r == Claim::kNone) return;
      if (r == Claim::kBusy) continue;
      if (inside.fetch_add(1) != 0) overlap = true;
      turns.fetch_add(1, std::memory_order_relaxed);
      inside.fetch_sub(1);
      t.let_go(c);
    }
  };
  std::thread w1(writer);
  std::thread w2(writer);
  while (turns.load() < 1000)
    std::this_thread::yield();
  t.remove(s);
  w1.join();
  w2.join();
  EXPECT_FALSE(overlap.load());
  EXPECT_EQ(t.open_count(), 0u);
}

}  // namespace
}  // namespace daqiri::backends::socket
