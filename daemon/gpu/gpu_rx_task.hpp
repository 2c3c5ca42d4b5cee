// The staged GPU copy engine for one GPU RX attachment. It is the consumer of a daemon-internal
// RX attachment on the flow (so fan-out, backpressure and the buffer ledger are the ones every
// client gets) and the producer of the client's GPU ring: per burst it launches the gather
// kernel (or, configured with gpu_copy: batch, one cudaMemcpyBatchAsync of the frames and their
// descriptors; with gpu_copy: dma, pitched copy-engine copies of runs of consecutive buffers
// before the kernel), then cuStreamWriteValue32 rings the doorbell on the same stream, then an
// event; when the event completes the host buffers go back to the pool and the host mirror of the
// producer index advances (waking a sleeping client). Runs on its GPU's poller.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <atomic>
#include <memory>
#include <optional>
#include <vector>

#include "config/config.hpp"
#include "daqiri/ring.hpp"
#include "dataplane/poller.hpp"
#include "dataplane/rx_attachment.hpp"
#include "gpu/device_ring.hpp"
#include "gpu/gather_kernel.hpp"
#include "gpu/gpu_device.hpp"
#include "gpu/gpu_engine.hpp"
#include "memory/shared_memory.hpp"

namespace daqiri::gpu {

class GpuRxTask final : public GpuRing {
 public:
  // `source` is the internal attachment it drains; `pool_device_addresses[r]` is where region r
  // of `source` is mapped for the GPU. Both must outlive the task.
  static Result<std::unique_ptr<GpuRxTask>> create(const GpuDevice& gpu,
                                                   dataplane::RxAttachment& source,
                                                   std::vector<uint64_t> pool_device_addresses,
                                                   uint32_t slots, uint32_t slot_size,
                                                   config::GpuCopy copy, uint32_t header_size = 0,
                                                   bool cuda_ipc = false);
  ~GpuRxTask() override;
  GpuRxTask(const GpuRxTask&) = delete;
  GpuRxTask& operator=(const GpuRxTask&) = delete;

  bool poll() override;
  [[nodiscard]] bool busy_poll() const override { return spin_ || inflight_ != 0 || backlog_; }
  // Asleep on the source's eventfd (nothing to copy, nothing in flight: the RX poller writes it
  // when frames come), it needs no timer; otherwise it may wait for its client to make room,
  // which only polls see.
  [[nodiscard]] bool needs_timed_wakeup() const override { return !sleeping_; }
  // Before it is polled: keep its poller spinning for as long as it is attached (the queue's
  // busy_poll), instead of sleeping on the source's eventfd when idle.
  void spin_while_attached() { spin_ = true; }

  // ---- control side ----
  [[nodiscard]] int gpu() const override { return gpu_.ordinal(); }
  [[nodiscard]] int wake_fd() const override { return source_.eventfd(); }
  [[nodiscard]] memory::SharedMemory& control() { return control_; }
  // Header-data split: the header slots clients map read-only; nullptr without.
  [[nodiscard]] const memory::SharedMemory* headers() const {
    return headers_ ? &*headers_ : nullptr;
  }
  [[nodiscard]] const DeviceRing& ring() const { return ring_; }
  [[nodiscard]] const abi::RingView& control_ring() const override { return control_ring_; }
  // Its streams idle or failed; a stream that does not answer must not hold up a control call.
  [[nodiscard]] bool quiesced() override;
  [[nodiscard]] Result<dataplane::AttachmentShare> share(uint64_t id) const override;
  [[nodiscard]] Result<std::string> ipc_handle() const override;

 private:
  // Frames per launch: what has arrived, up to this. Above the RX batch so that a backlog
  // becomes longer copy-engine runs (gpu_copy: dma at 1024 bytes doubled from 256 to 1024).
  static constexpr uint32_t kMaxBurst = 1024;
  static constexpr uint32_t kMaxInflight = 8;
  static constexpr uint32_t kMaxCopies = kMaxBurst + 2;  // frames, and descriptors in two pieces
  struct Inflight {
    cudaEvent_t event = nullptr;
    uint32_t source_end = 0;  // source consumer index once this copy is done
    uint32_t ring_end = 0;    // GPU ring producer index once this copy is done
    uint32_t packets = 0;
    uint64_t bytes = 0;
    uint64_t launched_ns = 0;
  };

  GpuRxTask(const GpuDevice& gpu, dataplane::RxAttachment& source,
            std::vector<uint64_t> pool_device_addresses, DeviceRing ring,
            memory::SharedMemory control, abi::RingView control_ring, UniqueFd client_eventfd,
            config::GpuCopy copy);
  Result<> init_cuda();
  bool retire();
  bool launch();
  // gpu_copy: batch: the frames of jobs [0, n) and their descriptors in one batch of copies.
  cudaError_t enqueue_batch(const GatherJob* jobs, uint32_t n, uint32_t slot_in_flight);
  // gpu_copy: dma: one copy per run of frames in equally spaced buffers bound for consecutive
  // slots, on copy_stream_; their jobs are left with no bytes (the kernel writes their
  // descriptors). Sets `any` when it enqueued a copy.
  cudaError_t enqueue_runs(GatherJob* jobs, uint32_t n, bool& any);
  void fail_attachment();

  const GpuDevice& gpu_;
  dataplane::RxAttachment& source_;
  abi::RingView source_ring_;
  std::vector<uint64_t> pool_device_;
  std::vector<uint64_t> pool_bytes_;
  bool spin_ = false;
  std::vector<bool> pool_on_device_;  // gpudirect pools: no header is read there by the CPU
  DeviceRing ring_;
  memory::SharedMemory control_;
  std::optional<memory::SharedMemory>
      headers_;  // header-data split: ring().info().header_size each
  abi::RingView control_ring_;
  UniqueFd client_eventfd_;

  cudaStream_t stream_ = nullptr;
  // gpu_copy: dma: the copy engines' stream, so that they move one burst while the kernel
  // writes the previous one's descriptors; the doorbell waits for both.
  cudaStream_t copy_stream_ = nullptr;
  std::array<cudaEvent_t, kMaxInflight> copied_{};
  GatherJob* jobs_ = nullptr;         // pinned, mapped: kMaxInflight * kMaxBurst
  GatherJob* jobs_device_ = nullptr;  // the same, as the GPU addresses it
  config::GpuCopy copy_;
  daqiri_rx_desc* descs_ = nullptr;  // batch: pinned descriptor staging, kMaxInflight * kMaxBurst
  std::vector<void*> copy_dsts_;     // batch: kMaxInflight * kMaxCopies each
  std::vector<const void*> copy_srcs_;
  std::vector<size_t> copy_sizes_;
  std::array<uint64_t, kMaxBurst>
      room_{};  // dma: readable bytes from each job's src to its pool's end
  std::array<Inflight, kMaxInflight> inflight_ring_{};
  uint32_t head_ = 0;      // oldest copy in flight
  uint32_t inflight_ = 0;  // copies in flight
  uint32_t read_ = 0;      // next source descriptor to copy
  uint32_t produced_ = 0;  // GPU ring producer index (doorbell) as launched
  uint32_t released_ = 0;  // client consumer index, validated
  bool backlog_ = false;   // source descriptors waiting for GPU ring room
  bool sleeping_ = false;  // NEED_WAKEUP set on the source ring
  bool failed_ = false;
  bool detached_ = false;  // control side: quiesced() said so to the client
};

}  // namespace daqiri::gpu
