// The daemon's captures (gRPC StartCapture / StopCapture / ListCaptures): checks where a
// client may write, opens the files beneath an allowed folder as the requester's, and runs a
// CaptureJob per capture. Control path only.
#pragma once

#include <sys/types.h>

#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "capture/capture_job.hpp"

namespace daqiri::capture_service {

struct CaptureSpec {
  std::string flow;  // one flow, or (empty) every flow of rx_interface/rx_queue
  std::string rx_interface, rx_queue;
  std::string path;
  capture::Format format = capture::Format::kPcap;
  uint32_t snaplen = 0;  // 0: the writer's default
  uint64_t rotate_bytes = 0;
  CaptureLimits limits;
};

class CaptureRegistry {
 public:
  static constexpr size_t kMaxRunning = 16;
  static constexpr size_t kMaxEnded = 64;

  CaptureRegistry(orchestrator::DataPlane& data_plane, std::vector<std::string> allowed_dirs);
  ~CaptureRegistry();  // stops every capture

  // `uid`, `gid`, `groups`: the requester's; the file is created as them.
  Result<CaptureStatus> start(const CaptureSpec& spec, uid_t uid, gid_t gid,
                              std::vector<gid_t> groups = {});
  // Stops capture `id`; only its owner or an admin may.
  Result<CaptureStatus> stop(uint64_t id, uid_t uid, bool admin);
  [[nodiscard]] std::vector<CaptureStatus> list() const;

  // Opens `path` for the writer: it must lie beneath an allowed folder, reached without any
  // symbolic link, and it is opened with the requester's filesystem identity (system::ActingAs),
  // so it is created only where they could create it, and as theirs; an existing file must be
  // theirs too.
  Result<UniqueFd> open_beneath(const std::string& path, int flags, uid_t uid, gid_t gid,
                                const std::vector<gid_t>& groups) const;

 private:
  using Jobs = std::map<uint64_t, std::unique_ptr<CaptureJob>>;
  void reap_locked();  // ended jobs move to ended_
  // Stops the job (if it still runs), keeps its last status in ended_, advances `it`.
  CaptureStatus end_locked(Jobs::iterator& it);

  orchestrator::DataPlane& data_plane_;
  std::vector<std::string> allowed_dirs_;
  mutable std::mutex mutex_;
  uint64_t next_id_ = 1;
  Jobs jobs_;
  std::deque<CaptureStatus> ended_;
};

}  // namespace daqiri::capture_service
