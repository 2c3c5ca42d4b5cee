// test_pattern.hpp: the payload daqiri-gen writes and clients check.
#include <gtest/gtest.h>

#include <vector>

#include "daqiri/test_pattern.hpp"

namespace daqiri::dataplane {
namespace {

TEST(Pattern, DetectsCorruption) {
  std::vector<std::byte> p(256);
  pattern::fill(p, 7, 42);
  pattern::Header h{};
  EXPECT_EQ(pattern::check(p, h), pattern::Check::kOk);
  EXPECT_EQ(h.sequence, 42u);
  p[200] ^= std::byte{1};
  EXPECT_EQ(pattern::check(p, h), pattern::Check::kCorrupt);
}

}  // namespace
}  // namespace daqiri::dataplane
