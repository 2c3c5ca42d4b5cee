// One daemon per socket path: an flock on "<socket>.lock", holding the owner's pid. A second
// daqirid on the same socket is refused with the pid of the first. Creates the socket's
// directory when missing. Released (and the file removed) on destruction.
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>

#include "daqiri/common/result.hpp"
#include "daqiri/common/unique_fd.hpp"

namespace daqiri::system {

class InstanceLock {
 public:
  static Result<std::unique_ptr<InstanceLock>> acquire(const std::string& socket_path,
                                                       std::optional<gid_t> group);
  ~InstanceLock();
  InstanceLock(const InstanceLock&) = delete;
  InstanceLock& operator=(const InstanceLock&) = delete;

  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  InstanceLock(std::string path, UniqueFd fd) : path_(std::move(path)), fd_(std::move(fd)) {}
  std::string path_;
  UniqueFd fd_;
};

}  // namespace daqiri::system
