// Delivery of one flow's packets to every attachment of the flow, without copies: one buffer,
// one descriptor per attachment, a reference per descriptor. Poller side is allocation- and
// lock-free; the attachment set is a Published snapshot changed by control threads.
#pragma once

#include <array>
#include <vector>

#include "dataplane/rx_attachment.hpp"
#include "dataplane/snapshot.hpp"

namespace daqiri::dataplane {

inline constexpr size_t kMaxAttachmentsPerFlow = 16;

class RxFanout {
 public:
  using Set = std::vector<RxAttachment*>;
  RxFanout() : set_(std::make_unique<const Set>()) {}

  // ---- poller side, once per poll ----
  // Loads the attachment set, returns released buffers, lets go of closing attachments, and
  // gathers the ones to deliver to. Returns how many there are.
  size_t begin();
  [[nodiscard]] size_t active() const { return active_count_; }
  // Whether an attachment with blocking backpressure lacks room for `burst` more packets.
  [[nodiscard]] bool must_wait(uint32_t burst) const;
  // The free slots of the fullest attachment with blocking backpressure (UINT32_MAX: none).
  [[nodiscard]] uint32_t blocking_room() const;
  // Packets every active attachment lost because the flow's pool was empty.
  void count_no_buffer(uint64_t n) const;
  // Hands one buffer to every active attachment with room; returns the references taken.
  // `head`: header bytes the NIC split off (RxAttachment::push).
  uint16_t deliver(const daqiri_rx_desc& desc, uint32_t buffer, const memory::BufferPool* pool,
                   std::span<const std::byte> head = {});
  void publish();

  // ---- control side (callers serialise) ----
  [[nodiscard]] size_t size() const { return set_.load().size(); }
  void add(RxAttachment* a, const Epoch& epoch);
  void remove(RxAttachment* a, const Epoch& epoch);

 private:
  Published<Set> set_;
  std::array<RxAttachment*, kMaxAttachmentsPerFlow> active_{};
  size_t active_count_ = 0;
};

}  // namespace daqiri::dataplane
