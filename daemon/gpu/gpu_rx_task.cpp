#include "gpu/gpu_rx_task.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "core/packet_fields.hpp"

namespace daqiri::gpu {
namespace {

// The GPU each poller thread last made current: a runtime call per poll would be waste.
thread_local int tl_current_gpu = -1;

// gpu_copy: dma: what makes a run worth a copy-engine copy. Narrower rows go faster through the
// gather kernel (benchmarks.md).
constexpr uint32_t kMinDmaRows = 2;
constexpr uint32_t kMinDmaWidth = 512;

}  // namespace

Result<std::unique_ptr<GpuRxTask>> GpuRxTask::create(const GpuDevice& gpu,
                                                     dataplane::RxAttachment& source,
                                                     std::vector<uint64_t> pool_device_addresses,
                                                     uint32_t slots, uint32_t slot_size,
                                                     config::GpuCopy copy, uint32_t header_size,
                                                     bool cuda_ipc) {
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
                                             std::move(efd), copy));
  t->headers_ = std::move(headers);
  if (auto ok = t->init_cuda(); !ok) return std::unexpected(ok.error());
  return t;
}

GpuRxTask::GpuRxTask(const GpuDevice& gpu, dataplane::RxAttachment& source,
                     std::vector<uint64_t> pool_device_addresses, DeviceRing ring,
                     memory::SharedMemory control, abi::RingView control_ring,
                     UniqueFd client_eventfd, config::GpuCopy copy)
    : gpu_(gpu),
      source_(source),
      source_ring_(source.ring()),
      pool_device_(std::move(pool_device_addresses)),
      ring_(std::move(ring)),
      control_(std::move(control)),
      control_ring_(control_ring),
      client_eventfd_(std::move(client_eventfd)),
      copy_(copy) {
  for (const memory::BufferPool* pool : source_.pools()) {
    pool_bytes_.push_back(pool->mapped_bytes());  // what is registered and mapped for the GPU
    pool_on_device_.push_back(pool->on_device());
  }
}

Result<> GpuRxTask::init_cuda() {
  if (auto ok = gpu_.make_current(); !ok) return ok;
  if (cudaError_t e = cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking);
      e != cudaSuccess) {
    return std::unexpected(runtime_error(e, "cudaStreamCreate"));
  }
  for (Inflight& f : inflight_ring_) {
    if (cudaError_t e = cudaEventCreateWithFlags(&f.event, cudaEventDisableTiming);
        e != cudaSuccess) {
      return std::unexpected(runtime_error(e, "cudaEventCreate"));
    }
  }
  if (copy_ == config::GpuCopy::kDma) {
    if (cudaError_t e = cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking);
        e != cudaSuccess) {
      return std::unexpected(runtime_error(e, "cudaStreamCreate"));
    }
    for (cudaEvent_t& event : copied_) {
      if (cudaError_t e = cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
          e != cudaSuccess) {
        return std::unexpected(runtime_error(e, "cudaEventCreate"));
      }
    }
  }
  size_t bytes = sizeof(GatherJob) * kMaxBurst * kMaxInflight;
  void* host = nullptr;
  if (cudaError_t e = cudaHostAlloc(&host, bytes, cudaHostAllocMapped | cudaHostAllocPortable);
      e != cudaSuccess) {
    return std::unexpected(runtime_error(e, "cudaHostAlloc of the job list"));
  }
  jobs_ = static_cast<GatherJob*>(host);
  void* device = nullptr;
  if (cudaError_t e = cudaHostGetDevicePointer(&device, host, 0); e != cudaSuccess) {
    return std::unexpected(runtime_error(e, "cudaHostGetDevicePointer of the job list"));
  }
  jobs_device_ = static_cast<GatherJob*>(device);
  if (copy_ == config::GpuCopy::kBatch) {
    void* descs = nullptr;
    if (cudaError_t e = cudaHostAlloc(&descs, sizeof(daqiri_rx_desc) * kMaxBurst * kMaxInflight,
                                      cudaHostAllocPortable);
        e != cudaSuccess) {
      return std::unexpected(runtime_error(e, "cudaHostAlloc of the descriptor staging"));
    }
    descs_ = static_cast<daqiri_rx_desc*>(descs);
    copy_dsts_.resize(size_t{kMaxInflight} * kMaxCopies);
    copy_srcs_.resize(size_t{kMaxInflight} * kMaxCopies);
    copy_sizes_.resize(size_t{kMaxInflight} * kMaxCopies);
  }
  return {};
}

GpuRxTask::~GpuRxTask() {
  if (gpu_.make_current()) {
    if (stream_ != nullptr) {
      cudaStreamSynchronize(stream_);
      cudaStreamDestroy(stream_);
    }
    if (copy_stream_ != nullptr) {
      cudaStreamSynchronize(copy_stream_);
      cudaStreamDestroy(copy_stream_);
    }
    for (Inflight& f : inflight_ring_) {
      if (f.event != nullptr) cudaEventDestroy(f.event);
    }
    for (cudaEvent_t event : copied_) {
      if (event != nullptr) cudaEventDestroy(event);
    }
    if (jobs_ != nullptr) cudaFreeHost(jobs_);
    if (descs_ != nullptr) cudaFreeHost(descs_);
  }
}

bool GpuRxTask::quiesced() {
  if (detached_) return true;
  if (gpu_.make_current()) {
    // Both streams: after a failed launch the copy engines may still read source buffers.
    for (cudaStream_t s : {stream_, copy_stream_}) {
      if (s != nullptr && cudaStreamQuery(s) == cudaErrorNotReady) return false;
    }
  }
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

bool GpuRxTask::poll() {
  if (failed_) return false;
  if (tl_current_gpu != gpu_.ordinal()) {
    if (!gpu_.make_current()) {
      fail_attachment();
      return false;
    }
    tl_current_gpu = gpu_.ordinal();
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
    cudaError_t e = cudaEventQuery(f.event);
    if (e == cudaErrorNotReady) break;
    if (e != cudaSuccess) {
      fail_attachment();
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
  // The client's consumer index: never trusted beyond [what it released, what we produced].
  uint32_t c = control_ring_.load_consumer();
  if (c - released_ > produced_ - released_) {
    dataplane::bump(source_.counters.bad_index);
    fail_attachment();
    return false;
  }
  released_ = c;
  uint32_t room = ring_.info().size - (produced_ - released_);
  uint32_t n = std::min({avail, room, kMaxBurst});
  backlog_ = n < avail;
  if (n == 0) return false;

  uint32_t slot_in_flight = (head_ + inflight_) % kMaxInflight;
  GatherJob* jobs = jobs_ + size_t{slot_in_flight} * kMaxBurst;
  uint64_t bytes = 0;
  uint32_t slot_size = ring_.info().slot_size;
  bool unread = false;  // frames whose payload offset the GPU must find
  for (uint32_t i = 0; i < n; ++i) {
    const daqiri_rx_desc d = *source_ring_.slot<daqiri_rx_desc>(read_ + i);
    GatherJob& j = jobs[i];
    j.desc = d;
    j.slot = (produced_ + i) & (ring_.info().size - 1);
    // Header-data split: the frame's first bytes to its header slot, here on the CPU (host
    // to host, a cache line or two), the rest to the GPU. The header bytes are at the start of
    // the frame's buffer, or (DAQIRI_DESC_SPLIT from the RX poller) were split off by the NIC
    // and kept beside the source ring, the buffer holding only the rest.
    uint32_t header_size = ring_.info().header_size;
    bool presplit = headers_ && (d.flags & DAQIRI_DESC_SPLIT) != 0;
    uint32_t head = headers_ ? std::min(d.length, header_size) : 0;
    uint32_t skip = presplit ? 0 : head;  // buffer bytes before what the GPU gets
    // Our own descriptors, but a bad one must not make the GPU read outside a pool, nor the
    // CPU read a header out of GPU memory.
    bool fits = d.region < pool_device_.size() && d.offset <= pool_bytes_[d.region] &&
                uint64_t{skip} + (d.length - head) <= pool_bytes_[d.region] - d.offset &&
                !(head != 0 && !presplit && pool_on_device_[d.region]);
    uint32_t len = fits ? d.length : 0;
    if (len == 0) head = 0;
    if (head != 0) {
      const std::byte* from =
          presplit ? source_.head(read_ + i) : source_.pools()[d.region]->data() + d.offset;
      std::memcpy(headers_->data() + uint64_t{j.slot} * header_size, from, head);
      j.desc.flags |= DAQIRI_DESC_SPLIT;
      // The GPU ring gets the frame without its first bytes: find its payload here.
      if (d.payload_offset == core::kPayloadOffsetUnread) {
        j.desc.payload_offset = daqiri_udp_payload_offset(reinterpret_cast<const uint8_t*>(from),
                                                          presplit ? head : d.length);
      }
    }
    unread |= j.desc.payload_offset == core::kPayloadOffsetUnread;
    uint32_t copy = len - head;
    if (copy > slot_size) {
      copy = slot_size;
      j.desc.flags |= DAQIRI_DESC_TRUNCATED;
    }
    j.src = copy != 0 ? pool_device_[d.region] + d.offset + skip : 0;
    j.bytes = copy;
    room_[i] = copy != 0 ? pool_bytes_[d.region] - d.offset - skip : 0;
    j.desc.offset = ring_.slot_offset(produced_ + i);
    j.desc.length = head + copy;
    j.desc.region = 0;
    bytes += head + copy;
  }
  uint64_t launched_ns = dataplane::monotonic_ns();
  cudaError_t copied = cudaSuccess;
  if (copy_ == config::GpuCopy::kBatch) {
    copied = enqueue_batch(jobs, n, slot_in_flight);
  } else {
    bool runs = false;
    if (copy_ == config::GpuCopy::kDma) copied = enqueue_runs(jobs, n, runs);
    if (copied == cudaSuccess && runs)
      copied = cudaEventRecord(copied_[slot_in_flight], copy_stream_);
    if (copied == cudaSuccess) {
      copied = launch_gather(jobs_device_ + size_t{slot_in_flight} * kMaxBurst, n, ring_.base(),
                             ring_.descs(), stream_);
    }
    if (copied == cudaSuccess && runs)
      copied = cudaStreamWaitEvent(stream_, copied_[slot_in_flight], 0);
  }
  if (copied == cudaSuccess && unread) {
    copied = launch_find_payloads(ring_.base(), ring_.descs(), produced_, n, ring_.info().size - 1,
                                  stream_);
  }
  if (copied != cudaSuccess) {
    fail_attachment();
    return false;
  }
  // Same stream, after the kernel: a reader that sees the doorbell sees the data.
  if (gpu_.api().stream_write_value32(reinterpret_cast<CUstream>(stream_), ring_.doorbell(),
                                      produced_ + n,
                                      CU_STREAM_WRITE_VALUE_DEFAULT) != CUDA_SUCCESS) {
    fail_attachment();
    return false;
  }
  Inflight& f = inflight_ring_[slot_in_flight];
  if (cudaEventRecord(f.event, stream_) != cudaSuccess) {
    fail_attachment();
    return false;
  }
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

cudaError_t GpuRxTask::enqueue_runs(GatherJob* jobs, uint32_t n, bool& any) {
  uint32_t start = 0;
  while (start < n) {
    uint32_t end = start + 1;
    uint64_t width = jobs[start].bytes;
    uint64_t room = room_[start];
    uint64_t spitch = 0;
    uint64_t dpitch = 0;
    if (width != 0 && start + 1 < n && jobs[start + 1].src > jobs[start].src) {
      spitch = jobs[start + 1].src - jobs[start].src;
      dpitch = jobs[start + 1].desc.offset - jobs[start].desc.offset;
    }
    // Rows grow wider as the run takes longer frames; every row must still be readable to the
    // run's width (its own pool's end) and fit its source spacing. Slots of one ring are
    // wider than any frame copied into them.
    for (; end < n && spitch != 0; ++end) {
      const GatherJob& prev = jobs[end - 1];
      const GatherJob& next = jobs[end];
      uint64_t w = std::max<uint64_t>(width, next.bytes);
      uint64_t r = std::min(room, room_[end]);
      if (next.bytes == 0 || next.slot != prev.slot + 1 || next.src - prev.src != spitch ||
          w > spitch || w > r) {
        break;
      }
      width = w;
      room = r;
    }
    if (end - start >= kMinDmaRows && width >= kMinDmaWidth) {
      // NOLINTNEXTLINE(performance-no-int-to-ptr): a device (or UVA host) address
      const void* src = reinterpret_cast<const void*>(jobs[start].src);
      uint8_t* dst = ring_.base() + jobs[start].desc.offset;
      uint32_t rows = end - start;
      // Rows that nearly fill equal pitches go as one contiguous copy, gaps included (the copy
      // engines move those at their bulk rate; pitched copies of the same rows went slower).
      // The gaps are slot tails, beyond every frame's length.
      cudaError_t e = spitch == dpitch && (spitch - width) * 8 <= spitch
                          ? cudaMemcpyAsync(dst, src, (rows - 1) * spitch + width,
                                            cudaMemcpyDefault, copy_stream_)
                          : cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, rows,
                                              cudaMemcpyDefault, copy_stream_);
      if (e != cudaSuccess) return e;
      any = true;
      for (uint32_t i = start; i < end; ++i)
        jobs[i].bytes = 0;
      dataplane::bump(counters.dma_frames, end - start);
      dataplane::bump(counters.dma_copies, 1);
    }
    start = end;
  }
  return cudaSuccess;
}

cudaError_t GpuRxTask::enqueue_batch(const GatherJob* jobs, uint32_t n, uint32_t slot_in_flight) {
  daqiri_rx_desc* descs = descs_ + size_t{slot_in_flight} * kMaxBurst;
  void** dsts = copy_dsts_.data() + size_t{slot_in_flight} * kMaxCopies;
  const void** srcs = copy_srcs_.data() + size_t{slot_in_flight} * kMaxCopies;
  size_t* sizes = copy_sizes_.data() + size_t{slot_in_flight} * kMaxCopies;
  size_t k = 0;
  for (uint32_t i = 0; i < n; ++i) {
    descs[i] = jobs[i].desc;
    if (jobs[i].bytes == 0) continue;
    dsts[k] = ring_.base() + jobs[i].desc.offset;
    srcs[k] = reinterpret_cast<const void*>(jobs[i].src);  // NOLINT(performance-no-int-to-ptr)
    sizes[k] = jobs[i].bytes;
    ++k;
  }
  // The descriptors land in consecutive slots, in two pieces when the burst wraps the ring.
  uint32_t first = jobs[0].slot;
  uint32_t head = std::min(n, ring_.info().size - first);
  dsts[k] = ring_.descs() + first;
  srcs[k] = descs;
  sizes[k++] = sizeof(daqiri_rx_desc) * head;
  if (head < n) {
    dsts[k] = ring_.descs();
    srcs[k] = descs + head;
    sizes[k++] = sizeof(daqiri_rx_desc) * (n - head);
  }
  cudaMemcpyAttributes attr{};
  attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;  // staging is reused only after the event
  size_t attr_index = 0;
  return cudaMemcpyBatchAsync(dsts, srcs, sizes, k, &attr, &attr_index, 1, stream_);
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
