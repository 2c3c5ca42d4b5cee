// A shared mapping of an fd (munmap'ed when it goes): how a client, or a consumer inside the
// daemon that acts like one, holds rings and regions it was handed as fds.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <utility>

#include "daqiri/common/result.hpp"

namespace daqiri {

class Mapping {
 public:
  Mapping() = default;
  Mapping(void* p, size_t n) : p_(p), n_(n) {}
  Mapping(Mapping&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  Mapping& operator=(Mapping&& o) noexcept {
    if (this != &o) {
      reset();
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() { reset(); }
  [[nodiscard]] std::byte* data() const { return static_cast<std::byte*>(p_); }
  [[nodiscard]] size_t size() const { return n_; }

 private:
  void reset() {
    if (p_) ::munmap(p_, n_);
    p_ = nullptr;
  }
  void* p_ = nullptr;
  size_t n_ = 0;
};

// MAP_SHARED, read-write or read-only.
inline Result<Mapping> map_fd(int fd, size_t size, bool writable) {
  void* p = ::mmap(nullptr, size, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return fail_errno("mmap");
  return Mapping(p, size);
}

}  // namespace daqiri
