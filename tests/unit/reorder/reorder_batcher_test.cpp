#include "reorder/reorder_batcher.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

namespace daqiri::reorder {
namespace {

// Frames as an instrument sends them: 42 bytes of headers, a 32-bit big-endian sequence number
// (bits 336-367), a 16-bit batch number (bits 368-383), then the samples.
constexpr uint32_t kHeader = 48;
constexpr BitField kSequence{336, 32};
constexpr BitField kBatchNumber{368, 16};

std::vector<std::byte> frame(uint32_t seq, uint16_t batch, uint32_t samples_bytes) {
  std::vector<std::byte> f(kHeader + samples_bytes);
  for (int i = 0; i < 4; ++i)
    f[42 + i] = static_cast<std::byte>(seq >> (24 - 8 * i));
  f[46] = static_cast<std::byte>(batch >> 8);
  f[47] = static_cast<std::byte>(batch);
  for (uint32_t k = 0; k < samples_bytes; ++k)
    f[kHeader + k] = static_cast<std::byte>(seq * 7 + k);
  return f;
}

// Output buffers of a fixed count; emitted batches kept in order.
class TestOutput : public ReorderOutput {
 public:
  TestOutput(size_t count, uint64_t bytes) : buffers_(count, std::vector<std::byte>(bytes)) {
    for (size_t i = count; i > 0; --i)
      free_.push_back(static_cast<uint32_t>(i - 1));
  }
  std::optional<Buffer> acquire() override {
    if (free_.empty()) return std::nullopt;
    uint32_t i = free_.back();
    free_.pop_back();
    std::fill(buffers_[i].begin(), buffers_[i].end(), std::byte{0xee});  // what it held before
    return Buffer{i, buffers_[i]};
  }
  void emit(const ReorderedBatch& b) override { batches.push_back(b); }
  void release(uint32_t i) { free_.push_back(i); }
  const std::vector<std::byte>& buffer(uint32_t i) const { return buffers_[i]; }

  std::vector<ReorderedBatch> batches;

 private:
  std::vector<std::vector<std::byte>> buffers_;
  std::vector<uint32_t> free_;
};

ReorderPlan packets_per_batch(uint32_t ppb, uint32_t samples_bytes) {
  ReorderPlan p;
  p.method = ReorderPlan::Method::kSeqPacketsPerBatch;
  p.sequence = kSequence;
  p.packets_per_batch = ppb;
  p.payload_offset = kHeader;
  p.max_payload = samples_bytes;
  return p;
}

TEST(ReorderBitField, ReadsMostSignificantFirstWithinTheFrame) {
  std::vector<std::byte> f{std::byte{0xa5}, std::byte{0x3c}};
  EXPECT_EQ(read_bits(f, {0, 8}), 0xa5u);
  EXPECT_EQ(read_bits(f, {4, 8}), 0x53u);
  EXPECT_EQ(read_bits(f, {1, 3}), 0x2u);
  EXPECT_EQ(read_bits(f, {15, 1}), 0u);
  EXPECT_EQ(read_bits(f, {9, 8}), std::nullopt) << "past the frame's end";
  EXPECT_EQ(read_bits(f, {0, 0}), std::nullopt);
  EXPECT_EQ(read_bits(f, {0, 33}), std::nullopt);
}

// Every field that fits a 12-byte frame, up to 32 bits across five bytes, against the bits
// taken one at a time.
TEST(ReorderBitField, EveryOffsetAndWidthMatchesBitByBit) {
  std::vector<std::byte> f;
  for (uint32_t i = 0; i < 12; ++i)
    f.push_back(std::byte((i * 73 + 29) & 0xff));
  for (uint32_t offset = 0; offset < 96; ++offset) {
    for (uint32_t width = 1; width <= 32 && offset + width <= 96; ++width) {
      uint32_t want = 0;
      for (uint32_t bit = offset; bit < offset + width; ++bit)
        want = (want << 1) | ((std::to_integer<uint32_t>(f[bit / 8]) >> (7 - bit % 8)) & 1U);
      ASSERT_EQ(read_bits(f, {offset, width}), want) << offset << " " << width;
    }
  }
}

// Packets of two batches, each shuffled: each batch holds its packets' samples in sequence
// order, whatever order they came in, and is emitted as its last slot fills.
TEST(ReorderBatcher, ShuffledPacketsLandInSequenceOrder) {
  constexpr uint32_t kPpb = 64;
  constexpr uint32_t kBytes = 100;
  ReorderPlan plan = packets_per_batch(kPpb, kBytes);
  TestOutput out(2, plan.batch_bytes());
  ReorderBatcher r(plan, out);
  std::mt19937 rng(3);
  for (uint32_t batch = 5; batch < 7; ++batch) {
    std::vector<uint32_t> seqs(kPpb);
    std::iota(seqs.begin(), seqs.end(), batch * kPpb);
    std::shuffle(seqs.begin(), seqs.end(), rng);
    for (uint32_t s : seqs)
      ASSERT_EQ(r.add(frame(s, 0, kBytes), 0), ReorderBatcher::Placed::kPlaced);
  }
  ASSERT_EQ(out.batches.size(), 2u);
  for (uint32_t b = 0; b < 2; ++b) {
    const ReorderedBatch& got = out.batches[b];
    EXPECT_EQ(got.batch_id, 5 + b);
    EXPECT_EQ(got.packets, kPpb);
    EXPECT_EQ(got.missing, 0u);
    EXPECT_EQ(got.payload_bytes, kBytes);
    EXPECT_EQ(got.bytes, uint64_t{kPpb} * kBytes);
    EXPECT_FALSE(got.timed_out);
    const auto& buf = out.buffer(got.buffer);
    for (uint32_t k = 0; k < kPpb; ++k) {
      uint32_t seq = (5 + b) * kPpb + k;
      EXPECT_EQ(
          std::memcmp(buf.data() + k * kBytes, frame(seq, 0, kBytes).data() + kHeader, kBytes), 0)
          << "slot " << k;
    }
  }
  EXPECT_FALSE(r.open());
}

// A lost packet is reported in its own batch (its slot reads zero) when the next batch's first
// packet arrives; a straggler of the emitted batch is late; a duplicate keeps its later copy.
TEST(ReorderBatcher, ALostPacketIsCountedInItsBatchAndStragglersAreLate) {
  constexpr uint32_t kPpb = 8;
  constexpr uint32_t kBytes = 16;
  ReorderPlan plan = packets_per_batch(kPpb, kBytes);
  TestOutput out(2, plan.batch_bytes());
  ReorderBatcher r(plan, out);
  for (uint32_t s : {0u, 1u, 2u, 4u, 5u, 6u, 7u})  // 3 is lost
    r.add(frame(s, 0, kBytes), 0);
  EXPECT_EQ(r.add(frame(6, 0, kBytes), 0), ReorderBatcher::Placed::kDuplicate);
  EXPECT_TRUE(out.batches.empty());
  EXPECT_EQ(r.add(frame(8, 0, kBytes), 0), ReorderBatcher::Placed::kPlaced);
  ASSERT_EQ(out.batches.size(), 1u);
  EXPECT_EQ(out.batches[0].batch_id, 0u);
  EXPECT_EQ(out.batches[0].missing, 1u);
  EXPECT_EQ(out.batches[0].packets, 8u) << "seven, and the duplicate";
  const auto& buf = out.buffer(out.batches[0].buffer);
  EXPECT_TRUE(std::all_of(buf.begin() + 3 * kBytes, buf.begin() + 4 * kBytes,
                          [](std::byte b) { return b == std::byte{0}; }));
  EXPECT_EQ(r.add(frame(3, 0, kBytes), 0), ReorderBatcher::Placed::kLate);
  EXPECT_EQ(r.counters().late, 1u);
  EXPECT_EQ(r.counters().duplicates, 1u);
  EXPECT_EQ(r.counters().placed, 8u);
}

// seq_batch_number: the batch is the batch number field, the slot the sequence modulo the
// packets a batch holds; a batch whose first packet is older than the timeout is emitted
// flagged, with what it has.
TEST(ReorderBatcher, BatchNumbersNameBatchesAndATimeoutEmitsWhatArrived) {
  ReorderPlan plan;
  plan.method = ReorderPlan::Method::kSeqBatchNumber;
  plan.sequence = {336, 4};  // 16 sequence numbers over 4 batches: 4 packets a batch
  plan.batch = kBatchNumber;
  plan.packets_per_batch = 4;
  plan.payload_offset = kHeader;
  plan.max_payload = 8;
  plan.timeout_ns = 1000;
  TestOutput out(4, plan.batch_bytes());
  ReorderBatcher r(plan, out);
  // The sequence field's 4 bits are the top of byte 42: sequence s is s << 28 in frame().
  auto f = [](uint32_t seq, uint16_t batch) { return frame(seq << 28, batch, 8); };
  r.add(f(6, 900), 100);
  r.add(f(5, 900), 200);
  r.expire(1099);
  EXPECT_TRUE(out.batches.empty());
  r.expire(1100);
  ASSERT_EQ(out.batches.size(), 1u);
  const ReorderedBatch& b = out.batches[0];
  EXPECT_EQ(b.batch_id, 900u);
  EXPECT_TRUE(b.timed_out);
  EXPECT_EQ(b.packets, 2u);
  EXPECT_EQ(b.missing, 2u);
  const auto& buf = out.buffer(b.buffer);
  EXPECT_EQ(std::memcmp(buf.data() + 8, f(5, 900).data() + kHeader, 8), 0) << "slot 5 % 4";
  EXPECT_EQ(std::memcmp(buf.data() + 16, f(6, 900).data() + kHeader, 8), 0) << "slot 6 % 4";
  EXPECT_EQ(r.counters().timed_out, 1u);
}

// Samples converted as they are placed: int16 in network order into fp32.
TEST(ReorderBatcher, SamplesAreConvertedIntoTheirSlots) {
  ReorderPlan plan = packets_per_batch(2, 4);
  plan.format = SampleFormat{SampleType::kInt16, SampleType::kFp32, ByteOrder::kNetwork};
  TestOutput out(1, plan.batch_bytes());
  ASSERT_EQ(plan.batch_bytes(), 16u);
  ReorderBatcher r(plan, out);
  auto f = [](uint32_t seq, std::initializer_list<int> samples) {
    auto fr = frame(seq, 0, 4);
    int k = 0;
    for (int s : samples) {
      fr[kHeader + k++] = static_cast<std::byte>(static_cast<uint16_t>(s) >> 8);
      fr[kHeader + k++] = static_cast<std::byte>(s);
    }
    return fr;
  };
  r.add(f(1, {-3, 1000}), 0);
  r.add(f(0, {7, -32768}), 0);
  ASSERT_EQ(out.batches.size(), 1u);
  EXPECT_EQ(out.batches[0].payload_bytes, 8u);
  std::vector<float> got(4);
  std::memcpy(got.data(), out.buffer(0).data(), 16);
  EXPECT_EQ(got, (std::vector<float>{7.0F, -32768.0F, -3.0F, 1000.0F}));
}

// What the wire cannot make it do: read past a short frame, take a packet shorter than its
// batch's first, or start a batch with no free buffer.
TEST(ReorderBatcher, ShortFramesAndMissingBuffersAreRefusedAndCounted) {
  ReorderPlan plan = packets_per_batch(4, 32);
  TestOutput out(1, plan.batch_bytes());
  ReorderBatcher r(plan, out);
  auto tiny = frame(0, 0, 0);
  tiny.resize(44);  // ends inside the sequence number
  EXPECT_EQ(r.add(tiny, 0), ReorderBatcher::Placed::kShort);
  EXPECT_EQ(r.add(frame(0, 0, 0), 0), ReorderBatcher::Placed::kShort) << "no payload";
  EXPECT_EQ(r.add(frame(0, 0, 32), 0), ReorderBatcher::Placed::kPlaced);
  EXPECT_EQ(r.add(frame(1, 0, 31), 0), ReorderBatcher::Placed::kShort);
  EXPECT_EQ(r.add(frame(1, 0, 64), 0), ReorderBatcher::Placed::kPlaced) << "cut to 32";
  r.flush();
  ASSERT_EQ(out.batches.size(), 1u);
  EXPECT_EQ(out.batches[0].missing, 2u);
  EXPECT_EQ(r.add(frame(4, 0, 32), 0), ReorderBatcher::Placed::kNoBuffer) << "one buffer, held";
  out.release(out.batches[0].buffer);
  EXPECT_EQ(r.add(frame(4, 0, 32), 0), ReorderBatcher::Placed::kPlaced);
  EXPECT_EQ(r.counters().short_frames, 3u);
  EXPECT_EQ(r.counters().no_buffer, 1u);

  ReorderPlan odd = packets_per_batch(4, 3);
  odd.format = SampleFormat{SampleType::kInt16, SampleType::kFp32, ByteOrder::kHost};
  TestOutput out2(1, odd.batch_bytes());
  ReorderBatcher r2(odd, out2);
  EXPECT_EQ(r2.add(frame(0, 0, 3), 0), ReorderBatcher::Placed::kNotSamples);
}

}  // namespace
}  // namespace daqiri::reorder
