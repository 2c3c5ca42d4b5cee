// One AF_XDP socket on a NIC queue and its UMEM. The kernel binds one UMEM to a queue, so the
// queue's RX and TX share the socket: the UMEM is one address range holding the RX queue's pool
// (client-shared: the queue's clients map its memfd read-only) and, just below it, the TX
// queue's chunks, anonymous memory of the daemon's that no client maps. Every chunk has the
// same size (the RX pool's buffers). The RX queue's poller alone drives the fill and RX rings,
// the TX queue's the TX and completion rings: one producer and one consumer each.
#pragma once

#include <xdp/xsk.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "daqiri/common/mapping.hpp"
#include "memory/buffer_pool.hpp"

namespace daqiri::backends::xdp {

// The socket's own counters (XDP_STATISTICS).
struct XskStatistics {
  uint64_t rx_dropped = 0;        // no room in the RX ring, or another reason
  uint64_t rx_invalid_descs = 0;  // fill descriptors the kernel could not use
  uint64_t rx_ring_full = 0;      // the RX ring was full
  uint64_t fill_ring_empty = 0;   // a frame came and the fill ring had no buffer
  uint64_t tx_invalid_descs = 0;  // TX descriptors the kernel refused
};

struct XskSocketSetup {
  std::string ifname;  // the Linux interface
  uint32_t queue_id = 0;
  uint32_t chunk_size = 0;  // 2048 to a page
  // RX: the pool (chunk_size buffers), its fill and RX rings (a power of two); 0 buffers: none.
  std::string pool_name;
  uint32_t rx_buffers = 0;
  bool huge = false;
  uint32_t rx_ring = 0;
  // TX: chunks of the daemon's, and the TX ring (a power of two); 0 chunks: none.
  uint32_t tx_chunks = 0;
  uint32_t tx_ring = 0;
};

class XskSocket {
 public:
  // Bound zero-copy where the driver can, else in copy mode.
  static Result<std::unique_ptr<XskSocket>> create(const XskSocketSetup& setup);
  ~XskSocket();
  XskSocket(const XskSocket&) = delete;
  XskSocket& operator=(const XskSocket&) = delete;

  [[nodiscard]] int fd() const;
  [[nodiscard]] uint32_t queue_id() const { return queue_id_; }
  [[nodiscard]] bool zero_copy() const { return zero_copy_; }
  [[nodiscard]] uint32_t chunk_size() const { return chunk_size_; }
  // Control side: a getsockopt.
  [[nodiscard]] XskStatistics statistics() const;

  // ---- the RX queue's poller ----
  [[nodiscard]] bool has_rx() const { return rx_pool_.has_value(); }
  [[nodiscard]] memory::BufferPool& rx_pool() { return *rx_pool_; }
  // The UMEM address of the RX pool's first buffer.
  [[nodiscard]] uint64_t rx_base() const { return rx_base_; }
  xsk_ring_prod& fill() { return fill_; }
  xsk_ring_cons& rx() { return rx_; }

  // ---- the TX queue's poller ----
  [[nodiscard]] uint32_t tx_chunks() const { return tx_chunks_; }
  // TX chunk `i`: its UMEM address and its bytes.
  [[nodiscard]] uint64_t tx_address(uint32_t i) const { return uint64_t{i} * chunk_size_; }
  [[nodiscard]] std::byte* tx_chunk(uint32_t i) const {
    return tx_area_.data() + uint64_t{i} * chunk_size_;
  }
  xsk_ring_prod& tx() { return tx_; }
  xsk_ring_cons& completion() { return completion_; }

 private:
  explicit XskSocket(const XskSocketSetup& setup);
  // The TX chunks, mapped right below the RX pool (or anywhere without one): the UMEM's start.
  Result<> map_tx_area(const XskSocketSetup& setup);
  Result<> bind(const XskSocketSetup& setup, bool zero_copy);
  void close();

  // Declared before the socket and UMEM, which close first.
  std::optional<memory::BufferPool> rx_pool_;
  Mapping tx_area_;
  std::byte* umem_start_ = nullptr;
  uint64_t umem_bytes_ = 0;
  uint64_t rx_base_ = 0;
  xsk_umem* umem_ = nullptr;
  xsk_socket* xsk_ = nullptr;
  xsk_ring_prod fill_{};
  xsk_ring_cons completion_{};
  xsk_ring_cons rx_{};
  xsk_ring_prod tx_{};
  uint32_t queue_id_;
  uint32_t chunk_size_;
  uint32_t tx_chunks_;
  bool zero_copy_ = false;
};

}  // namespace daqiri::backends::xdp
