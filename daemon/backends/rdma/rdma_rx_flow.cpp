#include "backends/rdma/rdma_rx_flow.hpp"

namespace daqiri::backends::rdma {

Result<std::unique_ptr<RdmaRxFlow>> RdmaRxFlow::create(const core::Flow& flow, uint32_t buf_size,
                                                       uint32_t num_bufs, bool huge,
                                                       memory::PageArena* arena,
                                                       uint32_t window_slots,
                                                       const memory::DeviceMemory* device) {
  auto pool = device != nullptr ? memory::BufferPool::over_device(*device, buf_size, num_bufs)
                                : memory::BufferPool::create("flow-" + flow.name, buf_size,
                                                             num_bufs, huge, arena);
  if (!pool) return std::unexpected(pool.error());
  std::optional<memory::BufferPool> window;
  if (window_slots > 0) {
    // Its own memfd: the peer's remote access reaches the window and nothing else.
    auto w = memory::BufferPool::create("window-" + flow.name, buf_size, window_slots, huge);
    if (!w) return std::unexpected(w.error());
    w->make_owner_managed();
    window = std::move(*w);
  }
  return std::unique_ptr<RdmaRxFlow>(new RdmaRxFlow(flow, std::move(*pool), std::move(window)));
}

}  // namespace daqiri::backends::rdma
