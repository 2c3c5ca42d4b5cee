// The session socket (SOCK_SEQPACKET, beside the control socket): the handshake that turns a
// gRPC Attach into mapped memory, and each client's lifeline. A session is one connected
// client process, identified by SO_PEERCRED and held by a pidfd. When its connection closes,
// its process exits, or it breaks the ring protocol, every attachment it holds ends and every
// buffer comes back. One thread runs the sockets; attach() is called from gRPC threads.
#pragma once

#include <sys/types.h>

#include <array>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "config/config.hpp"
#include "control/peer_identity.hpp"
#include "daqiri/abi.h"
#include "orchestrator/data_plane.hpp"
#include "session/process_handle.hpp"
#include "system/connection_acceptor.hpp"

namespace daqiri::session {

struct AttachSpec {
  uint64_t session_id = 0;
  std::string flow;          // RX when set
  std::string rx_interface;  // RX of a whole queue when set
  std::string rx_queue;
  std::string tx_interface;  // TX when set
  std::string tx_queue;
  bool tx_kicks = false;                     // TX: the client said it kicks
  orchestrator::RxAttachOptions rx_options;  // its gpu and who serve TX too
};

struct AttachGrant {
  uint64_t attachment_id = 0;
  std::array<uint8_t, DAQIRI_TOKEN_BYTES> token{};
};

struct SessionInfo {
  uint64_t id = 0;
  uid_t uid = 0;
  pid_t pid = 0;
  std::string user;
  std::string name;
  double age_seconds = 0;
  struct Attachment {
    uint64_t id;
    std::string target;
    bool rx;
    bool claimed;
  };
  std::vector<Attachment> attachments;
};

class SessionServer {
 public:
  static Result<std::unique_ptr<SessionServer>> start(const std::string& path,
                                                      const config::ClientLimitsConfig& limits,
                                                      std::optional<gid_t> group,
                                                      orchestrator::DataPlane& data_plane);
  // Ends every session (returning all buffers), stops the thread, removes the socket.
  ~SessionServer();
  SessionServer(const SessionServer&) = delete;
  SessionServer& operator=(const SessionServer&) = delete;

  // From gRPC: leases `spec`'s target to a session owned by `caller` (same uid and pid).
  Result<AttachGrant> attach(const control::PeerIdentity& caller, const AttachSpec& spec);
  [[nodiscard]] std::vector<SessionInfo> sessions() const;
  // Session of an attachment, 0 if none.
  [[nodiscard]] uint64_t session_of(uint64_t attachment_id) const;
  [[nodiscard]] uint64_t sessions_cut_off() const { return cut_off_.load(); }
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  struct Attachment {
    uint64_t id = 0;
    std::string target;
    bool rx = true;
    bool claimed = false;
    std::array<uint8_t, DAQIRI_TOKEN_BYTES> token{};
    orchestrator::MemoryCost memory;  // charged to its user while it exists
  };
  struct Session {
    uint64_t id = 0;
    UniqueFd conn;
    ProcessHandle pidfd;
    control::PeerIdentity peer;
    std::string name;
    bool welcomed = false;
    std::chrono::steady_clock::time_point started;
    std::map<uint64_t, Attachment> attachments;
    std::string unanswered;  // why an answer could not be sent: the session ends for it
  };

  SessionServer(std::string path, const config::ClientLimitsConfig& limits, UniqueFd listen,
                UniqueFd epoll, UniqueFd wake, orchestrator::DataPlane& dp);
  void run();
  void accept_one();
  void on_message(uint64_t session_id);
  // Each message, decoded (session_message.hpp): acts on it.
  void handle_hello(Session& s, std::string name);
  void handle_claim(Session& s, const daqiri_msg_claim& claim);
  void handle_detach(Session& s, const daqiri_msg_detach& d);
  // Sends an answer (an ERROR) to the session's client; one that cannot be sent is noted in
  // s.unanswered, and on_message ends the session after the handler.
  void answer(Session& s, const void* message, size_t size, std::span<const int> fds);
  void answer_error(Session& s, uint64_t attachment, int code, const std::string& text);
  // Sessions, welcomed or not, held by `uid`.
  uint32_t sessions_of(uid_t uid) const;
  // RESOURCE_EXHAUSTED when the caller's uid holds attachments_per_user already. Under mutex_.
  [[nodiscard]] Result<> check_attachment_limit(const control::PeerIdentity& caller) const;
  // Charges `cost` to `uid` if it fits daemon.limits' memory caps (RESOURCE_EXHAUSTED naming
  // the cap otherwise); uncharge() gives it back.
  Result<> charge(uid_t uid, const orchestrator::MemoryCost& cost);
  void uncharge(uid_t uid, const orchestrator::MemoryCost& cost);
  // Closes an attachment of a session of `uid` and gives back what it was charged.
  void close_attachment(uid_t uid, const Attachment& a);
  // Ends a session: every attachment closed, fds dropped. `why` goes to the log.
  void end_session(uint64_t session_id, const std::string& why);
  // Ends a session for breaking the protocol, and counts it.
  void cut_off(uint64_t session_id, const std::string& why);
  void cut_off_violators();

  std::string path_;
  config::ClientLimitsConfig limits_;
  UniqueFd listen_;
  system::ConnectionAcceptor acceptor_;
  UniqueFd epoll_;
  UniqueFd wake_;
  orchestrator::DataPlane& dp_;
  mutable std::mutex mutex_;  // sessions_ and their attachments
  std::map<uint64_t, std::unique_ptr<Session>> sessions_;
  std::set<uid_t> over_limit_;  // refused a session since their last one ended (logged once)
  // Memory charged per user and in all: its own lock, taken alone (the data plane's reserve
  // hook runs under the data plane's lock).
  std::mutex memory_mutex_;
  std::map<uid_t, orchestrator::MemoryCost> memory_;
  orchestrator::MemoryCost memory_total_;
  uint64_t next_session_ = 1;
  std::atomic<uint64_t> cut_off_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// "/run/daqiri/daqiri.sock" -> "/run/daqiri/daqiri.session.sock"
std::string session_socket_path(const std::string& control_socket);

}  // namespace daqiri::session
