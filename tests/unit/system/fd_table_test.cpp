#include "system/fd_table.hpp"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>

#include "system/fd_headroom.hpp"

namespace daqiri::system {
namespace {

TEST(FdTable, CountsTheFdsThatAreOpen) {
  auto before = open_fd_count();
  ASSERT_TRUE(before);
  size_t free_before = free_fds();
  std::array<int, 2> p{};
  ASSERT_EQ(::pipe(p.data()), 0);
  EXPECT_EQ(open_fd_count(), *before + 2);
  EXPECT_EQ(free_fds(), free_before - 2);
  ::close(p[0]);
  ::close(p[1]);
  EXPECT_EQ(open_fd_count(), *before);
}

TEST(FdTable, NamesTheSocketBehindANumber) {
  std::array<int, 2> s{};
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s.data()), 0);
  struct stat st {};
  ASSERT_EQ(::fstat(s[0], &st), 0);
  EXPECT_EQ(socket_inode(s[0]), st.st_ino);
  EXPECT_NE(socket_inode(s[1]), 0u);
  EXPECT_NE(socket_inode(s[1]), socket_inode(s[0]));

  std::array<int, 2> p{};
  ASSERT_EQ(::pipe(p.data()), 0);
  EXPECT_EQ(socket_inode(p[0]), 0u);  // no socket
  int closed = s[0];
  ::close(s[0]);
  EXPECT_EQ(socket_inode(closed), 0u);
  EXPECT_EQ(socket_inode(-1), 0u);
  for (int fd : {s[1], p[0], p[1]})
    ::close(fd);
}

}  // namespace
}  // namespace daqiri::system
