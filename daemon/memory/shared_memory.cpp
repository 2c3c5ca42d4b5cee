#include "memory/shared_memory.hpp"

#include <fcntl.h>
#include <linux/memfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <utility>

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010
#endif

namespace daqiri::memory {
namespace {

size_t page_size_for(bool huge) {
  return huge ? (2u << 20) : static_cast<size_t>(::sysconf(_SC_PAGESIZE));
}

}  // namespace

size_t SharedMemory::page_size() const {
  return page_size_for(huge_);
}

Result<SharedMemory> SharedMemory::create(const std::string& name, size_t bytes, bool huge) {
  size_t page = page_size_for(huge);
  size_t size = (bytes + page - 1) / page * page;
  unsigned flags = MFD_CLOEXEC | MFD_ALLOW_SEALING | (huge ? MFD_HUGETLB | MFD_HUGE_2MB : 0u);
  UniqueFd fd(::memfd_create(("daqiri:" + name).c_str(), flags));
  if (!fd) return fail_errno("memfd_create " + name);
  if (::ftruncate(fd.get(), static_cast<off_t>(size)) != 0) {
    return fail_errno("size memory " + name + " to " + std::to_string(size) + " bytes");
  }
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd.get(), 0);
  if (p == MAP_FAILED) {
    int err = errno;
    if (huge && (err == ENOMEM || err == EINVAL)) {
      return fail(ErrorCode::kResourceExhausted,
                  "memory " + name + ": not enough free 2 MB hugepages for " +
                      std::to_string(size >> 20) + " MiB (see /proc/sys/vm/nr_hugepages)");
    }
    return fail_errno("map memory " + name, err);
  }
  return SharedMemory(std::move(fd), static_cast<std::byte*>(p), size, huge);
}

SharedMemory::SharedMemory(SharedMemory&& other) noexcept
    : fd_(std::move(other.fd_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      huge_(other.huge_) {}

SharedMemory& SharedMemory::operator=(SharedMemory&& other) noexcept {
  if (this != &other) {
    unmap();
    fd_ = std::move(other.fd_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    huge_ = other.huge_;
  }
  return *this;
}

SharedMemory::~SharedMemory() {
  unmap();
}

void SharedMemory::unmap() {
  if (data_) ::munmap(data_, size_);
  data_ = nullptr;
}

Result<> SharedMemory::seal_read_only_for_others() {
  if (::fcntl(fd_.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE) != 0) {
    return fail_errno("seal memory");
  }
  return {};
}

Result<> SharedMemory::seal_size() {
  if (::fcntl(fd_.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0) {
    return fail_errno("seal memory");
  }
  return {};
}

Result<UniqueFd> SharedMemory::read_only_fd() const {
  std::string path = "/proc/self/fd/" + std::to_string(fd_.get());
  UniqueFd ro(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!ro) return fail_errno("reopen memory read-only");
  return ro;
}

Result<UniqueFd> SharedMemory::shared_fd() const {
  UniqueFd dup(::fcntl(fd_.get(), F_DUPFD_CLOEXEC, 0));
  if (!dup) return fail_errno("dup memory fd");
  return dup;
}

}  // namespace daqiri::memory
