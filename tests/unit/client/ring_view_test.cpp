// ring.hpp: a ring opened only where the daemon laid one out.
#include <fcntl.h>
#include <gtest/gtest.h>

#include <vector>

#include "daqiri/ring.hpp"

namespace daqiri::dataplane {
namespace {

TEST(RingView, OpenRejectsWhatTheDaemonDidNotWrite) {
  std::vector<std::byte> mem(abi::RingView::bytes_for(64, 32));
  abi::RingView::create(mem.data(), DAQIRI_RING_RX, 64, 32);
  EXPECT_TRUE(abi::RingView::open(mem.data(), mem.size(), DAQIRI_RING_RX, 32));
  EXPECT_FALSE(abi::RingView::open(mem.data(), mem.size(), DAQIRI_RING_TX, 32));
  EXPECT_FALSE(abi::RingView::open(mem.data(), mem.size() - 64, DAQIRI_RING_RX, 32));
  reinterpret_cast<daqiri_ring_header*>(mem.data())->size = 63;
  EXPECT_FALSE(abi::RingView::open(mem.data(), mem.size(), DAQIRI_RING_RX, 32));
}

}  // namespace
}  // namespace daqiri::dataplane
