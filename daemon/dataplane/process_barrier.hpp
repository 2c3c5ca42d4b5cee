// A full memory barrier on every running thread of this process (membarrier(2), private
// expedited), for the control side of a poller's epoch. The poll loop publishes its epoch with a
// plain release store: a poller may load a snapshot pointer while its earlier epoch stores
// still sit in its store buffer (store-load reordering, allowed on x86 and more so on Arm), so
// a control thread that swapped the pointer could read an epoch older than the iteration that
// still holds the old snapshot. After this barrier a poller's stores before it are visible and
// its loads after it see the swap: the fence is paid once a control change, not once a poll.
#pragma once

namespace daqiri::dataplane {

// Registers the process for the barrier on first use (the kernel refuses it otherwise). False
// where the kernel has none (before Linux 4.14) or a seccomp filter refuses it.
bool process_barrier_available();
// The barrier; false, and nothing done, where it is not available (the caller's exchange of
// the snapshot pointer is then the only fence, as before this existed).
bool process_barrier();

}  // namespace daqiri::dataplane
