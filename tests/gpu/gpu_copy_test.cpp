// The gpu engine on a pinned host pool, without a daemon: frames in runs of consecutive
// buffers, in scattered buffers, across the GPU ring's end, short and long, byte-exact into the
// ring, and the copies it chose for them: runs straight from the pool, the rest packed on the
// CPU first. Skips, saying why, on machines without a GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <vector>

#include "dataplane/rx_attachment.hpp"
#include "engine_driver.hpp"
#include "gpu/gpu_rx_task.hpp"
#include "gpu/host_registration.hpp"

namespace daqiri {
namespace {

constexpr uint32_t kBufSize = 2048;
constexpr uint32_t kBufs = 64;
constexpr uint32_t kSlots = 16;

struct Group {
  std::vector<uint32_t> buffers;  // pool buffers, in ring order
  std::vector<uint32_t> lengths;
};

// 12 frames in consecutive buffers (one run; lengths grow, the first shorter than a worthwhile
// row); 10 in consecutive buffers that reach the ring's end after 4 (two runs); 8 in buffers
// taken backwards and one 64-byte frame (no runs); 8 nearly filling consecutive buffers (rows
// copied as one contiguous piece, gaps included), reaching the ring's end after 2 (two runs).
std::vector<Group> groups() {
  Group run{{}, {}};
  for (uint32_t i = 0; i < 12; ++i) {
    run.buffers.push_back(i);
    run.lengths.push_back(300 + 120 * i);
  }
  Group wrap{{}, {}};
  for (uint32_t i = 0; i < 10; ++i) {
    wrap.buffers.push_back(20 + i);
    wrap.lengths.push_back(i == 5 ? 60 : 1500 - 7 * i);
  }
  Group scattered{{}, {}};
  for (uint32_t i = 0; i < 8; ++i) {
    scattered.buffers.push_back(60 - 2 * i);
    scattered.lengths.push_back(i == 3 ? 64 : 1000 + i);
  }
  Group full{{}, {}};
  for (uint32_t i = 0; i < 8; ++i) {
    full.buffers.push_back(30 + i);
    full.lengths.push_back(1800 + 30 * i);
  }
  return {run, wrap, scattered, full};
}

uint8_t byte_of(uint32_t frame, uint32_t k) {
  return static_cast<uint8_t>(frame * 29 + k * 7 + (k >> 8));
}

TEST(GpuCopy, FramesFromPinnedHostBuffersReachTheRingByteExact) {
  auto gpu = gpu::GpuDevice::open(0);
  if (!gpu) GTEST_SKIP() << "no GPU: " << gpu.error().message;
  ASSERT_TRUE((*gpu)->make_current());
  auto made = memory::BufferPool::create("gpu-copy-test", kBufSize, kBufs, false);
  ASSERT_TRUE(made) << made.error().message;
  memory::BufferPool& pool = *made;
  auto reg = gpu::HostRegistration::create(pool.data(), pool.mapped_bytes());
  ASSERT_TRUE(reg) << reg.error().message;
  std::vector<uint32_t> all(kBufs);
  ASSERT_EQ(pool.alloc(all.data(), kBufs), kBufs);
  auto att = dataplane::RxAttachment::create(1, kBufs, dataplane::Backpressure::kDropNew, {&pool});
  ASSERT_TRUE(att) << att.error().message;
  auto task = gpu::GpuRxTask::create(**gpu, **att, {reg->device_address()}, kSlots, kBufSize);
  ASSERT_TRUE(task) << task.error().message;
  const gpu::DeviceRing& ring = (*task)->ring();

  uint32_t frame = 0;
  for (const Group& g : groups()) {
    uint32_t first = frame;
    for (size_t i = 0; i < g.buffers.size(); ++i, ++frame) {
      std::byte* buf = pool.buffer(g.buffers[i]);
      for (uint32_t k = 0; k < kBufSize; ++k)  // the whole buffer: a copy too long would show
        buf[k] = std::byte{byte_of(frame, k)};
      daqiri_rx_desc d{};
      d.offset = pool.offset(g.buffers[i]);
      d.length = g.lengths[i];
      d.flow_id = 1;
      d.stream = static_cast<uint16_t>(frame);
      (*att)->push(d, g.buffers[i], &pool);
    }
    (*att)->publish();
    ASSERT_EQ(test::drive_until_produced(**task, frame), frame);
    for (uint32_t f = first; f < frame; ++f) {
      SCOPED_TRACE("frame " + std::to_string(f));
      daqiri_rx_desc d{};
      ASSERT_EQ(cudaMemcpy(&d, ring.descs() + (f % kSlots), sizeof d, cudaMemcpyDeviceToHost),
                cudaSuccess);
      uint32_t want_len = g.lengths[f - first];
      EXPECT_EQ(d.stream, f);
      EXPECT_EQ(d.length, want_len);
      EXPECT_EQ(d.offset, ring.slot_offset(f));
      std::vector<uint8_t> got(want_len);
      ASSERT_EQ(cudaMemcpy(got.data(), ring.base() + d.offset, got.size(), cudaMemcpyDeviceToHost),
                cudaSuccess);
      std::vector<uint8_t> want(want_len);
      for (uint32_t k = 0; k < want_len; ++k)
        want[k] = byte_of(f, k);
      EXPECT_EQ(got, want);
    }
    (*task)->control_ring().publish_consumer(frame);  // the client is done with them
  }
  // The run's first frame (300 bytes) is too narrow for a worthwhile direct row on its own but
  // the run is as wide as its widest; the scattered group is packed, its 64-byte frame too.
  EXPECT_EQ((*task)->counters.direct_frames.load(), 30u) << "all but the scattered group";
  EXPECT_EQ((*task)->counters.staged_frames.load(), 8u) << "the scattered group";
  EXPECT_EQ((*task)->counters.copies.load(), 6u)
      << "one run, two at each ring end, one packed stretch";
  EXPECT_EQ((*task)->counters.packets.load(), frame);
  // Every buffer the frames were in comes back once the copies are done (the test holds the
  // other kBufs - frame).
  ASSERT_TRUE((*att)->reclaim());
  EXPECT_EQ(pool.available(), frame);
}

// Each launch costs the copy engines a descriptor copy, a doorbell and an event, so a launch
// takes up to a quarter of the ring: frames in adjacent buffers arriving at once on a ring of
// 16384 slots go in launches of 4096, one copy each, byte-exact.
TEST(GpuCopy, ALaunchTakesAQuarterOfTheRingInOneCopy) {
  constexpr uint32_t kRing = 16384;
  constexpr uint32_t kFrames = kRing / 2;
  constexpr uint32_t kLength = 1500;
  auto gpu = gpu::GpuDevice::open(0);
  if (!gpu) GTEST_SKIP() << "no GPU: " << gpu.error().message;
  ASSERT_TRUE((*gpu)->make_current());
  auto made = memory::BufferPool::create("gpu-copy-launch", kBufSize, kRing, false);
  ASSERT_TRUE(made) << made.error().message;
  memory::BufferPool& pool = *made;
  auto reg = gpu::HostRegistration::create(pool.data(), pool.mapped_bytes());
  ASSERT_TRUE(reg) << reg.error().message;
  std::vector<uint32_t> bufs(kFrames);
  ASSERT_EQ(pool.alloc(bufs.data(), kFrames), kFrames);
  auto att = dataplane::RxAttachment::create(1, kRing, dataplane::Backpressure::kDropNew, {&pool});
  ASSERT_TRUE(att) << att.error().message;
  auto task = gpu::GpuRxTask::create(**gpu, **att, {reg->device_address()}, kRing, kBufSize);
  ASSERT_TRUE(task) << task.error().message;
  for (uint32_t f = 0; f < kFrames; ++f) {
    ASSERT_EQ(bufs[f], f) << "a new pool hands out its buffers in order";
    std::byte* buf = pool.buffer(f);
    for (uint32_t k = 0; k < kLength; ++k)
      buf[k] = std::byte{byte_of(f, k)};
    daqiri_rx_desc d{};
    d.offset = pool.offset(f);
    d.length = kLength;
    d.flow_id = 1;
    (*att)->push(d, f, &pool);
  }
  (*att)->publish();
  ASSERT_EQ(test::drive_until_produced(**task, kFrames), kFrames);
  EXPECT_EQ((*task)->counters.copies.load(), kFrames / (kRing / 4));
  EXPECT_EQ((*task)->counters.direct_frames.load(), kFrames);
  const gpu::DeviceRing& ring = (*task)->ring();
  std::vector<uint8_t> got(ring.slot_offset(kFrames - 1) + kLength);
  ASSERT_EQ(cudaMemcpy(got.data(), ring.base(), got.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  uint32_t wrong = 0;
  for (uint32_t f = 0; f < kFrames; ++f) {
    const uint8_t* slot = got.data() + ring.slot_offset(f);
    for (uint32_t k = 0; k < kLength; ++k)
      wrong += slot[k] != byte_of(f, k);
  }
  EXPECT_EQ(wrong, 0u);
}

}  // namespace
}  // namespace daqiri
