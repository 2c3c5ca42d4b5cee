// The fds daqirid keeps free for gRPC. gRPC 1.51 needs fds of its own while it serves (for a
// connection it takes on, and inside calls), and when the process has none left it fails
// inside (UBSan caught a bad object in its channel teardown). So nothing of ours (a session,
// an attachment, a control connection handed to gRPC) may take the process closer to its
// RLIMIT_NOFILE than this.
#pragma once

#include <cstddef>

namespace daqiri::system {

inline constexpr size_t kFdHeadroom = 16;

// Fds the process may still open; 0 when it cannot tell (it could not even open the folder).
size_t free_fds();

// Whether taking `more` fds leaves the headroom.
inline bool fds_to_spare(size_t more) {
  return free_fds() >= kFdHeadroom + more;
}

}  // namespace daqiri::system
