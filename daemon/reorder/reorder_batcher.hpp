// Reorder on the CPU: packets of a reorder's flows fill batches of packets_per_batch slots,
// each packet's payload (from payload_offset on, converted when the reorder names sample
// types) into slot `sequence % packets_per_batch` of the batch it names: its batch number field
// (seq_batch_number) or sequence / packets_per_batch (seq_packets_per_batch). A batch is
// emitted when every slot is filled, when a packet of another batch arrives, or when its first
// packet is timeout_ns old; it says how many slots no packet filled (they read zero). DAQIRI
// closes a batch after packets_per_batch arrivals instead, so there a lost packet moves the
// next batch's first packet into it; here a loss is reported in its own batch, and a packet of
// the batch emitted last, or of one before it (ids wrap with the sequence number: within half
// their range), is late and dropped. Every packet is copied as it arrives: no frame is
// held until its batch ends. Frames come from the wire: every field is read within the frame.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "reorder/sample_convert.hpp"

namespace daqiri::reorder {

// Bits of a frame, counted from its first byte's most significant bit, most significant first.
struct BitField {
  uint32_t bit_offset = 0;
  uint32_t bit_width = 0;  // 1 to 32
};

// The field's value, or nullopt when the frame ends before it.
std::optional<uint32_t> read_bits(std::span<const std::byte> frame, BitField f);

struct ReorderPlan {
  enum class Method : uint8_t { kSeqBatchNumber, kSeqPacketsPerBatch };
  Method method = Method::kSeqPacketsPerBatch;
  BitField sequence;
  BitField batch;  // kSeqBatchNumber
  // kSeqPacketsPerBatch: as configured; kSeqBatchNumber: 2^sequence bits / 2^batch bits.
  uint32_t packets_per_batch = 1;
  uint32_t payload_offset = 0;  // bytes of each frame before what is copied
  uint32_t max_payload = 0;     // input bytes a packet brings at most (the rest is cut)
  std::optional<SampleFormat> format;
  uint64_t timeout_ns = 0;  // 0: a batch waits for all its packets

  // Output bytes one slot takes at most, and a batch.
  [[nodiscard]] uint64_t slot_bytes() const;
  [[nodiscard]] uint64_t batch_bytes() const { return slot_bytes() * packets_per_batch; }
};

struct ReorderedBatch {
  uint32_t buffer = 0;  // the output buffer it is in
  uint64_t batch_id = 0;
  uint32_t packets = 0;        // packets placed in it (duplicates included)
  uint32_t missing = 0;        // slots no packet filled (zero bytes)
  uint32_t payload_bytes = 0;  // output bytes of each slot
  uint64_t bytes = 0;          // packets_per_batch * payload_bytes, from the buffer's start
  bool timed_out = false;
};

// Where batches go: an output buffer of at least batch_bytes() for each new batch, or nothing
// when none is free; and each batch once it is done.
class ReorderOutput {
 public:
  struct Buffer {
    uint32_t index = 0;
    std::span<std::byte> bytes;
  };
  virtual ~ReorderOutput() = default;
  virtual std::optional<Buffer> acquire() = 0;
  virtual void emit(const ReorderedBatch& batch) = 0;
};

class ReorderBatcher {
 public:
  enum class Placed : uint8_t {
    kPlaced,
    kDuplicate,   // its slot was filled already: the later copy stays
    kLate,        // its batch was emitted already
    kShort,       // too short for the fields, or for its batch's payload length
    kNotSamples,  // a batch's first packet whose payload is not whole samples
    kNoBuffer,    // no output buffer was free for a new batch
  };
  struct Counters {
    uint64_t placed = 0;
    uint64_t duplicates = 0;
    uint64_t late = 0;
    uint64_t short_frames = 0;
    uint64_t not_samples = 0;
    uint64_t no_buffer = 0;
    uint64_t batches = 0;
    uint64_t timed_out = 0;
  };

  ReorderBatcher(const ReorderPlan& plan, ReorderOutput& output);

  // Places one frame (emitting the open batch first when the frame names another, and its own
  // batch when the frame fills it).
  Placed add(std::span<const std::byte> frame, uint64_t now_ns);
  // Emits the open batch when its first packet arrived at least the plan's timeout before.
  void expire(uint64_t now_ns);
  // Emits the open batch whatever its age (the stream ended).
  void flush();
  [[nodiscard]] bool open() const { return open_; }
  // When the open batch's first packet came (the clock `add` was given).
  [[nodiscard]] uint64_t opened_ns() const { return first_ns_; }
  [[nodiscard]] const Counters& counters() const { return counters_; }

 private:
  void finish(bool timed_out);

  ReorderPlan plan_;
  ReorderOutput& output_;
  ConvertFn convert_ = nullptr;
  std::vector<uint64_t> filled_;  // a bit a slot
  Counters counters_;
  bool open_ = false;
  ReorderOutput::Buffer out_;
  uint64_t first_ns_ = 0;
  uint64_t batch_id_ = 0;
  std::optional<uint64_t> emitted_id_;  // the batch emitted last
  uint64_t id_range_ = 1;               // batch ids wrap at this
  uint32_t input_bytes_ = 0;            // each packet's, from the batch's first
  uint32_t output_bytes_ = 0;           // each slot's
  uint32_t arrived_ = 0;
  uint32_t distinct_ = 0;
};

}  // namespace daqiri::reorder
