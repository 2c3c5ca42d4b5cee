#include "backends/dpdk/dpdk_port.hpp"

#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_flow.h>
#include <rte_mbuf_dyn.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <string_view>
#include <thread>

#include "backends/dpdk/send_clock.hpp"
#include "backends/dpdk/software_reach.hpp"
#include "config/dpdk_address.hpp"

namespace daqiri::backends::dpdk {
namespace {

Result<> check(int rc, const std::string& what) {
  if (rc >= 0) return {};
  return fail(ErrorCode::kFailedPrecondition, what + ": " + rte_strerror(-rc));
}

// A PMD that frees what it is given unread: DPDK's null PMD unless its `copy` devarg is set.
// It takes payloads in GPU memory as a NIC would (nothing on the CPU touches them), which is
// how that path runs where there is no NIC.
bool discards_unread(const std::string& driver, const std::string& args) {
  if (driver != "net_null") return false;
  std::string_view rest = args;
  while (!rest.empty()) {  // devargs: key=value, comma-separated
    std::string_view arg = rest.substr(0, rest.find(','));
    if (arg.starts_with("copy=") && arg != "copy=0") return false;
    rest.remove_prefix(std::min(rest.size(), arg.size() + 1));
  }
  return true;
}

}  // namespace

Result<std::unique_ptr<Port>> Port::open(const config::InterfaceConfig& itf,
                                         const config::Config& c,
                                         const DpdkBackend::DevicePools& device_pools) {
  auto address = config::parse_dpdk_address(itf.address);
  if (!address) return fail(ErrorCode::kInvalidArgument, "not a DPDK device: " + itf.address);
  std::string where = "interface \"" + itf.name + "\" (" + address->name + ")";
  uint16_t id = 0;
  if (rte_eth_dev_get_port_by_name(address->name.c_str(), &id) != 0 &&
      !(address->pci && address->name.size() == 7 &&
        rte_eth_dev_get_port_by_name(("0000:" + address->name).c_str(), &id) == 0)) {
    return fail(ErrorCode::kFailedPrecondition,
                where + ": DPDK found no such port" +
                    (address->pci ? " (is the device bound to vfio-pci, or an mlx5 NIC?)"
                                  : " (the dpdk: lines above say why the vdev failed)"));
  }
  rte_eth_dev_info info{};
  if (auto ok = check(rte_eth_dev_info_get(id, &info), where + ": rte_eth_dev_info_get"); !ok) {
    return std::unexpected(ok.error());
  }
  std::unique_ptr<Port> port(new Port(itf.name, id, info.driver_name ? info.driver_name : "?"));
  rte_device* dma = address->pci ? info.device : nullptr;
  int socket = rte_eth_dev_socket_id(id);
  if (socket < 0) socket = SOCKET_ID_ANY;

  if (itf.mtu > info.max_mtu || itf.mtu < info.min_mtu) {
    return fail(ErrorCode::kFailedPrecondition, where + ": mtu " + std::to_string(itf.mtu) +
                                                    " is outside what " + port->driver_ +
                                                    " allows (" + std::to_string(info.min_mtu) +
                                                    " to " + std::to_string(info.max_mtu) + ")");
  }
  if (itf.rx_queues.size() > info.max_rx_queues || itf.tx_queues.size() > info.max_tx_queues) {
    return fail(ErrorCode::kFailedPrecondition,
                where + ": " + port->driver_ + " offers " + std::to_string(info.max_rx_queues) +
                    " RX and " + std::to_string(info.max_tx_queues) + " TX queues");
  }
  bool isolated = false;  // only what rte_flow rules steer reaches the port
  if (itf.flow_isolation) {
    // Isolated mode: the port receives only what rte_flow rules send it; everything else
    // (ARP, control traffic) stays with the kernel on bifurcated PMDs (mlx5).
    rte_flow_error error{};
    if (rte_flow_isolate(id, 1, &error) != 0) {
      return fail(ErrorCode::kFailedPrecondition,
                  where + ": flow_isolation: " + port->driver_ + " refuses isolated mode (" +
                      (error.message ? error.message : "unsupported") + ")");
    }
    isolated = true;
  }
  // Header-data split queues: the NIC splits where it can (mlx5's buffer split), into a header
  // mbuf pool and the payload region's; elsewhere the GPU engine splits whole frames, which a
  // gpudirect payload pool (GPU memory the CPU cannot read) does not allow.
  const rte_eth_rxseg_capa& seg = info.rx_seg_capa;
  bool nic_splits = (info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_BUFFER_SPLIT) != 0 &&
                    (info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_SCATTER) != 0 &&
                    seg.multi_pools != 0 && seg.max_nseg >= 2;
  bool any_split = false;
  for (const auto& q : itf.rx_queues) {
    if (q.regions.size() != 2) continue;
    any_split = true;
    if (!nic_splits && config::find_region(c, q.regions.back())->gpudirect) {
      return fail(ErrorCode::kFailedPrecondition,
                  where + ": RX queue " + q.name +
                      ": header-data split into a gpudirect region needs the NIC's buffer split "
                      "(RTE_ETH_RX_OFFLOAD_BUFFER_SPLIT with two pools), which " +
                      port->driver_ + " does not offer");
    }
  }
  rte_eth_conf conf{};
  conf.rxmode.mtu = itf.mtu;
  // hardware_timestamps: each descriptor carries the NIC's receive stamp; as in DAQIRI, a port
  // that cannot give one does not start.
  int timestamp_offset = -1;
  uint64_t timestamp_flag = 0;
  if (itf.hardware_timestamps) {
    if ((info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_TIMESTAMP) == 0) {
      return fail(ErrorCode::kFailedPrecondition,
                  where + ": hardware_timestamps: " + port->driver_ +
                      " offers no RX timestamps (RTE_ETH_RX_OFFLOAD_TIMESTAMP)");
    }
    if (rte_mbuf_dyn_rx_timestamp_register(&timestamp_offset, &timestamp_flag) != 0) {
      return fail(ErrorCode::kInternal,
                  where + ": the mbuf timestamp field: " + std::string(rte_strerror(rte_errno)));
    }
    conf.rxmode.offloads |= RTE_ETH_RX_OFFLOAD_TIMESTAMP;
  }
  // Checked TX frames chain their payload behind the daemon's copy of their headers, and TX
  // flows a raw frame behind its new headers, where the port takes chained mbufs; elsewhere each
  // is copied whole (DpdkTxQueue).
  bool any_checked_tx = std::any_of(itf.tx_queues.begin(), itf.tx_queues.end(), [](const auto& q) {
    return q.tx_policy.value_or(config::TxPolicy::kChecked) == config::TxPolicy::kChecked;
  });
  bool multi_segment = (any_checked_tx || !itf.tx_flows.empty()) &&
                       (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS) != 0;
  // A gpudirect TX queue: its frames' payloads stay in GPU memory, chained behind the headers,
  // for the NIC to read there; only a PCI NIC does (a vdev's PMD reads frames with the CPU),
  // or a PMD that reads nothing.
  const bool discards = !address->pci && discards_unread(port->driver_, address->args);
  for (const auto& q : itf.tx_queues) {
    if (!config::find_region(c, q.regions.back())->gpudirect || discards) continue;
    std::string why;
    if (!address->pci) {
      why = port->driver_ +
            " is a virtual device, whose PMD reads frames with the CPU, which cannot read GPU "
            "memory";
    } else if ((info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS) == 0) {
      why = port->driver_ + " offers no multi-segment TX (RTE_ETH_TX_OFFLOAD_MULTI_SEGS)";
    }
    if (!why.empty()) {
      return fail(ErrorCode::kFailedPrecondition,
                  where + ": TX queue " + q.name +
                      " sends payloads from a gpudirect region, which the NIC reads in GPU "
                      "memory behind each frame's headers: " +
                      why + "; use the region without gpudirect to stage through host memory");
    }
    multi_segment = true;
  }
  if (multi_segment) conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
  // accurate_send: the NIC holds each timed frame till its time where its PMD schedules sends
  // (SEND_ON_TIMESTAMP, what DAQIRI asks for); elsewhere the TX poller holds them. The same
  // scheduling meters paced queues, as DAQIRI paces; elsewhere the TX poller does.
  bool any_timed = std::any_of(itf.tx_queues.begin(), itf.tx_queues.end(),
                               [](const auto& q) { return q.accurate_send || q.pacing_mbps > 0; });
  int send_time_offset = -1;
  uint64_t send_time_flag = 0;
  if (any_timed && (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_SEND_ON_TIMESTAMP) != 0) {
    if (rte_mbuf_dyn_tx_timestamp_register(&send_time_offset, &send_time_flag) == 0) {
      conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_SEND_ON_TIMESTAMP;
    } else {
      spdlog::warn("{}: the mbuf send time field: {}: the TX poller holds timed frames", where,
                   rte_strerror(rte_errno));
      send_time_offset = -1;
    }
  }
  if (any_split && nic_splits) {
    // mlx5 chains the segments of a split frame: scatter comes with the split.
    conf.rxmode.offloads |= RTE_ETH_RX_OFFLOAD_BUFFER_SPLIT | RTE_ETH_RX_OFFLOAD_SCATTER;
  }
  if (auto ok = check(rte_eth_dev_configure(id, static_cast<uint16_t>(itf.rx_queues.size()),
                                            static_cast<uint16_t>(itf.tx_queues.size()), &conf),
                      where + ": rte_eth_dev_configure");
      !ok) {
    return std::unexpected(ok.error());
  }
  std::string tag = std::to_string(id);
  for (const auto& q : itf.rx_queues) {
    // Header-data split: whole frames in the payload region's buffers; the gpu engine splits.
    const auto* r = config::find_region(c, q.regions.back());
    uint16_t rxd = static_cast<uint16_t>(std::min<uint32_t>(q.ring_size, 32768));
    uint16_t txd = 0;
    rte_eth_dev_adjust_nb_rx_tx_desc(id, &rxd, &txd);
    // A queue staging for GPU rings keeps its buffers in release order: the engine's
    // copies then find long runs of consecutive buffers to move at once.
    bool gpu_staged =
        r->kind == config::RegionKind::kPinned || r->kind == config::RegionKind::kDevice;
    RxQueueSetup setup;
    setup.port = id;
    setup.queue = static_cast<uint16_t>(q.id);
    setup.pool_name = "rx" + tag + "_" + std::to_string(q.id);
    setup.buf_size = r->buf_size;
    setup.num_bufs = r->num_bufs;
    setup.huge = r->kind == config::RegionKind::kHuge;
    setup.batch = q.batch_size;
    setup.socket = socket;
    setup.dma_device = dma;
    setup.in_order = gpu_staged;
    setup.timestamp_offset = timestamp_offset;
    setup.timestamp_flag = timestamp_flag;
    setup.reach = software_reach(isolated, address->pci, static_cast<uint16_t>(q.id));
    if (auto d = device_pools.find(itf.name + "/" + q.name); d != device_pools.end()) {
      setup.device = &d->second;
    }
    if (q.regions.size() == 2 && nic_splits) {
      setup.split = static_cast<uint16_t>(config::find_region(c, q.regions.front())->buf_size);
    }
    auto queue = DpdkRxQueue::create(setup);
    if (!queue) {
      return fail(queue.error().code,
                  where + ": RX queue " + q.name + ": " + queue.error().message);
    }
    int rc = 0;
    if (setup.split != 0) {
      std::array<rte_eth_rxseg, 2> segs{};
      segs[0].split.mp = (*queue)->header_mempool();
      segs[0].split.length = setup.split;
      segs[1].split.mp = (*queue)->mempool();  // length 0: the rest, up to its data room
      rte_eth_rxconf rxconf = info.default_rxconf;
      rxconf.offloads = conf.rxmode.offloads;
      rxconf.rx_seg = segs.data();
      rxconf.rx_nseg = static_cast<uint16_t>(segs.size());
      rc = rte_eth_rx_queue_setup(id, static_cast<uint16_t>(q.id), rxd, socket, &rxconf, nullptr);
      if (rc < 0) {
        return fail(ErrorCode::kFailedPrecondition,
                    where + ": RX queue " + q.name + ": the NIC's buffer split at " +
                        std::to_string(setup.split) + " bytes: " + rte_strerror(-rc));
      }
    } else {
      rc = rte_eth_rx_queue_setup(id, static_cast<uint16_t>(q.id), rxd, socket, nullptr,
                                  (*queue)->mempool());
    }
    if (rc < 0 && setup.device != nullptr) {
      return fail(ErrorCode::kFailedPrecondition,
                  where + ": RX queue " + q.name + ": " + port->driver_ +
                      " refuses a pool in GPU memory (gpudirect): " + rte_strerror(-rc));
    }
    if (rc < 0) {
      // Some PMDs cannot fill external buffers; give them their own pool and copy.
      spdlog::warn(
          "{}: RX queue {}: {} refuses a pool over client-shared memory ({}); its "
          "frames will be copied into that memory",
          where, q.name, port->driver_, rte_strerror(-rc));
      rte_mempool* own = (*queue)->make_private_pool(r->num_bufs, socket);
      if (own == nullptr) {
        return fail(ErrorCode::kResourceExhausted,
                    where + ": RX queue " + q.name + ": private pool: " + rte_strerror(rte_errno));
      }
      rc = rte_eth_rx_queue_setup(id, static_cast<uint16_t>(q.id), rxd, socket, nullptr, own);
    }
    if (auto ok = check(rc, where + ": RX queue " + q.name); !ok)
      return std::unexpected(ok.error());
    port->rx_[q.name] = std::move(*queue);
  }
  for (const auto& q : itf.tx_queues) {
    uint16_t rxd = 0;
    uint16_t txd = static_cast<uint16_t>(std::min<uint32_t>(q.ring_size, 32768));
    rte_eth_dev_adjust_nb_rx_tx_desc(id, &rxd, &txd);
    TxQueueSetup setup;
    setup.port = id;
    setup.queue = static_cast<uint16_t>(q.id);
    setup.pool_name = "tx" + tag + "_" + std::to_string(q.id);
    setup.descriptors = txd;
    setup.batch = q.batch_size;
    setup.max_frame = itf.mtu + 14 + 4;
    setup.socket = socket;
    setup.dma_device = dma;
    setup.policy = q.tx_policy.value_or(config::TxPolicy::kChecked);
    setup.source_ipv4 = config::sending_ipv4(itf);
    rte_eth_macaddr_get(id, &setup.mac);
    setup.multi_segment = multi_segment;
    setup.pacing_mbps = q.pacing_mbps;
    setup.send_times = q.accurate_send;
    if (config::find_region(c, q.regions.back())->gpudirect) {
      setup.split_header = config::find_region(c, q.regions.front())->buf_size;
      setup.multi_segment = true;  // chained always (a PMD that reads nothing takes any chain)
    }
    // DAQIRI's TX flows come with DAQIRI files, whose TX queues are raw.
    if (setup.policy == config::TxPolicy::kRaw) setup.flows = itf.tx_flows;
    if (setup.split_header != 0) {
      spdlog::info("{}: TX queue {}: headers copied, payloads read by the NIC in GPU memory", where,
                   q.name);
    } else if (setup.policy == config::TxPolicy::kChecked) {
      spdlog::info("{}: TX queue {} checked: {}", where, q.name,
                   multi_segment ? "headers copied, payloads sent zero-copy"
                                 : "frames copied whole (the port has no multi-segment TX)");
    }
    auto queue = DpdkTxQueue::create(setup);
    if (!queue) {
      return fail(queue.error().code,
                  where + ": TX queue " + q.name + ": " + queue.error().message);
    }
    if (auto ok =
            check(rte_eth_tx_queue_setup(id, static_cast<uint16_t>(q.id), txd, socket, nullptr),
                  where + ": TX queue " + q.name);
        !ok) {
      return std::unexpected(ok.error());
    }
    port->tx_[q.name] = std::move(*queue);
  }
  if (itf.promiscuous) {
    if (int rc = rte_eth_promiscuous_enable(id); rc != 0) {
      spdlog::warn("{}: promiscuous mode: {}", where, rte_strerror(-rc));
    }
  }
  if (auto ok = check(rte_eth_dev_start(id), where + ": rte_eth_dev_start"); !ok) {
    return std::unexpected(ok.error());
  }
  port->started_ = true;
  spdlog::info("{}: port {} ({}) started, {} RX / {} TX queues, {}", where, id, port->driver_,
               itf.rx_queues.size(), itf.tx_queues.size(), port->link_state());
  if (any_timed) port->schedule_sends(itf, send_time_offset, send_time_flag, where);
  if (!itf.tx_flows.empty()) port->encapsulate_in_nic(itf, where);
  return port;
}

void Port::schedule_sends(const config::InterfaceConfig& itf, int offset, uint64_t flag,
                          const std::string& where) {
  // The NIC's clock rate: two readings 10 ms apart (a real-time clock counts nanoseconds).
  uint64_t first = 0, second = 0;
  auto t0 = std::chrono::steady_clock::now();
  bool clock = offset >= 0 && rte_eth_read_clock(id_, &first) == 0;
  if (clock) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    clock = rte_eth_read_clock(id_, &second) == 0;
  }
  auto span =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0);
  std::string why = offset < 0 ? driver_ + " offers no send scheduling (SEND_ON_TIMESTAMP)"
                               : driver_ + " does not read its clock (rte_eth_read_clock)";
  uint64_t tps = ticks_per_second(second - first, static_cast<uint64_t>(span.count()));
  for (const auto& q : itf.tx_queues) {
    if (!q.accurate_send && q.pacing_mbps == 0) continue;
    if (!clock) {
      if (q.accurate_send) {
        spdlog::info("{}: TX queue {}: accurate_send: the TX poller holds each timed frame ({})",
                     where, q.name, why);
      }
      if (q.pacing_mbps > 0) {
        spdlog::info("{}: TX queue {}: pacing_mbps: the TX poller meters the queue ({})", where,
                     q.name, why);
      }
      continue;
    }
    DpdkTxQueue& queue = *tx_.at(q.name);
    queue.schedule_sends_in_nic(offset, flag, tps);
    if (q.accurate_send) {
      spdlog::info(
          "{}: TX queue {}: accurate_send: the NIC holds each timed frame (its clock: {} "
          "ticks a second)",
          where, q.name, tps);
    }
    if (q.pacing_mbps > 0) {
      queue.pace_in_nic(q.pacing_mbps);
      spdlog::info(
          "{}: TX queue {}: pacing_mbps: the NIC meters the queue (the first frame of each "
          "burst leaves at its time)",
          where, q.name);
    }
  }
}

void Port::encapsulate_in_nic(const config::InterfaceConfig& itf, const std::string& where) {
  uint32_t overhead = 0;
  for (const auto& f : itf.tx_flows) {
    auto rule = HardwareRule::install_egress(id_, f);
    if (!rule) {
      egress_.clear();
      spdlog::info("{}: TX flows are encapsulated by the TX poller (flow {}: {})", where, f.name,
                   rule.error().message);
      return;
    }
    egress_.push_back(std::move(*rule));
    overhead = std::max(overhead, f.encap.overhead());
  }
  for (auto& [name, q] : tx_)
    q->encapsulated_by_nic(overhead);
  spdlog::info("{}: TX flows are encapsulated by the NIC ({} egress rules)", where, egress_.size());
}

Port::~Port() {
  egress_.clear();  // while the port is there to take the rules off
  flex_.reset();    // after the flows' rules that matched its items (gone with the flows)
  if (started_) rte_eth_dev_stop(id_);
  rte_eth_dev_close(id_);
}

DpdkRxQueue* Port::rx(const std::string& queue) const {
  auto it = rx_.find(queue);
  return it == rx_.end() ? nullptr : it->second.get();
}

DpdkTxQueue* Port::tx(const std::string& queue) const {
  auto it = tx_.find(queue);
  return it == tx_.end() ? nullptr : it->second.get();
}

std::string Port::link_state() const {
  rte_eth_link link{};
  if (rte_eth_link_get_nowait(id_, &link) != 0) return "unknown";
  if (link.link_status == RTE_ETH_LINK_DOWN) return "down";
  std::string speed = link.link_speed == RTE_ETH_SPEED_NUM_UNKNOWN
                          ? std::string("speed unknown")
                          : std::to_string(link.link_speed) + " Mbps";
  return "up " + speed;
}

dataplane::NicStats Port::stats() const {
  dataplane::NicStats s;
  s.interface = name_;
  s.driver = driver_;
  rte_eth_link link{};
  bool up = rte_eth_link_get_nowait(id_, &link) == 0 && link.link_status == RTE_ETH_LINK_UP;
  s.link = up ? "up" : "down";
  rte_eth_stats st{};
  if (rte_eth_stats_get(id_, &st) == 0) {
    s.rx_packets = st.ipackets;
    s.rx_bytes = st.ibytes;
    s.rx_missed = st.imissed;
    s.rx_errors = st.ierrors;
    s.rx_nombuf = st.rx_nombuf;
    s.tx_packets = st.opackets;
    s.tx_bytes = st.obytes;
    s.tx_errors = st.oerrors;
  }
  int n = rte_eth_xstats_get(id_, nullptr, 0);
  if (n > 0) {
    std::vector<rte_eth_xstat> values(static_cast<size_t>(n));
    std::vector<rte_eth_xstat_name> names(static_cast<size_t>(n));
    int got = rte_eth_xstats_get(id_, values.data(), static_cast<unsigned>(n));
    int named = rte_eth_xstats_get_names(id_, names.data(), static_cast<unsigned>(n));
    for (int i = 0; i < std::min(got, named); ++i) {
      s.xstats.emplace_back(names[values[i].id].name, values[i].value);
    }
  }
  for (const auto& [name, q] : rx_)
    s.queues.push_back(q->stats(name));
  for (const auto& [name, q] : tx_)
    s.queues.push_back(q->stats(name));
  return s;
}

}  // namespace daqiri::backends::dpdk
