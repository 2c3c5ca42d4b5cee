// Host memory (a flow's pool) pinned and mapped for GPUs, so that the copy engine's kernel
// reads packets straight out of it. Control path only.
#pragma once

#include <cstddef>
#include <cstdint>

#include "daqiri/common/result.hpp"

namespace daqiri::gpu {

class HostRegistration {
 public:
  static Result<HostRegistration> create(void* data, size_t bytes);
  HostRegistration(HostRegistration&& other) noexcept : data_(other.data_), device_(other.device_) {
    other.data_ = nullptr;
  }
  HostRegistration& operator=(HostRegistration&&) = delete;
  ~HostRegistration();

  // The device address of the first byte.
  [[nodiscard]] uint64_t device_address() const { return device_; }

 private:
  HostRegistration(void* data, uint64_t device) : data_(data), device_(device) {}
  void* data_ = nullptr;
  uint64_t device_ = 0;
};

}  // namespace daqiri::gpu
