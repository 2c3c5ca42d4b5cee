#include "backends/dpdk/dpdk_backend.hpp"

#include <spdlog/spdlog.h>

#include "backends/dpdk/dpdk_port.hpp"
#include "backends/dpdk/eal.hpp"

namespace daqiri::backends::dpdk {
namespace {

std::pair<std::string, std::string> split_key(const std::string& key) {
  auto slash = key.find('/');
  return {key.substr(0, slash), slash == std::string::npos ? "" : key.substr(slash + 1)};
}

}  // namespace

Result<std::unique_ptr<DpdkBackend>> DpdkBackend::start(const config::Config& c) {
  std::unique_ptr<DpdkBackend> b(new DpdkBackend());
  auto eal = Eal::start(c);
  if (!eal) return std::unexpected(eal.error());
  b->eal_ = std::move(*eal);
  for (const auto& itf : c.interfaces) {
    if (itf.backend != config::Backend::kDpdk) continue;
    auto port = Port::open(itf, c);
    if (!port) return std::unexpected(port.error());
    b->ports_.push_back(std::move(*port));
  }
  return b;
}

DpdkBackend::~DpdkBackend() {
  ports_.clear();  // ports stop before the EAL goes
}

void DpdkBackend::register_thread() {
  Eal::register_thread();
}

dataplane::PollTask* DpdkBackend::rx_task(const std::string& key) const {
  auto [itf, queue] = split_key(key);
  for (const auto& p : ports_) {
    if (p->name() == itf) return p->rx(queue);
  }
  return nullptr;
}

dataplane::PollTask* DpdkBackend::tx_task(const std::string& key) const {
  auto [itf, queue] = split_key(key);
  for (const auto& p : ports_) {
    if (p->name() == itf) return p->tx(queue);
  }
  return nullptr;
}

Result<std::unique_ptr<dataplane::RxFlowTask>> DpdkBackend::add_flow(
    const core::Flow& flow, const dataplane::Epoch& epoch) {
  auto* queue = static_cast<DpdkRxQueue*>(rx_task(flow.interface + "/" + flow.queue));
  if (queue == nullptr) {
    return fail(ErrorCode::kNotFound, "no DPDK RX queue " + flow.interface + "/" + flow.queue);
  }
  std::unique_ptr<HardwareRule> rule;
  if (!flow.match.any) {
    auto r = HardwareRule::install(queue->port(), flow.match, queue->queue());
    if (r) {
      rule = std::move(*r);
    } else {
      spdlog::debug("flow {}: steered in software ({})", flow.name, r.error().message);
    }
  }
  auto f = std::make_unique<DpdkRxFlow>(flow, *queue, std::move(rule));
  queue->add(f.get(), epoch);
  return f;
}

void DpdkBackend::remove_flow(dataplane::RxFlowTask* flow, const dataplane::Epoch& epoch) {
  auto* f = static_cast<DpdkRxFlow*>(flow);
  auto* queue = static_cast<DpdkRxQueue*>(rx_task(f->flow().interface + "/" + f->flow().queue));
  if (queue != nullptr) queue->remove(f, epoch);
}

Result<> DpdkBackend::add_tx(const std::string& key, dataplane::TxAttachment* a,
                             const dataplane::Epoch& epoch) {
  auto* queue = static_cast<DpdkTxQueue*>(tx_task(key));
  if (queue == nullptr) return fail(ErrorCode::kNotFound, "no DPDK TX queue " + key);
  return queue->add(a, epoch);
}

void DpdkBackend::remove_tx(const std::string& key, dataplane::TxAttachment* a,
                            const dataplane::Epoch& epoch) {
  if (auto* queue = static_cast<DpdkTxQueue*>(tx_task(key))) queue->remove(a, epoch);
}

std::string DpdkBackend::link_state(const std::string& interface) const {
  for (const auto& p : ports_) {
    if (p->name() == interface) return p->link_state();
  }
  return "unknown";
}

std::string DpdkBackend::delivery(const std::string& key) const {
  auto* queue = static_cast<DpdkRxQueue*>(rx_task(key));
  if (queue == nullptr) return "";
  uint64_t copied = queue->counters.copied.load(std::memory_order_relaxed);
  return copied == 0 ? "zero-copy" : "copy (the PMD delivers its own buffers)";
}

std::vector<PortStats> DpdkBackend::port_stats() const {
  std::vector<PortStats> out;
  out.reserve(ports_.size());
  for (const auto& p : ports_)
    out.push_back(p->stats());
  return out;
}

std::vector<QueueStats> DpdkBackend::queue_stats() const {
  std::vector<QueueStats> out;
  for (const auto& p : ports_) {
    for (const auto& [name, q] : p->rx_queues()) {
      QueueStats s;
      s.interface = p->name();
      s.queue = name;
      s.rx = true;
      const auto& c = q->counters;
      s.packets = c.packets.load(std::memory_order_relaxed);
      s.bytes = c.bytes.load(std::memory_order_relaxed);
      s.unmatched = c.unmatched.load(std::memory_order_relaxed);
      s.copied = c.copied.load(std::memory_order_relaxed);
      s.no_buffer = c.no_buffer.load(std::memory_order_relaxed);
      s.truncated = c.truncated.load(std::memory_order_relaxed);
      s.on_loan = c.on_loan.load(std::memory_order_relaxed);
      out.push_back(s);
    }
    for (const auto& [name, q] : p->tx_queues()) {
      QueueStats s;
      s.interface = p->name();
      s.queue = name;
      s.rx = false;
      const auto& c = q->counters;
      s.packets = c.packets.load(std::memory_order_relaxed);
      s.bytes = c.bytes.load(std::memory_order_relaxed);
      s.no_header = c.no_header.load(std::memory_order_relaxed);
      s.oversize = c.oversize.load(std::memory_order_relaxed);
      out.push_back(s);
    }
  }
  return out;
}

}  // namespace daqiri::backends::dpdk
