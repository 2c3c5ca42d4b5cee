#include "gpu/copy_plan.hpp"

#include <gtest/gtest.h>

#include <array>
#include <vector>

namespace daqiri::gpu {
namespace {

constexpr uint32_t kBuf = 2048;
constexpr uint64_t kPool = 0x10000000;  // where the pool is for the GPU
constexpr uint64_t kPoolBytes = uint64_t{kBuf} * 64;
const std::byte* const kHost = reinterpret_cast<const std::byte*>(uintptr_t{0x7f0000000000});

// Frame of `bytes` in buffer `b` of a pool in host memory (or, `gpu`, in GPU memory).
FrameSource in_buffer(uint32_t b, uint32_t bytes, bool gpu = false) {
  uint64_t off = uint64_t{b} * kBuf;
  return {kPool + off, gpu ? nullptr : kHost + off, kPoolBytes - off, bytes};
}

struct Planned {
  CopyPlan plan;
  std::vector<CopyOp> ops;
};

Planned plan(const std::vector<FrameSource>& frames, uint32_t first_counter = 0,
             uint32_t ring_size = 64, uint64_t staging = 1 << 20) {
  std::vector<CopyOp> ops(frames.size());
  CopyPlan p = plan_copies(frames, {first_counter, ring_size, kBuf}, staging, ops);
  ops.resize(p.ops);
  return {p, ops};
}

TEST(CopyPlan, ConsecutiveBuffersGoAsOneDirectCopy) {
  std::vector<FrameSource> f;
  for (uint32_t i = 0; i < 8; ++i)
    f.push_back(in_buffer(10 + i, 1000 + 10 * i));
  auto p = plan(f);
  EXPECT_EQ(p.plan.frames, 8u);
  EXPECT_EQ(p.plan.staged_bytes, 0u);
  ASSERT_EQ(p.ops.size(), 1u);
  const CopyOp& op = p.ops[0];
  EXPECT_FALSE(op.staged);
  EXPECT_EQ(op.first, 0u);
  EXPECT_EQ(op.rows, 8u);
  EXPECT_EQ(op.width, 1070u) << "as wide as the widest row";
  EXPECT_EQ(op.spitch, kBuf);
  EXPECT_EQ(op.src, kPool + 10 * kBuf);
  EXPECT_FALSE(op.contiguous) << "gaps of about half a slot: pitched";
}

TEST(CopyPlan, RowsThatNearlyFillTheirSlotsGoAsOneContiguousCopy) {
  std::vector<FrameSource> f;
  for (uint32_t i = 0; i < 4; ++i)
    f.push_back(in_buffer(i, 1900));
  auto p = plan(f);
  ASSERT_EQ(p.ops.size(), 1u);
  EXPECT_TRUE(p.ops[0].contiguous);
  EXPECT_EQ(p.ops[0].width, 1900u);
}

TEST(CopyPlan, NarrowFramesArePackedOnTheCpuAtTheirOwnWidth) {
  std::vector<FrameSource> f;
  for (uint32_t i = 0; i < 5; ++i)
    f.push_back(in_buffer(i, 60 + i));  // consecutive, but too narrow for direct rows
  auto p = plan(f);
  ASSERT_EQ(p.ops.size(), 1u);
  const CopyOp& op = p.ops[0];
  EXPECT_TRUE(op.staged);
  EXPECT_EQ(op.rows, 5u);
  EXPECT_EQ(op.width, 64u);
  EXPECT_EQ(op.spitch, 64u) << "the widest row, rounded up to 16";
  EXPECT_EQ(op.src, 0u) << "the start of the staging area";
  EXPECT_FALSE(op.contiguous);
  EXPECT_EQ(p.plan.staged_bytes, 5u * 64);
}

TEST(CopyPlan, ScatteredBuffersArePackedAndRunsBetweenThemGoDirect) {
  std::vector<FrameSource> f = {in_buffer(40, 1000), in_buffer(30, 1000), in_buffer(1, 800),
                                in_buffer(2, 900),   in_buffer(3, 700),   in_buffer(20, 1200)};
  auto p = plan(f);
  ASSERT_EQ(p.ops.size(), 3u);
  EXPECT_TRUE(p.ops[0].staged);
  EXPECT_EQ(p.ops[0].first, 0u);
  EXPECT_EQ(p.ops[0].rows, 2u) << "up to the run";
  EXPECT_FALSE(p.ops[1].staged);
  EXPECT_EQ(p.ops[1].first, 2u);
  EXPECT_EQ(p.ops[1].rows, 3u);
  EXPECT_EQ(p.ops[1].width, 900u);
  EXPECT_TRUE(p.ops[2].staged);
  EXPECT_EQ(p.ops[2].first, 5u);
  EXPECT_EQ(p.ops[2].rows, 1u);
  EXPECT_TRUE(p.ops[2].contiguous) << "one row";
  EXPECT_EQ(p.ops[2].src, 2u * 1008) << "after the first stretch in the staging area";
}

TEST(CopyPlan, NoCopyCrossesTheRingsEnd) {
  std::vector<FrameSource> f;
  for (uint32_t i = 0; i < 6; ++i)
    f.push_back(in_buffer(i, 1500));
  for (uint32_t i = 0; i < 4; ++i)
    f.push_back(in_buffer(50 - 3 * i, 100));
  // Counters 13..22 on a 16-slot ring: slot 15 is frame 2's, frame 3 goes to slot 0.
  auto p = plan(f, 13, 16);
  ASSERT_EQ(p.ops.size(), 3u);
  EXPECT_EQ(p.ops[0].rows, 3u);
  EXPECT_EQ(p.ops[1].first, 3u);
  EXPECT_EQ(p.ops[1].rows, 3u);
  EXPECT_TRUE(p.ops[2].staged);
  EXPECT_EQ(p.ops[2].rows, 4u);

  std::vector<FrameSource> narrow(4, FrameSource{});
  for (uint32_t i = 0; i < 4; ++i)
    narrow[i] = in_buffer(60 - 2 * i, 100);
  auto q = plan(narrow, 14, 16);  // slots 14, 15, 0, 1
  ASSERT_EQ(q.ops.size(), 2u);
  EXPECT_EQ(q.ops[0].rows, 2u);
  EXPECT_EQ(q.ops[1].first, 2u);
}

TEST(CopyPlan, FramesInGpuMemoryGoDirectEvenAlone) {
  std::vector<FrameSource> f = {in_buffer(9, 64, true), in_buffer(3, 64, true),
                                in_buffer(4, 64, true), in_buffer(5, 64, true)};
  auto p = plan(f);
  EXPECT_EQ(p.plan.staged_bytes, 0u) << "the CPU cannot read GPU memory";
  ASSERT_EQ(p.ops.size(), 2u);
  EXPECT_EQ(p.ops[0].rows, 1u);
  EXPECT_TRUE(p.ops[0].contiguous);
  EXPECT_EQ(p.ops[1].rows, 3u) << "narrow rows too: no other way there";
}

TEST(CopyPlan, ARunStopsAtARowWiderThanItsSpacingOrPastItsPool) {
  // Buffers 1024 apart (a pool cut finer than the slots): a 1500-byte row would overlap the
  // next buffer, so nothing here is a run.
  std::vector<FrameSource> f;
  for (uint32_t i = 0; i < 3; ++i)
    f.push_back(
        {kPool + i * 1024, kHost + i * 1024, kPoolBytes - i * 1024, i == 1 ? 1500u : 1000u});
  for (const CopyOp& op : plan(f).ops)
    EXPECT_TRUE(op.staged);
  // The pool's last buffers: a run reads no further than every row's pool end.
  std::vector<FrameSource> g = {in_buffer(62, 600), in_buffer(63, 600)};
  g[1].room = 600;
  auto q = plan(g);
  ASSERT_EQ(q.ops.size(), 1u);
  EXPECT_FALSE(q.ops[0].staged);
  EXPECT_EQ(q.ops[0].width, 600u);
  g[0].bytes = 700;  // the run would read 700 bytes of the last buffer, which has 600
  for (const CopyOp& op : plan(g).ops)
    EXPECT_TRUE(op.staged);
}

TEST(CopyPlan, FramesWithNothingForTheGpuGetNoCopy) {
  std::vector<FrameSource> f = {in_buffer(0, 1000), in_buffer(1, 1000), FrameSource{},
                                in_buffer(3, 1000), in_buffer(4, 1000)};
  auto p = plan(f);
  EXPECT_EQ(p.plan.frames, 5u);
  ASSERT_EQ(p.ops.size(), 2u);
  EXPECT_EQ(p.ops[0].rows, 2u);
  EXPECT_EQ(p.ops[1].first, 3u);
}

TEST(CopyPlan, AFullStagingAreaEndsTheBurstAtAFrame) {
  std::vector<FrameSource> f;
  for (uint32_t i = 0; i < 10; ++i)
    f.push_back(in_buffer(60 - 5 * i, 1000));  // scattered: all packed, 1008 bytes each
  auto p = plan(f, 0, 64, 4 * 1008 + 100);
  EXPECT_EQ(p.plan.frames, 4u) << "the rest waits for the next burst";
  ASSERT_EQ(p.ops.size(), 1u);
  EXPECT_EQ(p.ops[0].rows, 4u);
  EXPECT_LE(p.plan.staged_bytes, 4u * 1008 + 100);

  // A direct run first still goes, and the burst ends where staging does.
  std::vector<FrameSource> g = {in_buffer(0, 1000), in_buffer(1, 1000), in_buffer(30, 1000),
                                in_buffer(20, 1000)};
  auto q = plan(g, 0, 64, 1008);
  EXPECT_EQ(q.plan.frames, 3u);
  ASSERT_EQ(q.ops.size(), 2u);
  EXPECT_FALSE(q.ops[0].staged);
  EXPECT_TRUE(q.ops[1].staged);
}

TEST(CopyPlan, EveryFrameIsInExactlyOneCopyInOrder) {
  // A mix of every case, then the copies' rows are checked to cover each frame with bytes once.
  std::vector<FrameSource> f;
  uint32_t seed = 7;
  for (uint32_t i = 0; i < 300; ++i) {
    seed = seed * 1103515245 + 12345;
    uint32_t b = (seed >> 8) % 3 == 0 ? (seed >> 12) % 64 : i % 64;
    uint32_t bytes = (seed >> 16) % 5 == 0 ? 0 : 40 + (seed >> 4) % 2000;
    f.push_back(in_buffer(b, std::min<uint32_t>(bytes, kBuf)));
  }
  auto p = plan(f, 1000, 256, 64 * 1024);
  ASSERT_GT(p.plan.frames, 0u);
  std::vector<int> covered(p.plan.frames, 0);
  uint32_t last_end = 0;
  for (const CopyOp& op : p.ops) {
    EXPECT_GE(op.first, last_end) << "in order";
    last_end = op.first + op.rows;
    ASSERT_LE(last_end, p.plan.frames);
    for (uint32_t r = 0; r < op.rows; ++r) {
      ++covered[op.first + r];
      EXPECT_GE(op.width, f[op.first + r].bytes);
      if (r > 0) {
        EXPECT_NE((1000 + op.first + r) % 256, 0u) << "crosses the ring's end";
      }
    }
  }
  for (uint32_t i = 0; i < p.plan.frames; ++i)
    EXPECT_EQ(covered[i], f[i].bytes == 0 ? 0 : 1) << "frame " << i;
}

// Small copies go as two rows, so that the driver gives them to the copy engines; an odd count
// takes one byte more, never less.
TEST(CopyPlan, SmallContiguousCopiesGoAsTwoRows) {
  EXPECT_EQ(contiguous_shape(kMinCopyEngineBytes).rows, 1u);
  EXPECT_EQ(contiguous_shape(kMinCopyEngineBytes).width, kMinCopyEngineBytes);
  ContiguousShape even = contiguous_shape(48);
  EXPECT_EQ(even.rows, 2u);
  EXPECT_EQ(even.width, 24u);
  ContiguousShape odd = contiguous_shape(1023);
  EXPECT_EQ(odd.rows, 2u);
  EXPECT_EQ(odd.width, 512u);
}

}  // namespace
}  // namespace daqiri::gpu
