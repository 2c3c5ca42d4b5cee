#include "metrics/metrics_server.hpp"

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <civetweb.h>
#include <netdb.h>
#include <sys/socket.h>

#include <array>
#include <chrono>
#include <limits>
#include <map>
#include <optional>
#include <stop_token>
#include <thread>

#include "build_info.hpp"
#include "daqiri/common/unique_fd.hpp"
#include "daqiri/v1/stats_counters.hpp"

namespace daqiri::metrics {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

// Attachments are labelled per attachment; past this many the rest are summed into one series
// (attachment="other") so that a client churning attachments cannot blow up cardinality.
constexpr size_t kMaxAttachmentSeries = 256;

class FamilyBuilder {
 public:
  FamilyBuilder(std::vector<MetricFamily>& out, std::string name, std::string help, MetricType type)
      : out_(out) {
    out_.push_back({std::move(name), std::move(help), type, {}});
    index_ = out_.size() - 1;
  }
  void add(std::vector<ClientMetric::Label> labels, double value) {
    ClientMetric m;
    m.label = std::move(labels);
    if (out_[index_].type == MetricType::Counter) {
      m.counter.value = value;
    } else {
      m.gauge.value = value;
    }
    out_[index_].metric.push_back(std::move(m));
  }
  void add_histogram(std::vector<ClientMetric::Label> labels,
                     const dataplane::LatencyHistogram::Snapshot& s) {
    ClientMetric m;
    m.label = std::move(labels);
    uint64_t cumulative = 0;
    for (size_t i = 0; i < dataplane::LatencyHistogram::kBoundsNs.size(); ++i) {
      cumulative += s.counts[i];
      m.histogram.bucket.push_back(
          {cumulative, double(dataplane::LatencyHistogram::kBoundsNs[i]) * 1e-9});
    }
    cumulative += s.counts.back();
    m.histogram.bucket.push_back({cumulative, std::numeric_limits<double>::infinity()});
    m.histogram.sample_count = cumulative;
    m.histogram.sample_sum = double(s.sum_ns) * 1e-9;
    out_[index_].metric.push_back(std::move(m));
  }

 private:
  std::vector<MetricFamily>& out_;
  size_t index_;
};

// Adds one attachment's numbers to a sum (the series past the cap).
void add_to(orchestrator::AttachmentStats& sum, const orchestrator::AttachmentStats& a) {
#define DAQIRI_STATS_ADD(member, ...) sum.member += a.member;
  DAQIRI_ATTACHMENT_COUNTERS(DAQIRI_STATS_ADD)
#undef DAQIRI_STATS_ADD
  sum.gpu = sum.gpu || a.gpu;
  sum.gpu_copy_latency += a.gpu_copy_latency;
}

// A table's families (stats_counters.hpp), made in its order, by name.
using Families = std::map<std::string_view, FamilyBuilder>;
template <size_t N>
Families families_of(std::vector<MetricFamily>& out, const v1::stats::Family (&table)[N]) {
  Families f;
  for (const auto& family : table) {
    f.try_emplace(
        family.name, out, std::string(family.name), std::string(family.help),
        family.kind == v1::stats::Kind::kCounter ? MetricType::Counter : MetricType::Gauge);
  }
  return f;
}

// Adds each counter of `values` (one per row of `table`, in its order) that applies and is
// exported, to its family, with its reason as a label.
template <size_t N>
void add_counters(Families& families, const v1::stats::Counter (&table)[N],
                  const std::array<uint64_t, N>& values,
                  const std::vector<ClientMetric::Label>& labels, bool rx = true, bool gpu = false,
                  bool reorder = false) {
  for (size_t i = 0; i < N; ++i) {
    const v1::stats::Counter& c = table[i];
    if (c.family.empty() || !v1::stats::applies_to(c.applies, rx, gpu, reorder)) continue;
    auto l = labels;
    if (!c.reason.empty()) l.push_back({"reason", std::string(c.reason)});
    families.at(c.family).add(std::move(l), double(values[i]));
  }
}

// Each row's member of a snapshot, in the table's order.
#define DAQIRI_STATS_VALUE(member, ...) s.member,
std::array<uint64_t, std::size(v1::stats::kFlowCounters)> values_of(
    const orchestrator::FlowStats& s) {
  return {DAQIRI_FLOW_COUNTERS(DAQIRI_STATS_VALUE)};
}

std::array<uint64_t, std::size(v1::stats::kAttachmentCounters)> values_of(
    const orchestrator::AttachmentStats& s) {
  return {DAQIRI_ATTACHMENT_COUNTERS(DAQIRI_STATS_VALUE)};
}
#undef DAQIRI_STATS_VALUE

}  // namespace

// Reads the data plane's and sessions' counters when Prometheus scrapes.
class DataPlaneCollector final : public prometheus::Collectable {
 public:
  DataPlaneCollector(const orchestrator::DataPlane& dp, const session::SessionServer& sessions)
      : dp_(dp), sessions_(sessions) {}

  std::vector<MetricFamily> Collect() const override {
    std::vector<MetricFamily> out;
    FamilyBuilder build(out, "daqiri_build_info", "Version and build options of daqirid",
                        MetricType::Gauge);
    build.add({{"version", build::kVersion},
               {"dpdk", build::kHaveDpdk ? "yes" : "no"},
               {"rdma", build::kHaveRdma ? "yes" : "no"},
               {"cuda", build::kHaveCuda ? "yes" : "no"},
               {"xdp", build::kHaveXdp ? "yes" : "no"}},
              1);

    auto flows = dp_.flow_stats();
    Families flow_families = families_of(out, v1::stats::kFlowFamilies);
    for (const auto& f : flows) {
      std::vector<ClientMetric::Label> l{
          {"flow", f.name},
          {"steering", f.steering == dataplane::Steering::kHardware ? "hardware" : "software"}};
      add_counters(flow_families, v1::stats::kFlowCounters, values_of(f), l, true, false,
                   f.reorder);
    }

    // Interfaces and queues: the sums of their flows (RX) and TX attachments.
    struct Sums {
      double packets = 0, bytes = 0, dropped = 0, errors = 0;
    };
    std::map<std::string, Sums> itf_rx, itf_tx;
    std::map<std::pair<std::string, std::string>, Sums> q_rx, q_tx;
    for (const auto& f : flows) {
      double drops = double(f.no_attachment + f.rings_full + f.filtered + f.no_buffer + f.overflow);
      for (Sums* sum : {&itf_rx[f.interface], &q_rx[{f.interface, f.queue}]}) {
        sum->packets += double(f.packets);
        sum->bytes += double(f.bytes);
        sum->dropped += drops;
      }
    }
    auto attachments = dp_.attachment_stats();
    for (const auto& a : attachments) {
      if (a.rx) continue;
      for (Sums* sum : {&itf_tx[a.interface], &q_tx[{a.interface, a.queue}]}) {
        sum->packets += double(a.packets);
        sum->bytes += double(a.bytes);
        sum->errors += double(a.send_errors + a.refused);
      }
    }
    FamilyBuilder i_packets(out, "daqiri_interface_packets_total",
                            "Packets received (rx) or sent (tx) on an interface",
                            MetricType::Counter);
    FamilyBuilder i_bytes(out, "daqiri_interface_bytes_total", "Bytes of those packets",
                          MetricType::Counter);
    FamilyBuilder i_dropped(out, "daqiri_interface_dropped_packets_total",
                            "Packets received on an interface that no client got",
                            MetricType::Counter);
    FamilyBuilder i_errors(out, "daqiri_interface_errors_total",
                           "Frames an interface failed to send", MetricType::Counter);
    for (const auto& [itf, sum] : itf_rx) {
      i_packets.add({{"interface", itf}, {"direction", "rx"}}, sum.packets);
      i_bytes.add({{"interface", itf}, {"direction", "rx"}}, sum.bytes);
      i_dropped.add({{"interface", itf}}, sum.dropped);
    }
    for (const auto& [itf, sum] : itf_tx) {
      i_packets.add({{"interface", itf}, {"direction", "tx"}}, sum.packets);
      i_bytes.add({{"interface", itf}, {"direction", "tx"}}, sum.bytes);
      i_errors.add({{"interface", itf}}, sum.errors);
    }
    FamilyBuilder q_packets(out, "daqiri_queue_packets_total", "Packets through an RX or TX queue",
                            MetricType::Counter);
    FamilyBuilder q_bytes(out, "daqiri_queue_bytes_total", "Bytes through an RX or TX queue",
                          MetricType::Counter);
    for (const auto* table : {&q_rx, &q_tx}) {
      const char* dir = table == &q_rx ? "rx" : "tx";
      for (const auto& [key, sum] : *table) {
        std::vector<ClientMetric::Label> l{
            {"interface", key.first}, {"queue", key.second}, {"direction", dir}};
        q_packets.add(l, sum.packets);
        q_bytes.add(l, sum.bytes);
      }
    }

    std::map<uint64_t, const session::SessionInfo*> by_id;
    auto sessions = sessions_.sessions();
    for (const auto& s : sessions)
      by_id[s.id] = &s;
    Families attachment_families = families_of(out, v1::stats::kAttachmentFamilies);
    FamilyBuilder gpu_latency(out, "daqiri_gpu_copy_latency_seconds",
                              "Per burst, from the copy engine's launch to its completion",
                              MetricType::Histogram);
    // Past the cap, attachments are summed into one series per direction.
    std::vector<std::pair<std::vector<ClientMetric::Label>, orchestrator::AttachmentStats>> series;
    std::optional<orchestrator::AttachmentStats> other_rx, other_tx;
    for (const auto& a : attachments) {
      if (series.size() >= kMaxAttachmentSeries) {
        auto& sum = a.rx ? other_rx : other_tx;
        if (!sum) {
          sum = orchestrator::AttachmentStats{};
          sum->rx = a.rx;
        }
        add_to(*sum, a);
        continue;
      }
      auto s = by_id.find(sessions_.session_of(a.id));
      series.push_back({{{"attachment", std::to_string(a.id)},
                         {"direction", a.rx ? "rx" : "tx"},
                         {"target", a.target},
                         {"client", s == by_id.end() ? "" : s->second->name},
                         {"uid", s == by_id.end() ? "" : std::to_string(s->second->uid)}},
                        a});
    }
    for (const auto* sum : {&other_rx, &other_tx}) {
      if (!*sum) continue;
      series.push_back({{{"attachment", "other"},
                         {"direction", (*sum)->rx ? "rx" : "tx"},
                         {"target", ""},
                         {"client", ""},
                         {"uid", ""}},
                        **sum});
    }
    for (const auto& [l, a] : series) {
      add_counters(attachment_families, v1::stats::kAttachmentCounters, values_of(a), l, a.rx,
                   a.gpu);
      if (a.gpu) gpu_latency.add_histogram(l, a.gpu_copy_latency);
    }

    FamilyBuilder sessions_gauge(out, "daqiri_sessions", "Connected client sessions",
                                 MetricType::Gauge);
    sessions_gauge.add({}, double(sessions.size()));
    FamilyBuilder cut(out, "daqiri_sessions_cut_off_total",
                      "Sessions ended for breaking the protocol", MetricType::Counter);
    cut.add({}, double(sessions_.sessions_cut_off()));
    FamilyBuilder parked(out, "daqiri_attachments_parked",
                         "Attachments closed that their pollers have not let go yet",
                         MetricType::Gauge);
    parked.add({}, double(dp_.parked()));
    FamilyBuilder busy(out, "daqiri_poller_busy_ratio",
                       "Fraction of a poller's iterations that found work", MetricType::Gauge);
    FamilyBuilder parks(out, "daqiri_poller_parks_total",
                        "Times a poller slept (it had no work for a while)", MetricType::Counter);
    FamilyBuilder wakeups(out, "daqiri_poller_wakeups_total",
                          "What ended a poller's sleeps: io (a socket or other fd of its "
                          "tasks), doorbell (a client's kick or a control change), timer",
                          MetricType::Counter);
    for (const orchestrator::PollerStats& p : dp_.poller_stats()) {
      busy.add({{"poller", p.name}}, p.busy_ratio);
      parks.add({{"poller", p.name}}, double(p.wakeups.parks));
      wakeups.add({{"poller", p.name}, {"cause", "io"}}, double(p.wakeups.io));
      wakeups.add({{"poller", p.name}, {"cause", "doorbell"}}, double(p.wakeups.doorbell));
      wakeups.add({{"poller", p.name}, {"cause", "timer"}}, double(p.wakeups.timer));
    }
    collect_nics(out);
    return out;
  }

  // DPDK ports: the NIC's own counters, extended stats, and each queue's steering counters.
  void collect_nics(std::vector<MetricFamily>& out) const {
    auto nics = dp_.nic_stats();
    if (nics.empty()) return;
    FamilyBuilder link(out, "daqiri_nic_link_up", "1 when the port's link is up",
                       MetricType::Gauge);
    FamilyBuilder packets(out, "daqiri_nic_packets_total", "Packets the NIC counted, by direction",
                          MetricType::Counter);
    FamilyBuilder bytes(out, "daqiri_nic_bytes_total", "Bytes the NIC counted, by direction",
                        MetricType::Counter);
    FamilyBuilder missed(out, "daqiri_nic_rx_missed_packets_total",
                         "Packets the NIC dropped for want of a free descriptor (imissed)",
                         MetricType::Counter);
    FamilyBuilder nombuf(out, "daqiri_nic_rx_nombuf_total",
                         "Times the PMD found the queue's mbuf pool empty (rx_nombuf)",
                         MetricType::Counter);
    FamilyBuilder errors(out, "daqiri_nic_errors_total", "Erroneous packets, by direction",
                         MetricType::Counter);
    FamilyBuilder xstats(out, "daqiri_nic_xstat",
                         "The PMD's extended statistics (rte_eth_xstats), by name",
                         MetricType::Gauge);
    FamilyBuilder unmatched(out, "daqiri_nic_queue_unmatched_packets_total",
                            "Frames no flow of the RX queue took", MetricType::Counter);
    FamilyBuilder copied(out, "daqiri_nic_queue_copied_packets_total",
                         "Frames the PMD delivered in buffers not of the queue's pool, copied",
                         MetricType::Counter);
    FamilyBuilder no_header(out, "daqiri_nic_queue_tx_no_header_total",
                            "TX polls that found the header mbuf pool dry", MetricType::Counter);
    FamilyBuilder mbufs_free(out, "daqiri_nic_queue_mbufs_free",
                             "Mbufs in the RX queue's mempool now (rte_mempool_avail_count)",
                             MetricType::Gauge);
    for (const auto& n : nics) {
      std::vector<ClientMetric::Label> l{{"interface", n.interface}, {"driver", n.driver}};
      auto dir = [&l](const char* d) {
        auto r = l;
        r.push_back({"direction", d});
        return r;
      };
      link.add(l, n.link == "up" ? 1 : 0);
      packets.add(dir("rx"), double(n.rx_packets));
      packets.add(dir("tx"), double(n.tx_packets));
      bytes.add(dir("rx"), double(n.rx_bytes));
      bytes.add(dir("tx"), double(n.tx_bytes));
      errors.add(dir("rx"), double(n.rx_errors));
      errors.add(dir("tx"), double(n.tx_errors));
      missed.add(l, double(n.rx_missed));
      nombuf.add(l, double(n.rx_nombuf));
      for (const auto& [name, value] : n.xstats) {
        xstats.add({{"interface", n.interface}, {"name", name}}, double(value));
      }
      for (const auto& q : n.queues) {
        std::vector<ClientMetric::Label> ql{{"interface", n.interface}, {"queue", q.name}};
        if (q.rx) {
          unmatched.add(ql, double(q.unmatched));
          copied.add(ql, double(q.copied));
          mbufs_free.add(ql, double(q.mbufs_free));
        } else {
          no_header.add(ql, double(q.no_header));
        }
      }
    }
  }

 private:
  const orchestrator::DataPlane& dp_;
  const session::SessionServer& sessions_;
};

// Control-plane calls by method and status code, and their latency.
class ControlCallMetrics {
 public:
  explicit ControlCallMetrics(prometheus::Registry& registry)
      : requests_(prometheus::BuildCounter()
                      .Name("daqiri_control_requests_total")
                      .Help("Control API calls by method and gRPC status code")
                      .Register(registry)),
        latency_(prometheus::BuildHistogram()
                     .Name("daqiri_control_request_duration_seconds")
                     .Help("Control API call latency by method")
                     .Register(registry)) {}

  void record(const std::string& method, grpc::StatusCode code, double seconds) {
    requests_.Add({{"method", method}, {"code", code_name(code)}}).Increment();
    latency_
        .Add({{"method", method}},
             prometheus::Histogram::BucketBoundaries{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                                     0.01, 0.025, 0.05, 0.1, 0.25, 1})
        .Observe(seconds);
  }

 private:
  static const char* code_name(grpc::StatusCode c) {
    switch (c) {
      case grpc::StatusCode::OK:
        return "OK";
      case grpc::StatusCode::INVALID_ARGUMENT:
        return "INVALID_ARGUMENT";
      case grpc::StatusCode::NOT_FOUND:
        return "NOT_FOUND";
      case grpc::StatusCode::ALREADY_EXISTS:
        return "ALREADY_EXISTS";
      case grpc::StatusCode::PERMISSION_DENIED:
        return "PERMISSION_DENIED";
      case grpc::StatusCode::FAILED_PRECONDITION:
        return "FAILED_PRECONDITION";
      case grpc::StatusCode::RESOURCE_EXHAUSTED:
        return "RESOURCE_EXHAUSTED";
      case grpc::StatusCode::UNAVAILABLE:
        return "UNAVAILABLE";
      case grpc::StatusCode::CANCELLED:
        return "CANCELLED";
      case grpc::StatusCode::DEADLINE_EXCEEDED:
        return "DEADLINE_EXCEEDED";
      default:
        return "OTHER";
    }
  }

  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Histogram>& latency_;
};

namespace {

class CallInterceptor final : public grpc::experimental::Interceptor {
 public:
  CallInterceptor(grpc::experimental::ServerRpcInfo* info, ControlCallMetrics& metrics)
      : method_(info->method() ? info->method() : "?"),
        metrics_(metrics),
        start_(std::chrono::steady_clock::now()) {
    if (!method_.empty() && method_.front() == '/') method_.erase(0, 1);
  }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
      metrics_.record(method_, methods->GetSendStatus().error_code(), seconds);
    }
    methods->Proceed();
  }

 private:
  std::string method_;
  ControlCallMetrics& metrics_;
  std::chrono::steady_clock::time_point start_;
};

class CallInterceptorFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit CallInterceptorFactory(ControlCallMetrics& metrics) : metrics_(metrics) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new CallInterceptor(info, metrics_);  // gRPC owns and deletes it
  }

 private:
  ControlCallMetrics& metrics_;
};

// The host to connect to for reaching a listener bound to `address` (host:port, [v6]:port).
std::string reachable_host(const std::string& address) {
  std::string host = address.substr(0, address.rfind(':'));
  if (host.size() >= 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  if (host.empty() || host == "0.0.0.0") return "127.0.0.1";
  if (host == "::") return "::1";
  return host;
}

}  // namespace

Result<std::unique_ptr<MetricsServer>> MetricsServer::start(
    const std::string& address, const orchestrator::DataPlane& data_plane,
    const session::SessionServer& sessions) {
  std::unique_ptr<MetricsServer> m(new MetricsServer());
  m->address_ = address;
  m->registry_ = std::make_shared<prometheus::Registry>();
  m->calls_ = std::make_unique<ControlCallMetrics>(*m->registry_);
  m->collector_ = std::make_shared<DataPlaneCollector>(data_plane, sessions);
  try {
    m->exposer_ = std::make_unique<prometheus::Exposer>(address, 2);
  } catch (const std::exception& e) {
    constexpr unsigned kCivetwebIpv6 = 8;  // mg_check_feature's bit
    std::string why =
        !address.empty() && address.front() == '[' && mg_check_feature(kCivetwebIpv6) == 0
            ? "this build's civetweb has no IPv6 (Debian 12's has none): give an "
              "IPv4 address or a host name"
            : e.what();
    return fail(ErrorCode::kUnavailable,
                "daemon.metrics: cannot serve metrics on " + address + ": " + why);
  }
  m->exposer_->RegisterCollectable(m->registry_);
  m->exposer_->RegisterCollectable(m->collector_);
  return m;
}

// civetweb 1.15 (Debian 12) stops only once its listener's poll times out, about a second
// (civetweb issue #1163, fixed in 1.16 with a socketpair): every daemon stop waited for it. A
// connection made after mg_stop has set its flag ends that poll, so connect until it is done.
MetricsServer::~MetricsServer() {
  if (!exposer_) return;
  std::vector<int> ports = exposer_->GetListeningPorts();
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> where(nullptr, &freeaddrinfo);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (!ports.empty() && getaddrinfo(reachable_host(address_).c_str(),
                                    std::to_string(ports.front()).c_str(), &hints, &found) == 0) {
    where.reset(found);
  }
  std::jthread poke;  // declared after `where`: its destructor joins it before `where` goes
  if (where) {
    poke = std::jthread([at = where.get()](const std::stop_token& stop) {
      while (!stop.stop_requested()) {
        UniqueFd fd(::socket(at->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
        if (fd) (void)::connect(fd.get(), at->ai_addr, at->ai_addrlen);
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    });
  }
  exposer_.reset();
}

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
MetricsServer::interceptor_factory() {
  return std::make_unique<CallInterceptorFactory>(*calls_);
}

}  // namespace daqiri::metrics
