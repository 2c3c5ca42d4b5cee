#include "dataplane/attachment_share.hpp"

#include <fcntl.h>

#include <string>

namespace daqiri::dataplane {

Result<UniqueFd> dup_for_client(int fd, const char* what) {
  UniqueFd copy(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
  if (!copy) return fail_errno(std::string("dup ") + what);
  return copy;
}

Result<AttachmentShare> share_tx(TxAttachment& a, uint64_t id) {
  AttachmentShare share;
  share.id = id;
  share.rx = false;
  auto rings = a.rings().shared_fd();
  if (!rings) return std::unexpected(rings.error());
  share.rings_fd = std::move(*rings);
  share.rings_size = a.rings().size();
  share.completion_offset = a.completion_offset();
  auto event = dup_for_client(a.eventfd(), "eventfd");
  if (!event) return std::unexpected(event.error());
  share.event_fd = std::move(*event);
  auto kick = dup_for_client(a.kick_fd(), "kick eventfd");
  if (!kick) return std::unexpected(kick.error());
  share.kick_fd = std::move(*kick);
  const GpuTxBuffers* gpu = a.gpu_buffers();
  if (gpu == nullptr || a.buf_size() != 0) {
    auto buffers = a.buffers().shared_fd();
    if (!buffers) return std::unexpected(buffers.error());
    share.regions.push_back(
        {std::move(*buffers), a.buffers().size(), a.buf_size(), a.num_bufs(), true});
  }
  if (gpu != nullptr) {
    auto vmm = dup_for_client(gpu->vmm_fd, "GPU buffers");
    if (!vmm) return std::unexpected(vmm.error());
    share.gpu_fd = std::move(*vmm);
    share.gpu = gpu->info;
  }
  return share;
}

}  // namespace daqiri::dataplane
