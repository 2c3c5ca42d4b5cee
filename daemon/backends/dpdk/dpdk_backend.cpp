#include "backends/dpdk/dpdk_backend.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>

#include "backends/dpdk/dpdk_port.hpp"
#include "backends/dpdk/dpdk_rx_queue.hpp"
#include "backends/dpdk/eal.hpp"
#include "backends/dpdk/software_reach.hpp"
#include "core/rss_hash.hpp"

namespace daqiri::backends::dpdk {

Result<std::unique_ptr<Backend>> DpdkBackend::open(const BackendContext& context) {
  const config::Config& c = context.config;
  DevicePools device_pools;
  for (const auto& itf : c.interfaces) {
    if (itf.backend != config::Backend::kDpdk) continue;
    for (const auto& q : itf.rx_queues) {
      const auto* r = config::find_region(c, q.regions.back());
      if (!r->gpudirect) continue;
      auto m = context.device_memory(*r);
      if (!m) {
        return fail(m.error().code, "RX queue " + itf.name + "/" + q.name + ": region \"" +
                                        r->name + "\" is gpudirect: " + m.error().message);
      }
      device_pools.emplace(itf.name + "/" + q.name, std::move(*m));
    }
  }
  std::unique_ptr<DpdkBackend> b(new DpdkBackend(context));
  auto eal = Eal::start(c);
  if (!eal) return std::unexpected(eal.error());
  b->eal_ = std::move(*eal);
  for (const auto& itf : c.interfaces) {
    if (itf.backend != config::Backend::kDpdk) continue;
    auto port = Port::open(itf, c, device_pools);
    if (!port) return std::unexpected(port.error());
    b->ports_.push_back(std::move(*port));
  }
  return b;
}

DpdkBackend::DpdkBackend(const BackendContext& context) : Backend(context) {}

DpdkBackend::~DpdkBackend() {
  ports_.clear();  // ports stop before the EAL goes
}

std::function<void()> DpdkBackend::thread_setup() const {
  return &Eal::register_thread;
}

const Port* DpdkBackend::port(const std::string& interface) const {
  for (const auto& p : ports_) {
    if (p->name() == interface) return p.get();
  }
  return nullptr;
}

DpdkRxQueue* DpdkBackend::rx_queue(const std::string& interface, const std::string& q) const {
  const Port* p = port(interface);
  return p ? p->rx(q) : nullptr;
}

DpdkTxQueue* DpdkBackend::tx_queue(const std::string& interface, const std::string& q) const {
  const Port* p = port(interface);
  return p ? p->tx(q) : nullptr;
}

Result<> DpdkBackend::open_rx_queue(const QueueHome& home) {
  DpdkRxQueue* q = rx_queue(home.itf->name, home.queue->name);
  if (q == nullptr) return fail(ErrorCode::kNotFound, "no DPDK RX queue " + home.key());
  home.poller->add_task(q, {});  // the queue is the poll task; its flows are steered within
  return {};
}

Result<dataplane::TxQueueTask*> DpdkBackend::open_tx_queue(const QueueHome& home) {
  DpdkTxQueue* q = tx_queue(home.itf->name, home.queue->name);
  if (q == nullptr) return fail(ErrorCode::kNotFound, "no DPDK TX queue " + home.key());
  home.poller->add_task(q, {});
  return q;
}

Result<std::unique_ptr<HardwareRule>> DpdkBackend::steer(const core::Flow& flow, DpdkRxQueue& queue,
                                                         std::span<const uint16_t> queues) {
  std::unique_ptr<HardwareRule> rule;
  std::string why_software = "its first queue's rule was refused";
  // A flex match needs its item in the NIC's flex parser first.
  rte_flow_item_flex_handle* flex = nullptr;
  if (flow.match.flex && !queues.empty()) {
    auto h = port(flow.interface)->flex_items().handle(*flow.match.flex);
    if (h) {
      flex = *h;
    } else {
      why_software = h.error().message;
    }
  }
  if (!flow.match.any && !queues.empty() && (!flow.match.flex || flex != nullptr)) {
    auto r = HardwareRule::install(queue.port(), flow.match, queues, flow.id, flex);
    if (r && flex != nullptr) {
      if (auto routed = port(flow.interface)->flex_items().route(); !routed) {
        r = std::unexpected(routed.error());  // the rule goes: no frame would reach it
      }
    }
    if (r) {
      rule = std::move(*r);
    } else {
      why_software = r.error().message;
      spdlog::debug("flow {}: steered in software ({})", flow.name, why_software);
    }
  }
  if (!rule) {
    std::string why =
        flow.match.any ? "a catch-all has none" : "the NIC took none: " + why_software;
    switch (queue.reach()) {
      case SoftwareReach::kIsolated:
        return fail(ErrorCode::kFailedPrecondition,
                    "flow \"" + flow.name + "\": interface " + flow.interface +
                        " has flow_isolation on, so only frames an rte_flow rule steers reach "
                        "the daemon, and this flow has no rule (" +
                        why + ")",
                    "match");
      case SoftwareReach::kNotFirstQueue:
        if (flow.rss_queues.empty()) {
          spdlog::warn(
              "flow {}: steered in software on {}/{}, queue {} of a NIC, with no rte_flow rule "
              "({}): daqirid configures no RSS, so the NIC puts frames without a rule on its "
              "first queue and this flow may receive nothing; put it on the first RX queue",
              flow.name, flow.interface, flow.queue, queue.queue(), why);
        }
        break;
      case SoftwareReach::kReaches:
        break;
    }
    if (!flow.rss_queues.empty() && (queue.frames_on_device() || queue.split() != 0)) {
      return fail(ErrorCode::kFailedPrecondition,
                  "flow \"" + flow.name + "\": the NIC does not spread it over its queues (" + why +
                      "), and the daemon cannot: queue " + flow.interface + "/" + flow.queue +
                      " keeps " +
                      (queue.frames_on_device() ? "its frames in GPU memory (gpudirect)"
                                                : "its frames' headers apart (buffer split)") +
                      ", where its poller does not read the tuple to hash",
                  "queues");
    }
  }
  if (queue.frames_on_device() && !flow.match.any && !(rule && rule->marked())) {
    return fail(ErrorCode::kFailedPrecondition,
                "flow \"" + flow.name + "\": queue " + flow.interface + "/" + flow.queue +
                    " keeps its frames in GPU memory (gpudirect), where the daemon cannot read "
                    "their headers: a flow there must match any, or the NIC must steer and mark "
                    "it (" +
                    (rule ? std::string("the NIC steers but does not mark")
                          : "no rte_flow rule: " + why_software) +
                    ")",
                "match");
  }
  return rule;
}

Result<std::shared_ptr<RssGroup>> DpdkBackend::rss_group(const core::Flow& flow, size_t index,
                                                         const QueueHome& home) {
  const auto& names = flow.rss_queues;
  if (index != 0) {
    auto group = rss_groups_[flow.name].lock();
    // DataPlane adds the members in order, under one lock: the first made the group.
    if (!group || group->pollers.size() != index) {
      return fail(ErrorCode::kInternal, "flow \"" + flow.name + "\": RSS member out of order");
    }
    group->pollers.push_back(home.poller);
    return group;
  }
  auto group = std::make_shared<RssGroup>();
  group->serial = ++rss_serials_;
  std::vector<uint16_t> ids;
  for (const auto& name : names) {
    DpdkRxQueue* q = rx_queue(flow.interface, name);
    if (q == nullptr) {
      return fail(ErrorCode::kNotFound, "no DPDK RX queue " + flow.interface + "/" + name);
    }
    group->queues.push_back(q);
    ids.push_back(q->queue());
  }
  const auto count = static_cast<uint32_t>(names.size());  // at most kMaxRssQueues: FlowTable
  group->mask = core::rss_table_size(count) - 1;
  for (uint32_t h = 0; h <= group->mask; ++h)
    group->table[h] = static_cast<uint8_t>(core::rss_queue_index(h, count));
  // Each member's queue must let its poller steer, when the NIC does not spread the flow.
  for (size_t i = 0; i < names.size() && !group->rule; ++i) {
    core::Flow member = flow;
    member.queue = names[i];
    // Only the first asks the NIC, for all the queues; a rule there means no member steers.
    auto rule = steer(member, *group->queues[i],
                      i == 0 ? std::span<const uint16_t>(ids) : std::span<const uint16_t>{});
    if (!rule) return std::unexpected(rule.error());
    group->rule = std::move(*rule);
  }
  if (!group->rule) {
    const bool reached = std::any_of(group->queues.begin(), group->queues.end(),
                                     [](auto* q) { return q->reach() == SoftwareReach::kReaches; });
    if (!reached) {
      spdlog::warn(
          "flow {}: spread in software over queues of a NIC none of which is its first, with no "
          "rte_flow rule: daqirid configures no RSS, so the NIC puts frames without a rule on "
          "its first queue and this flow may receive nothing; list the first RX queue too",
          flow.name);
    }
  }
  group->pollers.push_back(home.poller);
  rss_groups_[flow.name] = group;
  return group;
}

Result<std::unique_ptr<dataplane::RxFlowTask>> DpdkBackend::add_flow(const core::Flow& flow,
                                                                     const QueueHome& home,
                                                                     memory::PageArena* /*arena*/) {
  DpdkRxQueue* queue = rx_queue(flow.interface, flow.queue);
  if (queue == nullptr) {
    return fail(ErrorCode::kNotFound, "no DPDK RX queue " + flow.interface + "/" + flow.queue);
  }
  std::unique_ptr<DpdkRxFlow> f;
  if (!flow.rss_queues.empty()) {
    const auto index = static_cast<uint32_t>(
        std::find(flow.rss_queues.begin(), flow.rss_queues.end(), flow.queue) -
        flow.rss_queues.begin());
    auto group = rss_group(flow, index, home);
    if (!group) return std::unexpected(group.error());
    f = std::make_unique<DpdkRxFlow>(flow, *queue, std::move(*group), index);
  } else {
    const std::array<uint16_t, 1> queues{queue->queue()};
    auto rule = steer(flow, *queue, queues);
    if (!rule) return std::unexpected(rule.error());
    f = std::make_unique<DpdkRxFlow>(flow, *queue, std::move(*rule));
  }
  queue->add(f.get(), home.poller->epoch());
  return f;
}

dataplane::Grace DpdkBackend::remove_flow(dataplane::RxFlowTask* flow, const QueueHome& home) {
  auto* f = static_cast<DpdkRxFlow*>(flow);  // every flow of this backend is one
  DpdkRxQueue* queue = rx_queue(home.itf->name, home.queue->name);
  return queue ? queue->remove(f, home.poller->epoch()) : dataplane::Grace{};
}

std::string DpdkBackend::link_state(const config::InterfaceConfig& itf) const {
  const Port* p = port(itf.name);
  return p ? p->link_state() : "unknown";
}

QueueTraits DpdkBackend::traits(const QueueHome& home) const {
  DpdkRxQueue* q = rx_queue(home.itf->name, home.queue->name);
  return {home.queue->ring_size + home.queue->batch_size, q != nullptr && q->split() != 0};
}

std::string DpdkBackend::delivery(const QueueHome& home) const {
  DpdkRxQueue* q = rx_queue(home.itf->name, home.queue->name);
  if (q == nullptr) return "";
  std::string split = q->split() != 0
                          ? ", headers split by the NIC at " + std::to_string(q->split()) + " bytes"
                          : "";
  if (q->frames_on_device()) return "zero-copy into GPU memory (gpudirect)" + split;
  if (!split.empty()) return "zero-copy" + split;
  uint64_t copied = q->counters.copied.load(std::memory_order_relaxed);
  return copied == 0 ? "zero-copy" : "copy (the PMD delivers its own buffers)";
}

std::vector<dataplane::NicStats> DpdkBackend::nic_stats() const {
  std::vector<dataplane::NicStats> out;
  out.reserve(ports_.size());
  for (const auto& p : ports_)
    out.push_back(p->stats());
  return out;
}

}  // namespace daqiri::backends::dpdk
