#include "config/config_validator.hpp"

#include <arpa/inet.h>
#include <net/if.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <string_view>

#include "backends/xdp/flow_filter.h"
#include "config/dpdk_address.hpp"
#include "core/flow_table.hpp"
#include "daqiri/abi.h"
#include "memory/page_arena.hpp"

namespace daqiri::config {
namespace {

std::string cpu_list(const std::set<int>& cpus) {
  std::string out;
  auto it = cpus.begin();
  while (it != cpus.end()) {
    int first = *it;
    int last = first;
    while (++it != cpus.end() && *it == last + 1)
      last = *it;
    if (!out.empty()) out += ',';
    out +=
        first == last ? std::to_string(first) : std::to_string(first) + '-' + std::to_string(last);
  }
  return out.empty() ? "none" : out;
}

bool is_power_of_two(uint64_t v) {
  return v != 0 && (v & (v - 1)) == 0;
}

// A frame buffer's size at most (a reorder's output buffers hold whole batches, and an RDMA
// queue's buffers whole messages, up to the schema's 1 GiB).
constexpr uint32_t kMaxQueueBufSize = 1u << 20;
// The smallest UMEM chunk the kernel takes (XDP_UMEM_MIN_CHUNK_SIZE).
constexpr uint32_t kXskMinChunk = 2048;

class Validator {
 public:
  Validator(const Config& config, const SystemFacts& facts, Diagnostics& diags)
      : c_(config), facts_(facts), diags_(diags) {}

  void run() {
    check_daemon();
    check_regions();
    check_interfaces();
    check_pool_sizes();
    check_hugepages();
    check_flows();
    check_reorders();
    check_dpdk();
  }

 private:
  void error(const Origin& o, std::string msg) { diags_.error(o, std::move(msg)); }

  void check_core(int core, const Origin& o) {
    if (core >= 0 && !facts_.usable_cpus.contains(core)) {
      error(o, "core " + std::to_string(core) + " is not available to daqirid (usable cores: " +
                   cpu_list(facts_.usable_cpus) + ")");
    }
  }

  void check_name(const char* what, const std::string& name, const Located& where) {
    if (auto ok = core::check_name(what, name); !ok) error(where.at("name"), ok.error().message);
  }

  void check_daemon() {
    const DaemonConfig& d = c_.daemon;
    if (d.socket_path.empty() || d.socket_path.front() != '/') {
      error(d.where.at("socket"),
            "the socket path must be absolute, got \"" + d.socket_path + "\"");
    } else if (d.socket_path.size() > 100) {
      error(d.where.at("socket"),
            "the socket path is longer than a Unix socket address allows "
            "(100 characters)");
    }
    if (!d.cdi_spec.empty() && (d.cdi_spec.front() != '/' || d.cdi_spec.back() == '/')) {
      error(d.where.at("cdi_spec"),
            "cdi_spec is the absolute path of a file (such as /var/run/cdi/daqiri.yaml), got \"" +
                d.cdi_spec + "\"");
    }
    for (int core : d.control_cores)
      check_core(core, d.where.at("control_cores"));
    for (const auto& dir : d.capture_dirs) {
      if (dir.empty() || dir.front() != '/' || dir.find("/..") != std::string::npos) {
        error(d.where.at("capture_dirs"),
              "capture_dirs are absolute folders without \"..\", got \"" + dir + "\"");
      }
    }
    if (!d.metrics_address.empty() && d.metrics_address.rfind(':') == std::string::npos) {
      error(d.where.at("metrics"),
            "expected host:port or \"off\", got \"" + d.metrics_address + "\"");
    }
    if (d.tcp) {
      if (d.tcp->address.rfind(':') == std::string::npos) {
        error(d.tcp->where.at("address"), "expected host:port, got \"" + d.tcp->address + "\"");
      }
      if (d.tcp->admin && d.tcp->client_ca_file.empty()) {
        error(d.tcp->where.at("role"),
              "role admin over TCP needs client_ca: callers must prove who they are");
      } else if (d.tcp->anonymous && !d.tcp->client_ca_file.empty()) {
        error(d.tcp->where.at("role"),
              "role anonymous lets callers in without a certificate; with client_ca they "
              "present one: use role client");
      } else if (!d.tcp->anonymous && d.tcp->client_ca_file.empty()) {
        error(d.tcp->where.at("client_ca"),
              "TCP callers must prove who they are: set client_ca (the CA that signs their "
              "certificates), or role: anonymous to let anyone who reaches the port read as a "
              "client");
      }
    }
  }

  void check_regions() {
    for (const auto& r : c_.memory_regions) {
      check_name("memory region", r.name, r.where);
      if (!regions_.emplace(r.name, &r).second) {
        error(r.where.at("name"), "a memory region named \"" + r.name + "\" is already defined");
      }
      for (const auto& a : r.access) {
        if (a != "local" && a != "rdma_read" && a != "rdma_write") {
          error(r.where.at("access"),
                "unknown access \"" + a + "\": expected local, rdma_read or rdma_write");
        }
      }
      bool gpu_kind = r.kind == RegionKind::kPinned || r.kind == RegionKind::kDevice;
      if (gpu_kind && !facts_.have_cuda) {
        error(r.where.at("kind"), std::string("kind ") + to_string(r.kind) +
                                      " needs a daqirid built with CUDA (DAQIRI_WITH_CUDA)");
      }
      if (!gpu_kind && r.gpu >= 0) {
        error(r.where.at("gpu"),
              std::string("gpu applies to pinned and device regions, not ") + to_string(r.kind));
      }
      if (r.gpudirect && r.kind != RegionKind::kDevice) {
        error(r.where.at("gpudirect"),
              std::string("gpudirect puts a queue's pool in GPU memory: it applies to device "
                          "regions, not ") +
                  to_string(r.kind));
      }
      if (r.share_pages && r.kind != RegionKind::kHuge) {
        error(r.where.at("share_pages"),
              std::string("share_pages packs pools into shared 2 MB hugepages: it applies to huge "
                          "regions, not ") +
                  to_string(r.kind));
      }
    }
  }

  void check_queue(const InterfaceConfig& itf, const QueueConfig& q, const char* dir,
                   std::set<std::string>& names, std::set<uint32_t>& ids) {
    check_name("queue", q.name, q.where);
    if (!names.insert(q.name).second) {
      error(q.where.at("name"),
            "interface \"" + itf.name + "\" already has a queue named \"" + q.name + "\"");
    }
    if (!ids.insert(q.id).second) {
      error(q.where.at("id"), std::string("interface \"") + itf.name + "\" already has an " + dir +
                                  " queue with id " + std::to_string(q.id));
    }
    check_core(q.core, q.where.at(c_.schema == Schema::kDaqiri ? "cpu_core" : "core"));
    if (!is_power_of_two(q.ring_size)) {
      error(q.where.at("ring_size"),
            "ring_size must be a power of two, got " + std::to_string(q.ring_size));
    }
    if (q.batch_size > q.ring_size) {
      error(q.where.at("batch_size"), "batch_size " + std::to_string(q.batch_size) +
                                          " exceeds ring_size " + std::to_string(q.ring_size));
    }
    const char* regions_key = c_.schema == Schema::kDaqiri ? "memory_regions" : "regions";
    if (q.regions.size() > 2) {
      error(q.where.at(regions_key), "a queue takes one region, or two for header-data split");
    }
    if (q.regions.size() == 2) check_split(q, itf.backend, regions_key);
    if (q.pacing_mbps != 0 && itf.backend == Backend::kRdma) {
      error(q.where.at("pacing_mbps"),
            "rdma TX queues carry RDMA operations, which are not paced: no pacing_mbps");
    }
    if (q.accurate_send && itf.backend == Backend::kRdma) {
      error(q.where.at("accurate_send"),
            "rdma TX queues carry RDMA operations, which go out as posted: no accurate_send");
    }
    if (q.tx_policy && itf.backend == Backend::kRdma) {
      error(q.where.at("tx_policy"),
            "rdma TX queues carry RDMA operations, not frames: no tx_policy");
    }
    const bool tcp = q.tx_policy == TxPolicy::kTcp;
    if (tcp && itf.backend != Backend::kSocket) {
      error(q.where.at("tx_policy"),
            "tx_policy tcp writes to the TCP connections of a socket interface's flows: this "
            "interface is " +
                std::string(to_string(itf.backend)));
    }
    if (tcp && q.accurate_send) {
      error(q.where.at("accurate_send"),
            "a tcp TX queue writes into a byte stream, which the kernel sends when the peer "
            "has room: no accurate_send");
    }
    if (std::string_view(dir) == "TX") check_gpu_tx(q, itf.backend, regions_key);
    if (std::string_view(dir) == "TX" &&
        (itf.backend == Backend::kDpdk || itf.backend == Backend::kXdp) &&
        q.tx_policy.value_or(TxPolicy::kChecked) == TxPolicy::kChecked && itf.source_ipv4.empty()) {
      error(q.where.self, "TX queue \"" + q.name +
                              "\" is checked (the default tx_policy): its interface needs "
                              "source_ipv4, the address its frames must come from (or give the "
                              "queue tx_policy: raw)");
    }
    for (const auto& name : q.regions) {
      if (!regions_.contains(name)) {
        error(q.where.at(regions_key), "no memory region named \"" + name + "\"");
      } else {
        // A split queue's header region holds header slots per GPU ring, not pools.
        bool header_slots = q.regions.size() == 2 && &name == &q.regions.front();
        if (!header_slots) users_[name].push_back(&q);
        if (itf.backend != Backend::kRdma && !tcp) frame_users_.insert(name);
        user_names_[&q] = itf.name + "/" + q.name;
        bool rx = std::string_view(dir) == "RX";
        if (regions_.at(name)->gpudirect && rx &&
            (itf.backend == Backend::kSocket || itf.backend == Backend::kXdp)) {
          error(q.where.at(regions_key),
                "region \"" + name + "\" is gpudirect, which this daqirid drives on RX queues of " +
                    "rdma and dpdk interfaces (the NIC writes into GPU memory) and on dpdk TX " +
                    "queues with header-data split (the NIC reads the payloads); use it " +
                    "without gpudirect to stage through host memory");
        } else if (regions_.at(name)->gpudirect && !rx &&
                   (itf.backend != Backend::kDpdk || q.regions.size() != 2 || header_slots)) {
          error(q.where.at(regions_key),
                "region \"" + name + "\" is gpudirect: on TX the NIC reads payloads in GPU " +
                    "memory behind headers the daemon copies, which needs a dpdk interface and " +
                    "header-data split (a host header region first, then the gpudirect one); " +
                    "use it without gpudirect to stage through host memory");
        }
        if (regions_.at(name)->share_pages &&
            (itf.backend == Backend::kDpdk || itf.backend == Backend::kXdp) &&
            std::string_view(dir) == "RX") {
          error(q.where.at(regions_key),
                "region \"" + name + "\" shares pages, but a " + to_string(itf.backend) +
                    " RX queue's pool is registered with the NIC as memory of its own; use a "
                    "region without share_pages");
        }
      }
    }
  }

  // Header-data split (two regions): headers to host slots, payloads to GPU rings, as the gpu
  // engine does it for staged RX queues, on every backend; on DPDK the NIC may split instead
  // (rte_eth_rxseg_split), which alone takes payloads into a gpudirect region. On TX the
  // client writes headers into host buffers and payloads into GPU buffers; the gpu engine
  // joins them in host memory before the queue sends them.
  void check_split(const QueueConfig& q, Backend backend, const char* key) {
    auto headers = regions_.find(q.regions[0]);
    auto payloads = regions_.find(q.regions[1]);
    if (headers == regions_.end() || payloads == regions_.end()) return;  // said elsewhere
    std::string why;
    if (headers->second->kind == RegionKind::kDevice) {
      why = "the first region takes the headers: host, huge or pinned, not device";
    } else if (payloads->second->kind != RegionKind::kDevice) {
      why = "the second region takes the payloads: a device region";
    } else if (payloads->second->gpudirect && backend != Backend::kDpdk) {
      why = "payloads into a gpudirect region need the NIC's buffer split (dpdk interfaces)";
    }
    if (!why.empty()) {
      error(q.where.at(key), "two regions (\"" + q.regions[0] + "\", \"" + q.regions[1] +
                                 "\") mean header-data split: " + why);
    }
  }

  // A TX queue whose (last) region is a device region sends from GPU memory: the gpu engine
  // copies each frame, or with a header region each payload, into host memory of its own, and
  // the queue sends that like any client's frame. The frames must fit the largest buffer a
  // frame queue takes, and a tcp queue's messages have no headers to split off.
  void check_gpu_tx(const QueueConfig& q, Backend backend, const char* key) {
    if (q.regions.empty()) return;
    auto payloads = regions_.find(q.regions.back());
    if (payloads == regions_.end() || payloads->second->kind != RegionKind::kDevice) return;
    uint64_t frame = payloads->second->buf_size;
    if (q.regions.size() == 2) {
      if (auto headers = regions_.find(q.regions[0]); headers != regions_.end())
        frame += headers->second->buf_size;
    }
    if (q.tx_policy == TxPolicy::kTcp) {
      error(q.where.at(key), "a tcp TX queue sends from the host memory of its one region: " +
                                 std::string("region \"") + payloads->second->name +
                                 "\" is device memory");
      return;
    }
    // DPDK's mbufs address at most 65535 bytes.
    uint64_t most = backend == Backend::kDpdk ? 65535 : kMaxQueueBufSize;
    if (backend != Backend::kRdma && frame > most) {
      error(q.where.at(key), "frames sent from GPU memory on TX queue \"" + q.name + "\" are " +
                                 std::to_string(frame) + " bytes (headers and payload buffers), " +
                                 "more than its buffers hold (" + std::to_string(most) + ")");
    }
  }

  void check_interfaces() {
    std::set<std::string> names;
    for (const auto& itf : c_.interfaces) {
      check_name("interface", itf.name, itf.where);
      if (!names.insert(itf.name).second) {
        error(itf.where.at("name"), "an interface named \"" + itf.name + "\" is already defined");
      }
      switch (itf.backend) {
        case Backend::kDpdk:
          if (!facts_.have_dpdk) {
            error(itf.where.at("backend"),
                  "backend dpdk needs a daqirid built with DPDK (DAQIRI_WITH_DPDK)");
            break;
          }
          check_dpdk_interface(itf);
          break;
        case Backend::kXdp:
          if (!facts_.have_xdp) {
            error(itf.where.at("backend"),
                  "backend xdp needs a daqirid built with libxdp and libbpf (DAQIRI_WITH_XDP)");
            break;
          }
          check_xdp_interface(itf);
          break;
        case Backend::kRdma:
          if (!facts_.have_rdma) {
            error(itf.where.at("backend"),
                  "backend rdma needs a daqirid built with rdma-core (DAQIRI_WITH_RDMA)");
          }
          [[fallthrough]];
        case Backend::kSocket: {
          if (itf.hardware_timestamps) {
            error(itf.where.at("hardware_timestamps"),
                  std::string(to_string(itf.backend)) +
                      " interfaces stamp frames with the daemon's clock: hardware_timestamps is "
                      "for dpdk ones, whose NIC stamps them");
          }
          if (!itf.source_ipv4.empty()) {
            error(itf.where.at("source_ipv4"),
                  std::string(to_string(itf.backend)) +
                      " interfaces send from their address: source_ipv4 is for dpdk ones");
          }
          if (!parse_ipv4(itf.address)) {
            error(itf.where.at("address"), std::string("a ") + to_string(itf.backend) +
                                               " interface binds an IPv4 address, got \"" +
                                               itf.address + "\"");
          }
          break;
        }
      }
      if (itf.rx_queues.empty() && itf.tx_queues.empty()) {
        error(itf.where.self, "interface \"" + itf.name + "\" has no rx or tx queues");
      }
      std::set<std::string> queue_names;
      std::set<uint32_t> rx_ids;
      std::set<uint32_t> tx_ids;
      for (const auto& q : itf.rx_queues)
        check_queue(itf, q, "RX", queue_names, rx_ids);
      for (const auto& q : itf.tx_queues)
        check_queue(itf, q, "TX", queue_names, tx_ids);
    }
  }

  // An xdp interface is a Linux network interface by name, whose RX queues are AF_XDP sockets
  // over UMEM chunks of a page at most.
  void check_xdp_interface(const InterfaceConfig& itf) {
    if (itf.address.empty() || itf.address.size() >= IFNAMSIZ ||
        itf.address.find_first_of("/ ") != std::string::npos) {
      error(itf.where.at("address"),
            "an xdp interface names a Linux network interface (eth0, enp3s0f0), got \"" +
                itf.address + "\"");
    }
    if (itf.hardware_timestamps) {
      error(itf.where.at("hardware_timestamps"),
            "xdp interfaces stamp frames with the daemon's clock: hardware_timestamps is for "
            "dpdk ones, whose NIC stamps them");
    }
    if (!itf.source_ipv4.empty() && !parse_ipv4(itf.source_ipv4)) {
      error(itf.where.at("source_ipv4"),
            "source_ipv4 is an IPv4 address, got \"" + itf.source_ipv4 + "\"");
    }
    // A queue id's RX and TX share one socket, whose chunks are the RX pool's buffers.
    const auto page = static_cast<uint32_t>(sysconf(_SC_PAGESIZE));
    std::map<uint32_t, uint32_t> chunk_of_id;
    for (const auto* queues : {&itf.rx_queues, &itf.tx_queues}) {
      const bool rx = queues == &itf.rx_queues;
      for (const auto& q : *queues) {
        if (q.id >= DAQIRI_XDP_MAX_QUEUES) {
          error(q.where.at("id"), "xdp queue ids go up to " +
                                      std::to_string(DAQIRI_XDP_MAX_QUEUES - 1) + ", got " +
                                      std::to_string(q.id));
        }
        if (q.regions.empty() || q.regions.size() > 2) continue;  // said by check_queue
        // A split's payload region is a device region: refused below as any.
        auto it = regions_.find(q.regions.back());
        if (it == regions_.end()) continue;
        const MemoryRegionConfig& r = *it->second;
        const std::string queue = "xdp queue " + itf.name + "/" + q.name;
        if (r.kind == RegionKind::kDevice) {
          error(q.where.at("regions"), queue + ": the kernel reads and writes frames in host " +
                                           "memory; region \"" + r.name + "\" is a device region");
        } else if (rx && (r.buf_size < kXskMinChunk || r.buf_size > page)) {
          error(r.where.at("buf_size"), "buf_size " + std::to_string(r.buf_size) + " of " + queue +
                                            ": AF_XDP chunks are " + std::to_string(kXskMinChunk) +
                                            " to " + std::to_string(page) +
                                            " bytes (a page), and hold a frame after 256 bytes " +
                                            "of the kernel's headroom");
        } else if (rx) {
          chunk_of_id[q.id] = r.buf_size;
        } else if (auto chunk = chunk_of_id.find(q.id);
                   r.buf_size > (chunk != chunk_of_id.end() ? chunk->second : page)) {
          error(r.where.at("buf_size"),
                "buf_size " + std::to_string(r.buf_size) + " of " + queue + ": its frames " +
                    "are sent from chunks of the socket of queue id " + std::to_string(q.id) +
                    ", " + std::to_string(chunk != chunk_of_id.end() ? chunk->second : page) +
                    " bytes (the RX queue's buf_size there, else a page)");
        }
      }
    }
  }

  void check_dpdk_interface(const InterfaceConfig& itf) {
    auto address = parse_dpdk_address(itf.address);
    if (!address) {
      error(itf.where.at("address"),
            "a dpdk interface names a PCI device (0000:3b:00.0) or a DPDK virtual device "
            "(net_null0, net_pcap0,rx_pcap=in.pcap), got \"" +
                itf.address + "\"");
      return;
    }
    if (!dpdk_devices_.insert(address->name).second) {
      error(itf.where.at("address"),
            "DPDK device \"" + address->name + "\" is used by another interface");
    }
    if (!itf.source_ipv4.empty() && !parse_ipv4(itf.source_ipv4)) {
      error(itf.where.at("source_ipv4"),
            "source_ipv4 is an IPv4 address, got \"" + itf.source_ipv4 + "\"");
    }
    if (address->pci && !c_.dpdk.hugepages) {
      error(itf.where.at("address"),
            "a PCI device needs DMA-able memory: dpdk.hugepages must be true for " + address->name);
    }
    auto check_ids = [&](const std::vector<QueueConfig>& queues, const char* dir) {
      for (size_t i = 0; i < queues.size(); ++i) {
        bool found = false;
        for (const auto& q : queues)
          found |= q.id == i;
        if (!found) {
          error(itf.where.self, std::string("interface \"") + itf.name + "\": DPDK " + dir +
                                    " queue ids must be 0 to " + std::to_string(queues.size() - 1) +
                                    "; " + std::to_string(i) + " is missing");
          return;
        }
      }
    };
    check_ids(itf.rx_queues, "RX");
    check_ids(itf.tx_queues, "TX");
    // A frame must fit one buffer after the mbuf headroom (128 bytes).
    uint32_t need = itf.mtu + 14 + 4 + kMbufHeadroom;
    for (const auto* queues : {&itf.rx_queues, &itf.tx_queues}) {
      for (const auto& q : *queues) {
        // Header-data split: DAQIRI sizes the two regions as a header and a payload segment,
        // less than a whole MTU each; frames longer than the staging buffer (the payload
        // region's) are truncated and counted, as a NIC's buffer split would cut them.
        if (q.regions.size() != 1) continue;
        auto it = regions_.find(q.regions.front());
        if (it == regions_.end()) continue;
        const MemoryRegionConfig& r = *it->second;
        // Every kind: device and pinned queues stage frames in host buffers of buf_size.
        if (r.buf_size > 65535) {
          error(r.where.at("buf_size"), "buf_size " + std::to_string(r.buf_size) +
                                            " is too large for DPDK queue " + itf.name + "/" +
                                            q.name + " (mbufs address at most 65535 bytes)");
        } else if (queues == &itf.rx_queues && r.buf_size < need) {
          error(r.where.at("buf_size"), "buf_size " + std::to_string(r.buf_size) +
                                            " cannot hold a frame of MTU " +
                                            std::to_string(itf.mtu) + " on DPDK queue " + itf.name +
                                            "/" + q.name + ": it needs " + std::to_string(need) +
                                            " (frame + VLAN tag + 128 bytes of mbuf headroom)");
        }
      }
    }
  }

  void check_dpdk() {
    bool any_dpdk = false;
    for (const auto& itf : c_.interfaces)
      any_dpdk |= itf.backend == Backend::kDpdk;
    if (!any_dpdk) return;
    if (c_.dpdk.main_core >= 0) check_core(c_.dpdk.main_core, c_.dpdk.where.at("main_core"));
  }

  // A region is the template of the pools cut from it (one per flow on the socket backend), so
  // every pool must cover the largest ring it feeds, not the sum of them.
  void check_pool_sizes() {
    for (const auto& [name, queues] : users_) {
      const MemoryRegionConfig& r = *regions_.at(name);
      if (r.buf_size > kMaxQueueBufSize && frame_users_.contains(name)) {
        error(r.where.at("buf_size"), "buf_size " + std::to_string(r.buf_size) +
                                          " is more than a queue's buffers hold (" +
                                          std::to_string(kMaxQueueBufSize) +
                                          "); only RDMA and tcp TX queues' regions (whole "
                                          "messages) and a reorder's output region "
                                          "(whole batches) hold larger ones");
      }
      const QueueConfig* worst = nullptr;
      for (const QueueConfig* q : queues) {
        if (!worst || buffers_needed(*q) > buffers_needed(*worst)) worst = q;
      }
      uint64_t need = buffers_needed(*worst);
      if (r.num_bufs < need) {
        error(r.where.at("num_bufs"), "num_bufs " + std::to_string(r.num_bufs) +
                                          " is too small for queue " + user_names_.at(worst) +
                                          " (1.5 x ring_size " + std::to_string(worst->ring_size) +
                                          " + batch_size " + std::to_string(worst->batch_size) +
                                          "): each pool cut from region \"" + name +
                                          "\" needs at least " + std::to_string(need));
      }
    }
  }

  // Who holds hugepages of daqirid memory, for a shortfall's message: after a daemon was
  // killed, its clients keep the pools they mapped until they exit.
  [[nodiscard]] std::string held_by() const {
    auto holders = facts_.hugepage_holders ? facts_.hugepage_holders() : std::vector<std::string>{};
    if (holders.empty()) return "";
    std::string text = "; daqirid memory in hugepages is still mapped by ";
    for (size_t i = 0; i < holders.size(); ++i)
      text += (i ? ", " : "") + holders[i];
    return text + " (clients of a daqirid that ended keep theirs until they exit)";
  }

  // What the data plane will take from hugetlbfs: a pool per flow (each flow owns its pool,
  // so clients map nothing of other flows) rounded up to whole pages, and a TX pool for the
  // first client of each TX queue. Pools are packed across flows only in share_pages regions.
  void check_hugepages() {
    auto pages_of = [this](const MemoryRegionConfig& r) {
      return (r.total_bytes() + facts_.hugepage_size - 1) / facts_.hugepage_size;
    };
    const MemoryRegionConfig* first = nullptr;
    uint64_t pages = 0;
    std::map<const MemoryRegionConfig*, uint64_t> shared_pools;  // share_pages: counted apart
    auto count_queue = [&](const QueueConfig& q, bool rx_flow) {
      if (q.regions.empty()) return;
      // The pool's geometry: with header-data split the payload region (header slots and a
      // GPU TX queue's frame copies are ordinary memory).
      auto it = regions_.find(q.regions.back());
      if (it == regions_.end() || it->second->kind != RegionKind::kHuge) return;
      if (rx_flow && it->second->share_pages)
        ++shared_pools[it->second];
      else
        pages += pages_of(*it->second);
      if (!first) first = it->second;
    };
    for (const auto& f : c_.flows) {
      for (const auto& itf : c_.interfaces) {
        if (itf.name != f.interface || itf.rx_queues.empty()) continue;
        // A pool per queue, counted below.
        if (itf.backend == Backend::kDpdk || itf.backend == Backend::kXdp) continue;
        const QueueConfig* q = &itf.rx_queues.front();
        for (const auto& candidate : itf.rx_queues) {
          if (candidate.name == f.queue) q = &candidate;
        }
        count_queue(*q, true);
      }
    }
    for (const auto& [r, pools] : shared_pools)
      pages += memory::PageArena::pages_for(pools, r->total_bytes(), facts_.hugepage_size);
    for (const auto& r : c_.reorders) {  // a pool of its own: each batch after its header
      auto it = regions_.find(r.region);
      if (it == regions_.end() || it->second->kind != RegionKind::kHuge) continue;
      uint64_t bytes =
          (uint64_t{it->second->buf_size} + DAQIRI_BATCH_HEADER_BYTES) * it->second->num_bufs;
      pages += (bytes + facts_.hugepage_size - 1) / facts_.hugepage_size;
      if (!first) first = it->second;
    }
    bool eal = false;
    const InterfaceConfig* first_dpdk = nullptr;
    for (const auto& itf : c_.interfaces) {
      for (const auto& q : itf.tx_queues)
        count_queue(q, false);
      if (itf.backend == Backend::kXdp) {
        for (const auto& q : itf.rx_queues)
          count_queue(q, false);
      }
      if (itf.backend != Backend::kDpdk) continue;
      for (const auto& q : itf.rx_queues)
        count_queue(q, false);
      eal = c_.dpdk.hugepages && facts_.have_dpdk;
      if (!first_dpdk) first_dpdk = &itf;
    }
    uint64_t eal_pages = eal ? ((uint64_t{c_.dpdk.memory_mb} << 20) + facts_.hugepage_size - 1) /
                                   facts_.hugepage_size
                             : 0;
    if (eal_pages > 0 && pages + eal_pages > facts_.hugepages_free) {
      uint64_t mib = facts_.hugepage_size >> 20;
      error(c_.dpdk.where.self.line > 0 ? c_.dpdk.where.at("hugepages")
                                        : first_dpdk->where.at("backend"),
            "DPDK needs " + std::to_string(eal_pages) + " hugepages of " + std::to_string(mib) +
                " MiB for dpdk.memory_mb " + std::to_string(c_.dpdk.memory_mb) +
                (pages ? " and " + std::to_string(pages) + " for huge regions" : std::string()) +
                " but the machine has " + std::to_string(facts_.hugepages_free) +
                " free; reserve more with `echo " +
                std::to_string(facts_.hugepages_total + pages + eal_pages - facts_.hugepages_free) +
                " > /proc/sys/vm/nr_hugepages` (and mount hugetlbfs) or set dpdk.hugepages: false" +
                held_by());
      return;
    }
    if (!first || pages <= facts_.hugepages_free) return;
    uint64_t mib = facts_.hugepage_size >> 20;
    error(first->where.at("kind"),
          "huge regions need " + std::to_string(pages) + " hugepages of " + std::to_string(mib) +
              " MiB (a pool per flow and per TX queue's first client, each rounded up to whole "
              "pages) but the machine has " +
              std::to_string(facts_.hugepages_free) + " free (of " +
              std::to_string(facts_.hugepages_total) + "); reserve more with `echo " +
              std::to_string(facts_.hugepages_total + pages - facts_.hugepages_free) +
              " > /proc/sys/vm/nr_hugepages` or use kind host" + held_by());
  }

  void check_catch_all(const FlowConfig& f) {
    for (const auto& itf : c_.interfaces) {
      if (itf.name == f.interface && !f.rss_queues.empty() && itf.backend != Backend::kDpdk) {
        error(f.where.at("queues"), "RSS across queues needs a dpdk interface; \"" + itf.name +
                                        "\" is " + to_string(itf.backend));
      }
    }
    for (const auto& itf : c_.interfaces) {
      if (itf.name != f.interface || itf.backend != Backend::kRdma) continue;
      bool server = itf.rdma.value_or(RdmaConfig{}).mode == RdmaConfig::Mode::kServer;
      if (auto ok = core::check_rdma_flow(f.match, f.connect, server); !ok) {
        error(f.where.at(ok.error().field), ok.error().message);
      }
      return;
    }
    for (const auto& itf : c_.interfaces) {
      if (itf.name != f.interface || itf.backend != Backend::kXdp) continue;
      if (f.connect || f.match.is_tcp() || (!f.match.udp_src && !f.match.udp_dst)) {
        error(f.where.at(f.connect ? "connect" : "match"),
              "an xdp interface takes UDP flows (udp_dst or udp_src, with optional address "
              "prefixes): what no flow matches stays the kernel's");
        return;
      }
    }
    const char* needs_frames = f.match.any           ? "match any (a queue's catch-all)"
                               : f.match.decap       ? "decapsulating"
                               : f.match.ecpri       ? "eCPRI matching"
                               : f.match.flex        ? "flex-item matching"
                               : f.match.ipv4_length ? "matching the IPv4 length"
                                                     : nullptr;
    if (needs_frames == nullptr) return;
    for (const auto& itf : c_.interfaces) {
      if (itf.name == f.interface && itf.backend != Backend::kDpdk) {
        error(f.where.at("match"), std::string(needs_frames) + " needs a dpdk interface; \"" +
                                       itf.name + "\" is " + to_string(itf.backend));
      }
    }
  }

  void check_flows() {
    core::RxTopology topology;
    for (const auto& itf : c_.interfaces) {
      auto& qs = topology.rx_queues[itf.name];
      for (const auto& q : itf.rx_queues)
        qs.push_back(q.name);
    }
    core::FlowTable table(std::move(topology));
    for (const auto& f : c_.flows) {
      auto added = table.add(f.spec());
      if (!added) {
        const auto& field = added.error().field;
        error(f.where.at(field.empty() ? "name" : field), added.error().message);
      }
      check_catch_all(f);
    }
  }

  // What a reorder reads and where it writes (docs/configuration.md, "reorders").
  void check_reorders() {
    std::set<std::string> names;
    std::set<std::string> flow_names;
    for (const auto& f : c_.flows)
      flow_names.insert(f.name);
    std::map<std::string, std::string> reordered;  // flow -> its reorder
    for (const auto& r : c_.reorders) {
      check_name("reorder", r.name, r.where);
      if (!names.insert(r.name).second) {
        error(r.where.at("name"), "a reorder named \"" + r.name + "\" is already defined");
      }
      if (flow_names.contains(r.name)) {
        error(r.where.at("name"), "\"" + r.name +
                                      "\" names a flow too: clients attach to a reorder by its "
                                      "name, as to a flow");
      }
      const InterfaceConfig* itf = nullptr;
      for (const auto& i : c_.interfaces) {
        if (i.name == r.interface) itf = &i;
      }
      if (itf == nullptr) {
        error(r.where.at("interface"), "no interface named \"" + r.interface + "\"");
        continue;
      }
      uint32_t frame_room = 0;  // the largest frame its flows' buffers hold
      for (const auto& name : r.flows) {
        auto f = std::find_if(c_.flows.begin(), c_.flows.end(),
                              [&](const FlowConfig& c) { return c.name == name; });
        if (f == c_.flows.end() || f->interface != r.interface) {
          error(r.where.at("flows"),
                "interface \"" + r.interface + "\" has no flow named \"" + name + "\"");
          continue;
        }
        if (!f->rss_queues.empty()) {
          error(r.where.at("flows"), "flow \"" + name +
                                         "\" spreads over RX queues (RSS): a reorder reads "
                                         "flows steered to one queue");
        }
        if (f->connect || f->match.is_tcp()) {
          error(r.where.at("flows"), "flow \"" + name +
                                         "\" is a TCP stream: a reorder places datagrams and "
                                         "frames, which carry their sequence numbers");
        }
        if (auto [it, fresh] = reordered.emplace(name, r.name); !fresh) {
          error(r.where.at("flows"), "flow \"" + name + "\" feeds reorder \"" + it->second +
                                         "\" already; a flow feeds one reorder");
        }
        // A reorder's batches hold its flows' packets: their clients, and only theirs.
        const FlowConfig& first =
            *std::find_if(c_.flows.begin(), c_.flows.end(),
                          [&](const auto& c) { return c.name == r.flows.front(); });
        if (first.clients.uids != f->clients.uids || first.clients.gids != f->clients.gids) {
          error(r.where.at("flows"), "flows \"" + first.name + "\" and \"" + name +
                                         "\" admit different clients: a reorder's batches go to "
                                         "the clients its flows admit, the same for each");
        }
        for (const auto& q : itf->rx_queues) {
          if (q.name != f->queue && !(f->queue.empty() && &q == &itf->rx_queues.front())) continue;
          if (auto reg = regions_.find(q.regions.back()); reg != regions_.end())
            frame_room = std::max(frame_room, reg->second->buf_size);
        }
      }
      const reorder::ReorderPlan& p = r.plan;
      if (p.packets_per_batch == 0) {
        error(r.where.at("batch"), "the batch number's " + std::to_string(p.batch.bit_width) +
                                       " bits must be no more than the sequence number's " +
                                       std::to_string(p.sequence.bit_width) +
                                       ", by 24 at most (2^sequence bits / 2^batch bits "
                                       "packets a batch)");
      } else if (p.method == reorder::ReorderPlan::Method::kSeqPacketsPerBatch &&
                 ((uint64_t{1} << p.sequence.bit_width) % p.packets_per_batch) != 0) {
        error(r.where.at("packets_per_batch"),
              "packets_per_batch " + std::to_string(p.packets_per_batch) + " must divide 2^" +
                  std::to_string(p.sequence.bit_width) +
                  " (the sequence number's range), so that batches do not straddle its wrap");
      }
      auto out = regions_.find(r.region);
      if (out == regions_.end()) {
        error(r.where.at("region"), "no memory region named \"" + r.region + "\"");
        continue;
      }
      if (users_.contains(r.region)) {
        error(r.where.at("region"), "region \"" + r.region +
                                        "\" is a queue's: a reorder writes its batches into a "
                                        "region of its own");
      }
      if (!reorder_outputs_.insert(r.region).second) {
        error(r.where.at("region"),
              "region \"" + r.region + "\" is another reorder's output: each has its own");
      }
      const MemoryRegionConfig& region = *out->second;
      if (region.gpudirect) {
        error(r.where.at("region"), "region \"" + r.region +
                                        "\" is a gpudirect pool, which the CPU cannot write: a "
                                        "reorder's output is host, huge, pinned or device");
      }
      if (p.packets_per_batch != 0 && region.buf_size < p.packets_per_batch) {
        error(region.where.at("buf_size"),
              "buf_size " + std::to_string(region.buf_size) + " cannot hold a batch of " +
                  std::to_string(p.packets_per_batch) + " packets of reorder \"" + r.name + "\"");
      } else if (p.packets_per_batch != 0 && frame_room > p.payload_offset) {
        reorder::ReorderPlan largest = p;
        largest.max_payload = frame_room - p.payload_offset;
        if (largest.batch_bytes() > region.buf_size) {
          diags_.warning(region.where.at("buf_size"),
                         "a batch of reorder \"" + r.name +
                             "\" from the largest frames its "
                             "flows' buffers hold needs " +
                             std::to_string(largest.batch_bytes()) + " bytes; buf_size is " +
                             std::to_string(region.buf_size) + ": longer payloads are cut to fit");
        }
      }
    }
  }

  const Config& c_;
  const SystemFacts& facts_;
  Diagnostics& diags_;
  std::map<std::string, const MemoryRegionConfig*> regions_;
  std::map<std::string, std::vector<const QueueConfig*>> users_;
  std::map<const QueueConfig*, std::string> user_names_;
  std::set<std::string> frame_users_;  // regions of queues that hold frames (not messages)
  std::set<std::string> dpdk_devices_;
  std::set<std::string> reorder_outputs_;
};

}  // namespace

void validate_config(const Config& config, const SystemFacts& facts, Diagnostics& diags) {
  Validator(config, facts, diags).run();
}

const char* to_string(LogLevel level) {
  switch (level) {
    case LogLevel::kTrace:
      return "trace";
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      return "error";
    case LogLevel::kCritical:
      return "critical";
    case LogLevel::kOff:
      return "off";
  }
  return "?";
}

const char* to_string(RegionKind kind) {
  switch (kind) {
    case RegionKind::kHost:
      return "host";
    case RegionKind::kHuge:
      return "huge";
    case RegionKind::kPinned:
      return "pinned";
    case RegionKind::kDevice:
      return "device";
  }
  return "?";
}

const char* to_string(Backend backend) {
  switch (backend) {
    case Backend::kSocket:
      return "socket";
    case Backend::kDpdk:
      return "dpdk";
    case Backend::kRdma:
      return "rdma";
    case Backend::kXdp:
      return "xdp";
  }
  return "?";
}

std::optional<uint32_t> parse_ipv4(const std::string& text) {
  in_addr a{};
  if (inet_pton(AF_INET, text.c_str(), &a) != 1) return std::nullopt;
  return ntohl(a.s_addr);
}

uint32_t sending_ipv4(const InterfaceConfig& itf) {
  const bool own_address = itf.backend == Backend::kDpdk || itf.backend == Backend::kXdp;
  return parse_ipv4(own_address ? itf.source_ipv4 : itf.address).value_or(0);
}

}  // namespace daqiri::config
