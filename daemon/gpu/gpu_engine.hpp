// The GPU engine as the data plane drives it, free of CUDA headers: GPU memory for gpudirect
// pools, and GPU rings that copy an RX attachment's frames into GPU memory. registry.cpp makes
// one in a daqirid built with CUDA (gpu/cuda_gpu_engine.hpp); without, there is none.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "daqiri/ring.hpp"
#include "dataplane/attachment_share.hpp"
#include "dataplane/latency_histogram.hpp"
#include "dataplane/poller.hpp"
#include "dataplane/rx_attachment.hpp"
#include "dataplane/tx_attachment.hpp"
#include "memory/buffer_pool.hpp"
#include "memory/device_memory.hpp"

namespace daqiri::gpu {

// A GPU this host has.
struct GpuInfo {
  uint32_t index = 0;
  std::string name;
  uint64_t memory_bytes = 0;
  std::string pci_bus_id;
};

// Frames whose copy into the GPU ring completed (single writer: the ring's poller).
struct GpuCopyCounters {
  std::atomic<uint64_t> packets{0};
  std::atomic<uint64_t> bytes{0};
  // Frames copied straight from their buffers, frames packed on the CPU first, and the
  // copy-engine copies of frames (descriptors not counted).
  std::atomic<uint64_t> direct_frames{0};
  std::atomic<uint64_t> staged_frames{0};
  std::atomic<uint64_t> copies{0};
  // TX: times the engine woke the queue's sleeping TX poller (its client's kicks, of the
  // engine's poller, are the attachment's).
  std::atomic<uint64_t> kicks{0};
  // Per burst: from the copy's launch to the engine seeing its event complete (host clock).
  dataplane::LatencyHistogram latency;
};

// One GPU attachment's copy task, on its GPU's poller: RX drains a daemon-internal RX
// attachment into the client's GPU ring; TX copies the client's frames out of GPU memory into
// a daemon-internal TX attachment.
class GpuRing : public dataplane::PollTask {
 public:
  [[nodiscard]] virtual int gpu() const = 0;  // the CUDA ordinal
  // Wakes the task's sleeping poller: RX, frames came to the source attachment; TX, the
  // internal attachment completed frames.
  [[nodiscard]] virtual int wake_fd() const = 0;
  // TX: the client's kick, a doorbell its poller watches; -1 for RX (the client kicks nothing).
  [[nodiscard]] virtual int kick_fd() const { return -1; }
  // After the task left its poller (and the poller came round past that): whether no copy is
  // in flight any more. Asks, never waits; the first time it is, the client hears the ring is
  // detached, and the source's buffers are the RX poller's to take back.
  [[nodiscard]] virtual bool quiesced() = 0;
  // The client's side of the ring (producer mirror, consumer index): occupancy.
  [[nodiscard]] virtual const abi::RingView& control_ring() const = 0;
  // What the client maps: the control block, its eventfd, the ring (a VMM fd, or for a legacy
  // IPC ring nothing: ipc_handle() goes over gRPC) and, with header-data split, header slots.
  [[nodiscard]] virtual Result<dataplane::AttachmentShare> share(uint64_t id) const = 0;
  // A ring made with cuda_ipc: its cudaIpcMemHandle_t bytes; NOT_FOUND otherwise.
  [[nodiscard]] virtual Result<std::string> ipc_handle() const = 0;
  GpuCopyCounters counters;
};

class GpuEngine {
 public:
  virtual ~GpuEngine() = default;
  // GPU memory for a gpudirect region's pools, on the region's GPU.
  virtual Result<memory::DeviceMemory> device_memory(const config::MemoryRegionConfig& region) = 0;
  // A ring of `slots` on the region's GPU fed by `source`, whose host pools it pins for the GPU
  // on first use. `header_size` > 0: header-data split (the first header_size bytes of each
  // frame to host header slots, the rest to the ring). `busy_poll`: its poller spins while it
  // has the ring.
  virtual Result<std::unique_ptr<GpuRing>> create_ring(dataplane::RxAttachment& source,
                                                       const config::MemoryRegionConfig& region,
                                                       uint32_t slots, uint32_t header_size,
                                                       bool cuda_ipc, bool busy_poll) = 0;
  // GPU buffers for a GPU TX client: `count` of the region's buf_size, on its GPU; each frame's
  // first `header_size` bytes (header-data split) are in the client's host buffers instead.
  // `nic_reads`: memory the NIC may read payloads from in place (a gpudirect region).
  virtual Result<dataplane::GpuTxBuffers> tx_buffers(const config::MemoryRegionConfig& region,
                                                     uint32_t count, uint32_t header_size,
                                                     bool nic_reads) = 0;
  // A GPU TX attachment's copy task: `client` is the ring its client submits on, with its GPU
  // buffers (tx_buffers), `internal` the attachment the TX queue sends from, whole frames in
  // host buffers paired with the client's one to one. The task owns `client` and pins
  // `internal`'s buffers.
  virtual Result<std::unique_ptr<GpuRing>> create_tx(
      std::unique_ptr<dataplane::TxAttachment> client, dataplane::TxAttachment& internal,
      const config::MemoryRegionConfig& region, bool busy_poll) = 0;
  // `pool` is about to be freed (its flow is gone): unpinned, if it was. Null: every pool.
  virtual void forget_pool(const memory::BufferPool* pool) = 0;
  // The GPUs this host has.
  [[nodiscard]] virtual std::vector<GpuInfo> devices() const = 0;
};

}  // namespace daqiri::gpu
