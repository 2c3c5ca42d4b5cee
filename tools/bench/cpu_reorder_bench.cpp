// cpu-reorder-bench: the daemon's reorder on the CPU (reorder::ReorderBatcher, what a reorder's
// poller runs per packet), without the daemon: frames built in memory (42 bytes of headers, a
// 32-bit big-endian sequence number, then samples), shuffled within each batch, placed batch by
// batch with or without a conversion. The peer, in the same run: a memcpy of each frame's
// samples into the same slot of the same output buffers, frames in the same shuffled order, so
// that both touch the same bytes and only the reorder's own work differs.
//   cpu-reorder-bench [PACKETS_PER_BATCH] [SAMPLE_BYTES] [INPUT:OUTPUT|copy] [BATCHES] [ROUNDS]
// Prints, per round, "reorder A GB/s out, B Mpps; memcpy C GB/s, D Mpps; ratio R": GB/s of
// bytes written, R the reorder's packet rate over the copy's.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "reorder/reorder_batcher.hpp"

namespace {

using namespace daqiri::reorder;
using Clock = std::chrono::steady_clock;
constexpr uint32_t kHeaders = 42;
constexpr uint32_t kPayloadOffset = kHeaders + 4;  // after the sequence number
constexpr uint32_t kOutputs = 8;                   // output buffers, taken in turn

class Outputs final : public ReorderOutput {
 public:
  explicit Outputs(uint64_t bytes) : buffers_(kOutputs, std::vector<std::byte>(bytes)) {}
  std::optional<Buffer> acquire() override {
    uint32_t i = next_++ % kOutputs;
    return Buffer{i, buffers_[i]};
  }
  void emit(const ReorderedBatch& b) override { bytes_ += b.bytes; }
  std::vector<std::vector<std::byte>> buffers_;
  uint64_t bytes_ = 0;

 private:
  uint32_t next_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  uint32_t ppb = argc > 1 ? static_cast<uint32_t>(std::strtoul(argv[1], nullptr, 10)) : 64;
  uint32_t sample_bytes =
      argc > 2 ? static_cast<uint32_t>(std::strtoul(argv[2], nullptr, 10)) : 1024;
  std::string convert = argc > 3 ? argv[3] : "int16:fp32";
  uint32_t batches = argc > 4 ? static_cast<uint32_t>(std::strtoul(argv[4], nullptr, 10)) : 2000;
  uint32_t rounds = argc > 5 ? static_cast<uint32_t>(std::strtoul(argv[5], nullptr, 10)) : 5;
  ReorderPlan plan;
  plan.sequence = {kHeaders * 8, 32};
  plan.packets_per_batch = ppb;
  plan.payload_offset = kPayloadOffset;
  plan.max_payload = sample_bytes;
  if (convert != "copy") {
    auto colon = convert.find(':');
    auto in = sample_type_from(convert.substr(0, colon));
    auto out =
        colon == std::string::npos ? std::nullopt : sample_type_from(convert.substr(colon + 1));
    if (!in || !out || !is_input(*in) || !is_output(*out)) {
      std::fprintf(stderr, "conversion: INPUT:OUTPUT (int4..int32 : fp16..fp64, int32) or copy\n");
      return 2;
    }
    plan.format = SampleFormat{*in, *out, ByteOrder::kNetwork};
  }
  if (ppb == 0 || (ppb & (ppb - 1)) != 0 || sample_bytes == 0) {
    std::fprintf(stderr, "PACKETS_PER_BATCH: a power of two; SAMPLE_BYTES: more than 0\n");
    return 2;
  }
  // The frames, batch by batch, shuffled within each; seeded, so runs compare.
  uint32_t frame_bytes = kPayloadOffset + sample_bytes;
  uint64_t packets = uint64_t{ppb} * batches;
  std::vector<std::byte> frames(packets * frame_bytes);
  std::vector<uint32_t> order(packets);
  std::mt19937 rng(7);
  for (uint32_t b = 0; b < batches; ++b) {
    auto first = order.begin() + uint64_t{b} * ppb;
    std::iota(first, first + ppb, b * ppb);
    std::shuffle(first, first + ppb, rng);
  }
  for (uint64_t i = 0; i < packets; ++i) {
    std::byte* f = frames.data() + i * frame_bytes;
    uint32_t seq = order[i];
    for (int k = 0; k < 4; ++k)
      f[kHeaders + k] = std::byte(seq >> (24 - 8 * k));
    for (uint32_t k = 0; k < sample_bytes; ++k)
      f[kPayloadOffset + k] = std::byte((seq * 31 + k) & 0xff);
  }
  Outputs out(plan.batch_bytes());
  uint64_t slot_bytes = plan.slot_bytes();
  std::printf(
      "cpu-reorder-bench: %u packets a batch, %u sample bytes, %s, %u batches (%.1f MB of "
      "output a round)\n",
      ppb, sample_bytes, convert.c_str(), batches,
      static_cast<double>(plan.batch_bytes()) * batches / 1e6);
  for (uint32_t r = 0; r < rounds; ++r) {
    ReorderBatcher batcher(plan, out);
    out.bytes_ = 0;
    auto t0 = Clock::now();
    for (uint64_t i = 0; i < packets; ++i)
      batcher.add({frames.data() + i * frame_bytes, frame_bytes}, 0);
    batcher.flush();
    double reorder_s = std::chrono::duration<double>(Clock::now() - t0).count();
    uint64_t emitted = out.bytes_;
    // The peer: the same slots of the same buffers, the samples as they are.
    t0 = Clock::now();
    for (uint64_t i = 0; i < packets; ++i) {
      const std::byte* f = frames.data() + i * frame_bytes;
      uint32_t seq = order[i];
      std::byte* to = out.buffers_[(i / ppb) % kOutputs].data() + (seq % ppb) * slot_bytes;
      std::memcpy(to, f + kPayloadOffset, std::min<uint64_t>(sample_bytes, slot_bytes));
    }
    double copy_s = std::chrono::duration<double>(Clock::now() - t0).count();
    double reorder_gbs = static_cast<double>(emitted) / reorder_s / 1e9;
    double copy_gbs = static_cast<double>(packets) *
                      static_cast<double>(std::min<uint64_t>(sample_bytes, slot_bytes)) / copy_s /
                      1e9;
    std::printf("reorder %.2f GB/s out, %.2f Mpps; memcpy %.2f GB/s, %.2f Mpps; ratio %.2f\n",
                reorder_gbs, static_cast<double>(packets) / reorder_s / 1e6, copy_gbs,
                static_cast<double>(packets) / copy_s / 1e6, copy_s / reorder_s);
  }
  return 0;
}
