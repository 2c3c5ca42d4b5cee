#include "backends/socket/socket_tx_queue.hpp"

#include <arpa/inet.h>
#include <netinet/ip.h>

#include <algorithm>
#include <cstring>

#include "backends/socket/poller_syscalls.hpp"
#include "daqiri/frame.hpp"
#include "dataplane/tx_frame_policy.hpp"

namespace daqiri::backends::socket {

Result<std::unique_ptr<SocketTxQueue>> SocketTxQueue::create(uint32_t source_ipv4, uint32_t batch,
                                                             uint32_t max_frame,
                                                             config::TxPolicy policy,
                                                             uint32_t pacing_mbps,
                                                             bool send_times) {
  UniqueFd raw(::socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, IPPROTO_RAW));
  if (!raw) return fail_errno("socket(SOCK_RAW) for TX (needs CAP_NET_RAW)");
  int one = 1;
  if (::setsockopt(raw.get(), IPPROTO_IP, IP_HDRINCL, &one, sizeof one) != 0) {
    return fail_errno("IP_HDRINCL");
  }
  int sndbuf = 8 << 20;
  ::setsockopt(raw.get(), SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof sndbuf);
  return std::unique_ptr<SocketTxQueue>(
      new SocketTxQueue(std::move(raw), source_ipv4, std::min(batch, kMaxBatch), max_frame, policy,
                        dataplane::TxPacer(pacing_mbps, max_frame), send_times));
}

SocketTxQueue::SocketTxQueue(UniqueFd raw, uint32_t source_ipv4, uint32_t batch, uint32_t max_frame,
                             config::TxPolicy policy, dataplane::TxPacer pacer, bool send_times)
    : raw_(std::move(raw)),
      source_ipv4_(source_ipv4),
      batch_(batch),
      max_frame_(max_frame),
      policy_(policy),
      pacer_(pacer),
      send_times_(send_times),
      staging_(size_t{batch} * max_frame) {}

bool SocketTxQueue::poll() {
  // Frames are copied by the kernel at send time: nothing is left on loan.
  return dataplane::serve_copying(attachments(), pacer_,
                                  [this](dataplane::TxAttachment& a) { return drain(a); });
}

bool SocketTxQueue::drain(dataplane::TxAttachment& a) {
  if (pacer_.budget() == 0) return false;
  uint32_t n = a.take(descs_.data(), batch_, pacer_);
  if (n == 0) return false;
  // Frames the policy refuses are completed first, as failed; the rest keep their order.
  uint32_t m = 0;
  uint32_t refused = 0;
  uint64_t bytes = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const daqiri_tx_desc& d = descs_[i];
    // take() checked d.length <= the region's buf_size, which is max_frame_.
    std::byte* copy = staging_.data() + size_t{m} * max_frame_;
    std::memcpy(copy, a.buffer(d.buffer), d.length);
    auto verdict = dataplane::check_tx_frame({copy, d.length}, d.length, source_ipv4_, policy_);
    if (verdict.refused != nullptr) {
      descs_[refused++] = d;  // i >= refused: a slot already read
      continue;
    }
    pending_[m] = d;
    to_[m] = {};
    to_[m].sin_family = AF_INET;
    to_[m].sin_addr.s_addr = htonl(verdict.dst_ipv4);
    // The IP packet as checked; the kernel fills the IP checksum and total length.
    iov_[m] = {copy + frame::kEthHeader, verdict.ip_length};
    msgs_[m].msg_hdr = {};
    msgs_[m].msg_hdr.msg_name = &to_[m];
    msgs_[m].msg_hdr.msg_namelen = sizeof(sockaddr_in);
    msgs_[m].msg_hdr.msg_iov = &iov_[m];
    msgs_[m].msg_hdr.msg_iovlen = 1;
    bytes += d.length;
    ++m;
  }
  if (refused > 0) {
    dataplane::bump(a.counters.refused, refused);
    a.complete(descs_.data(), refused, true);
  }
  uint32_t sent = 0;
  while (sent < m) {
    int r = sendmmsg_now(raw_.get(), msgs_.data() + sent, m - sent, MSG_DONTWAIT);
    if (r <= 0) {
      // Socket buffer full or an error: the rest are completed unsent and counted.
      dataplane::bump(a.counters.send_errors, m - sent);
      break;
    }
    sent += uint32_t(r);
  }
  dataplane::bump(a.counters.packets, sent);
  dataplane::bump(a.counters.bytes, bytes);
  a.complete(pending_.data(), sent);
  a.complete(pending_.data() + sent, m - sent, true);
  return true;
}

}  // namespace daqiri::backends::socket
