// The session protocol spoken by hand (gRPC Attach, then the seqpacket handshake), for test
// clients that misbehave on purpose: libdaqiri would never send what they send.
#pragma once

#include <grpcpp/grpcpp.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <array>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "daqiri/abi.h"
#include "daqiri/common/fd_passing.hpp"
#include "daqiri/common/unique_fd.hpp"
#include "daqiri/session_header.hpp"
#include "daqiri/v1/control.grpc.pb.h"
#include "support/test_client_support.hpp"

namespace daqiri::test {

struct Raw {
  std::unique_ptr<v1::Control::Stub> stub;
  UniqueFd session;
  uint64_t session_id = 0;
  daqiri_msg_attached attached{};
  std::vector<UniqueFd> fds;
};

// An Attach granted but not yet claimed.
struct RawGrant {
  uint64_t attachment_id = 0;
  std::array<uint8_t, DAQIRI_TOKEN_BYTES> token{};
};

// Connects and says HELLO with `name` (all 64 bytes of it are sent as given).
inline bool raw_open(Raw& r, const std::string& socket,
                     const std::array<char, 64>& name = {"test-hostile"}) {
  r.stub = v1::Control::NewStub(
      grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials()));
  v1::Info info;
  grpc::ClientContext ctx;
  if (!r.stub->GetInfo(&ctx, {}, &info).ok()) return false;
  r.session.reset(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, info.session_socket().c_str(), sizeof a.sun_path - 1);
  if (::connect(r.session.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return false;
  daqiri_msg_hello h{};
  h.h = abi::message_header(DAQIRI_MSG_HELLO, sizeof h);
  std::memcpy(h.name, name.data(), sizeof h.name);
  (void)send_with_fds(r.session.get(), &h, sizeof h, {});
  daqiri_msg_welcome w{};
  std::vector<UniqueFd> none;
  auto n = recv_with_fds(r.session.get(), &w, sizeof w, none);
  r.session_id = w.session_id;
  return n && *n == sizeof w;
}

// gRPC Attach alone; false (saying why) when refused.
inline bool raw_grant(Raw& r, v1::AttachRequest req, RawGrant& grant, std::string* why = nullptr) {
  req.set_session_id(r.session_id);
  v1::AttachResponse resp;
  grpc::ClientContext ctx;
  auto st = r.stub->Attach(&ctx, req, &resp);
  if (!st.ok()) {
    if (why) *why = st.error_message();
    return false;
  }
  grant.attachment_id = resp.attachment_id();
  std::memcpy(grant.token.data(), resp.token().data(), DAQIRI_TOKEN_BYTES);
  return true;
}

// CLAIM on the session socket; true when ATTACHED came back (r.attached, r.fds), false with the
// ERROR's text in `why`.
inline bool raw_claim(Raw& r, const RawGrant& grant, std::string* why = nullptr) {
  daqiri_msg_claim c{};
  c.h = abi::message_header(DAQIRI_MSG_CLAIM, sizeof c);
  c.attachment_id = grant.attachment_id;
  std::memcpy(c.token, grant.token.data(), DAQIRI_TOKEN_BYTES);
  (void)send_with_fds(r.session.get(), &c, sizeof c, {});
  union {
    daqiri_msg_attached_gpu attached;
    daqiri_msg_error error;
  } reply{};
  r.fds.clear();
  auto n = recv_with_fds(r.session.get(), &reply, sizeof reply, r.fds);
  if (!n || *n < sizeof(daqiri_msg_header)) {
    if (why) *why = "no reply";
    return false;
  }
  if (reply.attached.base.h.type == DAQIRI_MSG_ATTACHED && *n >= sizeof r.attached) {
    std::memcpy(&r.attached, &reply.attached.base, sizeof r.attached);
    return true;
  }
  if (why) {
    *why = reply.error.h.type == DAQIRI_MSG_ERROR
               ? std::string(reply.error.message,
                             strnlen(reply.error.message, sizeof reply.error.message))
               : "unexpected reply";
  }
  return false;
}

inline bool raw_attach(Raw& r, const v1::AttachRequest& req) {
  RawGrant grant;
  std::string why;
  if (!raw_grant(r, req, grant, &why)) {
    say("attach failed: %s", why.c_str());
    return false;
  }
  return raw_claim(r, grant);
}

// Waits for the daemon to close the session: the proof of being cut off.
inline int expect_cut(Raw& r) {
  char buf[512];
  for (int i = 0; i < 500; ++i) {
    ssize_t n = ::recv(r.session.get(), buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0) {
      say("cut off");
      return 0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  say("still connected");
  return 1;
}

}  // namespace daqiri::test
