// The fault shim's shared state: a file that libdaqiri-fault.so (preloaded into daqirid) and the
// test map together. The test arms the shim, picks which use of which call fails and with what
// errno, and reads back what the daemon reached: uses per call and per call site.
#pragma once

#include <atomic>
#include <cstdint>

namespace daqiri::fault {

// The calls the shim can fail. Only calls made from daqirid's own code count (the return
// address lies in the executable): DPDK, gRPC and the C++ library keep their own calls.
enum class Call : uint32_t {
  kMemfdCreate,
  kMmap,
  kFtruncate,
  kFallocate,
  kDup,  // dup, and fcntl F_DUPFD / F_DUPFD_CLOEXEC
  kAccept4,
  kSendmsg,
  kSendmmsg,
  kRecvmmsg,
  kWrite,  // on regular files only: eventfd wakeups cannot fail that way
  kFsync,
  kEpollCtl,
  kPidfdOpen,
  kOpen,  // open, openat, openat2 of regular files (captures, the instance lock)
  // CUDA driver calls (libdaqiri-fault-cuda.so only); the fault's error is a CUresult.
  kCuMemCreate,
  kCuMemExport,  // cuMemExportToShareableHandle
  kCuMemAlloc,   // what cudaMalloc comes down to
  kCount,
};

inline constexpr const char* kCallNames[] = {
    "memfd_create", "mmap",    "ftruncate",   "fallocate",
    "dup",          "accept4", "sendmsg",     "sendmmsg",
    "recvmmsg",     "write",   "fsync",       "epoll_ctl",
    "pidfd_open",   "open",    "cuMemCreate", "cuMemExportToShareableHandle",
    "cuMemAlloc"};
static_assert(sizeof kCallNames / sizeof kCallNames[0] == static_cast<size_t>(Call::kCount));

inline constexpr uint32_t kNoCall = UINT32_MAX;
inline constexpr size_t kMaxSites = 512;

// One call site: which call, where (offset of the return address in the executable, what
// addr2line takes), and how many times it was used while armed.
struct Site {
  std::atomic<uint64_t> key;  // (call + 1) << 48 | offset; 0 = free slot
  std::atomic<uint64_t> uses;
};

struct State {
  std::atomic<uint32_t> armed;  // uses are counted, and faults fire, only while armed
  // The fault: the `nth` use (1-based, counted per site when `site` is set, else per call) of
  // `call` fails with `error` (an errno, or a CUresult for a CUDA call), and so do the
  // `times - 1` uses after it.
  std::atomic<uint32_t> call;
  std::atomic<uint64_t> site;  // an offset from the sites table; 0 = any site
  std::atomic<uint64_t> nth;
  std::atomic<uint32_t> times;
  std::atomic<int32_t> error;
  // What happened.
  std::atomic<uint64_t> uses[static_cast<size_t>(Call::kCount)];
  std::atomic<uint64_t> fired;
  std::atomic<uint64_t> fired_site;
  Site sites[kMaxSites];
};

inline uint64_t site_key(uint32_t call, uint64_t offset) {
  return (uint64_t{call} + 1) << 48 | offset;
}
inline uint32_t site_call(uint64_t key) {
  return static_cast<uint32_t>(key >> 48) - 1;
}
inline uint64_t site_offset(uint64_t key) {
  return key & ((uint64_t{1} << 48) - 1);
}

}  // namespace daqiri::fault
