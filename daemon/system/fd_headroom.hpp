// The fds daqirid keeps free for gRPC, which needs some of its own while it serves (for a
// connection it takes on, inside calls). Nothing of ours (a session, an attachment, a control
// connection handed to gRPC) may take the process closer to its RLIMIT_NOFILE than this.
// (In the sanitizer builds the runtime needs fds too: UBSan's vptr check reads objects
// through a pipe, and with no fd left it reported gRPC's channel teardown as a bad object.)
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
