// daqiri-rdma-bad-peer: an RDMA CM server that lies in its handshake, for the failure tests in
// the Soft-RoCE guest. It accepts one RC connection, advertises a remote window whose key it
// never registered, and waits: the first WRITE daqirid issues on a client's behalf is refused by
// this side's NIC, so daqirid's work completion carries a remote access error (counted, the
// connection torn down, the client's buffer back marked failed). It exits 0 when the connection
// ends, 1 after SECONDS without one.
//   daqiri-rdma-bad-peer ADDRESS PORT SECONDS
#include <arpa/inet.h>
#include <poll.h>
#include <rdma/rdma_cma.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "backends/rdma/rdma_handshake.hpp"
#include "backends/rdma/verbs.hpp"

namespace {

using daqiri::backends::rdma::CmId;
using daqiri::backends::rdma::CompletionQueue;
using daqiri::backends::rdma::EventChannel;
using daqiri::backends::rdma::ProtectionDomain;

int fail(const char* what) {
  std::perror(what);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: daqiri-rdma-bad-peer ADDRESS PORT SECONDS\n");
    return 2;
  }
  EventChannel channel(rdma_create_event_channel());
  if (!channel) return fail("rdma_create_event_channel");
  rdma_cm_id* raw = nullptr;
  if (rdma_create_id(channel.get(), &raw, nullptr, RDMA_PS_TCP) != 0) return fail("create_id");
  CmId listener(raw);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(std::atoi(argv[2])));
  inet_pton(AF_INET, argv[1], &addr.sin_addr);
  if (rdma_bind_addr(listener.get(), reinterpret_cast<sockaddr*>(&addr)) != 0) {
    return fail("rdma_bind_addr");
  }
  if (rdma_listen(listener.get(), 1) != 0) return fail("rdma_listen");
  std::printf("listening\n");
  std::fflush(stdout);

  CmId conn;
  ProtectionDomain pd;
  CompletionQueue cq;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(std::atoi(argv[3]));
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{channel->fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    rdma_cm_event* ev = nullptr;
    if (rdma_get_cm_event(channel.get(), &ev) != 0) return fail("rdma_get_cm_event");
    rdma_cm_event_type type = ev->event;
    rdma_cm_id* id = ev->id;
    rdma_ack_cm_event(ev);
    if (type == RDMA_CM_EVENT_CONNECT_REQUEST && !conn) {
      conn.reset(id);
      pd.reset(ibv_alloc_pd(id->verbs));
      cq.reset(ibv_create_cq(id->verbs, 64, nullptr, nullptr, 0));
      if (!pd || !cq) return fail("pd/cq");
      ibv_qp_init_attr qa{};
      qa.send_cq = cq.get();
      qa.recv_cq = cq.get();
      qa.qp_type = IBV_QPT_RC;
      qa.cap.max_send_wr = 16;
      qa.cap.max_recv_wr = 16;
      qa.cap.max_send_sge = 1;
      qa.cap.max_recv_sge = 1;
      if (rdma_create_qp(id, pd.get(), &qa) != 0) return fail("rdma_create_qp");
      // A writable window of 16 slots at an address and under a key that were never
      // registered: any WRITE to it is a remote access error.
      daqiri::backends::rdma::Handshake h;
      h.access = daqiri::backends::rdma::kWindowWritable;
      h.window_addr = 0x10000;
      h.window_rkey = 0xdead;
      h.slot_size = 4096;
      h.slots = 16;
      rdma_conn_param cp{};
      cp.private_data = &h;
      cp.private_data_len = sizeof h;
      cp.responder_resources = 1;
      cp.initiator_depth = 1;
      if (rdma_accept(id, &cp) != 0) return fail("rdma_accept");
    } else if (type == RDMA_CM_EVENT_ESTABLISHED) {
      std::printf("established\n");
      std::fflush(stdout);
    } else if (type == RDMA_CM_EVENT_DISCONNECTED) {
      std::printf("disconnected\n");
      rdma_destroy_qp(conn.get());
      return 0;
    }
  }
  std::printf("no connection ended within %s s\n", argv[3]);
  if (conn && conn->qp != nullptr) rdma_destroy_qp(conn.get());
  return 1;
}
