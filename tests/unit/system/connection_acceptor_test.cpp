// ConnectionAcceptor when the process is out of fds: the connection is taken with the reserve
// fd, told, and closed, instead of staying queued on a socket that stays readable.
#include "system/connection_acceptor.hpp"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

namespace daqiri::system {
namespace {

// The limit is on fd numbers: every number below the highest open one is taken (fillers go
// into the gaps), so that a limit of highest + 1 leaves none.
int fill_fd_gaps(std::vector<UniqueFd>& fillers) {
  int highest = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd"))
    highest = std::max(highest, std::stoi(e.path().filename().string()));
  for (;;) {
    UniqueFd f(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (f.get() > highest) return highest;  // closes it: no gap left below
    fillers.push_back(std::move(f));
  }
}

TEST(ConnectionAcceptor, OutOfFdsTellsAndClosesTheConnection) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // The sanitizer runtimes need fds too. UBSan's vptr check reads the object through a pipe
  // it opens; with no fd left it reports every virtual call as one on a bad object (here:
  // the log line the refusal writes).
  GTEST_SKIP() << "no fd left is no fd for the sanitizer runtime either";
#endif
  std::string path = "/tmp/daqiri-acceptor-" + std::to_string(::getpid()) + ".sock";
  UniqueFd listener(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  ::unlink(path.c_str());
  ASSERT_EQ(::bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener.get(), 8), 0);
  ConnectionAcceptor acceptor("test", listener.get(), SOCK_CLOEXEC);
  UniqueFd client(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  ASSERT_EQ(::connect(client.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  timeval tv{5, 0};  // a failure below is an error, not a hang
  ::setsockopt(client.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);

  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  std::vector<UniqueFd> fillers;
  rlimit full = saved;
  full.rlim_cur = static_cast<rlim_t>(fill_fd_gaps(fillers)) + 1;  // not one more
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &full), 0);
  int told = -1;
  UniqueFd conn = acceptor.accept([&](int fd) {
    told = fd;
    char why = 'x';
    (void)::send(fd, &why, 1, 0);
  });
  int err = errno;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);
  fillers.clear();
  ASSERT_FALSE(conn) << "accepted with " << full.rlim_cur << " fds allowed";
  EXPECT_EQ(err, EMFILE);
  EXPECT_GE(told, 0);  // the connection was taken, told, and closed
  char got = 0;
  EXPECT_EQ(::recv(client.get(), &got, 1, 0), 1);
  EXPECT_EQ(got, 'x');
  EXPECT_EQ(::recv(client.get(), &got, 1, 0), 0);

  // With fds again, the next connection is accepted as usual.
  UniqueFd second(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  ASSERT_EQ(::connect(second.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  EXPECT_TRUE(acceptor.accept());
  ::unlink(path.c_str());
}

}  // namespace
}  // namespace daqiri::system
