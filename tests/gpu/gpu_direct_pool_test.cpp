// GPUDirect pools without the NIC: a flow pool in RDMA-capable GPU memory, exported as a
// dma-buf (what ibv_reg_dmabuf_mr takes), frames written into it as a NIC would, and the gpu
// engine copying them device to device into a GPU ring. The NIC's half (an RDMA device that
// DMAs into the dma-buf) needs hardware these machines lack; docs/rdma.md says so. Skips, saying
// why, on machines without a GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <span>
#include <vector>

#include "core/packet_fields.hpp"
#include "daqiri/gpu_payload_offsets.hpp"
#include "dataplane/rx_attachment.hpp"
#include "engine_driver.hpp"
#include "gpu/device_pool_memory.hpp"
#include "gpu/gpu_rx_task.hpp"

namespace daqiri {
namespace {

constexpr uint32_t kBufSize = 2048;
constexpr uint32_t kBufs = 64;
constexpr uint32_t kFrames = 16;

// Headers on three of every four frames: plain UDP, VLAN-tagged UDP with IP options, TCP.
std::vector<uint8_t> frame(uint32_t i) {
  std::vector<uint8_t> f(100 + i * 97);
  for (size_t k = 0; k < f.size(); ++k)
    f[k] = static_cast<uint8_t>(i * 31 + k);
  uint32_t at = 12;
  if (i % 4 == 1) {
    f[12] = 0x81, f[13] = 0x00;
    at = 16;
  }
  if (i % 4 != 3) {
    f[at] = 0x08, f[at + 1] = 0x00;
    uint32_t ip = at + 2;
    f[ip] = static_cast<uint8_t>(0x40 | (i % 4 == 1 ? 6 : 5));
    f[ip + 6] = f[ip + 7] = 0;  // not a later fragment
    f[ip + 9] = i % 4 == 2 ? core::PacketFields::kTcp : core::PacketFields::kUdp;
  }
  return f;
}

// One frame keeps the payload offset its producer gave it; the others ask the GPU for it.
constexpr uint32_t kOffsetGiven = 12;

TEST(GpuDirectPool, FramesInGpuMemoryReachAGpuRingDeviceToDevice) {
  auto gpu = gpu::GpuDevice::open(0);
  if (!gpu) GTEST_SKIP() << "no GPU: " << gpu.error().message;
  auto mem = gpu::DevicePoolMemory::create(**gpu, uint64_t{kBufs} * kBufSize);
  ASSERT_TRUE(mem) << mem.error().message;
  // The dma-buf spans the whole allocation (dma-buf fds report their size through lseek).
  EXPECT_GE(::lseek(mem->dmabuf_fd, 0, SEEK_END), off_t{kBufs} * kBufSize);
  auto made = memory::BufferPool::over_device(*mem, kBufSize, kBufs);
  ASSERT_TRUE(made) << made.error().message;
  memory::BufferPool& pool = *made;
  ASSERT_TRUE(pool.on_device());
  EXPECT_FALSE(memory::BufferPool::over_device(*mem, kBufSize, 1u << 20))
      << "a pool larger than its memory";

  ASSERT_TRUE((*gpu)->make_current());
  std::vector<uint32_t> bufs(kFrames);
  ASSERT_EQ(pool.alloc(bufs.data(), kFrames), kFrames);
  auto att = dataplane::RxAttachment::create(1, kBufs, dataplane::Backpressure::kDropNew, {&pool});
  ASSERT_TRUE(att) << att.error().message;
  for (uint32_t i = 0; i < kFrames; ++i) {
    auto f = frame(i);
    ASSERT_EQ(cudaMemcpy(pool.buffer(bufs[i]), f.data(), f.size(), cudaMemcpyHostToDevice),
              cudaSuccess);
    daqiri_rx_desc d{};
    d.offset = pool.offset(bufs[i]);
    d.length = static_cast<uint32_t>(f.size());
    d.flow_id = 1;
    d.stream = static_cast<uint16_t>(i);
    d.payload_offset = i == kOffsetGiven ? 0 : core::kPayloadOffsetUnread;
    (*att)->push(d, bufs[i], &pool);
  }
  (*att)->publish();

  auto task = gpu::GpuRxTask::create(**gpu, **att, {reinterpret_cast<uintptr_t>(pool.data())},
                                     kBufs, kBufSize);
  ASSERT_TRUE(task) << task.error().message;
  ASSERT_EQ(test::drive_until_produced(**task, kFrames), kFrames);

  const gpu::DeviceRing& ring = (*task)->ring();
  std::vector<daqiri_rx_desc> descs(kFrames);
  ASSERT_EQ(cudaMemcpy(descs.data(), ring.descs(), sizeof(daqiri_rx_desc) * kFrames,
                       cudaMemcpyDeviceToHost),
            cudaSuccess);
  // The daemon reads nothing in GPU memory: the client's helper finds the payloads there.
  for (uint32_t i = 0; i < kFrames; ++i) {
    EXPECT_EQ(descs[i].payload_offset, i == kOffsetGiven ? 0 : DAQIRI_PAYLOAD_UNREAD)
        << "frame " << i;
  }
  GpuRingView view{ring.base(),          nullptr, ring.descs(), nullptr, ring.info().size - 1,
                   ring.info().slot_size};
  ASSERT_EQ(resolve_payload_offsets(view, 0, kFrames, nullptr), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(descs.data(), ring.descs(), sizeof(daqiri_rx_desc) * kFrames,
                       cudaMemcpyDeviceToHost),
            cudaSuccess);
  for (uint32_t i = 0; i < kFrames; ++i) {
    auto want = frame(i);
    EXPECT_EQ(descs[i].length, want.size());
    EXPECT_EQ(descs[i].stream, i);
    std::vector<uint8_t> got(want.size());
    ASSERT_EQ(
        cudaMemcpy(got.data(), ring.base() + descs[i].offset, got.size(), cudaMemcpyDeviceToHost),
        cudaSuccess);
    EXPECT_EQ(got, want) << "frame " << i;
    // Found on the GPU as the daemon's software steering finds it on the host; one the
    // producer gave stays.
    auto host = core::PacketFields::parse(reinterpret_cast<const std::byte*>(want.data()),
                                          static_cast<uint32_t>(want.size()));
    EXPECT_EQ(host.payload_offset, i % 4 == 0 ? 42 : i % 4 == 1 ? 50 : 0) << "frame " << i;
    EXPECT_EQ(descs[i].payload_offset, i == kOffsetGiven ? 0 : host.payload_offset)
        << "frame " << i;
  }
  // The pool's buffers come back once the copies are done.
  ASSERT_TRUE((*att)->reclaim());
  EXPECT_EQ(pool.available(), kBufs);
}

// Header-data split by the NIC into a gpudirect pool (rte_eth_rxseg_split on mlx5): the RX
// poller keeps each frame's first bytes beside the source ring and lends the buffer holding
// the rest; a frame that fit in its header lends none. The engine puts the header bytes in the
// ring's header slots and the rest in its GPU slots: each frame comes back whole from the two,
// and every buffer (none for the header-only frame) returns.
TEST(GpuDirectPool, FramesTheNicSplitLineUpInHeaderAndGpuSlots) {
  constexpr uint32_t kSplit = 64;
  auto gpu = gpu::GpuDevice::open(0);
  if (!gpu) GTEST_SKIP() << "no GPU: " << gpu.error().message;
  auto mem = gpu::DevicePoolMemory::create(**gpu, uint64_t{kBufs} * kBufSize);
  ASSERT_TRUE(mem) << mem.error().message;
  auto made = memory::BufferPool::over_device(*mem, kBufSize, kBufs);
  ASSERT_TRUE(made) << made.error().message;
  memory::BufferPool& pool = *made;
  ASSERT_TRUE((*gpu)->make_current());
  std::vector<uint32_t> bufs(kFrames);
  ASSERT_EQ(pool.alloc(bufs.data(), kFrames), kFrames);
  auto att = dataplane::RxAttachment::create(1, kBufs, dataplane::Backpressure::kDropNew, {&pool});
  ASSERT_TRUE(att) << att.error().message;
  auto task = gpu::GpuRxTask::create(**gpu, **att, {reinterpret_cast<uintptr_t>(pool.data())},
                                     kBufs, kBufSize, kSplit);
  ASSERT_TRUE(task) << task.error().message;
  std::vector<std::vector<uint8_t>> frames;
  for (uint32_t i = 0; i <= kFrames; ++i) {
    // Frame kFrames: 40 bytes, all of it in the header.
    auto f = i < kFrames ? frame(i) : std::vector<uint8_t>(40, uint8_t{0xa5});
    uint32_t head = std::min<uint32_t>(kSplit, f.size());
    bool lends = i < kFrames;
    if (lends) {
      ASSERT_EQ(cudaMemcpy(pool.buffer(bufs[i]), f.data() + head, f.size() - head,
                           cudaMemcpyHostToDevice),
                cudaSuccess);
    }
    daqiri_rx_desc d{};
    d.offset = lends ? pool.offset(bufs[i]) : 0;
    d.length = static_cast<uint32_t>(f.size());
    d.flags = DAQIRI_DESC_SPLIT;
    d.stream = static_cast<uint16_t>(i);
    (*att)->push(d, lends ? bufs[i] : dataplane::RxAttachment::kNoBuffer, &pool,
                 std::as_bytes(std::span(f.data(), head)));
    frames.push_back(std::move(f));
  }
  (*att)->publish();
  ASSERT_EQ(test::drive_until_produced(**task, kFrames + 1), kFrames + 1);
  const gpu::DeviceRing& ring = (*task)->ring();
  ASSERT_NE((*task)->headers(), nullptr);
  const std::byte* header_slots = (*task)->headers()->data();
  std::vector<daqiri_rx_desc> descs(kFrames + 1);
  ASSERT_EQ(cudaMemcpy(descs.data(), ring.descs(), sizeof(daqiri_rx_desc) * descs.size(),
                       cudaMemcpyDeviceToHost),
            cudaSuccess);
  for (uint32_t i = 0; i <= kFrames; ++i) {
    const auto& want = frames[i];
    ASSERT_EQ(descs[i].length, want.size()) << "frame " << i;
    EXPECT_EQ(descs[i].stream, i);
    EXPECT_NE(descs[i].flags & DAQIRI_DESC_SPLIT, 0) << "frame " << i;
    uint32_t head = std::min<uint32_t>(kSplit, want.size());
    std::vector<uint8_t> got(want.size());
    std::memcpy(got.data(), header_slots + size_t{i} * kSplit, head);
    if (want.size() > head) {
      ASSERT_EQ(cudaMemcpy(got.data() + head, ring.base() + descs[i].offset, want.size() - head,
                           cudaMemcpyDeviceToHost),
                cudaSuccess);
    }
    EXPECT_EQ(got, want) << "frame " << i;
  }
  ASSERT_TRUE((*att)->reclaim());
  EXPECT_EQ(pool.available(), kBufs);
}

}  // namespace
}  // namespace daqiri
