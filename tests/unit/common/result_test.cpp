// Errors from failed system calls: the code a client sees says whether it may try again.
#include <gtest/gtest.h>

#include "daqiri/common/result.hpp"

namespace daqiri {
namespace {

TEST(FailErrno, RunningOutOfSomethingIsResourceExhausted) {
  for (int err : {EMFILE, ENFILE, ENOMEM, ENOSPC, ENOBUFS}) {
    auto r = fail_errno("memfd_create", err);
    EXPECT_EQ(r.error().code, ErrorCode::kResourceExhausted) << strerrorname_np(err);
    EXPECT_EQ(r.error().message, std::string("memfd_create: ") + std::strerror(err));
  }
}

TEST(FailErrno, PermissionIsDeniedAndTheRestIsInternal) {
  EXPECT_EQ(fail_errno("open", EACCES).error().code, ErrorCode::kPermissionDenied);
  EXPECT_EQ(fail_errno("open", EPERM).error().code, ErrorCode::kPermissionDenied);
  EXPECT_EQ(fail_errno("write", EIO).error().code, ErrorCode::kInternal);
  EXPECT_EQ(fail_errno("epoll_ctl", EBADF).error().code, ErrorCode::kInternal);
}

}  // namespace
}  // namespace daqiri
