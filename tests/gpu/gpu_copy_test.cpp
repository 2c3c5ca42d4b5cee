// The gpu engine on a pinned host pool, without a daemon: frames in runs of consecutive
// buffers, in scattered buffers, across the GPU ring's end, short and long, byte-exact into the
// ring, and the copies it chose for them: runs straight from the pool, the rest packed on the
// CPU first. Skips, saying why, on machines without a GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <memory>
#include <optional>
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

// The engine without a daemon: a pinned pool of `bufs` buffers of kBufSize, every one taken by
// the test (in order: a new pool hands them out lowest first), an attachment of `bufs` slots
// feeding the engine, and a GPU ring of `slots` slots.
class GpuCopy : public ::testing::Test {
 protected:
  void make_engine(const char* name, uint32_t bufs, uint32_t slots) {
    auto gpu = gpu::GpuDevice::open(0);
    if (!gpu) GTEST_SKIP() << "no GPU: " << gpu.error().message;
    gpu_ = std::move(*gpu);
    ASSERT_TRUE(gpu_->make_current());
    auto pool = memory::BufferPool::create(name, kBufSize, bufs, false);
    ASSERT_TRUE(pool) << pool.error().message;
    pool_.emplace(std::move(*pool));
    auto reg = gpu::HostRegistration::create(pool_->data(), pool_->mapped_bytes());
    ASSERT_TRUE(reg) << reg.error().message;
    reg_.emplace(std::move(*reg));
    std::vector<uint32_t> all(bufs);
    ASSERT_EQ(pool_->alloc(all.data(), bufs), bufs);
    auto att =
        dataplane::RxAttachment::create(1, bufs, dataplane::Backpressure::kDropNew, {&*pool_});
    ASSERT_TRUE(att) << att.error().message;
    att_ = std::move(*att);
    auto task = gpu::GpuRxTask::create(*gpu_, *att_, {reg_->device_address()}, slots, kBufSize);
    ASSERT_TRUE(task) << task.error().message;
    task_ = std::move(*task);
  }
  [[nodiscard]] bool made() const { return task_ != nullptr; }

  // Destroyed from the last: the engine before what it reads.
  std::unique_ptr<gpu::GpuDevice> gpu_;
  std::optional<memory::BufferPool> pool_;
  std::optional<gpu::HostRegistration> reg_;
  std::unique_ptr<dataplane::RxAttachment> att_;
  std::unique_ptr<gpu::GpuRxTask> task_;
};

TEST_F(GpuCopy, FramesFromPinnedHostBuffersReachTheRingByteExact) {
  make_engine("gpu-copy-test", kBufs, kSlots);
  if (!made()) return;
  memory::BufferPool& pool = *pool_;
  const gpu::DeviceRing& ring = task_->ring();

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
      att_->push(d, g.buffers[i], &pool);
    }
    att_->publish();
    ASSERT_EQ(test::drive_until_produced(*task_, frame), frame);
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
    task_->control_ring().publish_consumer(frame);  // the client is done with them
  }
  // The run's first frame (300 bytes) is too narrow for a worthwhile direct row on its own but
  // the run is as wide as its widest; the scattered group is packed, its 64-byte frame too.
  EXPECT_EQ(task_->counters.direct_frames.load(), 30u) << "all but the scattered group";
  EXPECT_EQ(task_->counters.staged_frames.load(), 8u) << "the scattered group";
  EXPECT_EQ(task_->counters.copies.load(), 6u)
      << "one run, two at each ring end, one packed stretch";
  EXPECT_EQ(task_->counters.packets.load(), frame);
  // Every buffer the frames were in comes back once the copies are done (the test holds the
  // other kBufs - frame).
  ASSERT_TRUE(att_->reclaim());
  EXPECT_EQ(pool.available(), frame);
}

// Each launch costs the copy engines a descriptor copy, a doorbell and an event, so a launch
// takes up to a quarter of the ring: frames in adjacent buffers arriving at once on a ring of
// 16384 slots go in launches of 4096, one copy each, byte-exact.
TEST_F(GpuCopy, ALaunchTakesAQuarterOfTheRingInOneCopy) {
  constexpr uint32_t kRing = 16384;
  constexpr uint32_t kFrames = kRing / 2;
  constexpr uint32_t kLength = 1500;
  make_engine("gpu-copy-launch", kRing, kRing);
  if (!made()) return;
  memory::BufferPool& pool = *pool_;
  for (uint32_t f = 0; f < kFrames; ++f) {
    std::byte* buf = pool.buffer(f);
    for (uint32_t k = 0; k < kLength; ++k)
      buf[k] = std::byte{byte_of(f, k)};
    daqiri_rx_desc d{};
    d.offset = pool.offset(f);
    d.length = kLength;
    d.flow_id = 1;
    att_->push(d, f, &pool);
  }
  att_->publish();
  ASSERT_EQ(test::drive_until_produced(*task_, kFrames), kFrames);
  EXPECT_EQ(task_->counters.copies.load(), kFrames / (kRing / 4));
  EXPECT_EQ(task_->counters.direct_frames.load(), kFrames);
  const gpu::DeviceRing& ring = task_->ring();
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
