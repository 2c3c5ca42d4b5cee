#include "session/session_server.hpp"

#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "daqiri/common/fd_passing.hpp"
#include "daqiri/session_header.hpp"
#include "daqiri/v1/status_code.hpp"
#include "session/session_message.hpp"
#include "system/fd_headroom.hpp"
#include "system/socket_node.hpp"

namespace daqiri::session {
namespace {

constexpr int kGrpcNotFound = static_cast<int>(grpc::StatusCode::NOT_FOUND);
constexpr int kGrpcResourceExhausted = static_cast<int>(grpc::StatusCode::RESOURCE_EXHAUSTED);
constexpr int kGrpcUnavailable = static_cast<int>(grpc::StatusCode::UNAVAILABLE);
constexpr const char* kOutOfFds = "daqirid is out of file descriptors";

// What an epoll event names: the session it is for (never its fd number, which a closed
// session's successor may reuse within one batch of events) and which of its fds fired.
constexpr uint64_t kListenTag = ~uint64_t{0};
constexpr uint64_t kWakeTag = ~uint64_t{0} - 1;
uint64_t conn_tag(uint64_t session) {
  return session << 1;
}
uint64_t pidfd_tag(uint64_t session) {
  return session << 1 | 1;
}

bool same_token(const uint8_t* a, const uint8_t* b) {
  uint8_t diff = 0;  // constant time: a token is a secret
  for (size_t i = 0; i < DAQIRI_TOKEN_BYTES; ++i)
    diff |= a[i] ^ b[i];
  return diff == 0;
}

daqiri_msg_error error_message(uint64_t attachment, int code, const std::string& text) {
  daqiri_msg_error e{};
  e.h = abi::message_header(DAQIRI_MSG_ERROR, sizeof e);
  e.code = code;
  e.attachment_id = attachment;
  std::strncpy(e.message, text.c_str(), sizeof e.message - 1);
  return e;
}

// Tells a connection why it is not taken, before the caller closes it. What it sent so far
// (a HELLO) is read first: closing with a message unread makes the client's next read fail
// with ECONNRESET instead of returning the reason. A few messages at most: a client that
// keeps sending does not hold the session thread here.
void refuse(int conn, int code, const std::string& why) {
  auto e = error_message(0, code, why);
  (void)send_with_fds(conn, &e, sizeof e, {});
  alignas(8) unsigned char drain[sizeof(daqiri_msg_hello)];
  for (int i = 0; i < 4 && ::recv(conn, drain, sizeof drain, MSG_DONTWAIT) > 0; ++i) {
  }
}

}  // namespace

std::string session_socket_path(const std::string& control_socket) {
  const std::string suffix = ".sock";
  if (control_socket.size() > suffix.size() && control_socket.ends_with(suffix)) {
    return control_socket.substr(0, control_socket.size() - suffix.size()) + ".session.sock";
  }
  return control_socket + ".session";
}

Result<std::unique_ptr<SessionServer>> SessionServer::start(
    const std::string& path, const config::ClientLimitsConfig& limits, std::optional<gid_t> group,
    orchestrator::DataPlane& data_plane) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) return fail_errno("socket(SOCK_SEQPACKET)");
  ::unlink(path.c_str());  // stale: the daemon holds the instance lock
  if (auto ok = system::bind_socket_node(fd.get(), path, 0660, group); !ok) {
    return std::unexpected(ok.error());
  }
  auto undo = [&path](const std::string& what) {
    int e = errno;
    ::unlink(path.c_str());
    return fail_errno(what + " " + path, e);
  };
  if (::listen(fd.get(), 64) != 0) return undo("listen");
  UniqueFd ep(::epoll_create1(EPOLL_CLOEXEC));
  UniqueFd wake(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!ep || !wake) return undo("epoll/eventfd for");
  for (auto [f, tag] : {std::pair{fd.get(), kListenTag}, std::pair{wake.get(), kWakeTag}}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = tag;
    if (::epoll_ctl(ep.get(), EPOLL_CTL_ADD, f, &ev) != 0) return undo("epoll_ctl for");
  }
  std::unique_ptr<SessionServer> s(
      new SessionServer(path, limits, std::move(fd), std::move(ep), std::move(wake), data_plane));
  s->thread_ = std::thread([raw = s.get()] { raw->run(); });
  return s;
}

SessionServer::SessionServer(std::string path, const config::ClientLimitsConfig& limits,
                             UniqueFd listen, UniqueFd epoll, UniqueFd wake,
                             orchestrator::DataPlane& dp)
    : path_(std::move(path)),
      limits_(limits),
      listen_(std::move(listen)),
      acceptor_(path_, listen_.get(), SOCK_CLOEXEC | SOCK_NONBLOCK),
      epoll_(std::move(epoll)),
      wake_(std::move(wake)),
      dp_(dp) {}

SessionServer::~SessionServer() {
  stop_.store(true);
  uint64_t one = 1;
  [[maybe_unused]] auto w = ::write(wake_.get(), &one, sizeof one);
  if (thread_.joinable()) thread_.join();
  std::vector<uint64_t> ids;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [id, s] : sessions_)
      ids.push_back(id);
  }
  for (uint64_t id : ids)
    end_session(id, "daemon stopping");
  ::unlink(path_.c_str());
}

void SessionServer::run() {
  pthread_setname_np(pthread_self(), "sessions");
  epoll_event events[32];
  while (!stop_.load()) {
    // The timeout bounds how long a protocol violation goes unanswered.
    int n = ::epoll_wait(epoll_.get(), events, 32, 10);
    for (int i = 0; i < n; ++i) {
      uint64_t tag = events[i].data.u64;
      if (tag == kListenTag) {
        accept_one();
        continue;
      }
      if (tag == kWakeTag) continue;
      uint64_t sid = tag >> 1;
      bool is_pidfd = (tag & 1) != 0;
      {
        // A session this batch already ended: its events are stale.
        std::lock_guard lock(mutex_);
        if (!sessions_.contains(sid)) continue;
      }
      if (is_pidfd) {
        end_session(sid, "its process exited");
      } else if (events[i].events & EPOLLIN) {
        on_message(sid);
      } else {
        end_session(sid, "it disconnected");
      }
    }
    cut_off_violators();
  }
}

void SessionServer::accept_one() {
  UniqueFd conn =
      acceptor_.accept([](int refused) { refuse(refused, kGrpcResourceExhausted, kOutOfFds); });
  if (!conn) return;
  auto peer = control::identify_unix_peer(conn.get());
  if (!peer) {
    spdlog::warn("session socket: {}", peer.error().message);
    return;
  }
  if (uint32_t held = sessions_of(peer->uid); held >= limits_.sessions_per_user) {
    std::string why = peer->describe() + " already holds " + std::to_string(held) +
                      " sessions, the most daemon.limits.sessions_per_user allows";
    refuse(conn.get(), kGrpcResourceExhausted, why);
    std::lock_guard lock(mutex_);
    if (over_limit_.insert(peer->uid).second) spdlog::warn("session socket: refused: {}", why);
    return;
  }
  if (!system::fds_to_spare(1)) {  // the pidfd; the rest is gRPC's (system/fd_headroom.hpp)
    refuse(conn.get(), kGrpcResourceExhausted, kOutOfFds);
    acceptor_.count_refused();
    return;
  }
  ProcessHandle pidfd = ProcessHandle::open(peer->pid);
  if (!pidfd) {
    int err = errno;
    if (err == EMFILE || err == ENFILE) {
      refuse(conn.get(), kGrpcResourceExhausted, kOutOfFds);
      acceptor_.count_refused();  // logged once a streak: a line each would flood the log
      return;
    }
    spdlog::warn("session socket: pidfd_open({}): {}", peer->pid, std::strerror(err));
    refuse(conn.get(), kGrpcUnavailable,
           std::string("daqirid cannot watch the process: ") + std::strerror(err));
    return;
  }
  auto s = std::make_unique<Session>();
  s->peer = std::move(*peer);
  s->started = std::chrono::steady_clock::now();
  std::lock_guard lock(mutex_);
  s->id = next_session_++;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.u64 = conn_tag(s->id);
  // Unwatched, the session would never be served nor ended: refuse it instead.
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, conn.get(), &ev) != 0 ||
      pidfd.watch(epoll_.get(), pidfd_tag(s->id)) != 0) {
    std::string why = std::string("daqirid cannot watch the session: ") + std::strerror(errno);
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, conn.get(), nullptr);
    spdlog::warn("session socket: {}", why);
    refuse(conn.get(), kGrpcUnavailable, why);
    return;
  }
  acceptor_.kept();
  s->conn = std::move(conn);
  s->pidfd = std::move(pidfd);
  sessions_[s->id] = std::move(s);
}

void SessionServer::on_message(uint64_t session_id) {
  alignas(8) unsigned char buf[512];
  std::vector<UniqueFd> fds;
  Session* s = nullptr;
  {
    std::lock_guard lock(mutex_);
    auto it = sessions_.find(session_id);
    if (it == sessions_.end()) return;
    s = it->second.get();
  }
  // Only this thread ends sessions, so `s` stays valid until we do.
  auto n = recv_with_fds(s->conn.get(), buf, sizeof buf, fds, MSG_DONTWAIT);
  if (!n) {
    if (n.error().code == ErrorCode::kInvalidArgument) {
      cut_off(session_id, "it sent an oversized message");
    } else if (errno != EAGAIN) {
      end_session(session_id, "it disconnected");
    }
    return;
  }
  if (*n == 0) {
    end_session(session_id, "it disconnected");
    return;
  }
  auto message = decode_session_message({reinterpret_cast<const std::byte*>(buf), *n}, fds.size(),
                                        s->welcomed);
  if (auto* hello = std::get_if<Hello>(&message)) {
    handle_hello(*s, std::move(hello->name));
  } else if (auto* claim = std::get_if<Claim>(&message)) {
    handle_claim(*s, claim->msg);
  } else if (auto* detach = std::get_if<Detach>(&message)) {
    handle_detach(*s, detach->msg);
  } else {
    const auto& refusal = std::get<Refusal>(message);
    if (refusal.end) {
      end_session(session_id, refusal.why);
    } else {
      cut_off(session_id, refusal.why);
    }
    return;
  }
  // The client waits for the answer that was lost: ending the session tells it.
  if (!s->unanswered.empty()) end_session(session_id, s->unanswered);
}

void SessionServer::answer(Session& s, const void* message, size_t size, std::span<const int> fds) {
  auto ok = send_with_fds(s.conn.get(), message, size, fds);
  if (!ok && s.unanswered.empty()) s.unanswered = "its answer was lost: " + ok.error().message;
}

void SessionServer::answer_error(Session& s, uint64_t attachment, int code,
                                 const std::string& text) {
  auto e = error_message(attachment, code, text);
  answer(s, &e, sizeof e, {});
}

void SessionServer::handle_hello(Session& s, std::string name) {
  {
    std::lock_guard lock(mutex_);
    s.name = std::move(name);
    s.welcomed = true;
  }
  daqiri_msg_welcome w{abi::message_header(DAQIRI_MSG_WELCOME, sizeof(daqiri_msg_welcome)), s.id};
  answer(s, &w, sizeof w, {});
  spdlog::info("session {} opened: {} pid {} \"{}\"", s.id, s.peer.describe(), s.peer.pid, s.name);
}

void SessionServer::handle_claim(Session& s, const daqiri_msg_claim& claim) {
  {
    std::lock_guard lock(mutex_);
    auto it = s.attachments.find(claim.attachment_id);
    if (it == s.attachments.end() || it->second.claimed ||
        !same_token(it->second.token.data(), claim.token)) {
      // Unknown, already claimed, or a wrong token: nothing is revealed about which.
      answer_error(s, claim.attachment_id, kGrpcNotFound, "no such attachment for this session");
      return;
    }
    it->second.claimed = true;  // one time only, right or wrong later on
  }
  auto share = dp_.activate(claim.attachment_id);
  if (!share) {
    answer_error(s, claim.attachment_id, static_cast<int>(v1::to_grpc_code(share.error().code)),
                 share.error().message);
    return;
  }
  daqiri_msg_attached_gpu message{};
  daqiri_msg_attached& a = message.base;
  size_t size = share->is_gpu() ? sizeof message : sizeof a;
  a.h = abi::message_header(DAQIRI_MSG_ATTACHED, static_cast<uint32_t>(size));
  a.attachment_id = share->id;
  a.direction = share->gpu_ipc                 ? DAQIRI_DIRECTION_GPU_RX_IPC
                : share->is_gpu() && share->rx ? DAQIRI_DIRECTION_GPU_RX
                : share->is_gpu()              ? DAQIRI_DIRECTION_GPU_TX
                : share->rx                    ? DAQIRI_DIRECTION_RX
                                               : DAQIRI_DIRECTION_TX;
  a.region_count = static_cast<uint32_t>(share->regions.size());
  a.rings_size = share->rings_size;
  a.ring_offset = share->ring_offset;
  a.completion_offset = share->completion_offset;
  std::vector<int> fds{share->rings_fd.get(), share->event_fd.get()};
  for (size_t i = 0; i < share->regions.size() && i < DAQIRI_MAX_REGIONS; ++i) {
    const auto& r = share->regions[i];
    a.regions[i] = {r.size, r.buf_size, r.num_bufs, r.writable ? 1u : 0u, 0};
    fds.push_back(r.fd.get());
  }
  if (share->kick_fd) fds.push_back(share->kick_fd.get());  // RX, TX and GPU TX
  if (share->is_gpu()) {
    message.gpu = share->gpu;
    if (share->gpu_fd) fds.push_back(share->gpu_fd.get());  // none for a cuda_ipc ring
  }
  answer(s, &message, size, fds);
}

void SessionServer::handle_detach(Session& s, const daqiri_msg_detach& d) {
  std::optional<Attachment> known;
  {
    std::lock_guard lock(mutex_);
    if (auto it = s.attachments.find(d.attachment_id); it != s.attachments.end()) {
      known = it->second;
      s.attachments.erase(it);
    }
  }
  if (!known) {
    answer_error(s, d.attachment_id, kGrpcNotFound, "no such attachment for this session");
    return;
  }
  close_attachment(s.peer.uid, *known);
  daqiri_msg_detach reply{abi::message_header(DAQIRI_MSG_DETACHED, sizeof reply), d.attachment_id};
  answer(s, &reply, sizeof reply, {});
}

void SessionServer::cut_off(uint64_t session_id, const std::string& why) {
  cut_off_.fetch_add(1);
  spdlog::warn("session {}: cutting off: {}", session_id, why);
  end_session(session_id, why);
}

void SessionServer::end_session(uint64_t session_id, const std::string& why) {
  std::unique_ptr<Session> s;
  {
    std::lock_guard lock(mutex_);
    auto it = sessions_.find(session_id);
    if (it == sessions_.end()) return;
    s = std::move(it->second);
    sessions_.erase(it);
    over_limit_.erase(s->peer.uid);  // the next refusal is news again
  }
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, s->conn.get(), nullptr);
  s->pidfd.unwatch(epoll_.get());
  for (const auto& [id, a] : s->attachments)
    close_attachment(s->peer.uid, a);
  if (s->welcomed || !s->attachments.empty()) {
    spdlog::info(
        "session {} ({} pid {}) ended: {}; {} attachment(s) closed, their buffers "
        "returned",
        s->id, s->peer.describe(), s->peer.pid, why, s->attachments.size());
  }
}

void SessionServer::cut_off_violators() {
  auto violated = dp_.violated();
  for (const orchestrator::DataPlane::Violation& v : violated) {
    uint64_t sid = session_of(v.attachment);
    if (sid == 0) {
      dp_.close(v.attachment);
      continue;
    }
    if (v.engine_call != nullptr) {  // not the client's doing: not counted as cut off
      spdlog::error("session {}: cutting off: attachment {}: its engine failed: {}: {}", sid,
                    v.attachment, v.engine_call,
                    v.engine_error != nullptr ? v.engine_error : "unknown error");
      end_session(sid, "the daemon's engine for its attachment failed");
      continue;
    }
    cut_off_.fetch_add(1);
    spdlog::warn(
        "session {}: cutting off: attachment {} wrote an impossible ring index or "
        "descriptor",
        sid, v.attachment);
    end_session(sid, "it broke the ring protocol");
  }
}

Result<AttachGrant> SessionServer::attach(const control::PeerIdentity& caller,
                                          const AttachSpec& spec) {
  if (caller.transport != control::PeerIdentity::Transport::kUnix) {
    return fail(ErrorCode::kPermissionDenied,
                "attachments are for local processes: call Attach on the Unix socket");
  }
  {
    std::lock_guard lock(mutex_);
    auto it = sessions_.find(spec.session_id);
    if (it == sessions_.end() || !it->second->welcomed) {
      return fail(
          ErrorCode::kNotFound,
          "no session " + std::to_string(spec.session_id) + " (open one on " + path_ + " first)",
          "session_id");
    }
    const Session& s = *it->second;
    if (s.peer.uid != caller.uid || s.peer.pid != caller.pid) {
      return fail(ErrorCode::kPermissionDenied,
                  "session " + std::to_string(spec.session_id) +
                      " belongs to another process; attach from the process that opened it",
                  "session_id");
    }
    if (auto full = check_attachment_limit(caller); !full) return std::unexpected(full.error());
  }
  // What the attachment opens (a ring's memfd, its eventfd and kick eventfd; TX also its
  // pool's memfd), and the copies handed over at CLAIM (RX: with its regions reopened). A GPU
  // TX attachment is two TX attachments (the client's and the one the queue sends from) and
  // the GPU buffers' VMM fd at CLAIM.
  const bool gpu_tx = spec.flow.empty() && spec.rx_interface.empty() && spec.rx_options.gpu;
  if (!system::fds_to_spare(gpu_tx ? 14 : 8)) {
    return fail(ErrorCode::kResourceExhausted, kOutOfFds);
  }
  // Charged before the data plane allocates anything; given back if it then fails.
  Attachment a;
  auto reserve = [&](const orchestrator::MemoryCost& cost) -> Result<> {
    if (auto ok = charge(caller.uid, cost); !ok) return ok;
    a.memory = cost;
    return {};
  };
  Result<uint64_t> id =
      !spec.flow.empty() ? dp_.create_rx(spec.flow, spec.rx_options, reserve)
      : !spec.rx_interface.empty()
          ? dp_.create_rx_queue(spec.rx_interface, spec.rx_queue, spec.rx_options, reserve)
          : dp_.create_tx(spec.tx_interface, spec.tx_queue,
                          {spec.tx_kicks, spec.rx_options.gpu, spec.rx_options.who}, reserve);
  if (!id) {
    uncharge(caller.uid, a.memory);
    return std::unexpected(id.error());
  }
  a.id = *id;
  a.rx = !spec.flow.empty() || !spec.rx_interface.empty();
  AttachGrant grant;
  grant.attachment_id = *id;
  if (::getrandom(grant.token.data(), grant.token.size(), 0) !=
      static_cast<ssize_t>(grant.token.size())) {
    close_attachment(caller.uid, a);
    return fail_errno("getrandom");
  }
  a.target = dp_.target(*id);  // the name stats use too, TX queue resolved
  a.token = grant.token;
  Result<> kept;
  {
    std::lock_guard lock(mutex_);
    auto it = sessions_.find(spec.session_id);
    if (it == sessions_.end()) {  // it ended meanwhile
      kept = fail(ErrorCode::kNotFound, "the session ended", "session_id");
    } else {
      // Again, for calls of the same user that were checked side by side.
      kept = check_attachment_limit(caller);
      if (kept) it->second->attachments[*id] = a;
    }
  }
  if (!kept) {  // closed outside the session lock: close() waits for the pollers
    close_attachment(caller.uid, a);
    return std::unexpected(kept.error());
  }
  return grant;
}

std::vector<SessionInfo> SessionServer::sessions() const {
  std::lock_guard lock(mutex_);
  std::vector<SessionInfo> out;
  auto now = std::chrono::steady_clock::now();
  for (const auto& [id, s] : sessions_) {
    SessionInfo info;
    info.id = id;
    info.uid = s->peer.uid;
    info.pid = s->peer.pid;
    info.user = s->peer.user;
    info.name = s->name;
    info.age_seconds = std::chrono::duration<double>(now - s->started).count();
    for (const auto& [aid, a] : s->attachments) {
      info.attachments.push_back({aid, a.target, a.rx, a.claimed});
    }
    out.push_back(std::move(info));
  }
  return out;
}

Result<> SessionServer::charge(uid_t uid, const orchestrator::MemoryCost& cost) {
  constexpr uint64_t kMiB = 1 << 20;
  std::lock_guard lock(memory_mutex_);
  orchestrator::MemoryCost& mine = memory_[uid];
  auto within = [&](uint64_t now, uint64_t more, uint32_t cap_mb, const char* key,
                    const char* kind) -> Result<> {
    if (now + more <= uint64_t{cap_mb} * kMiB) return {};
    return fail(ErrorCode::kResourceExhausted,
                "the attachment takes " + std::to_string((more + kMiB - 1) / kMiB) + " MiB of " +
                    kind + " memory; " + std::to_string((now + kMiB - 1) / kMiB) + " MiB of the " +
                    std::to_string(cap_mb) + " MiB daemon.limits." + key + " allows are taken");
  };
  Result<> ok =
      within(mine.host, cost.host, limits_.memory_mb_per_user, "memory_mb_per_user", "host");
  if (ok) {
    ok = within(memory_total_.host, cost.host, limits_.memory_mb_total, "memory_mb_total", "host");
  }
  if (ok) {
    ok =
        within(mine.gpu, cost.gpu, limits_.gpu_memory_mb_per_user, "gpu_memory_mb_per_user", "GPU");
  }
  if (ok) {
    ok = within(memory_total_.gpu, cost.gpu, limits_.gpu_memory_mb_total, "gpu_memory_mb_total",
                "GPU");
  }
  if (!ok) {
    if (mine.host == 0 && mine.gpu == 0) memory_.erase(uid);
    return ok;
  }
  mine.host += cost.host;
  mine.gpu += cost.gpu;
  memory_total_.host += cost.host;
  memory_total_.gpu += cost.gpu;
  return {};
}

void SessionServer::uncharge(uid_t uid, const orchestrator::MemoryCost& cost) {
  if (cost.host == 0 && cost.gpu == 0) return;
  std::lock_guard lock(memory_mutex_);
  orchestrator::MemoryCost& mine = memory_[uid];
  mine.host -= cost.host;
  mine.gpu -= cost.gpu;
  memory_total_.host -= cost.host;
  memory_total_.gpu -= cost.gpu;
  if (mine.host == 0 && mine.gpu == 0) memory_.erase(uid);
}

void SessionServer::close_attachment(uid_t uid, const Attachment& a) {
  dp_.close(a.id);
  uncharge(uid, a.memory);
}

Result<> SessionServer::check_attachment_limit(const control::PeerIdentity& caller) const {
  size_t held = 0;
  for (const auto& [id, s] : sessions_) {
    if (s->peer.uid == caller.uid) held += s->attachments.size();
  }
  if (held < limits_.attachments_per_user) return {};
  return fail(ErrorCode::kResourceExhausted,
              caller.describe() + " already holds " + std::to_string(held) +
                  " attachments, the most daemon.limits.attachments_per_user allows");
}

uint32_t SessionServer::sessions_of(uid_t uid) const {
  std::lock_guard lock(mutex_);
  uint32_t n = 0;
  for (const auto& [id, s] : sessions_)
    n += s->peer.uid == uid ? 1 : 0;
  return n;
}

uint64_t SessionServer::session_of(uint64_t attachment_id) const {
  std::lock_guard lock(mutex_);
  for (const auto& [id, s] : sessions_) {
    if (s->attachments.contains(attachment_id)) return id;
  }
  return 0;
}

}  // namespace daqiri::session
