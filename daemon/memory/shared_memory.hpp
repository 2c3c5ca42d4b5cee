// A memfd and the daemon's read-write mapping of it: the unit of memory shared with clients.
// Clients get either a read-only reopen of the memfd (RX memory, sealed against any new
// writable mapping) or a duplicate (memory they fill, sealed against resizing only).
// Startup/control path only; the mapping itself may be used from any thread.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "daqiri/common/result.hpp"
#include "daqiri/common/unique_fd.hpp"

namespace daqiri::memory {

class SharedMemory {
 public:
  // `bytes` is rounded up to the page size (2 MB for huge). Zero-filled.
  static Result<SharedMemory> create(const std::string& name, size_t bytes, bool huge);

  SharedMemory() = default;
  SharedMemory(SharedMemory&& other) noexcept;
  SharedMemory& operator=(SharedMemory&& other) noexcept;
  SharedMemory(const SharedMemory&) = delete;
  SharedMemory& operator=(const SharedMemory&) = delete;
  ~SharedMemory();

  [[nodiscard]] std::byte* data() const { return data_; }
  [[nodiscard]] size_t size() const { return size_; }
  [[nodiscard]] bool huge() const { return huge_; }
  // The mapping's page size: 2 MiB for hugetlb memfds, else the system page.
  [[nodiscard]] size_t page_size() const;

  // Freezes the size, and forbids every writable mapping made from now on (ours stays).
  Result<> seal_read_only_for_others();
  // Freezes the size only: for memory clients write.
  Result<> seal_size();
  // An fd clients can map read-only and nothing more (requires seal_read_only_for_others).
  [[nodiscard]] Result<UniqueFd> read_only_fd() const;
  // A duplicate of the memfd, for memory clients write.
  [[nodiscard]] Result<UniqueFd> shared_fd() const;

 private:
  SharedMemory(UniqueFd fd, std::byte* data, size_t size, bool huge)
      : fd_(std::move(fd)), data_(data), size_(size), huge_(huge) {}
  void unmap();

  UniqueFd fd_;
  std::byte* data_ = nullptr;
  size_t size_ = 0;
  bool huge_ = false;
};

}  // namespace daqiri::memory
