#include "gpu/gpu_tx_task.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "dataplane/clock.hpp"

namespace daqiri::gpu {
Result<std::unique_ptr<GpuTxTask>> GpuTxTask::create(
    const GpuDevice& gpu, std::unique_ptr<dataplane::TxAttachment> client,
    dataplane::TxAttachment& internal) {
  if (client->gpu_buffers() == nullptr) {
    return fail(ErrorCode::kInternal, "a GPU TX client without GPU buffers");
  }
  if (auto ok = gpu.make_current(); !ok) return std::unexpected(ok.error());
  auto pinned = HostRegistration::create(internal.buffers().data(), internal.buffers().size());
  if (!pinned) return std::unexpected(pinned.error());
  std::unique_ptr<GpuTxTask> t(new GpuTxTask(gpu, std::move(client), internal, std::move(*pinned)));
  if (auto ok = t->streams_.create(gpu); !ok) return std::unexpected(ok.error());
  return t;
}

GpuTxTask::GpuTxTask(const GpuDevice& gpu, std::unique_ptr<dataplane::TxAttachment> client,
                     dataplane::TxAttachment& internal, HostRegistration pinned)
    : gpu_(gpu),
      client_(std::move(client)),
      internal_(internal),
      internal_tx_(internal.tx_ring()),
      internal_completion_(
          *abi::RingView::open(internal.rings().data() + internal.completion_offset(),
                               internal.rings().size() - internal.completion_offset(),
                               DAQIRI_RING_COMPLETION, sizeof(uint32_t))),
      payloads_(*client_->gpu_buffers()),
      info_(payloads_.info),
      pinned_(std::move(pinned)),
      frame_size_(internal.buf_size()),
      descs_(size_t{kMaxInflight} * kMaxLaunch),
      completed_(kMaxLaunch) {}

GpuTxTask::~GpuTxTask() = default;  // streams_ first: no copy still writes internal_'s buffers

bool GpuTxTask::quiesced() {
  if (detached_) return true;
  // After a failed launch the copy engines may still write internal buffers.
  if (gpu_.make_current() && !streams_.idle()) return false;
  detached_ = true;
  client_->detach();  // its rings say DETACHED, its eventfd is written
  return true;
}

void GpuTxTask::fail_attachment(const char* call, cudaError_t error) {
  failed_ = true;
  internal_.lifecycle.engine_failed(call, cudaGetErrorString(error));  // a static string
}

bool GpuTxTask::arm_wakeups() {
  if (failed_) return true;
  bool quiet = client_->arm_wakeup();
  internal_completion_.set_need_wakeup(true);
  return quiet && internal_completion_.load_producer_seq_cst() == taken_back_;
}

void GpuTxTask::disarm_wakeups() {
  client_->disarm_wakeup();
  internal_completion_.set_need_wakeup(false);
  uint64_t v = 0;
  [[maybe_unused]] auto r = ::read(internal_.eventfd(), &v, sizeof v);
}

bool GpuTxTask::poll() {
  if (failed_) return false;
  if (!gpu_.make_current_on_poller()) {
    fail_attachment("cudaSetDevice", cudaGetLastError());
    return false;
  }
  bool did = complete();
  did |= retire();
  did |= launch();
  return did;
}

bool GpuTxTask::complete() {
  uint32_t p = internal_completion_.load_producer();
  if (p == taken_back_) return false;
  // Runs of the same outcome, each handed to the client at once.
  uint32_t n = 0;
  bool failed = false;
  auto flush = [&] {
    client_->complete(completed_.data(), n, failed);
    n = 0;
  };
  for (; taken_back_ != p; ++taken_back_) {
    uint32_t e = *internal_completion_.slot<uint32_t>(taken_back_);
    uint32_t buffer = e & DAQIRI_COMPLETION_BUFFER;
    bool f = (e & DAQIRI_COMPLETION_FAILED) != 0;
    if (buffer >= info_.size) continue;  // the daemon's own ring: cannot happen
    if (n != 0 && (f != failed || n == completed_.size())) flush();
    failed = f;
    completed_[n++] = daqiri_tx_desc{buffer, 0, 0, 0};
  }
  flush();
  internal_completion_.publish_consumer(taken_back_);
  return true;
}

bool GpuTxTask::retire() {
  bool did = false;
  while (inflight_ != 0) {
    Inflight& f = inflight_ring_[head_];
    cudaError_t e = cudaEventQuery(streams_.event(head_));
    if (e == cudaErrorNotReady) break;
    if (e != cudaSuccess) {
      fail_attachment("cudaEventQuery", e);
      return did;
    }
    const daqiri_tx_desc* descs = descs_.data() + size_t{head_} * kMaxLaunch;
    for (uint32_t i = 0; i < f.count; ++i)
      *internal_tx_.slot<daqiri_tx_desc>(submitted_++) = descs[i];
    internal_tx_.publish_producer(submitted_);
    internal_tx_.wake_consumer(internal_.kick_fd());
    dataplane::bump(counters.packets, f.count);
    dataplane::bump(counters.bytes, f.bytes);
    counters.latency.record(dataplane::monotonic_ns() - f.launched_ns);
    head_ = (head_ + 1) % kMaxInflight;
    --inflight_;
    did = true;
  }
  return did;
}

bool GpuTxTask::launch() {
  if (inflight_ == kMaxInflight) return false;
  // The internal ring's consumer is the TX poller's (no client maps that ring).
  uint32_t room = internal_tx_.size() - (queued_ - internal_tx_.load_consumer());
  uint32_t max = std::min(room, kMaxLaunch);
  if (max == 0) return false;
  uint32_t slot = (head_ + inflight_) % kMaxInflight;
  daqiri_tx_desc* descs = descs_.data() + size_t{slot} * kMaxLaunch;
  // Read once and checked (buffer owned and in range, length, flags) by take().
  uint32_t n = client_->take(descs, max);
  if (client_->lifecycle.violated.load(std::memory_order_relaxed)) {
    dataplane::bump(internal_.counters.bad_descriptor,
                    client_->counters.bad_descriptor.load(std::memory_order_relaxed));
    dataplane::bump(internal_.counters.bad_index,
                    client_->counters.bad_index.load(std::memory_order_relaxed));
    failed_ = true;
    internal_.lifecycle.violated.store(true, std::memory_order_release);
    return false;
  }
  if (n == 0) return false;
  // Headers on the CPU, out of the client's memory into ours: what the queue checks and sends
  // is this copy, whatever the client writes later.
  const uint32_t header_size = info_.header_size;
  std::byte* frames = internal_.buffers().data();
  uint64_t bytes = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const daqiri_tx_desc& d = descs[i];
    uint32_t head = std::min(d.length, header_size);
    if (head != 0) {
      std::memcpy(frames + uint64_t{d.buffer} * frame_size_, client_->buffer(d.buffer), head);
    }
    bytes += d.length;
  }
  cudaStream_t stream = streams_.stream(slot);
  if (cudaError_t e = enqueue_copies(descs, n, stream); e != cudaSuccess) {
    fail_attachment("cudaMemcpyAsync (GPU TX)", e);
    return false;
  }
  Inflight& f = inflight_ring_[slot];
  if (cudaError_t e = cudaEventRecord(streams_.event(slot), stream); e != cudaSuccess) {
    fail_attachment("cudaEventRecord", e);
    return false;
  }
  f.count = n;
  f.bytes = bytes;
  f.launched_ns = dataplane::monotonic_ns();
  queued_ += n;
  ++inflight_;
  return true;
}

cudaError_t GpuTxTask::enqueue_copies(const daqiri_tx_desc* descs, uint32_t n,
                                      cudaStream_t stream) {
  const uint32_t header_size = info_.header_size;
  const uint64_t slot = info_.slot_size;
  std::byte* frames = internal_.buffers().data();
  auto gpu_bytes = [&](const daqiri_tx_desc& d) {
    return d.length > header_size ? d.length - header_size : 0;
  };
  uint32_t k = 0;
  while (k < n) {
    uint64_t width = gpu_bytes(descs[k]);
    if (width == 0) {
      ++k;
      continue;
    }
    // A run of consecutive buffers, rising or falling (a client that reuses the buffers that
    // came back last hands them out in reverse), goes as one pitched copy from its lowest
    // buffer, each row as wide as the widest (both sides have the room: a frame buffer holds a
    // header and a GPU buffer). Every buffer of the run is the burst's: no other is written.
    uint32_t e = k + 1;
    int64_t step = 0;
    if (e < n && gpu_bytes(descs[e]) != 0) {
      int64_t d = int64_t{descs[e].buffer} - int64_t{descs[k].buffer};
      step = d == 1 || d == -1 ? d : 0;
    }
    while (step != 0 && e < n && gpu_bytes(descs[e]) != 0 &&
           int64_t{descs[e].buffer} - int64_t{descs[e - 1].buffer} == step) {
      width = std::max<uint64_t>(width, gpu_bytes(descs[e]));
      ++e;
    }
    const uint32_t first = step < 0 ? descs[e - 1].buffer : descs[k].buffer;
    const CUdeviceptr at =
        reinterpret_cast<uintptr_t>(payloads_.memory.base) + info_.payload_offset + first * slot;
    // NOLINTNEXTLINE(performance-no-int-to-ptr): the driver API's device addresses are integers
    const auto* src = reinterpret_cast<const std::byte*>(at);
    std::byte* dst = frames + uint64_t{first} * frame_size_ + header_size;
    uint32_t rows = e - k;
    cudaError_t err = rows == 1 ? cudaMemcpyAsync(dst, src, width, cudaMemcpyDeviceToHost, stream)
                                : cudaMemcpy2DAsync(dst, frame_size_, src, slot, width, rows,
                                                    cudaMemcpyDeviceToHost, stream);
    if (err != cudaSuccess) return err;
    dataplane::bump(counters.copies, 1);
    dataplane::bump(counters.direct_frames, rows);
    k = e;
  }
  return cudaSuccess;
}

Result<dataplane::AttachmentShare> GpuTxTask::share(uint64_t id) const {
  return dataplane::share_tx(*client_, id);
}

Result<std::string> GpuTxTask::ipc_handle() const {
  return fail(ErrorCode::kNotFound, "no GPU ring attached with cuda_ipc");
}

}  // namespace daqiri::gpu
