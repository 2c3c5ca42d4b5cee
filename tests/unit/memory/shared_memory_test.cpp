// SharedMemory: the seals that keep a client's read-only mapping read-only.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <string>

#include "memory/shared_memory.hpp"

namespace daqiri::dataplane {
namespace {

TEST(SharedMemory, ReadOnlyFdsCannotBecomeWritable) {
  auto m = memory::SharedMemory::create("t", 4096, false);
  ASSERT_TRUE(m);
  ASSERT_TRUE(m->seal_read_only_for_others());
  m->data()[0] = std::byte{1};  // the daemon's own mapping still writes
  auto ro = m->read_only_fd();
  ASSERT_TRUE(ro);
  void* w = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, ro->get(), 0);
  EXPECT_EQ(w, MAP_FAILED);
  // Even a fresh read-write open of the same memfd cannot map it writable.
  std::string path = "/proc/self/fd/" + std::to_string(ro->get());
  UniqueFd rw(::open(path.c_str(), O_RDWR));
  if (rw) {
    void* w2 = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, rw.get(), 0);
    EXPECT_EQ(w2, MAP_FAILED);
  }
  void* r = ::mmap(nullptr, 4096, PROT_READ, MAP_SHARED, ro->get(), 0);
  ASSERT_NE(r, MAP_FAILED);
  EXPECT_EQ(static_cast<std::byte*>(r)[0], std::byte{1});
  ::munmap(r, 4096);
}

}  // namespace
}  // namespace daqiri::dataplane
