// libdaqiri-fault.so: preloaded into daqirid by the fault-injection tests only. It stands in
// front of the C library for the calls in fault_state.hpp, counts the uses daqirid's own code
// makes of them while the test has armed it, and makes the chosen use fail with the chosen
// errno. Calls from shared libraries (DPDK, gRPC, libstdc++) and from the shim itself pass
// through untouched, so a fault always lands on a call site of ours.
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdarg.h>
#include <sys/auxv.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>

#include "fault_state.hpp"

namespace {

using daqiri::fault::Call;
using daqiri::fault::State;

State* state = nullptr;
uintptr_t exe_base = 0;
uintptr_t exe_text_begin = UINTPTR_MAX;
uintptr_t exe_text_end = 0;

// The executable's code, from its program headers in the aux vector: no call a sanitizer
// intercepts (the shim's constructor runs before the sanitizer runtime is up).
void find_executable() {
  auto* phdr = reinterpret_cast<const ElfW(Phdr)*>(getauxval(AT_PHDR));
  auto count = static_cast<size_t>(getauxval(AT_PHNUM));
  for (size_t i = 0; i < count; ++i) {
    if (phdr[i].p_type == PT_PHDR) exe_base = reinterpret_cast<uintptr_t>(phdr) - phdr[i].p_vaddr;
  }
  for (size_t i = 0; i < count; ++i) {
    const auto& ph = phdr[i];
    if (ph.p_type != PT_LOAD || (ph.p_flags & PF_X) == 0) continue;
    uintptr_t begin = exe_base + ph.p_vaddr;
    if (begin < exe_text_begin) exe_text_begin = begin;
    if (begin + ph.p_memsz > exe_text_end) exe_text_end = begin + ph.p_memsz;
  }
}

// The next definition of `name` (the C library's, or a sanitizer's interceptor), looked up on
// first use into `slot`. Never a function-local static with a guard: TSan's runtime calls our
// mmap while it starts, before it can take a guard (__cxa_guard_* are its interceptors).
template <typename F>
F real(std::atomic<F>& slot, const char* name) {
  F fn = slot.load(std::memory_order_relaxed);
  if (fn == nullptr) {
    fn = reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
    slot.store(fn, std::memory_order_relaxed);
  }
  return fn;
}

__attribute__((constructor)) void attach_state() {
  find_executable();
  const char* path = getenv("DAQIRI_FAULT_STATE");
  if (path == nullptr) return;
  int fd = static_cast<int>(::syscall(SYS_openat, AT_FDCWD, path, O_RDWR | O_CLOEXEC));
  if (fd < 0) abort();
  void* p = reinterpret_cast<void*>(
      ::syscall(SYS_mmap, nullptr, sizeof(State), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  ::syscall(SYS_close, fd);
  if (p == MAP_FAILED) abort();
  state = static_cast<State*>(p);
}

void count_site(Call call, uint64_t offset, uint64_t& site_uses) {
  uint64_t key = daqiri::fault::site_key(static_cast<uint32_t>(call), offset);
  size_t slot = (offset * 0x9E3779B97F4A7C15ULL >> 32) % daqiri::fault::kMaxSites;
  for (size_t probe = 0; probe < daqiri::fault::kMaxSites; ++probe) {
    auto& s = state->sites[(slot + probe) % daqiri::fault::kMaxSites];
    uint64_t seen = s.key.load(std::memory_order_acquire);
    if (seen == 0 && s.key.compare_exchange_strong(seen, key)) seen = key;
    if (seen == key) {
      site_uses = s.uses.fetch_add(1) + 1;
      return;
    }
  }
  site_uses = 0;  // table full: the site goes uncounted
}

bool is_regular_file(int fd) {
  struct stat st {};
  return fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
}

// The errno this use must fail with, or 0 to let it through. `regular_fd`: a call on an fd
// that counts only when the fd is a regular file.
int fault_for(Call call, void* return_address, int regular_fd = -1) {
  auto ra = reinterpret_cast<uintptr_t>(return_address);
  if (state == nullptr || ra < exe_text_begin || ra >= exe_text_end) return 0;
  if (state->armed.load(std::memory_order_acquire) == 0) return 0;
  if (regular_fd >= 0 && !is_regular_file(regular_fd)) return 0;
  auto index = static_cast<uint32_t>(call);
  uint64_t offset = ra - exe_base;
  uint64_t call_uses = state->uses[index].fetch_add(1) + 1;
  uint64_t site_uses = 0;
  count_site(call, offset, site_uses);
  if (state->call.load() != index) return 0;
  uint64_t site = state->site.load();
  if (site != 0 && site != offset) return 0;
  uint64_t n = site != 0 ? site_uses : call_uses;
  uint64_t first = state->nth.load();
  if (n < first || n >= first + state->times.load()) return 0;
  state->fired.fetch_add(1);
  state->fired_site.store(offset);
  return state->error.load();
}

Call call_of_syscall(long number) {
  switch (number) {
    case SYS_recvmmsg:
      return Call::kRecvmmsg;
    case SYS_sendmmsg:
      return Call::kSendmmsg;
    case SYS_pidfd_open:
      return Call::kPidfdOpen;
    case SYS_epoll_ctl:
      return Call::kEpollCtl;
    case SYS_openat2:
      return Call::kOpen;
    case SYS_memfd_create:
      return Call::kMemfdCreate;
    default:
      return Call::kCount;
  }
}

}  // namespace

// Each hook asks fault_for() with its own return address: the call site in daqirid.
#define DAQIRI_FAULT(call, failed)                                    \
  if (int e = fault_for(call, __builtin_return_address(0)); e != 0) { \
    errno = e;                                                        \
    return failed;                                                    \
  }

extern "C" {

// A hook: `params` and `args` in parentheses; the next definition of `name` does the work.
#define DAQIRI_HOOK(ret, name, call, failed, params, args) \
  ret name params {                                        \
    DAQIRI_FAULT(call, failed);                            \
    static std::atomic<ret(*) params> next{nullptr};       \
    return real(next, #name) args;                         \
  }

DAQIRI_HOOK(int, memfd_create, Call::kMemfdCreate, -1, (const char* name, unsigned flags),
            (name, flags))
DAQIRI_HOOK(void*, mmap, Call::kMmap, MAP_FAILED,
            (void* addr, size_t len, int prot, int flags, int fd, off_t off),
            (addr, len, prot, flags, fd, off))
DAQIRI_HOOK(void*, mmap64, Call::kMmap, MAP_FAILED,
            (void* addr, size_t len, int prot, int flags, int fd, off_t off),
            (addr, len, prot, flags, fd, off))
DAQIRI_HOOK(int, ftruncate, Call::kFtruncate, -1, (int fd, off_t len), (fd, len))
DAQIRI_HOOK(int, ftruncate64, Call::kFtruncate, -1, (int fd, off_t len), (fd, len))
DAQIRI_HOOK(int, fallocate, Call::kFallocate, -1, (int fd, int mode, off_t off, off_t len),
            (fd, mode, off, len))
DAQIRI_HOOK(int, fallocate64, Call::kFallocate, -1, (int fd, int mode, off_t off, off_t len),
            (fd, mode, off, len))
DAQIRI_HOOK(int, dup, Call::kDup, -1, (int fd), (fd))
DAQIRI_HOOK(int, accept4, Call::kAccept4, -1, (int fd, sockaddr* addr, socklen_t* len, int flags),
            (fd, addr, len, flags))
DAQIRI_HOOK(ssize_t, sendmsg, Call::kSendmsg, -1, (int fd, const msghdr* msg, int flags),
            (fd, msg, flags))
DAQIRI_HOOK(int, sendmmsg, Call::kSendmmsg, -1, (int fd, mmsghdr* msgs, unsigned n, int flags),
            (fd, msgs, n, flags))
DAQIRI_HOOK(int, recvmmsg, Call::kRecvmmsg, -1,
            (int fd, mmsghdr* msgs, unsigned n, int flags, timespec* timeout),
            (fd, msgs, n, flags, timeout))
DAQIRI_HOOK(int, fsync, Call::kFsync, -1, (int fd), (fd))
DAQIRI_HOOK(int, fdatasync, Call::kFsync, -1, (int fd), (fd))
DAQIRI_HOOK(int, epoll_ctl, Call::kEpollCtl, -1, (int ep, int op, int fd, epoll_event* ev),
            (ep, op, fd, ev))

// Only writes to regular files (captures) fail: an eventfd wakeup cannot fail that way.
ssize_t write(int fd, const void* buf, size_t n) {
  if (int e = fault_for(Call::kWrite, __builtin_return_address(0), fd); e != 0) {
    errno = e;
    return -1;
  }
  static std::atomic<ssize_t (*)(int, const void*, size_t)> next{nullptr};
  return real(next, "write")(fd, buf, n);
}

// fcntl's third argument is an int or a pointer; both travel in one register.
#define DAQIRI_FCNTL(name)                                                      \
  int name(int fd, int cmd, ...) {                                              \
    va_list ap;                                                                 \
    va_start(ap, cmd);                                                          \
    void* arg = va_arg(ap, void*);                                              \
    va_end(ap);                                                                 \
    if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) DAQIRI_FAULT(Call::kDup, -1); \
    static std::atomic<int (*)(int, int, void*)> next{nullptr};                 \
    return real(next, #name)(fd, cmd, arg);                                     \
  }
DAQIRI_FCNTL(fcntl)
DAQIRI_FCNTL(fcntl64)

// open's mode is there only with O_CREAT or O_TMPFILE; reading it regardless is harmless.
// `params` end with `int flags, ...`; `args` hand on `mode`.
#define DAQIRI_OPEN(name, params, type, args)              \
  int name params {                                        \
    va_list ap;                                            \
    va_start(ap, flags);                                   \
    auto mode = static_cast<mode_t>(va_arg(ap, unsigned)); \
    va_end(ap);                                            \
    DAQIRI_FAULT(Call::kOpen, -1);                         \
    static std::atomic<type> next{nullptr};                \
    return real(next, #name) args;                         \
  }
DAQIRI_OPEN(open, (const char* path, int flags, ...), int (*)(const char*, int, mode_t),
            (path, flags, mode))
DAQIRI_OPEN(open64, (const char* path, int flags, ...), int (*)(const char*, int, mode_t),
            (path, flags, mode))
DAQIRI_OPEN(openat, (int dir, const char* path, int flags, ...),
            int (*)(int, const char*, int, mode_t), (dir, path, flags, mode))
DAQIRI_OPEN(openat64, (int dir, const char* path, int flags, ...),
            int (*)(int, const char*, int, mode_t), (dir, path, flags, mode))

// daqirid reaches some calls through syscall(2) (the pollers' recvmmsg and sendmmsg, pidfds,
// openat2); six register arguments cover every call it makes that way.
long syscall(long number, ...) {
  va_list ap;
  va_start(ap, number);
  long a[6];
  for (long& x : a)
    x = va_arg(ap, long);
  va_end(ap);
  if (Call call = call_of_syscall(number); call != Call::kCount) {
    DAQIRI_FAULT(call, -1);
  }
  static std::atomic<long (*)(long, ...)> next{nullptr};
  return real(next, "syscall")(number, a[0], a[1], a[2], a[3], a[4], a[5]);
}

}  // extern "C"

#ifdef DAQIRI_FAULT_CUDA
// The CUDA driver's calls (libdaqiri-fault-cuda.so). daqirid links cudart statically, and cudart
// reaches every driver entry point (ours through cudaGetDriverEntryPointByVersion too) through
// cuGetProcAddress, which it looks up with dlsym in libcuda.so.1. The shim answers that dlsym
// with a cuGetProcAddress of its own, which hands out wrappers for the calls it can fail.
#include <cuda.h>

#include <cstring>

namespace {

std::atomic<CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*)>
    next_get_proc_address_v2;
std::atomic<CUresult (*)(const char*, void**, int, cuuint64_t)> next_get_proc_address;
std::atomic<decltype(&cuMemCreate)> next_mem_create;
std::atomic<decltype(&cuMemExportToShareableHandle)> next_mem_export;
std::atomic<CUresult (*)(CUdeviceptr*, size_t)> next_mem_alloc;

#define DAQIRI_CU_FAULT(call)                                         \
  if (int e = fault_for(call, __builtin_return_address(0)); e != 0) { \
    return static_cast<CUresult>(e);                                  \
  }

CUresult mem_create(CUmemGenericAllocationHandle* handle, size_t size,
                    const CUmemAllocationProp* prop, unsigned long long flags) {
  DAQIRI_CU_FAULT(Call::kCuMemCreate);
  return next_mem_create.load()(handle, size, prop, flags);
}
CUresult mem_export(void* shareable, CUmemGenericAllocationHandle handle,
                    CUmemAllocationHandleType type, unsigned long long flags) {
  DAQIRI_CU_FAULT(Call::kCuMemExport);
  return next_mem_export.load()(shareable, handle, type, flags);
}
CUresult mem_alloc(CUdeviceptr* ptr, size_t size) {
  DAQIRI_CU_FAULT(Call::kCuMemAlloc);
  return next_mem_alloc.load()(ptr, size);
}

// Takes the driver's entry point into `next` and hands out `wrapper` instead.
template <typename F>
bool substitute(const char* symbol, const char* name, void** pfn, std::atomic<F>& next, F wrapper) {
  if (std::strcmp(symbol, name) != 0) return false;
  next.store(reinterpret_cast<F>(*pfn));
  *pfn = reinterpret_cast<void*>(wrapper);
  return true;
}

CUresult get_proc_address_v2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult* status);
CUresult get_proc_address(const char* symbol, void** pfn, int version, cuuint64_t flags);

// cudart asks cuGetProcAddress for cuGetProcAddress itself (the CUDA 12 ABI, with a query
// result, and the 11.3 one, without) and looks up everything else through what it got: those
// are wrapped too.
void wrap(const char* symbol, void** pfn, int version) {
  if (symbol == nullptr || pfn == nullptr || *pfn == nullptr) return;
  if (std::strcmp(symbol, "cuGetProcAddress") == 0) {
    if (version >= 12000) {
      substitute(symbol, "cuGetProcAddress", pfn, next_get_proc_address_v2, &get_proc_address_v2);
    } else {
      substitute(symbol, "cuGetProcAddress", pfn, next_get_proc_address, &get_proc_address);
    }
    return;
  }
  substitute(symbol, "cuMemCreate", pfn, next_mem_create, &mem_create) ||
      substitute(symbol, "cuMemExportToShareableHandle", pfn, next_mem_export, &mem_export) ||
      substitute(symbol, "cuMemAlloc", pfn, next_mem_alloc, &mem_alloc);
}

CUresult get_proc_address_v2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult* status) {
  CUresult r = next_get_proc_address_v2.load()(symbol, pfn, version, flags, status);
  if (r == CUDA_SUCCESS) wrap(symbol, pfn, version);
  return r;
}
CUresult get_proc_address(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  CUresult r = next_get_proc_address.load()(symbol, pfn, version, flags);
  if (r == CUDA_SUCCESS) wrap(symbol, pfn, version);
  return r;
}

using Dlsym = void* (*)(void*, const char*);
std::atomic<Dlsym> next_dlsym_slot{nullptr};
Dlsym next_dlsym() {
  Dlsym next = next_dlsym_slot.load(std::memory_order_relaxed);
  if (next == nullptr) {
    next = reinterpret_cast<Dlsym>(dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34"));
    if (next == nullptr) next = reinterpret_cast<Dlsym>(dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5"));
    next_dlsym_slot.store(next, std::memory_order_relaxed);
  }
  return next;
}

}  // namespace

extern "C" void* dlsym(void* handle, const char* name) {
  if (std::strncmp(name, "cuGetProcAddress", 16) == 0) {
    void* fn = next_dlsym()(handle, name);
    if (fn != nullptr) {
      substitute(name, "cuGetProcAddress_v2", &fn, next_get_proc_address_v2,
                 &get_proc_address_v2) ||
          substitute(name, "cuGetProcAddress", &fn, next_get_proc_address, &get_proc_address);
    }
    return fn;
  }
  // A tail call (the shim is built with -O2): glibc resolves RTLD_NEXT from its caller's return
  // address, which must stay the original caller's.
  return next_dlsym()(handle, name);
}
#endif  // DAQIRI_FAULT_CUDA
