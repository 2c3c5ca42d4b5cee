// libdaqiri: the session handshake, attachment mappings, and the ring protocol's client side.
#include "daqiri/client.hpp"

#include <grpcpp/grpcpp.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "daqiri/common/fd_passing.hpp"
#include "daqiri/common/mapping.hpp"
#include "daqiri/common/unique_fd.hpp"
#include "daqiri/ring.hpp"
#include "daqiri/session_header.hpp"
#include "daqiri/v1/control.grpc.pb.h"
#include "daqiri/v1/status_code.hpp"

namespace daqiri {
namespace {

Error from_status(const grpc::Status& s) {
  return {v1::from_grpc_code(s.error_code()), s.error_message(), {}};
}

// The daemon's ERROR message as an error of ours (its code is a gRPC status code).
Error from_message(const void* msg) {
  daqiri_msg_error e{};
  std::memcpy(&e, msg, sizeof e);
  e.message[sizeof e.message - 1] = '\0';
  return from_status(grpc::Status(static_cast<grpc::StatusCode>(e.code), e.message));
}

// What an ATTACHED message brings: mapped rings and regions.
struct Attached {
  uint64_t id = 0;
  Mapping rings;
  UniqueFd eventfd;
  // Written after a submit that finds NEED_WAKEUP on the TX ring, or (RX) after a release
  // that finds NEED_KICK on the RX ring.
  UniqueFd kick;
  size_t ring_offset = 0;
  size_t completion_offset = 0;
  struct Region {
    Mapping map;
    uint32_t buf_size = 0;
    uint32_t num_bufs = 0;
  };
  std::vector<Region> regions;
  // GPU TX: the GPU buffers' VMM fd and layout.
  UniqueFd gpu;
  daqiri_gpu_ring_info gpu_info{};
};

constexpr size_t kCudaIpcHandleBytes = 64;  // CU_IPC_HANDLE_SIZE
// The most descriptor lines next_burst() prefetches: about what a core keeps in flight.
constexpr uint32_t kPrefetchLines = 16;

// No flow and no queue given: the flow the environment names (DAQIRI_FLOW, which a container
// given one flow through CDI has), else none.
RxOptions with_environment_flow(RxOptions o) {
  if (o.flow.empty() && o.interface.empty() && o.queue.empty()) {
    if (const char* env = std::getenv("DAQIRI_FLOW")) o.flow = env;
  }
  return o;
}

v1::AttachRequest rx_request(const RxOptions& o) {
  v1::AttachRequest req;
  if (!o.flow.empty()) {
    req.set_flow(o.flow);
  } else {
    req.mutable_rx_queue()->set_interface(o.interface);
    req.mutable_rx_queue()->set_queue(o.queue);
  }
  req.set_ring_size(o.ring_size);
  req.set_backpressure(o.block ? v1::BACKPRESSURE_BLOCK : v1::BACKPRESSURE_DROP_NEW);
  req.set_compact(o.compact);
  return req;
}

v1::AttachRequest tx_request(const TxOptions& o) {
  v1::AttachRequest req;
  req.mutable_tx_queue()->set_interface(o.interface);
  req.mutable_tx_queue()->set_queue(o.queue);
  req.set_kicks(o.kick);  // submit() kicks: the daemon need not poll for this client
  req.set_gpu(o.gpu);
  return req;
}

void send_detach(int session, uint64_t id) {
  daqiri_msg_detach d{abi::message_header(DAQIRI_MSG_DETACH, sizeof(daqiri_msg_detach)), id};
  if (send_with_fds(session, &d, sizeof d, {})) {
    alignas(8) unsigned char buf[sizeof(daqiri_msg_error)];
    std::vector<UniqueFd> fds;
    (void)recv_with_fds(session, buf, sizeof buf, fds);
  }
}

bool hung_up(int fd) {
  pollfd p{fd, POLLRDHUP, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR)) != 0;
}

}  // namespace

struct Client::Impl {
  ClientOptions options;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Control::Stub> stub;
  std::string session_path;
  UniqueFd session;
  uint64_t session_id = 0;
  uint64_t sessions_opened = 0;
  std::vector<std::unique_ptr<RxStream>> rx;
  std::vector<std::unique_ptr<TxStream>> tx;

  std::unique_ptr<grpc::ClientContext> context() const {
    auto c = std::make_unique<grpc::ClientContext>();
    c->set_deadline(std::chrono::system_clock::now() + options.timeout);
    return c;
  }
  // A new channel: one that saw its daemon go waits out gRPC's reconnect backoff (a second,
  // then longer each time) before it tries again, long after a restarted daemon is back.
  void open_channel() {
    channel = grpc::CreateChannel("unix:" + options.socket, grpc::InsecureChannelCredentials());
    stub = v1::Control::NewStub(channel);
  }
  Result<> open_session();
  // Attach + CLAIM: the ATTACHED message (host or GPU) and its fds.
  struct Claimed {
    daqiri_msg_attached_gpu msg{};
    std::vector<UniqueFd> fds;
    std::string cuda_ipc_handle;  // from the Attach reply
  };
  Result<Claimed> claim(const v1::AttachRequest& request);
  Result<Attached> attach(const v1::AttachRequest& request);
  bool broken() const { return !session || hung_up(session.get()); }
};

Result<> Client::Impl::open_session() {
  v1::Info info;
  auto ctx = context();
  auto st = stub->GetInfo(ctx.get(), {}, &info);
  if (!st.ok()) return std::unexpected(from_status(st));
  if (info.abi_version() != DAQIRI_ABI_VERSION) {
    return fail(ErrorCode::kFailedPrecondition,
                "daqirid speaks ABI " + std::to_string(info.abi_version()) + ", this library " +
                    std::to_string(DAQIRI_ABI_VERSION));
  }
  session_path = info.session_socket();
  UniqueFd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!fd) return fail_errno("socket(SOCK_SEQPACKET)");
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, session_path.c_str(), sizeof addr.sun_path - 1);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    return fail_errno("connect " + session_path);
  }
  daqiri_msg_hello hello{};
  hello.h = abi::message_header(DAQIRI_MSG_HELLO, sizeof hello);
  std::strncpy(hello.name, options.name.c_str(), sizeof hello.name - 1);
  // The daemon answers ERROR instead of WELCOME when it will not take the session (a limit
  // reached), and hangs up, perhaps before the HELLO arrives: its reason is still there to
  // read when the send failed.
  auto sent = send_with_fds(fd.get(), &hello, sizeof hello, {});
  alignas(8) unsigned char reply[sizeof(daqiri_msg_error)];
  std::vector<UniqueFd> fds;
  auto n = recv_with_fds(fd.get(), reply, sizeof reply, fds, sent ? 0 : MSG_DONTWAIT);
  // A hang-up while our HELLO was unread is reported first (ECONNRESET), the reply after it.
  if (!n && errno == ECONNRESET)
    n = recv_with_fds(fd.get(), reply, sizeof reply, fds, MSG_DONTWAIT);
  daqiri_msg_header h{};
  if (n && *n >= sizeof h) std::memcpy(&h, reply, sizeof h);
  if (h.type == DAQIRI_MSG_ERROR && *n == sizeof(daqiri_msg_error)) {
    return std::unexpected(from_message(reply));
  }
  if (!sent) return sent;
  if (!n) return std::unexpected(n.error());
  daqiri_msg_welcome welcome{};
  if (*n != sizeof welcome || h.type != DAQIRI_MSG_WELCOME) {
    return fail(ErrorCode::kUnavailable, "daqirid refused the session");
  }
  std::memcpy(&welcome, reply, sizeof welcome);
  session = std::move(fd);
  session_id = welcome.session_id;
  ++sessions_opened;
  return {};
}

Result<Client::Impl::Claimed> Client::Impl::claim(const v1::AttachRequest& request) {
  v1::AttachRequest req = request;
  req.set_session_id(session_id);
  v1::AttachResponse resp;
  auto ctx = context();
  auto st = stub->Attach(ctx.get(), req, &resp);
  if (!st.ok()) return std::unexpected(from_status(st));
  if (resp.token().size() != DAQIRI_TOKEN_BYTES) {
    return fail(ErrorCode::kInternal, "daqirid sent a token of the wrong size");
  }
  daqiri_msg_claim claim{};
  claim.h = abi::message_header(DAQIRI_MSG_CLAIM, sizeof claim);
  claim.attachment_id = resp.attachment_id();
  std::memcpy(claim.token, resp.token().data(), DAQIRI_TOKEN_BYTES);
  if (auto ok = send_with_fds(session.get(), &claim, sizeof claim, {}); !ok) {
    return std::unexpected(ok.error());
  }
  alignas(8) unsigned char buf[sizeof(daqiri_msg_error) + sizeof(daqiri_msg_attached_gpu)];
  Claimed c;
  std::vector<UniqueFd>& fds = c.fds;
  auto n = recv_with_fds(session.get(), buf, sizeof buf, fds);
  if (!n) return std::unexpected(n.error());
  daqiri_msg_header h{};
  if (*n < sizeof h) return fail(ErrorCode::kUnavailable, "the daemon closed the session");
  std::memcpy(&h, buf, sizeof h);
  if (h.type == DAQIRI_MSG_ERROR && *n == sizeof(daqiri_msg_error)) {
    return std::unexpected(from_message(buf));
  }
  daqiri_msg_attached& a = c.msg.base;
  if (h.type != DAQIRI_MSG_ATTACHED || *n < sizeof a) {
    return fail(ErrorCode::kInternal, "unexpected reply to CLAIM");
  }
  std::memcpy(&a, buf, sizeof a);
  bool ipc = a.direction == DAQIRI_DIRECTION_GPU_RX_IPC;  // the ring came as a handle, not an fd
  bool gpu_tx = a.direction == DAQIRI_DIRECTION_GPU_TX;
  bool gpu = a.direction == DAQIRI_DIRECTION_GPU_RX || ipc || gpu_tx;
  // RX, TX and GPU TX rings come with a kick eventfd, after the regions; GPU RX rings without.
  bool kicks = a.direction == DAQIRI_DIRECTION_TX || a.direction == DAQIRI_DIRECTION_RX || gpu_tx;
  if (*n != (gpu ? sizeof c.msg : sizeof a)) {
    return fail(ErrorCode::kInternal, "ATTACHED has the wrong size");
  }
  if (gpu) std::memcpy(&c.msg, buf, sizeof c.msg);
  c.cuda_ipc_handle = resp.cuda_ipc_handle();
  if (a.region_count > DAQIRI_MAX_REGIONS ||
      fds.size() != 2 + a.region_count + (gpu && !ipc ? 1 : 0) + (kicks ? 1 : 0)) {
    return fail(ErrorCode::kInternal, "ATTACHED carried the wrong number of fds");
  }
  return c;
}

Result<Attached> Client::Impl::attach(const v1::AttachRequest& request) {
  auto c = claim(request);
  if (!c) return std::unexpected(c.error());
  const daqiri_msg_attached& a = c->msg.base;
  std::vector<UniqueFd>& fds = c->fds;
  bool gpu_tx = a.direction == DAQIRI_DIRECTION_GPU_TX;
  if (a.direction == DAQIRI_DIRECTION_GPU_RX || a.direction == DAQIRI_DIRECTION_GPU_RX_IPC ||
      gpu_tx != request.gpu()) {
    send_detach(session.get(), a.attachment_id);
    return fail(ErrorCode::kInternal, "the daemon answered with another kind of attachment");
  }
  Attached out;
  out.id = a.attachment_id;
  auto rings = map_fd(fds[0].get(), a.rings_size, true);
  if (!rings) return std::unexpected(rings.error());
  out.rings = std::move(*rings);
  out.eventfd = std::move(fds[1]);
  out.ring_offset = a.ring_offset;
  out.completion_offset = a.completion_offset;
  for (uint32_t i = 0; i < a.region_count; ++i) {
    auto m = map_fd(fds[2 + i].get(), a.regions[i].size, a.regions[i].writable != 0);
    if (!m) return std::unexpected(m.error());
    out.regions.push_back({std::move(*m), a.regions[i].buf_size, a.regions[i].num_bufs});
  }
  out.kick = std::move(fds[2 + a.region_count]);
  if (gpu_tx) {
    out.gpu = std::move(fds[3 + a.region_count]);
    out.gpu_info = c->msg.gpu;
  }
  return out;
}

// ---- RX ----------------------------------------------------------------------------------

struct RxStream::State {
  Client::Impl* client = nullptr;
  Attached attached;
  abi::RingView ring;
  uint32_t read = 0;        // next descriptor to hand out
  uint32_t released = 0;    // consumer index published
  detail::RxRingView view;  // what Burst::operator[] reads

  Result<> adopt(Attached a, const RxOptions& options) {
    bool compact = options.compact;
    auto r = abi::RingView::open(a.rings.data() + a.ring_offset, a.rings.size() - a.ring_offset,
                                 compact ? DAQIRI_RING_RX_COMPACT : DAQIRI_RING_RX,
                                 compact ? sizeof(daqiri_rx_desc_compact) : sizeof(daqiri_rx_desc));
    if (!r) return fail(ErrorCode::kInternal, "the daemon's RX ring does not check out");
    if (a.regions.size() > view.regions.size()) {
      return fail(ErrorCode::kInternal, "the daemon shared more regions than the ABI allows");
    }
    attached = std::move(a);
    ring = *r;
    read = released = 0;
    view = {};
    view.slots = ring.slot<std::byte>(0);
    view.mask = ring.size() - 1;
    view.compact = compact;
    view.find_payloads = options.find_payloads;
    view.region_count = static_cast<uint32_t>(attached.regions.size());
    for (uint32_t i = 0; i < view.region_count; ++i)
      view.regions[i] = {attached.regions[i].map.data(), attached.regions[i].map.size()};
    return {};
  }
};

RxStream::RxStream(RxOptions options, std::unique_ptr<State> state)
    : options_(std::move(options)), s_(std::move(state)) {}
RxStream::~RxStream() = default;

uint64_t RxStream::id() const {
  return s_->attached.id;
}

RxStream::Memory RxStream::memory() const {
  const Attached& a = s_->attached;
  Memory m;
  m.rings = {a.rings.data(), a.rings.size()};
  m.ring = reinterpret_cast<daqiri_ring_header*>(a.rings.data() + a.ring_offset);
  m.view = s_->view;
  return m;
}

Burst RxStream::next_burst(uint32_t max) {
  uint32_t avail = s_->ring.load_producer() - s_->read;
  if (avail > s_->ring.size()) avail = 0;  // not a producer index the daemon could have written
  uint32_t n = max == 0 ? avail : std::min(avail, max);
  // The daemon's core wrote these slots: start every line's miss now, so that they overlap
  // (read one packet at a time, the misses waited on each other's instructions).
  const auto& v = s_->view;
  const uint32_t desc = v.compact ? sizeof(daqiri_rx_desc_compact) : sizeof(daqiri_rx_desc);
  const uint32_t per_line = DAQIRI_CACHE_LINE / desc;
  const uint32_t ahead = std::min(n, kPrefetchLines * per_line);
  for (uint32_t i = 0; i < ahead; i += per_line)
    __builtin_prefetch(v.slots + size_t{(s_->read + i) & v.mask} * desc);
  Burst b(&s_->view, s_->read, n);
  s_->read += n;
  return b;
}

Result<Burst> RxStream::wait_burst(std::chrono::milliseconds timeout, uint32_t max) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    Burst b = next_burst(max);
    if (!b.empty()) return b;
    if (detached()) return fail(ErrorCode::kUnavailable, "the stream is detached");
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return Burst();
    s_->ring.sleep_for_producer(s_->attached.eventfd.get(), s_->read,
                                static_cast<int>(left.count()) + 1, s_->client->session.get());
  }
}

void RxStream::release(const Burst& burst) {
  if (burst.view_ != &s_->view) return;  // not a burst of this stream
  uint32_t end = burst.first_ + burst.count_;
  if (end - s_->released > s_->read - s_->released) return;  // released already
  s_->released = end;
  s_->ring.publish_consumer(end);
  s_->ring.kick_producer(s_->attached.kick.get());  // the flow may wait for this release
}

bool RxStream::detached() const {
  return s_->ring.state() != DAQIRI_RING_ACTIVE || s_->client->broken();
}

// ---- TX ----------------------------------------------------------------------------------

struct TxStream::State {
  Client::Impl* client = nullptr;
  Attached attached;
  abi::RingView tx;
  abi::RingView completion;
  std::vector<uint32_t> free;
  std::vector<uint8_t> mine;  // 1 while the client holds the buffer
  uint32_t produced = 0;
  uint32_t completed = 0;
  uint64_t failed = 0;
  uint32_t max_length = 0;  // of a frame
  TxGpuMemory gpu_memory;

  Result<> adopt(Attached a) {
    auto t = abi::RingView::open(a.rings.data() + a.ring_offset, a.completion_offset,
                                 DAQIRI_RING_TX, sizeof(daqiri_tx_desc));
    auto c = abi::RingView::open(a.rings.data() + a.completion_offset,
                                 a.rings.size() - a.completion_offset, DAQIRI_RING_COMPLETION,
                                 sizeof(uint32_t));
    // GPU TX: the header buffers (none when frames are in GPU memory whole) pair with the GPU
    // buffers one to one.
    const daqiri_gpu_ring_info& g = a.gpu_info;
    bool gpu = a.gpu.valid();
    bool regions_ok =
        gpu ? a.regions.size() == (g.header_size != 0 ? 1u : 0u) &&
                  (a.regions.empty() ||
                   (a.regions[0].num_bufs == g.size && a.regions[0].buf_size == g.header_size)) &&
                  g.size != 0 && g.payload_offset + uint64_t{g.size} * g.slot_size <= g.alloc_size
            : a.regions.size() == 1;
    if (!t || !c || !regions_ok) {
      return fail(ErrorCode::kInternal, "the daemon's TX rings do not check out");
    }
    attached = std::move(a);
    tx = *t;
    completion = *c;
    uint32_t n = gpu ? g.size : attached.regions[0].num_bufs;
    max_length = gpu ? g.header_size + g.slot_size : attached.regions[0].buf_size;
    free.resize(n);
    for (uint32_t i = 0; i < n; ++i)
      free[i] = n - 1 - i;
    mine.assign(n, 1);
    produced = completed = 0;
    return {};
  }
};

TxStream::TxStream(TxOptions options, std::unique_ptr<State> state)
    : options_(std::move(options)), s_(std::move(state)) {}
TxStream::~TxStream() = default;

uint64_t TxStream::id() const {
  return s_->attached.id;
}
uint32_t TxStream::buf_size() const {
  return s_->max_length;
}

const TxGpuMemory* TxStream::gpu_memory() const {
  if (!s_->attached.gpu) return nullptr;
  s_->gpu_memory = {s_->attached.gpu.get(), s_->attached.gpu_info};
  return &s_->gpu_memory;
}

bool TxStream::detached() const {
  return s_->tx.state() != DAQIRI_RING_ACTIVE || s_->client->broken();
}

size_t TxStream::reclaim() {
  uint32_t p = s_->completion.load_producer();
  size_t n = 0;
  for (; s_->completed != p; ++s_->completed) {
    uint32_t e = *s_->completion.slot<uint32_t>(s_->completed);
    uint32_t b = e & DAQIRI_COMPLETION_BUFFER;
    if (b < s_->mine.size() && s_->mine[b] == 0) {
      if (e & DAQIRI_COMPLETION_FAILED) ++s_->failed;
      s_->mine[b] = 1;
      s_->free.push_back(b);
      ++n;
    }
  }
  if (n) s_->completion.publish_consumer(s_->completed);
  return n;
}

size_t TxStream::reserve(std::span<TxBuffer> out) {
  reclaim();
  const auto* region = s_->attached.regions.empty() ? nullptr : &s_->attached.regions[0];
  size_t n = std::min(out.size(), s_->free.size());
  for (size_t i = 0; i < n; ++i) {
    uint32_t b = s_->free.back();
    s_->free.pop_back();
    out[i] = {b, {}, 0};
    // GPU TX: the header buffer (the rest of the frame is in GPU memory), or nothing.
    if (region)
      out[i].data = {region->map.data() + uint64_t{b} * region->buf_size, region->buf_size};
  }
  return n;
}

Result<size_t> TxStream::submit(std::span<const TxBuffer> buffers) {
  if (detached()) return fail(ErrorCode::kUnavailable, "the stream is detached");
  uint32_t room = s_->tx.size() - (s_->produced - s_->tx.load_consumer());
  size_t n = std::min<size_t>(buffers.size(), room);
  for (size_t i = 0; i < n; ++i) {
    const TxBuffer& b = buffers[i];
    if (b.index >= s_->mine.size() || s_->mine[b.index] != 1 || b.length > buf_size()) {
      n = i;  // not a buffer we hold: stop here rather than hand the daemon a lie
      break;
    }
    s_->mine[b.index] = 0;
    uint32_t flags = uint32_t(b.op) | uint32_t{b.connection} << DAQIRI_TX_CONNECTION_SHIFT;
    daqiri_tx_desc d{b.index, b.length, flags, b.remote_slot};
    if (b.send_at_ns != 0) daqiri_tx_desc_set_time(&d, b.send_at_ns);
    *s_->tx.slot<daqiri_tx_desc>(s_->produced++) = d;
  }
  s_->tx.publish_producer(s_->produced);
  if (n > 0 && options_.kick) s_->tx.wake_consumer(s_->attached.kick.get());
  return n;
}

uint64_t TxStream::failed() const {
  return s_->failed;
}

Result<> TxStream::flush(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (reclaim(), s_->free.size() < s_->mine.size()) {
    if (detached()) return fail(ErrorCode::kUnavailable, "the stream is detached");
    if (std::chrono::steady_clock::now() >= deadline) {
      return fail(ErrorCode::kUnavailable, "the daemon did not send everything in time");
    }
    s_->completion.sleep_for_producer(s_->attached.eventfd.get(), s_->completed, 2);
  }
  return {};
}

// ---- Client ------------------------------------------------------------------------------

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

Result<std::unique_ptr<Client>> Client::connect(const ClientOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  if (impl->options.socket.empty()) {
    const char* env = std::getenv("DAQIRI_SOCKET");
    impl->options.socket = env ? env : "/run/daqiri/daqiri.sock";
  }
  impl->open_channel();
  if (auto ok = impl->open_session(); !ok) return std::unexpected(ok.error());
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

Result<RxStream*> Client::attach_rx(const RxOptions& given) {
  const RxOptions options = with_environment_flow(given);
  auto a = impl_->attach(rx_request(options));
  if (!a) return std::unexpected(a.error());
  auto state = std::make_unique<RxStream::State>();
  state->client = impl_.get();
  if (auto ok = state->adopt(std::move(*a), options); !ok) {
    return std::unexpected(ok.error());
  }
  impl_->rx.push_back(std::unique_ptr<RxStream>(new RxStream(options, std::move(state))));
  return impl_->rx.back().get();
}

Result<TxStream*> Client::attach_tx(const TxOptions& given) {
  const TxOptions options = with_environment_queue(given);
  auto a = impl_->attach(tx_request(options));
  if (!a) return std::unexpected(a.error());
  auto state = std::make_unique<TxStream::State>();
  state->client = impl_.get();
  if (auto ok = state->adopt(std::move(*a)); !ok) return std::unexpected(ok.error());
  impl_->tx.push_back(std::unique_ptr<TxStream>(new TxStream(options, std::move(state))));
  return impl_->tx.back().get();
}

Result<GpuRingFds> Client::attach_gpu_rx_fds(const RxOptions& given) {
  const RxOptions options = with_environment_flow(given);
  if (options.flow.empty()) {
    return fail(ErrorCode::kInvalidArgument, "a GPU ring takes one flow", "flow");
  }
  v1::AttachRequest req = rx_request(options);
  req.set_gpu(true);
  req.set_cuda_ipc(options.cuda_ipc);
  auto c = impl_->claim(req);
  if (!c) return std::unexpected(c.error());
  // No regions, or one: the header slots of a split ring.
  uint32_t regions = c->msg.base.region_count;
  uint32_t want = options.cuda_ipc ? DAQIRI_DIRECTION_GPU_RX_IPC : DAQIRI_DIRECTION_GPU_RX;
  if (c->msg.base.direction != want || regions > 1 ||
      (regions == 1) != (c->msg.gpu.header_size != 0) ||
      (options.cuda_ipc && c->cuda_ipc_handle.size() != kCudaIpcHandleBytes)) {
    send_detach(impl_->session.get(), c->msg.base.attachment_id);
    return fail(ErrorCode::kInternal, "the daemon answered with something but a GPU ring");
  }
  GpuRingFds out;
  out.id = c->msg.base.attachment_id;
  out.control = std::move(c->fds[0]);
  out.control_size = c->msg.base.rings_size;
  out.eventfd = std::move(c->fds[1]);
  if (regions == 1) {
    out.headers = std::move(c->fds[2]);
    out.headers_info = c->msg.base.regions[0];
  }
  if (options.cuda_ipc) {
    out.cuda_ipc_handle = std::move(c->cuda_ipc_handle);
  } else {
    out.ring = std::move(c->fds[2 + regions]);
  }
  out.info = c->msg.gpu;
  return out;
}

void Client::detach(uint64_t attachment_id) {
  if (!impl_->broken()) send_detach(impl_->session.get(), attachment_id);
}

void Client::detach(RxStream* stream) {
  auto& v = impl_->rx;
  auto it = std::find_if(v.begin(), v.end(), [stream](const auto& p) { return p.get() == stream; });
  if (it == v.end()) return;
  if (!impl_->broken()) send_detach(impl_->session.get(), stream->id());
  v.erase(it);
}

void Client::detach(TxStream* stream) {
  auto& v = impl_->tx;
  auto it = std::find_if(v.begin(), v.end(), [stream](const auto& p) { return p.get() == stream; });
  if (it == v.end()) return;
  if (!impl_->broken()) send_detach(impl_->session.get(), stream->id());
  v.erase(it);
}

Result<> Client::reconnect() {
  impl_->session.reset();
  impl_->open_channel();
  if (auto ok = impl_->open_session(); !ok) return ok;
  for (auto& rx : impl_->rx) {
    auto a = impl_->attach(rx_request(rx->options_));
    if (!a) return std::unexpected(a.error());
    if (auto ok = rx->s_->adopt(std::move(*a), rx->options_); !ok) return ok;
  }
  for (auto& tx : impl_->tx) {
    auto a = impl_->attach(tx_request(tx->options_));
    if (!a) return std::unexpected(a.error());
    if (auto ok = tx->s_->adopt(std::move(*a)); !ok) return ok;
  }
  return {};
}

bool Client::connected() const {
  return !impl_->broken();
}
uint64_t Client::session_id() const {
  return impl_->session_id;
}
uint64_t Client::sessions_opened() const {
  return impl_->sessions_opened;
}

// A container given one TX queue through CDI has DAQIRI_TX_INTERFACE and DAQIRI_TX_QUEUE.
TxOptions with_environment_queue(TxOptions o) {
  if (o.interface.empty() && o.queue.empty()) {
    if (const char* itf = std::getenv("DAQIRI_TX_INTERFACE")) o.interface = itf;
    if (const char* queue = std::getenv("DAQIRI_TX_QUEUE")) o.queue = queue;
  }
  return o;
}

}  // namespace daqiri
