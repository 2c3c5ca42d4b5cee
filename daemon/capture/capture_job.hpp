// One capture the daemon runs for a client (gRPC StartCapture): an RX attachment of the flow
// inside the daemon, read by a thread of its own exactly as a client reads one — its own
// mappings of the fds the attachment shares (so a flow deleted under it only detaches the
// ring), the ring protocol (NEED_WAKEUP, eventfd) — handing each frame to a
// capture::FileWriter. The flow's other clients see one more fan-out attachment and nothing
// else; a slow disk costs this attachment ring-full drops (counted), never the poller.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "daqiri/capture.hpp"
#include "daqiri/common/mapping.hpp"
#include "daqiri/ring.hpp"
#include "orchestrator/data_plane.hpp"

namespace daqiri::capture_service {

struct CaptureStatus {
  uint64_t id = 0;
  std::string flow;
  std::string path;
  capture::Format format = capture::Format::kPcap;
  uid_t uid = 0;
  bool running = false;
  uint64_t packets = 0, bytes = 0;
  std::vector<std::string> files;
  std::string error;
  std::string staging;  // how the bytes reach the file
  uint64_t attachment = 0;
};

struct CaptureLimits {
  uint64_t max_packets = 0;                  // 0: none
  std::chrono::nanoseconds max_duration{0};  // 0: none
};

class CaptureJob {
 public:
  // Takes over the active attachment `share` describes (on `status.flow`): closes it when the
  // capture ends.
  static Result<std::unique_ptr<CaptureJob>> start(CaptureStatus status, CaptureLimits limits,
                                                   orchestrator::DataPlane& data_plane,
                                                   dataplane::AttachmentShare share,
                                                   std::unique_ptr<capture::FileWriter> writer);
  ~CaptureJob();
  CaptureJob(const CaptureJob&) = delete;
  CaptureJob& operator=(const CaptureJob&) = delete;

  // Ends the capture (if it still runs) and waits for its files to close.
  void stop();
  [[nodiscard]] CaptureStatus status() const;

 private:
  CaptureJob(CaptureStatus status, CaptureLimits limits, orchestrator::DataPlane& data_plane,
             std::unique_ptr<capture::FileWriter> writer);
  void run();
  void finish(std::string error);

  CaptureLimits limits_;
  orchestrator::DataPlane& data_plane_;
  // What a client would map: the rings (read-write: the consumer index is ours to write),
  // the eventfd, the regions (read-only).
  Mapping rings_;
  abi::RingView ring_;
  UniqueFd eventfd_;
  std::vector<Mapping> regions_;
  std::unique_ptr<capture::FileWriter> writer_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> packets_{0}, bytes_{0};
  mutable std::mutex mutex_;
  CaptureStatus status_;  // under mutex_: running, files, error
  std::thread thread_;
};

}  // namespace daqiri::capture_service
