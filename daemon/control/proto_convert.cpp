#include "control/proto_convert.hpp"

#include "config/user_ids.hpp"

namespace daqiri::control {
namespace {

// A flow's or a TX queue's clients list, as given.
template <typename Message>
void add_clients(const core::ClientList& clients, Message& out) {
  for (const auto& u : clients.users)
    out.add_client_users(u);
  for (const auto& g : clients.groups)
    out.add_client_groups(g);
}

void to_proto(const core::PortRange& r, v1::PortRange& out) {
  out.set_first(r.first);
  out.set_last(r.last);
}

void to_proto(const core::Ipv4Prefix& p, v1::Ipv4Prefix& out) {
  core::Ipv4Prefix host = p;
  host.length = 32;
  out.set_address(host.to_string());
  out.set_prefix_length(p.length);
}

Result<core::PortRange> from_proto(const v1::PortRange& r, const char* field) {
  uint64_t last = r.last() == 0 ? r.first() : r.last();
  auto range = core::make_port_range(r.first(), last);
  if (!range) {
    return fail(ErrorCode::kInvalidArgument,
                std::string("match.") + field + ": " + range.error().message, field);
  }
  return range;
}

Result<core::Ipv4Prefix> from_proto(const v1::Ipv4Prefix& p, const char* field) {
  std::string text = p.address();
  if (p.has_prefix_length()) text += "/" + std::to_string(p.prefix_length());
  auto prefix = core::parse_ipv4_prefix(text);
  if (!prefix) {
    return fail(ErrorCode::kInvalidArgument,
                std::string("match.") + field + ": " + prefix.error().message, field);
  }
  return prefix;
}

v1::Backend to_proto(config::Backend b) {
  switch (b) {
    case config::Backend::kSocket:
      return v1::BACKEND_SOCKET;
    case config::Backend::kDpdk:
      return v1::BACKEND_DPDK;
    case config::Backend::kRdma:
      return v1::BACKEND_RDMA;
    case config::Backend::kXdp:
      return v1::BACKEND_XDP;
  }
  return v1::BACKEND_UNSPECIFIED;
}

v1::RegionKind to_proto(config::RegionKind k) {
  switch (k) {
    case config::RegionKind::kHost:
      return v1::REGION_KIND_HOST;
    case config::RegionKind::kHuge:
      return v1::REGION_KIND_HUGE;
    case config::RegionKind::kPinned:
      return v1::REGION_KIND_PINNED;
    case config::RegionKind::kDevice:
      return v1::REGION_KIND_DEVICE;
  }
  return v1::REGION_KIND_UNSPECIFIED;
}

}  // namespace

void to_proto(const core::Flow& flow, std::optional<dataplane::Steering> steering, v1::Flow& out) {
  out.set_name(flow.name);
  out.set_interface(flow.interface);
  out.set_queue(flow.queue);
  out.set_id(flow.id);
  out.set_origin(flow.origin == core::FlowOrigin::kConfig ? v1::FLOW_ORIGIN_CONFIG
                                                          : v1::FLOW_ORIGIN_API);
  // Software: the kernel by port and the poller by source filters (socket backend), or the
  // queue's poller (DPDK without an rte_flow rule). Hardware: an rte_flow rule.
  if (!steering) {
    out.set_steering(v1::STEERING_PENDING);
  } else {
    out.set_steering(*steering == dataplane::Steering::kHardware ? v1::STEERING_HARDWARE
                                                                 : v1::STEERING_SOFTWARE);
  }
  auto* m = out.mutable_match();
  if (flow.match.udp_src) to_proto(*flow.match.udp_src, *m->mutable_udp_src());
  if (flow.match.udp_dst) to_proto(*flow.match.udp_dst, *m->mutable_udp_dst());
  if (flow.match.ipv4_src) to_proto(*flow.match.ipv4_src, *m->mutable_ipv4_src());
  if (flow.match.ipv4_dst) to_proto(*flow.match.ipv4_dst, *m->mutable_ipv4_dst());
  if (flow.match.tcp_dst) to_proto(*flow.match.tcp_dst, *m->mutable_tcp_dst());
  m->set_any(flow.match.any);
  m->set_text(flow.match.to_string());
  if (flow.connect) out.set_connect(flow.connect->to_string());
  out.set_allow_block(flow.allow_block.anyone);
  for (const auto& u : flow.allow_block.users)
    out.add_allow_block_users(u);
  for (const auto& q : flow.rss_queues)
    out.add_queues(q);
  add_clients(flow.clients, out);
}

void to_proto(const config::InterfaceConfig& itf, const std::string& state, v1::Interface& out) {
  out.set_name(itf.name);
  out.set_backend(to_proto(itf.backend));
  out.set_address(itf.address);
  out.set_rx_queues(static_cast<uint32_t>(itf.rx_queues.size()));
  out.set_tx_queues(static_cast<uint32_t>(itf.tx_queues.size()));
  out.set_state(state);
}

void to_proto(const config::MemoryRegionConfig& region, v1::MemoryRegion& out) {
  out.set_name(region.name);
  out.set_kind(to_proto(region.kind));
  out.set_buf_size(region.buf_size);
  out.set_num_bufs(region.num_bufs);
  out.set_total_bytes(region.total_bytes());
  out.set_gpu(region.gpu);
  out.set_share_pages(region.share_pages);
}

void to_proto(const config::InterfaceConfig& itf, const config::QueueConfig& queue,
              v1::Direction direction, v1::Queue& out) {
  out.set_interface(itf.name);
  out.set_name(queue.name);
  out.set_id(queue.id);
  out.set_direction(direction);
  out.set_core(queue.core);
  out.set_batch_size(queue.batch_size);
  out.set_ring_size(queue.ring_size);
  for (const auto& r : queue.regions)
    out.add_regions(r);
  if (direction == v1::DIRECTION_TX) {
    add_clients(queue.clients, out);
    out.set_max_clients(queue.max_clients);
  }
}

Result<core::FlowSpec> from_proto(const v1::CreateFlowRequest& request) {
  core::FlowSpec spec;
  spec.name = request.name();
  spec.interface = request.interface();
  spec.queue = request.queue();
  spec.rss_queues.assign(request.queues().begin(), request.queues().end());
  spec.origin = core::FlowOrigin::kApi;
  if (spec.name.empty()) return fail(ErrorCode::kInvalidArgument, "name is required", "name");
  if (spec.interface.empty()) {
    return fail(ErrorCode::kInvalidArgument, "interface is required", "interface");
  }
  const auto& m = request.match();
  if (m.has_udp_src()) {
    auto r = from_proto(m.udp_src(), "udp_src");
    if (!r) return std::unexpected(r.error());
    spec.match.udp_src = *r;
  }
  if (m.has_udp_dst()) {
    auto r = from_proto(m.udp_dst(), "udp_dst");
    if (!r) return std::unexpected(r.error());
    spec.match.udp_dst = *r;
  }
  if (m.has_ipv4_src()) {
    auto p = from_proto(m.ipv4_src(), "ipv4_src");
    if (!p) return std::unexpected(p.error());
    spec.match.ipv4_src = *p;
  }
  if (m.has_ipv4_dst()) {
    auto p = from_proto(m.ipv4_dst(), "ipv4_dst");
    if (!p) return std::unexpected(p.error());
    spec.match.ipv4_dst = *p;
  }
  if (m.has_tcp_dst()) {
    auto r = from_proto(m.tcp_dst(), "tcp_dst");
    if (!r) return std::unexpected(r.error());
    spec.match.tcp_dst = *r;
  }
  spec.match.any = m.any();
  if (!request.connect().empty()) {
    auto ep = core::parse_endpoint(request.connect());
    if (!ep) {
      return fail(ErrorCode::kInvalidArgument, "connect: " + ep.error().message, "connect");
    }
    spec.connect = *ep;
  }
  spec.allow_block.anyone = request.allow_block();
  spec.allow_block.users.assign(request.allow_block_users().begin(),
                                request.allow_block_users().end());
  // Resolved now: the flow admits the ids these names have while it exists.
  for (const auto& u : request.client_users()) {
    auto uid = config::user_id(u);
    if (!uid)
      return fail(ErrorCode::kInvalidArgument, "no user named \"" + u + "\"", "client_users");
    spec.clients.users.push_back(u);
    spec.clients.uids.push_back(*uid);
  }
  for (const auto& g : request.client_groups()) {
    auto gid = config::group_id(g);
    if (!gid) {
      return fail(ErrorCode::kInvalidArgument, "no group named \"" + g + "\"", "client_groups");
    }
    spec.clients.groups.push_back(g);
    spec.clients.gids.push_back(*gid);
  }
  return spec;
}

namespace {

// The same three formats on both sides; 0 (unspecified) reads as PCAP.
v1::CaptureFormat to_proto(capture::Format format) {
  switch (format) {
    case capture::Format::kPcapng:
      return v1::CAPTURE_FORMAT_PCAPNG;
    case capture::Format::kRaw:
      return v1::CAPTURE_FORMAT_RAW;
    case capture::Format::kPcap:
      break;
  }
  return v1::CAPTURE_FORMAT_PCAP;
}

}  // namespace

void to_proto(const capture_service::CaptureStatus& capture, v1::Capture& out) {
  out.set_id(capture.id);
  out.set_flow(capture.flow);
  out.set_path(capture.path);
  out.set_format(to_proto(capture.format));
  out.set_uid(capture.uid);
  out.set_running(capture.running);
  out.set_packets(capture.packets);
  out.set_bytes(capture.bytes);
  for (const auto& f : capture.files)
    out.add_files(f);
  out.set_error(capture.error);
  out.set_staging(capture.staging);
  out.set_attachment_id(capture.attachment);
}

Result<capture_service::CaptureSpec> from_proto(const v1::StartCaptureRequest& request) {
  bool queue = request.has_rx_queue();
  if (request.flow().empty() == !queue) {
    return fail(ErrorCode::kInvalidArgument, "name a flow or an rx_queue", "flow");
  }
  if (queue && (request.rx_queue().interface().empty() || request.rx_queue().queue().empty())) {
    return fail(ErrorCode::kInvalidArgument, "rx_queue needs an interface and a queue", "rx_queue");
  }
  // Written so that NaN fails too (every comparison with it is false).
  if (!(request.max_seconds() >= 0 && request.max_seconds() <= 1e9)) {
    return fail(ErrorCode::kInvalidArgument, "max_seconds must be a number from 0 to 1e9",
                "max_seconds");
  }
  if (request.snaplen() != 0 && (request.snaplen() < 64 || request.snaplen() > 262144)) {
    return fail(ErrorCode::kInvalidArgument, "snaplen is 64 to 262144", "snaplen");
  }
  capture_service::CaptureSpec spec;
  switch (request.format()) {
    case v1::CAPTURE_FORMAT_UNSPECIFIED:
    case v1::CAPTURE_FORMAT_PCAP:
      spec.format = capture::Format::kPcap;
      break;
    case v1::CAPTURE_FORMAT_PCAPNG:
      spec.format = capture::Format::kPcapng;
      break;
    case v1::CAPTURE_FORMAT_RAW:
      spec.format = capture::Format::kRaw;
      break;
    default:
      return fail(ErrorCode::kInvalidArgument, "unknown capture format", "format");
  }
  spec.flow = request.flow();
  if (queue) {
    spec.rx_interface = request.rx_queue().interface();
    spec.rx_queue = request.rx_queue().queue();
  }
  spec.path = request.path();
  spec.snaplen = request.snaplen();
  spec.rotate_bytes = request.rotate_bytes();
  spec.limits.max_packets = request.max_packets();
  spec.limits.max_duration =
      std::chrono::nanoseconds(static_cast<int64_t>(request.max_seconds() * 1e9));
  return spec;
}

}  // namespace daqiri::control
