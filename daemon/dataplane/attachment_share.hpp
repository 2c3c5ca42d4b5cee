// What a client needs to map an attachment, sent over the session socket: its rings, eventfds
// and regions as fds, with their layout.
#pragma once

#include <cstdint>
#include <vector>

#include "daqiri/abi.h"
#include "daqiri/common/result.hpp"
#include "daqiri/common/unique_fd.hpp"
#include "dataplane/tx_attachment.hpp"

namespace daqiri::dataplane {

struct AttachmentShare {
  uint64_t id = 0;
  bool rx = true;
  UniqueFd rings_fd;
  size_t rings_size = 0;
  size_t ring_offset = 0;
  size_t completion_offset = 0;
  UniqueFd event_fd;
  UniqueFd kick_fd;  // RX and TX: the client's doorbell (sent after the regions)
  struct Region {
    UniqueFd fd;
    uint64_t size = 0;
    uint32_t buf_size = 0;
    uint32_t num_bufs = 0;
    bool writable = false;
  };
  std::vector<Region> regions;
  // GPU RX: the ring's VMM fd and layout (rings_fd is then its host control block).
  UniqueFd gpu_fd;  // or, for a legacy IPC ring (gpu_ipc), none: the handle went over gRPC
  bool gpu_ipc = false;
  daqiri_gpu_ring_info gpu{};
  [[nodiscard]] bool is_gpu() const { return gpu_fd.valid() || gpu_ipc; }
};

// A duplicate of one of the daemon's fds for a client (close-on-exec), or why there is none.
Result<UniqueFd> dup_for_client(int fd, const char* what);

// A TX attachment as its client maps it: rings, eventfd, kick, and its buffer region; a GPU TX
// client's (TxAttachment::gpu_buffers) its header buffers, if any, and its GPU buffers instead.
Result<AttachmentShare> share_tx(TxAttachment& a, uint64_t id);

}  // namespace daqiri::dataplane
