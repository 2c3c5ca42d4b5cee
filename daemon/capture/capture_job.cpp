#include "capture/capture_job.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace daqiri::capture_service {

Result<std::unique_ptr<CaptureJob>> CaptureJob::start(CaptureStatus status, CaptureLimits limits,
                                                      orchestrator::DataPlane& data_plane,
                                                      dataplane::AttachmentShare share,
                                                      std::unique_ptr<capture::FileWriter> writer) {
  status.attachment = share.id;
  status.running = true;
  std::unique_ptr<CaptureJob> job(
      new CaptureJob(std::move(status), limits, data_plane, std::move(writer)));
  auto rings = map_fd(share.rings_fd.get(), share.rings_size, true);
  if (!rings) return std::unexpected(rings.error());
  auto ring =
      abi::RingView::open(rings->data() + share.ring_offset, rings->size() - share.ring_offset,
                          DAQIRI_RING_RX, sizeof(daqiri_rx_desc));
  if (!ring) return fail(ErrorCode::kInternal, "capture: the attachment's ring does not check");
  job->rings_ = std::move(*rings);
  job->ring_ = *ring;
  job->eventfd_ = std::move(share.event_fd);
  for (const auto& r : share.regions) {
    auto m = map_fd(r.fd.get(), r.size, false);
    if (!m) return std::unexpected(m.error());
    job->regions_.push_back(std::move(*m));
  }
  job->thread_ = std::thread([j = job.get()] { j->run(); });
  return job;
}

CaptureJob::CaptureJob(CaptureStatus status, CaptureLimits limits,
                       orchestrator::DataPlane& data_plane,
                       std::unique_ptr<capture::FileWriter> writer)
    : limits_(limits),
      data_plane_(data_plane),
      writer_(std::move(writer)),
      status_(std::move(status)) {}

CaptureJob::~CaptureJob() {
  stop();
}

void CaptureJob::stop() {
  stop_.store(true, std::memory_order_release);
  if (thread_.joinable()) thread_.join();
}

CaptureStatus CaptureJob::status() const {
  std::lock_guard lock(mutex_);
  CaptureStatus s = status_;
  s.packets = packets_.load(std::memory_order_relaxed);
  s.bytes = bytes_.load(std::memory_order_relaxed);
  if (s.running) s.files = writer_->files();
  return s;
}

void CaptureJob::run() {
  using Clock = std::chrono::steady_clock;
  const abi::RingView& ring = ring_;
  auto deadline = limits_.max_duration.count() > 0 ? Clock::now() + limits_.max_duration
                                                   : Clock::time_point::max();
  uint32_t cons = 0;  // a fresh ring
  uint64_t packets = 0, bytes = 0;
  std::string error;
  while (!stop_.load(std::memory_order_acquire) && Clock::now() < deadline) {
    uint32_t prod = ring.load_producer();
    if (prod == cons) {
      if (ring.state() == DAQIRI_RING_DETACHED) {
        error = "the flow's attachment was detached (flow deleted?)";
        break;
      }
      // Sleep as clients do, 100 ms at most, to see stop requests and the deadline.
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      ring.sleep_for_producer(eventfd_.get(), cons, int(std::clamp<int64_t>(left.count(), 0, 100)));
      continue;
    }
    for (; cons != prod; ++cons) {
      const daqiri_rx_desc d = *ring.slot<daqiri_rx_desc>(cons);
      if (d.region >= regions_.size()) continue;  // the daemon's own: never, but cheap
      std::span<const std::byte> region(regions_[d.region].data(), regions_[d.region].size());
      if (d.offset > region.size() || d.length > region.size() - d.offset) continue;
      auto frame = region.subspan(d.offset, d.length);
      uint32_t payload =
          daqiri_rx_payload_offset(&d, reinterpret_cast<const uint8_t*>(frame.data()));
      if (auto ok = writer_->write(d.timestamp_ns, frame, payload); !ok) {
        error = ok.error().message;
        break;
      }
      ++packets;
      bytes += d.length;
      if (limits_.max_packets != 0 && packets >= limits_.max_packets) {
        ++cons;
        break;
      }
    }
    ring.publish_consumer(cons);  // copied into the writer: the buffers go back
    packets_.store(packets, std::memory_order_relaxed);
    bytes_.store(bytes, std::memory_order_relaxed);
    if (!error.empty() || (limits_.max_packets != 0 && packets >= limits_.max_packets)) break;
  }
  finish(std::move(error));
}

void CaptureJob::finish(std::string error) {
  auto closed = writer_->close();
  if (error.empty() && !closed) error = closed.error().message;
  data_plane_.close(status_.attachment);
  // Said here, not only to whoever stops it: a capture may end with nobody to ask (a daemon
  // stopping, a capture that hit its limit and was never stopped).
  if (!error.empty()) {
    spdlog::error("capture {} ended early ({} packets taken): {}", status_.id,
                  packets_.load(std::memory_order_relaxed), error);
  }
  std::lock_guard lock(mutex_);
  status_.running = false;
  status_.files = writer_->files();
  status_.error = std::move(error);
}

}  // namespace daqiri::capture_service
