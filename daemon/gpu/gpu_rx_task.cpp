#include "gpu/gpu_rx_task.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "core/packet_fields.hpp"

namespace daqiri::gpu {
namespace {

// `bytes` contiguous bytes on the copy engines (contiguous_shape).
cudaError_t copy_contiguous(void* dst, const void* src, uint64_t bytes, cudaStream_t stream) {
  ContiguousShape shape = contiguous_shape(bytes);
  if (shape.rows == 1) return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream);
  return cudaMemcpy2DAsync(dst, shape.width, src, shape.width, shape.width, shape.rows,
                           cudaMemcpyDefault, stream);
}

// `n` descriptors, one a row when they are too few for a 1-D copy on the copy engines.
cudaError_t copy_descriptors(daqiri_rx_desc* dst, const daqiri_rx_desc* src, uint32_t n,
                             cudaStream_t stream) {
  constexpr size_t kSize = sizeof(daqiri_rx_desc);
  if (n == 1 || n * kSize >= kMinCopyEngineBytes)
    return copy_contiguous(dst, src, n * kSize, stream);
  return cudaMemcpy2DAsync(dst, kSize, src, kSize, kSize, n, cudaMemcpyDefault, stream);
}

}  // namespace

Result<std::unique_ptr<GpuRxTask>> GpuRxTask::create(const GpuDevice& gpu,
                                                     dataplane::RxAttachment& source,
                                                     std::vector<uint64_t> pool_device_addresses,
                                                     uint32_t slots, uint32_t slot_size,
                                                     uint32_t header_size, bool cuda_ipc) {
  auto ring = DeviceRing::create(gpu, slots, slot_size, header_size, cuda_ipc);
  if (!ring) return std::unexpected(ring.error());
  std::optional<memory::SharedMemory> headers;
  if (header_size != 0) {
    // The engine copies headers on the CPU: from the frames in host memory, or from what the
    // NIC split off beside the source ring (frames in a gpudirect pool come only that way).
    if (source.head_size() < header_size) source.reserve_heads(header_size);
    auto h = memory::SharedMemory::create("gpu-ring-headers-" + std::to_string(source.id()),
                                          uint64_t{slots} * header_size, false);
    if (!h) return std::unexpected(h.error());
    if (auto ok = h->seal_read_only_for_others(); !ok) return std::unexpected(ok.error());
    headers = std::move(*h);
  }
  auto control = memory::SharedMemory::create("gpu-ring-" + std::to_string(source.id()),
                                              abi::RingView::bytes_for(slots, 0), false);
  if (!control) return std::unexpected(control.error());
  if (auto ok = control->seal_size(); !ok) return std::unexpected(ok.error());
  auto control_ring = abi::RingView::create(control->data(), DAQIRI_RING_GPU, slots, 0);
  UniqueFd efd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!efd) return fail_errno("eventfd");
  std::unique_ptr<GpuRxTask> t(new GpuRxTask(gpu, source, std::move(pool_device_addresses),
                                             std::move(*ring), std::move(*control), control_ring,
                                             std::move(efd)));
  t->headers_ = std::move(headers);
  if (auto ok = t->init_cuda(); !ok) return std::unexpected(ok.error());
  return t;
}

GpuRxTask::GpuRxTask(const GpuDevice& gpu, dataplane::RxAttachment& source,
                     std::vector<uint64_t> pool_device_addresses, DeviceRing ring,
                     memory::SharedMemory control, abi::RingView control_ring,
                     UniqueFd client_eventfd)
    : gpu_(gpu),
      source_(source),
      source_ring_(source.ring()),
      pool_device_(std::move(pool_device_addresses)),
      ring_(std::move(ring)),
      control_(std::move(control)),
      control_ring_(control_ring),
      client_eventfd_(std::move(client_eventfd)) {
  for (const memory::BufferPool* pool : source_.pools()) {
    pool_bytes_.push_back(pool->mapped_bytes());  // what is registered and mapped for the GPU
    pool_on_device_.push_back(pool->on_device());
  }
  launch_frames_ =
      std::clamp(std::min(source_ring_.size(), ring_.info().size) / 4, kMinLaunch, kMaxLaunch);
  frames_.resize(launch_frames_);
  ops_.resize(launch_frames_);
}

Result<> GpuRxTask::init_cuda() {
  if (auto ok = gpu_.make_current(); !ok) return ok;
  if (auto ok = streams_.create(gpu_); !ok) return ok;
  void* descs = nullptr;
  if (cudaError_t e = cudaHostAlloc(&descs, sizeof(daqiri_rx_desc) * launch_frames_ * kMaxInflight,
                                    cudaHostAllocPortable);
      e != cudaSuccess) {
    return std::unexpected(runtime_error(e, "cudaHostAlloc of the descriptor staging"));
  }
  descs_ = static_cast<daqiri_rx_desc*>(descs);
  staging_bytes_ = std::max<uint64_t>(kStagingBytes, ring_.info().slot_size);
  void* staging = nullptr;
  if (cudaError_t e = cudaHostAlloc(&staging, staging_bytes_ * kMaxInflight, cudaHostAllocPortable);
      e != cudaSuccess) {
    return std::unexpected(runtime_error(e, "cudaHostAlloc of the frame staging"));
  }
  staging_ = static_cast<std::byte*>(staging);
  return {};
}

GpuRxTask::~GpuRxTask() {
  if (gpu_.make_current()) {
    streams_.synchronize();  // no copy still reads the staging
    if (descs_ != nullptr) cudaFreeHost(descs_);
    if (staging_ != nullptr) cudaFreeHost(staging_);
  }
}

bool GpuRxTask::quiesced() {
  if (detached_) return true;
  // After a failed launch the copy engines may still read source buffers.
  if (gpu_.make_current() && !streams_.idle()) return false;
  detached_ = true;
  control_ring_.set_state(DAQIRI_RING_DETACHED);
  uint64_t one = 1;
  [[maybe_unused]] auto w = ::write(client_eventfd_.get(), &one, sizeof one);
  return true;
}

void GpuRxTask::fail_attachment() {
  failed_ = true;
  source_.lifecycle.violated.store(true, std::memory_order_release);
}

void GpuRxTask::fail_attachment(const char* call, cudaError_t error) {
  failed_ = true;
  source_.lifecycle.engine_failed(call, cudaGetErrorString(error));  // a static string
}

void GpuRxTask::fail_attachment(const char* call, CUresult error) {
  const char* text = nullptr;
  if (gpu_.api().get_error_string(error, &text) != CUDA_SUCCESS) text = nullptr;
  failed_ = true;
  source_.lifecycle.engine_failed(call, text);
}

bool GpuRxTask::poll() {
  if (failed_) return false;
  if (!gpu_.make_current_on_poller()) {
    fail_attachment("cudaSetDevice", cudaGetLastError());
    return false;
  }
  bool did = retire();
  did |= launch();
  return did;
}

// Completed copies, oldest first: their host buffers return and the client may see them.
bool GpuRxTask::retire() {
  bool did = false;
  while (inflight_ != 0) {
    Inflight& f = inflight_ring_[head_];
    cudaError_t e = cudaEventQuery(streams_.event(head_));
    if (e == cudaErrorNotReady) break;
    if (e != cudaSuccess) {
      fail_attachment("cudaEventQuery", e);
      return did;
    }
    source_ring_.publish_consumer(f.source_end);
    source_ring_.kick_producer(source_.kick_fd());  // its flow may wait for this release
    control_ring_.publish_producer(f.ring_end);
    if (control_ring_.consumer_wants_wakeup()) {
      uint64_t one = 1;
      [[maybe_unused]] auto w = ::write(client_eventfd_.get(), &one, sizeof one);
    }
    dataplane::bump(counters.packets, f.packets);
    dataplane::bump(counters.bytes, f.bytes);
    counters.latency.record(dataplane::monotonic_ns() - f.launched_ns);
    head_ = (head_ + 1) % kMaxInflight;
    --inflight_;
    did = true;
  }
  return did;
}

bool GpuRxTask::launch() {
  uint32_t avail = source_ring_.load_producer() - read_;
  if (avail == 0) {
    backlog_ = false;
    if (!spin_ && !sleeping_ && inflight_ == 0) {
      // Park-ready: the RX poller signals the source eventfd once NEED_WAKEUP is seen.
      source_ring_.set_need_wakeup(true);
      sleeping_ = true;
      if (source_ring_.load_producer_seq_cst() == read_) return false;
    } else {
      return false;
    }
    avail = source_ring_.load_producer() - read_;
  }
  if (sleeping_) {
    source_ring_.set_need_wakeup(false);
    sleeping_ = false;
    uint64_t v = 0;
    [[maybe_unused]] auto r = ::read(source_.eventfd(), &v, sizeof v);
  }
  if (inflight_ == kMaxInflight) return false;
  // While copies are still moving, a few frames more wait for them rather than pay a launch of
  // their own: each launch costs the host about as much whatever its size, so under load bursts
  // grow to what arrives meanwhile; an idle engine still launches at once.
  if (inflight_ >= kBatchWhenInflight && avail < launch_frames_) return false;
  // The client's consumer index: never trusted beyond [what it released, what we produced].
  uint32_t c = control_ring_.load_consumer();
  if (c - released_ > produced_ - released_) {
    dataplane::bump(source_.counters.bad_index);
    fail_attachment();
    return false;
  }
  released_ = c;
  uint32_t room = ring_.info().size - (produced_ - released_);
  uint32_t n = std::min({avail, room, launch_frames_});
  if (n == 0) {
    backlog_ = true;
    return false;
  }

  uint32_t slot_in_flight = (head_ + inflight_) % kMaxInflight;
  daqiri_rx_desc* descs = descs_ + size_t{slot_in_flight} * launch_frames_;
  for (uint32_t i = 0; i < n; ++i)
    prepare(i, descs[i]);
  RingGeometry geometry{produced_, ring_.info().size, ring_.info().slot_size};
  CopyPlan plan = plan_copies(std::span(frames_.data(), n), geometry, staging_bytes_, ops_);
  n = plan.frames;
  backlog_ = n < avail;
  if (n == 0) return false;
  uint64_t launched_ns = dataplane::monotonic_ns();
  cudaStream_t stream = streams_.stream(slot_in_flight);
  // Same stream, after the copies: a reader that sees the doorbell sees the data. And after the
  // burst before (on the other stream) rang: the doorbell only moves forward.
  cudaEvent_t before = streams_.event((slot_in_flight + kMaxInflight - 1) % kMaxInflight);
  if (cudaError_t e = enqueue_frames(plan, slot_in_flight, stream); e != cudaSuccess) {
    fail_attachment("cudaMemcpyAsync (frames)", e);
    return false;
  }
  if (cudaError_t e = enqueue_descriptors(descs, n, stream); e != cudaSuccess) {
    fail_attachment("cudaMemcpyAsync (descriptors)", e);
    return false;
  }
  if (inflight_ != 0) {
    if (cudaError_t e = cudaStreamWaitEvent(stream, before, 0); e != cudaSuccess) {
      fail_attachment("cudaStreamWaitEvent", e);
      return false;
    }
  }
  if (CUresult r =
          gpu_.api().stream_write_value32(reinterpret_cast<CUstream>(stream), ring_.doorbell(),
                                          produced_ + n, CU_STREAM_WRITE_VALUE_DEFAULT);
      r != CUDA_SUCCESS) {
    fail_attachment("cuStreamWriteValue32", r);
    return false;
  }
  Inflight& f = inflight_ring_[slot_in_flight];
  if (cudaError_t e = cudaEventRecord(streams_.event(slot_in_flight), stream); e != cudaSuccess) {
    fail_attachment("cudaEventRecord", e);
    return false;
  }
  uint64_t bytes = 0;
  for (uint32_t i = 0; i < n; ++i)
    bytes += descs[i].length;
  read_ += n;
  produced_ += n;
  f.source_end = read_;
  f.ring_end = produced_;
  f.packets = n;
  f.bytes = bytes;
  f.launched_ns = launched_ns;
  ++inflight_;
  return true;
}

void GpuRxTask::prepare(uint32_t i, daqiri_rx_desc& desc) {
  const daqiri_rx_desc d = *source_ring_.slot<daqiri_rx_desc>(read_ + i);
  desc = d;
  uint32_t counter = produced_ + i;
  uint32_t slot = counter & (ring_.info().size - 1);
  // Header-data split: the frame's first bytes to its header slot, here on the CPU (host to
  // host, a cache line or two), the rest to the GPU. The header bytes are at the start of the
  // frame's buffer, or (DAQIRI_DESC_SPLIT from the RX poller) were split off by the NIC and kept
  // beside the source ring, the buffer holding only the rest.
  uint32_t header_size = ring_.info().header_size;
  bool presplit = headers_ && (d.flags & DAQIRI_DESC_SPLIT) != 0;
  uint32_t head = headers_ ? std::min(d.length, header_size) : 0;
  uint32_t skip = presplit ? 0 : head;  // buffer bytes before what the GPU gets
  // Our own descriptors, but a bad one must not make the GPU read outside a pool, nor the CPU
  // read out of GPU memory.
  bool on_device = d.region < pool_on_device_.size() && pool_on_device_[d.region];
  bool fits = d.region < pool_device_.size() && d.offset <= pool_bytes_[d.region] &&
              uint64_t{skip} + (d.length - head) <= pool_bytes_[d.region] - d.offset &&
              !(head != 0 && !presplit && on_device);
  uint32_t len = fits ? d.length : 0;
  if (len == 0) head = 0;
  const std::byte* frame =
      fits && !on_device ? source_.pools()[d.region]->data() + d.offset : nullptr;
  if (head != 0) {
    const std::byte* from = presplit ? source_.head(read_ + i) : frame;
    std::memcpy(headers_->data() + uint64_t{slot} * header_size, from, head);
    desc.flags |= DAQIRI_DESC_SPLIT;
    if (d.payload_offset == core::kPayloadOffsetUnread) {
      desc.payload_offset = daqiri_udp_payload_offset(reinterpret_cast<const uint8_t*>(from),
                                                      presplit ? head : d.length);
    }
  }
  // A whole frame nobody read to steer it keeps DAQIRI_PAYLOAD_UNREAD: reading its header here
  // would cost a cache miss a frame, and the client's helpers find it on the GPU for free.
  uint32_t copy = len - head;
  if (copy > ring_.info().slot_size) {
    copy = ring_.info().slot_size;
    desc.flags |= DAQIRI_DESC_TRUNCATED;
  }
  FrameSource& src = frames_[i];
  src.bytes = copy;
  src.src = copy != 0 ? pool_device_[d.region] + d.offset + skip : 0;
  src.host = copy != 0 && frame != nullptr ? frame + skip : nullptr;
  src.room = copy != 0 ? pool_bytes_[d.region] - d.offset - skip : 0;
  desc.offset = ring_.slot_offset(counter);
  desc.length = head + copy;
  desc.region = 0;
}

cudaError_t GpuRxTask::enqueue_frames(const CopyPlan& plan, uint32_t slot_in_flight,
                                      cudaStream_t stream) {
  std::byte* staging = staging_ + staging_bytes_ * slot_in_flight;
  uint32_t slot_size = ring_.info().slot_size;
  for (uint32_t o = 0; o < plan.ops; ++o) {
    const CopyOp& op = ops_[o];
    const void* src = nullptr;
    if (op.staged) {
      for (uint32_t r = 0; r < op.rows; ++r) {
        const FrameSource& f = frames_[op.first + r];
        std::memcpy(staging + op.src + r * op.spitch, f.host, f.bytes);
      }
      src = staging + op.src;
      dataplane::bump(counters.staged_frames, op.rows);
    } else {
      src = reinterpret_cast<const void*>(op.src);  // NOLINT(performance-no-int-to-ptr)
      dataplane::bump(counters.direct_frames, op.rows);
    }
    uint8_t* dst = ring_.base() + ring_.slot_offset(produced_ + op.first);
    // A contiguous copy too small for the copy engines goes pitched (its rows, or two halves
    // of its one row: a slot and the staging area have the byte more an odd row takes). From
    // GPU memory nothing reaches the copy engines: as it comes.
    uint64_t bytes = (op.rows - 1) * op.spitch + op.width;
    bool from_gpu = !op.staged && frames_[op.first].host == nullptr;
    cudaError_t e = cudaSuccess;
    if (op.contiguous && from_gpu) {
      e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream);
    } else if (op.contiguous && (bytes >= kMinCopyEngineBytes || op.rows == 1)) {
      e = copy_contiguous(dst, src, bytes, stream);
    } else {
      e = cudaMemcpy2DAsync(dst, slot_size, src, op.spitch, op.width, op.rows, cudaMemcpyDefault,
                            stream);
    }
    if (e != cudaSuccess) return e;
    dataplane::bump(counters.copies, 1);
  }
  return cudaSuccess;
}

cudaError_t GpuRxTask::enqueue_descriptors(const daqiri_rx_desc* descs, uint32_t n,
                                           cudaStream_t stream) {
  // Consecutive slots, in two pieces when the burst wraps the ring.
  uint32_t first = produced_ & (ring_.info().size - 1);
  uint32_t head = std::min(n, ring_.info().size - first);
  cudaError_t e = copy_descriptors(ring_.descs() + first, descs, head, stream);
  if (e == cudaSuccess && head < n)
    e = copy_descriptors(ring_.descs(), descs + head, n - head, stream);
  return e;
}

}  // namespace daqiri::gpu

namespace daqiri::gpu {

Result<dataplane::AttachmentShare> GpuRxTask::share(uint64_t id) const {
  dataplane::AttachmentShare share;
  share.id = id;
  auto ctl = control_.shared_fd();
  if (!ctl) return std::unexpected(ctl.error());
  share.rings_fd = std::move(*ctl);
  share.rings_size = control_.size();
  auto event = dataplane::dup_for_client(client_eventfd_.get(), "eventfd");
  if (!event) return std::unexpected(event.error());
  share.event_fd = std::move(*event);
  if (ring_.legacy_ipc()) {
    share.gpu_ipc = true;
  } else {
    auto vmm = ring_.export_fd();
    if (!vmm) return std::unexpected(vmm.error());
    share.gpu_fd = std::move(*vmm);
  }
  if (headers_) {
    // Header-data split: the header slots, read-only, as the attachment's one region.
    auto ro = headers_->read_only_fd();
    if (!ro) return std::unexpected(ro.error());
    share.regions.push_back(
        {std::move(*ro), headers_->size(), ring_.info().header_size, ring_.info().size, false});
  }
  share.gpu = ring_.info();
  return share;
}

Result<std::string> GpuRxTask::ipc_handle() const {
  if (!ring_.legacy_ipc()) return fail(ErrorCode::kNotFound, "no GPU ring attached with cuda_ipc");
  return ring_.ipc_handle();
}

}  // namespace daqiri::gpu
