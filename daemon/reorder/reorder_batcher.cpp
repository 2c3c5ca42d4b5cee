#include "reorder/reorder_batcher.hpp"

#include <algorithm>
#include <cstring>

namespace daqiri::reorder {

std::optional<uint32_t> read_bits(std::span<const std::byte> frame, BitField f) {
  if (f.bit_width == 0 || f.bit_width > 32) return std::nullopt;
  uint64_t end = uint64_t{f.bit_offset} + f.bit_width;
  if (end > uint64_t{frame.size()} * 8) return std::nullopt;
  // The bytes the field spans (five at most), big-endian in one word, then the field cut out.
  uint64_t first = f.bit_offset / 8;
  uint64_t last = (end - 1) / 8;
  uint64_t word = 0;
  for (uint64_t i = first; i <= last; ++i)
    word = (word << 8) | static_cast<uint8_t>(frame[i]);
  uint64_t after = (last + 1) * 8 - end;  // bits of the last byte past the field
  return static_cast<uint32_t>((word >> after) & ((uint64_t{1} << f.bit_width) - 1));
}

uint64_t ReorderPlan::slot_bytes() const {
  if (!format || !format->converts()) return max_payload;
  // Whole samples of the most a packet brings.
  uint64_t in_bits = bits_of(format->input);
  uint64_t whole = uint64_t{max_payload} * 8 / in_bits * in_bits / 8;
  return format->output_bytes(whole).value_or(0);
}

ReorderBatcher::ReorderBatcher(const ReorderPlan& plan, ReorderOutput& output)
    : plan_(plan),
      output_(output),
      convert_(plan.format && plan.format->converts() ? converter(*plan.format) : nullptr),
      filled_((plan.packets_per_batch + 63) / 64, 0) {
  uint32_t bits = plan.method == ReorderPlan::Method::kSeqBatchNumber ? plan.batch.bit_width
                                                                      : plan.sequence.bit_width;
  id_range_ = uint64_t{1} << std::min(bits, 32u);
  if (plan.method == ReorderPlan::Method::kSeqPacketsPerBatch)
    id_range_ = std::max<uint64_t>(1, id_range_ / std::max(plan.packets_per_batch, 1u));
}

ReorderBatcher::Placed ReorderBatcher::add(std::span<const std::byte> frame, uint64_t now_ns) {
  auto seq = read_bits(frame, plan_.sequence);
  std::optional<uint32_t> id;
  if (seq) {
    id = plan_.method == ReorderPlan::Method::kSeqBatchNumber ? read_bits(frame, plan_.batch)
                                                              : *seq / plan_.packets_per_batch;
  }
  if (!id || frame.size() <= plan_.payload_offset) {
    ++counters_.short_frames;
    return Placed::kShort;
  }
  auto payload = frame.subspan(plan_.payload_offset);
  // The batch emitted last, or one before it (within half the ids' range, which wraps): a
  // straggler, not a new batch. The open batch is never among them.
  if (emitted_id_ &&
      (*emitted_id_ % id_range_ + id_range_ - *id % id_range_) % id_range_ < (id_range_ + 1) / 2) {
    ++counters_.late;
    return Placed::kLate;
  }
  if (open_ && *id != batch_id_) finish(false);
  if (!open_) {
    auto in = static_cast<uint32_t>(std::min<size_t>(payload.size(), plan_.max_payload));
    uint64_t out = in;
    if (convert_ != nullptr) {
      auto bytes = plan_.format->output_bytes(in);
      if (!bytes) {
        ++counters_.not_samples;
        return Placed::kNotSamples;
      }
      out = *bytes;
    }
    auto buffer = output_.acquire();
    if (!buffer) {
      ++counters_.no_buffer;
      return Placed::kNoBuffer;
    }
    open_ = true;
    out_ = *buffer;
    first_ns_ = now_ns;
    batch_id_ = *id;
    input_bytes_ = in;
    output_bytes_ = static_cast<uint32_t>(out);
    arrived_ = 0;
    distinct_ = 0;
    std::fill(filled_.begin(), filled_.end(), 0);
  }
  if (payload.size() < input_bytes_) {
    ++counters_.short_frames;
    return Placed::kShort;
  }
  uint32_t slot = *seq % plan_.packets_per_batch;
  std::byte* to = out_.bytes.data() + uint64_t{slot} * output_bytes_;
  if (convert_ != nullptr) {
    convert_(payload.data(), input_bytes_, to);
  } else {
    std::memcpy(to, payload.data(), input_bytes_);
  }
  ++arrived_;
  uint64_t bit = uint64_t{1} << (slot % 64);
  if ((filled_[slot / 64] & bit) != 0) {
    ++counters_.duplicates;
    return Placed::kDuplicate;
  }
  filled_[slot / 64] |= bit;
  ++counters_.placed;
  if (++distinct_ == plan_.packets_per_batch) finish(false);
  return Placed::kPlaced;
}

void ReorderBatcher::expire(uint64_t now_ns) {
  if (open_ && plan_.timeout_ns != 0 && now_ns - first_ns_ >= plan_.timeout_ns) finish(true);
}

void ReorderBatcher::flush() {
  if (open_) finish(false);
}

void ReorderBatcher::finish(bool timed_out) {
  // Slots no packet filled read zero, not what the buffer held before.
  for (uint32_t slot = 0; slot < plan_.packets_per_batch; ++slot) {
    if ((filled_[slot / 64] & (uint64_t{1} << (slot % 64))) == 0) {
      std::memset(out_.bytes.data() + uint64_t{slot} * output_bytes_, 0, output_bytes_);
    }
  }
  ReorderedBatch b;
  b.buffer = out_.index;
  b.batch_id = batch_id_;
  b.packets = arrived_;
  b.missing = plan_.packets_per_batch - distinct_;
  b.payload_bytes = output_bytes_;
  b.bytes = uint64_t{plan_.packets_per_batch} * output_bytes_;
  b.timed_out = timed_out;
  open_ = false;
  emitted_id_ = batch_id_;
  ++counters_.batches;
  if (timed_out) ++counters_.timed_out;
  output_.emit(b);
}

}  // namespace daqiri::reorder
