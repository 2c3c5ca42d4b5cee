#include "backends/xdp/xsk_socket.hpp"

#include <linux/if_xdp.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <bit>

namespace daqiri::backends::xdp {

XskSocket::XskSocket(const XskSocketSetup& setup)
    : queue_id_(setup.queue_id), chunk_size_(setup.chunk_size), tx_chunks_(setup.tx_chunks) {}

Result<std::unique_ptr<XskSocket>> XskSocket::create(const XskSocketSetup& s) {
  std::unique_ptr<XskSocket> x(new XskSocket(s));
  // One UMEM holds the TX chunks and the RX pool, so the chunks go right below the pool.
  // Another thread may map something there first (seen in CI); a pool made again, while the
  // last one still holds its range, lands elsewhere.
  Result<> mapped;
  for (int attempt = 0; attempt < 8; ++attempt) {
    if (s.rx_buffers > 0) {
      auto pool = memory::BufferPool::create(s.pool_name, s.chunk_size, s.rx_buffers, s.huge);
      if (!pool) return std::unexpected(pool.error());
      x->rx_pool_.emplace(std::move(*pool));
    }
    mapped = x->map_tx_area(s);
    if (mapped) break;
  }
  if (!mapped) return std::unexpected(mapped.error());
  // Zero-copy where the driver DMAs into the UMEM itself; the kernel refuses it (EOPNOTSUPP,
  // EINVAL) where it cannot, and copies into the same chunks instead.
  if (auto zc = x->bind(s, true); !zc) {
    x->close();
    if (auto copy = x->bind(s, false); !copy) {
      return fail(copy.error().code, "AF_XDP socket on " + s.ifname + " queue " +
                                         std::to_string(s.queue_id) + ": " + copy.error().message);
    }
  }
  return x;
}

Result<> XskSocket::map_tx_area(const XskSocketSetup& s) {
  const auto page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t rx_bytes = has_rx() ? uint64_t{s.chunk_size} * s.rx_buffers : 0;
  // A whole number of pages, and of chunks: RX chunks must start a chunk apart from the UMEM's
  // start (a power-of-two chunk of a page at most divides a page; any other size is unaligned).
  const uint64_t tx_bytes = (uint64_t{s.chunk_size} * s.tx_chunks + page - 1) / page * page;
  if (tx_bytes == 0) {
    umem_start_ = rx_pool_->data();
    umem_bytes_ = rx_bytes;
    return {};
  }
  // Below the pool: mmap places mappings top-down, so the range under the latest is the one
  // most often free. MAP_FIXED_NOREPLACE never takes a range something else holds. Shared,
  // as the pool's memfd is: Linux 6.18 refuses (EINVAL) a UMEM of private and shared pages.
  void* want = has_rx() ? rx_pool_->data() - tx_bytes : nullptr;
  int flags = MAP_SHARED | MAP_ANONYMOUS | MAP_POPULATE | (want ? MAP_FIXED_NOREPLACE : 0);
  void* p = ::mmap(want, tx_bytes, PROT_READ | PROT_WRITE, flags, -1, 0);
  if (p == MAP_FAILED || (want != nullptr && p != want)) {
    if (p != MAP_FAILED) ::munmap(p, tx_bytes);  // an old kernel took the hint elsewhere
    return fail(ErrorCode::kResourceExhausted,
                "no address room for the TX chunks next to the RX pool of queue " +
                    std::to_string(s.queue_id) + " (one UMEM holds both)");
  }
  tx_area_ = Mapping(p, tx_bytes);
  umem_start_ = tx_area_.data();
  umem_bytes_ = tx_bytes + rx_bytes;
  rx_base_ = tx_bytes;
  return {};
}

Result<> XskSocket::bind(const XskSocketSetup& s, bool zero_copy) {
  xsk_umem_config umem_config{};
  umem_config.fill_size = std::max<uint32_t>(s.rx_ring, XSK_RING_PROD__DEFAULT_NUM_DESCS);
  umem_config.comp_size =
      std::max<uint32_t>(std::bit_ceil(std::max(s.tx_ring, 1u)), XSK_RING_CONS__DEFAULT_NUM_DESCS);
  umem_config.frame_size = s.chunk_size;
  umem_config.frame_headroom = 0;
  // Chunks of any size from 2048 bytes to a page; a power of two needs no flag.
  umem_config.flags = std::has_single_bit(s.chunk_size) ? 0 : XDP_UMEM_UNALIGNED_CHUNK_FLAG;
  if (int err =
          xsk_umem__create(&umem_, umem_start_, umem_bytes_, &fill_, &completion_, &umem_config);
      err != 0) {
    umem_ = nullptr;
    return fail_errno("registering the UMEM", -err);
  }
  xsk_socket_config config{};
  config.rx_size = has_rx() ? s.rx_ring : 0;
  config.tx_size = s.tx_chunks > 0 ? s.tx_ring : 0;
  // The daemon's flow filter redirects to the socket, not libxdp's default program.
  config.libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD;
  config.bind_flags =
      static_cast<uint16_t>(XDP_USE_NEED_WAKEUP | (zero_copy ? XDP_ZEROCOPY : XDP_COPY));
  if (int err =
          xsk_socket__create(&xsk_, s.ifname.c_str(), s.queue_id, umem_, has_rx() ? &rx_ : nullptr,
                             s.tx_chunks > 0 ? &tx_ : nullptr, &config);
      err != 0) {
    xsk_ = nullptr;
    return fail_errno(zero_copy ? "binding zero-copy" : "binding in copy mode", -err);
  }
  zero_copy_ = zero_copy;
  return {};
}

void XskSocket::close() {
  if (xsk_ != nullptr) xsk_socket__delete(xsk_);
  if (umem_ != nullptr) xsk_umem__delete(umem_);
  xsk_ = nullptr;
  umem_ = nullptr;
}

XskSocket::~XskSocket() {
  close();
}

int XskSocket::fd() const {
  return xsk_socket__fd(xsk_);
}

XskStatistics XskSocket::statistics() const {
  xdp_statistics s{};
  socklen_t len = sizeof s;
  XskStatistics out;
  if (getsockopt(fd(), SOL_XDP, XDP_STATISTICS, &s, &len) != 0) return out;
  out.rx_dropped = s.rx_dropped;
  out.rx_invalid_descs = s.rx_invalid_descs;
  out.tx_invalid_descs = s.tx_invalid_descs;
  // Both arrived in Linux 5.9, with the struct's second size.
  if (len >= sizeof s) {
    out.rx_ring_full = s.rx_ring_full;
    out.fill_ring_empty = s.rx_fill_ring_empty_descs;
  }
  return out;
}

}  // namespace daqiri::backends::xdp
