#include "commands.hpp"

#include <fmt/format.h>
#include <google/protobuf/util/json_util.h>

#include <unistd.h>

#include <chrono>
#include <iostream>
#include <map>
#include <thread>

#include "daqiri/common/match_text.hpp"
#include "daqiri/v1/stats_counters.hpp"
#include "daqiri/v1/stats_reflection.hpp"
#include "table.hpp"

namespace daqiri::ctl {

void print_json(const google::protobuf::Message& msg) {
  std::string out;
  google::protobuf::util::JsonPrintOptions opts;
  opts.add_whitespace = true;
  opts.always_print_primitive_fields = true;
  opts.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(msg, &out, opts);
  std::cout << out;
}

std::string lower_enum(const std::string& name, const std::string& prefix) {
  std::string s = name.starts_with(prefix) ? name.substr(prefix.size()) : name;
  for (char& c : s)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

namespace {

std::string bytes(uint64_t n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", n) : fmt::format("{:.1f} {}", v, units[u]);
}

std::string range(const v1::PortRange& r) {
  return r.first() == r.last() ? std::to_string(r.first())
                               : fmt::format("{}-{}", r.first(), r.last());
}

std::string prefix(const v1::Ipv4Prefix& p) {
  return p.prefix_length() == 32 ? p.address()
                                 : fmt::format("{}/{}", p.address(), p.prefix_length());
}

std::string match_text(const v1::FlowMatch& m) {
  if (!m.text().empty()) return m.text();  // the daemon's own words, whole
  std::string out;
  auto add = [&out](const std::string& s) { out += (out.empty() ? "" : " ") + s; };
  if (m.has_udp_src()) add("udp_src=" + range(m.udp_src()));
  if (m.has_udp_dst()) add("udp_dst=" + range(m.udp_dst()));
  if (m.has_ipv4_src()) add("ipv4_src=" + prefix(m.ipv4_src()));
  if (m.has_ipv4_dst()) add("ipv4_dst=" + prefix(m.ipv4_dst()));
  if (m.has_tcp_dst()) add("tcp_dst=" + range(m.tcp_dst()));
  if (m.any()) add("any");
  return out;
}

// "4096" or "4096-4100"; false when it is not numbers. The daemon checks the rest.
bool parse_ports(const std::string& text, v1::PortRange& out) {
  auto r = match_text::port_range(text);
  out.set_first(r ? static_cast<uint32_t>(r->first) : 0);
  out.set_last(r ? static_cast<uint32_t>(r->last) : 0);
  return r.has_value() && r->first <= UINT32_MAX && r->last <= UINT32_MAX;
}

// "10.0.0.0/24" or an address; false when what follows a slash is not a number. The daemon
// checks the rest (the address, a length up to 32, no host bits) and says why.
bool parse_prefix(const std::string& text, v1::Ipv4Prefix& out) {
  auto p = match_text::ipv4_prefix(text);
  if (!p || p->length.value_or(0) > UINT32_MAX) return false;
  out.set_address(std::string(p->address));
  if (p->length) out.set_prefix_length(static_cast<uint32_t>(*p->length));
  return true;
}

}  // namespace

int run_info(ControlClient& client, const Options& opts) {
  v1::Info info;
  auto ctx = client.context();
  auto status = client.control().GetInfo(ctx.get(), {}, &info);
  if (!status.ok()) return client.report(status);
  if (opts.json) {
    print_json(info);
    return kOk;
  }
  std::cout << fmt::format("daqirid {}  pid {}  up {:.0f}s\n", info.version(), info.pid(),
                           info.uptime_seconds());
  std::cout << "config:    " << info.config_source() << '\n';
  std::string backends;
  for (const auto& b : info.backends())
    backends += (backends.empty() ? "" : ", ") + b;
  std::cout << "backends:  " << backends << '\n';
  for (const auto& f : info.build_features()) {
    std::cout << fmt::format("  {:<6} {:<4} {}\n", f.name(), f.enabled() ? "yes" : "no",
                             f.detail());
  }
  std::cout << "gpus:      " << (info.gpus().empty() ? "none" : "") << '\n';
  for (const auto& g : info.gpus()) {
    std::cout << fmt::format("  {} {} {} {}\n", g.index(), g.name(), bytes(g.memory_bytes()),
                             g.pci_bus_id());
  }
  std::cout << "hugepages: " << (info.hugepages().empty() ? "none" : "") << '\n';
  for (const auto& h : info.hugepages()) {
    std::cout << fmt::format("  {:<8} {} free of {}\n", bytes(h.page_size_bytes()), h.free_pages(),
                             h.total_pages());
  }
  const auto& c = info.caller();
  std::cout << fmt::format("you:       uid {} ({}) pid {} via {}, role {}\n", c.uid(), c.user(),
                           c.pid(), c.transport(), lower_enum(v1::Role_Name(c.role()), "ROLE_"));
  return kOk;
}

int run_interfaces(ControlClient& client, const Options& opts) {
  v1::ListInterfacesResponse resp;
  auto ctx = client.context();
  auto status = client.control().ListInterfaces(ctx.get(), {}, &resp);
  if (!status.ok()) return client.report(status);
  if (opts.json) {
    print_json(resp);
    return kOk;
  }
  Table t({"NAME", "BACKEND", "ADDRESS", "RX", "TX", "STATE"});
  for (const auto& i : resp.interfaces()) {
    t.add({i.name(), lower_enum(v1::Backend_Name(i.backend()), "BACKEND_"), i.address(),
           std::to_string(i.rx_queues()), std::to_string(i.tx_queues()), i.state()});
  }
  t.print(std::cout);
  return kOk;
}

namespace {
// Huge regions: are their pools packed into shared pages (share_pages) or a page set each.
std::string pages(const v1::MemoryRegion& r) {
  if (r.kind() != v1::REGION_KIND_HUGE) return "-";
  return r.share_pages() ? "shared" : "per pool";
}
}  // namespace

int run_regions(ControlClient& client, const Options& opts) {
  v1::ListMemoryRegionsResponse resp;
  auto ctx = client.context();
  auto status = client.control().ListMemoryRegions(ctx.get(), {}, &resp);
  if (!status.ok()) return client.report(status);
  if (opts.json) {
    print_json(resp);
    return kOk;
  }
  Table t({"NAME", "KIND", "BUF_SIZE", "NUM_BUFS", "TOTAL", "GPU", "PAGES"});
  for (const auto& r : resp.regions()) {
    t.add({r.name(), lower_enum(v1::RegionKind_Name(r.kind()), "REGION_KIND_"),
           std::to_string(r.buf_size()), std::to_string(r.num_bufs()), bytes(r.total_bytes()),
           r.gpu() < 0 ? "-" : std::to_string(r.gpu()), pages(r)});
  }
  t.print(std::cout);
  return kOk;
}

int run_queues(ControlClient& client, const Options& opts, const std::string& interface) {
  v1::ListQueuesRequest req;
  req.set_interface(interface);
  v1::ListQueuesResponse resp;
  auto ctx = client.context();
  auto status = client.control().ListQueues(ctx.get(), req, &resp);
  if (!status.ok()) return client.report(status);
  if (opts.json) {
    print_json(resp);
    return kOk;
  }
  Table t({"INTERFACE", "QUEUE", "ID", "DIR", "CORE", "BATCH", "RING", "REGIONS", "DELIVERY"});
  for (const auto& q : resp.queues()) {
    std::string regions;
    for (const auto& r : q.regions())
      regions += (regions.empty() ? "" : ",") + r;
    t.add({q.interface(), q.name(), std::to_string(q.id()),
           lower_enum(v1::Direction_Name(q.direction()), "DIRECTION_"),
           q.core() < 0 ? "-" : std::to_string(q.core()), std::to_string(q.batch_size()),
           std::to_string(q.ring_size()), regions, q.delivery().empty() ? "-" : q.delivery()});
  }
  t.print(std::cout);
  return kOk;
}

int run_flows_list(ControlClient& client, const Options& opts, const std::string& interface) {
  v1::ListFlowsRequest req;
  req.set_interface(interface);
  v1::ListFlowsResponse resp;
  auto ctx = client.context();
  auto status = client.control().ListFlows(ctx.get(), req, &resp);
  if (!status.ok()) return client.report(status);
  if (opts.json) {
    print_json(resp);
    return kOk;
  }
  Table t({"NAME", "ID", "INTERFACE", "QUEUE", "MATCH", "ORIGIN", "STEERING", "CLIENTS"});
  for (const auto& f : resp.flows()) {
    std::string queues = f.queue();
    if (f.queues_size() > 0) {
      queues.clear();
      for (const auto& q : f.queues())
        queues += (queues.empty() ? "" : ",") + q;
    }
    // Who may attach: "all", or "user:NAME" and "group:NAME" entries.
    std::string clients;
    for (const auto& u : f.client_users())
      clients += (clients.empty() ? "user:" : ",user:") + u;
    for (const auto& g : f.client_groups())
      clients += (clients.empty() ? "group:" : ",group:") + g;
    t.add({f.name(), std::to_string(f.id()), f.interface(), queues,
           f.connect().empty() ? match_text(f.match()) : "connect=" + f.connect(),
           lower_enum(v1::FlowOrigin_Name(f.origin()), "FLOW_ORIGIN_"),
           lower_enum(v1::Steering_Name(f.steering()), "STEERING_"),
           clients.empty() ? "all" : clients});
  }
  t.print(std::cout);
  return kOk;
}

int run_flows_add(ControlClient& client, const Options& opts, const FlowAddArgs& args) {
  v1::CreateFlowRequest req;
  req.set_name(args.name);
  req.set_interface(args.interface);
  if (args.queue.find(',') == std::string::npos) {
    req.set_queue(args.queue);
  } else {  // RSS across them
    for (size_t at = 0; at <= args.queue.size();) {
      size_t comma = std::min(args.queue.find(',', at), args.queue.size());
      req.add_queues(args.queue.substr(at, comma - at));
      at = comma + 1;
    }
  }
  auto* m = req.mutable_match();
  if (!args.udp_src.empty() && !parse_ports(args.udp_src, *m->mutable_udp_src())) {
    std::cerr << "daqiri-ctl: --udp-src: expected a port or a range like 4096-4100, got \""
              << args.udp_src << "\"\n";
    return kUsage;
  }
  if (!args.udp_dst.empty() && !parse_ports(args.udp_dst, *m->mutable_udp_dst())) {
    std::cerr << "daqiri-ctl: --udp-dst: expected a port or a range like 4096-4100, got \""
              << args.udp_dst << "\"\n";
    return kUsage;
  }
  auto bad_prefix = [](const char* option, const std::string& text) {
    std::cerr << "daqiri-ctl: " << option
              << ": expected an address or a prefix like 10.0.0.0/24, got \"" << text << "\"\n";
    return kUsage;
  };
  if (!args.ipv4_src.empty() && !parse_prefix(args.ipv4_src, *m->mutable_ipv4_src())) {
    return bad_prefix("--ipv4-src", args.ipv4_src);
  }
  if (!args.ipv4_dst.empty() && !parse_prefix(args.ipv4_dst, *m->mutable_ipv4_dst())) {
    return bad_prefix("--ipv4-dst", args.ipv4_dst);
  }
  if (!args.tcp_dst.empty() && !parse_ports(args.tcp_dst, *m->mutable_tcp_dst())) {
    std::cerr << "daqiri-ctl: --tcp-dst: expected a port, got \"" << args.tcp_dst << "\"\n";
    return kUsage;
  }
  m->set_any(args.any);
  req.set_connect(args.connect);
  req.set_allow_block(args.allow_block);
  for (const auto& u : args.block_users)
    req.add_allow_block_users(u);
  for (const auto& u : args.client_users)
    req.add_client_users(u);
  for (const auto& g : args.client_groups)
    req.add_client_groups(g);
  v1::Flow flow;
  auto ctx = client.context();
  auto status = client.control().CreateFlow(ctx.get(), req, &flow);
  if (!status.ok()) return client.report(status);
  if (opts.json) {
    print_json(flow);
  } else {
    std::cout << fmt::format(
        "flow {} (id {}) created: {} -> {}/{}\n", flow.name(), flow.id(),
        flow.connect().empty() ? match_text(flow.match()) : "connect=" + flow.connect(),
        flow.interface(), flow.queue());
  }
  return kOk;
}

int run_flows_del(ControlClient& client, const Options& opts, const std::string& name) {
  v1::DeleteFlowRequest req;
  req.set_name(name);
  v1::DeleteFlowResponse resp;
  auto ctx = client.context();
  auto status = client.control().DeleteFlow(ctx.get(), req, &resp);
  if (!status.ok()) return client.report(status);
  if (opts.json) {
    print_json(resp);
  } else {
    std::cout << "flow " << name << " deleted\n";
  }
  return kOk;
}

int run_sessions(ControlClient& client, const Options& opts) {
  v1::ListSessionsResponse resp;
  auto ctx = client.context();
  auto status = client.control().ListSessions(ctx.get(), {}, &resp);
  if (!status.ok()) return client.report(status);
  if (opts.json) {
    print_json(resp);
    return kOk;
  }
  Table t({"ID", "USER", "UID", "PID", "NAME", "AGE", "ATTACHMENTS"});
  for (const auto& s : resp.sessions()) {
    t.add({std::to_string(s.id()), s.user(), std::to_string(s.uid()), std::to_string(s.pid()),
           s.name(), fmt::format("{:.0f}s", s.age_seconds()),
           std::to_string(s.attachments_size())});
  }
  t.print(std::cout);
  return kOk;
}

namespace {

struct Rates {
  double pps = 0;
  double mbps = 0;
};

std::string rate_text(const Rates& r) {
  return fmt::format("{:.0f} pps {:.1f} Mbit/s", r.pps, r.mbps);
}

// Rates of every flow and attachment between two snapshots `seconds` apart.
std::map<std::string, Rates> rates_between(const v1::Stats& before, const v1::Stats& now,
                                           double seconds) {
  std::map<std::string, Rates> out;
  std::map<std::string, std::pair<uint64_t, uint64_t>> old;
  for (const auto& f : before.flows())
    old["flow " + f.name()] = {f.packets(), f.bytes()};
  for (const auto& a : before.attachments()) {
    old["attachment " + std::to_string(a.id())] = {a.packets(), a.bytes()};
  }
  auto add = [&](const std::string& key, uint64_t packets, uint64_t bytes) {
    auto it = old.find(key);
    if (it == old.end() || seconds <= 0) return;
    out[key] = {double(packets - it->second.first) / seconds,
                double(bytes - it->second.second) * 8 / seconds / 1e6};
  };
  for (const auto& f : now.flows())
    add("flow " + f.name(), f.packets(), f.bytes());
  for (const auto& a : now.attachments()) {
    add("attachment " + std::to_string(a.id()), a.packets(), a.bytes());
  }
  return out;
}

// The table's columns (stats_counters.hpp): headings, then one row's values.
template <size_t N>
void add_headings(std::vector<std::string>& h, const v1::stats::Counter (&table)[N]) {
  for (const auto& c : table) {
    if (!c.column.empty()) h.emplace_back(c.column);
  }
}

template <size_t N>
void add_values(std::vector<std::string>& row, const v1::stats::Counter (&table)[N],
                const google::protobuf::Message& m, bool gpu = false) {
  for (const auto& c : table) {
    if (c.column.empty()) continue;
    // A GPU ring's counters mean nothing for other attachments; RX- or TX-only ones read 0.
    bool shown = c.applies != v1::stats::Applies::kGpu || gpu;
    row.push_back(shown ? std::to_string(v1::stats::counter(m, c.field)) : "-");
  }
}

void print_stats(const v1::Stats& stats, const std::map<std::string, Rates>* rates) {
  std::vector<std::string> fh{"FLOW"};
  add_headings(fh, v1::stats::kFlowCounters);
  if (rates) fh.push_back("RATE");
  Table flows(fh);
  for (const auto& f : stats.flows()) {
    std::vector<std::string> row{f.name()};
    add_values(row, v1::stats::kFlowCounters, f);
    if (rates) {
      auto it = rates->find("flow " + f.name());
      row.push_back(it == rates->end() ? "-" : rate_text(it->second));
    }
    flows.add(row);
  }
  flows.print(std::cout);
  std::cout << '\n';
  std::vector<std::string> ah{"ATTACHMENT", "SESSION", "DIR", "TARGET"};
  add_headings(ah, v1::stats::kAttachmentCounters);
  ah.emplace_back("RING");
  if (rates) ah.push_back("RATE");
  Table atts(ah);
  for (const auto& a : stats.attachments()) {
    std::vector<std::string> row{std::to_string(a.id()), std::to_string(a.session_id()),
                                 lower_enum(v1::Direction_Name(a.direction()), "DIRECTION_"),
                                 a.target()};
    add_values(row, v1::stats::kAttachmentCounters, a, a.gpu());
    // Attach alone delivers nothing: packets come once the client claims it on the session
    // socket.
    row.push_back(a.claimed() ? std::to_string(a.ring_used()) + "/" + std::to_string(a.ring_size())
                              : "unclaimed");
    if (rates) {
      auto it = rates->find("attachment " + std::to_string(a.id()));
      row.push_back(it == rates->end() ? "-" : rate_text(it->second));
    }
    atts.add(row);
  }
  atts.print(std::cout);
  if (stats.nics_size() > 0) {
    std::cout << '\n';
    Table nics({"INTERFACE", "DRIVER", "LINK", "RX_PACKETS", "RX_BYTES", "RX_MISSED", "RX_ERRORS",
                "RX_NOMBUF", "TX_PACKETS", "TX_BYTES", "TX_ERRORS"});
    Table queues({"INTERFACE", "QUEUE", "DIR", "PACKETS", "BYTES", "UNMATCHED", "COPIED",
                  "NO_BUFFER", "TRUNCATED", "NO_HEADER", "OVERSIZE", "ON_LOAN", "MBUFS_FREE"});
    for (const auto& n : stats.nics()) {
      nics.add({n.interface(), n.driver(), n.link(), std::to_string(n.rx_packets()),
                std::to_string(n.rx_bytes()), std::to_string(n.rx_missed()),
                std::to_string(n.rx_errors()), std::to_string(n.rx_nombuf()),
                std::to_string(n.tx_packets()), std::to_string(n.tx_bytes()),
                std::to_string(n.tx_errors())});
      for (const auto& q : n.queues()) {
        queues.add(
            {n.interface(), q.name(), lower_enum(v1::Direction_Name(q.direction()), "DIRECTION_"),
             std::to_string(q.packets()), std::to_string(q.bytes()), std::to_string(q.unmatched()),
             std::to_string(q.copied()), std::to_string(q.no_buffer()),
             std::to_string(q.truncated()), std::to_string(q.no_header()),
             std::to_string(q.oversize()), std::to_string(q.buffers_on_loan()),
             q.direction() == v1::DIRECTION_RX ? std::to_string(q.mbufs_free()) : "-"});
      }
    }
    nics.print(std::cout);
    // The driver's own counters, as `ethtool -S` shows them: only those that moved.
    Table xstats({"INTERFACE", "COUNTER", "VALUE"});
    for (const auto& n : stats.nics()) {
      for (const auto& x : n.xstats()) {
        if (x.value() != 0) xstats.add({n.interface(), x.name(), std::to_string(x.value())});
      }
    }
    std::cout << '\n';
    xstats.print(std::cout);
    std::cout << '\n';
    queues.print(std::cout);
  }
  if (stats.pollers_size() > 0) {
    // What each poller thread costs, and why it woke: IO climbing fast while no traffic
    // comes is a poller spinning on a socket it cannot read.
    std::cout << '\n';
    Table pollers({"POLLER", "BUSY", "PARKS", "WOKEN_IO", "WOKEN_DOORBELL", "WOKEN_TIMER"});
    for (const auto& p : stats.pollers()) {
      pollers.add({p.name(), fmt::format("{:.3f}", p.busy_ratio()), std::to_string(p.parks()),
                   std::to_string(p.io_wakeups()), std::to_string(p.doorbell_wakeups()),
                   std::to_string(p.timer_wakeups())});
    }
    pollers.print(std::cout);
  }
  std::cout << "sessions cut off: " << stats.sessions_cut_off() << '\n';
  if (stats.attachments_parked() > 0) {
    std::cout << "attachments parked (closed, not let go by their pollers): "
              << stats.attachments_parked() << '\n';
  }
}

}  // namespace

int run_stats(ControlClient& client, const Options& opts, double watch, int frames) {
  v1::Stats previous;
  auto previous_at = std::chrono::steady_clock::now();
  bool have_previous = false;
  bool tty = ::isatty(STDOUT_FILENO) != 0;
  for (int frame = 0;; ++frame) {
    v1::Stats stats;
    auto ctx = client.context();
    auto status = client.control().GetStats(ctx.get(), {}, &stats);
    if (!status.ok()) return client.report(status);
    auto now = std::chrono::steady_clock::now();
    std::map<std::string, Rates> rates;
    if (have_previous) {
      rates =
          rates_between(previous, stats, std::chrono::duration<double>(now - previous_at).count());
    }
    if (opts.json) {
      if (watch > 0) {
        // One object per line: the counters, and the rates once there are two snapshots.
        std::string line;
        google::protobuf::util::MessageToJsonString(stats, &line);
        std::cout << "{\"stats\":" << line << ",\"rates\":{";
        bool first = true;
        for (const auto& [key, r] : rates) {
          std::cout << (first ? "" : ",")
                    << fmt::format("\"{}\":{{\"pps\":{:.3f},\"mbps\":{:.3f}}}", key, r.pps, r.mbps);
          first = false;
        }
        std::cout << "}}" << std::endl;
      } else {
        print_json(stats);
      }
    } else {
      if (watch > 0 && tty) std::cout << "\033[H\033[2J";
      print_stats(stats, watch > 0 ? &rates : nullptr);
      if (watch > 0) std::cout << std::endl;
    }
    if (watch <= 0 || (frames > 0 && frame + 1 >= frames)) return kOk;
    previous = stats;
    previous_at = now;
    have_previous = true;
    std::this_thread::sleep_for(std::chrono::duration<double>(watch));
  }
}

int run_health(ControlClient& client, const Options& opts) {
  grpc::health::v1::HealthCheckResponse resp;
  auto ctx = client.context();
  auto status = client.health().Check(ctx.get(), {}, &resp);
  if (!status.ok()) return client.report(status);
  if (opts.json) {
    print_json(resp);
  } else {
    std::cout << lower_enum(
                     grpc::health::v1::HealthCheckResponse::ServingStatus_Name(resp.status()), "")
              << '\n';
  }
  return resp.status() == grpc::health::v1::HealthCheckResponse::SERVING ? kOk : kNotServing;
}

}  // namespace daqiri::ctl
