#include "orchestrator/data_plane.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <thread>

namespace daqiri::orchestrator {

std::string DataPlane::member_key(const core::Flow& flow, std::string_view queue) {
  return flow.rss_queues.empty() ? flow.name : flow.name + "@" + std::string(queue);
}

std::vector<std::string> DataPlane::members_of(std::string_view flow) const {
  std::vector<std::string> keys;
  for (const auto& [key, e] : flows_) {
    if (e.flow->flow().name == flow) keys.push_back(key);
  }
  return keys;
}

Result<> DataPlane::add_flow(const core::Flow& flow) {
  std::lock_guard lock(mutex_);
  std::vector<std::string> added;
  for (const auto& q : flow.queues()) {
    core::Flow member = flow;
    member.queue = q;
    std::string key = member_key(flow, q);
    if (auto ok = add_member_locked(member, key); !ok) {
      for (const auto& k : added)
        remove_member_locked(k);
      return ok;
    }
    added.push_back(std::move(key));
  }
  return {};
}

Result<> DataPlane::add_member_locked(const core::Flow& flow, const std::string& key) {
  auto queue = rx_queues_.find(flow.interface + "/" + flow.queue);
  if (queue == rx_queues_.end()) {
    return fail(ErrorCode::kNotFound, "no RX queue " + flow.interface + "/" + flow.queue);
  }
  const backends::QueueHome& home = queue->second.home;
  if (flows_.contains(key)) {  // the model knows flows' names, not reorders'
    return fail(ErrorCode::kAlreadyExists, "a reorder is named \"" + flow.name + "\"", "name");
  }
  if (lingers(key)) {
    return fail(ErrorCode::kAlreadyExists,
                "flow \"" + flow.name +
                    "\" is still being removed: its poller has not let go of it (see the log)");
  }
  memory::PageArena* arena = nullptr;
  if (home.region->share_pages) {
    bool huge = home.region->kind == config::RegionKind::kHuge;
    arena =
        &arenas_.try_emplace(home.region->name, "region-" + home.region->name, huge).first->second;
  }
  auto f = queue->second.backend->add_flow(flow, home, arena);
  if (!f) return std::unexpected(f.error());
  flows_[key] = {std::move(*f), &queue->second};
  return {};
}

Result<> DataPlane::remove_flow(std::string_view name) {
  std::lock_guard lock(mutex_);
  if (auto r = reordered_.find(name); r != reordered_.end()) {
    return fail(ErrorCode::kFailedPrecondition, "flow \"" + std::string(name) +
                                                    "\" feeds reorder \"" + r->second +
                                                    "\", which the configuration defines");
  }
  if (auto f = flows_.find(name);
      f != flows_.end() && f->second.queue->backend == reorder_home_.get()) {
    return fail(ErrorCode::kFailedPrecondition,
                "\"" + std::string(name) + "\" is a reorder, which the configuration defines");
  }
  auto keys = members_of(name);
  if (keys.empty()) return fail(ErrorCode::kNotFound, "flow not installed");
  for (const auto& key : keys)
    remove_member_locked(key);
  return {};
}

void DataPlane::remove_member_locked(std::string_view name) {
  auto it = flows_.find(name);
  if (it == flows_.end()) return;
  std::vector<uint64_t> ids;
  for (const auto& [id, a] : attachments_) {
    if (a.rx && std::find(a.flows.begin(), a.flows.end(), name) != a.flows.end()) {
      ids.push_back(id);
    }
  }
  for (uint64_t id : ids)
    close_locked(id);
  FlowEntry& e = it->second;
  e.queue->backend->close_flow(*e.flow, e.queue->home);
  ReleaseWait wait({e.poller()});
  while (!let_go(name, e) && !wait.over())
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  if (!let_go(name, e)) {
    spdlog::error(
        "flow {}: not let go within {} ms (its poller, {}, has not closed its connections, or "
        "copies into a GPU ring still read its buffers): it lingers, {} lingering now; daqirid "
        "reports NOT_SERVING until it is let go",
        name, kReleaseWait.count(), e.poller()->name(), lingering_.size() + 1);
    lingering_.emplace_back(std::string(name), std::move(e));
    flows_.erase(it);
    return;
  }
  finish_removal(name, e);
  flows_.erase(it);
}

bool DataPlane::let_go(std::string_view name, const FlowEntry& e) {
  if (!e.queue->backend->flow_released(*e.flow)) return false;
  for (Attachment& a : parked_) {
    if (a.gpu && !a.retired && std::find(a.flows.begin(), a.flows.end(), name) != a.flows.end() &&
        !hand_back_when_quiet(a)) {
      return false;
    }
  }
  return true;
}

void DataPlane::finish_removal(std::string_view name, FlowEntry& e) {
  Poller& poller = *e.poller();
  // A pool of the flow's own goes with it: unpinned first. (The flows of a DPDK queue share
  // the queue's pool, which stays.)
  if (gpu_engine_ && !e.flow->shares_pool()) gpu_engine_->forget_pool(&e.flow->pool());
  Grace g = e.queue->backend->remove_flow(e.flow.get(), e.queue->home);
  dispose(g, std::move(e.flow));
  let_parked_go(name, poller, g);
}

void DataPlane::let_parked_go(std::string_view flow, Poller& poller, const Grace& removal) {
  // The poller can no longer reach these attachments through the flow once `removal` has
  // passed, and will not come to let them go through it.
  for (Attachment& a : parked_) {
    auto f = a.rx && !a.retired ? std::find(a.flows.begin(), a.flows.end(), flow) : a.flows.end();
    if (f == a.flows.end()) continue;
    a.await(poller.unwatch(a.rx->kick_fd()));
    a.await(removal);
    a.flows.erase(f);
    a.retired = a.flows.empty();
  }
}

bool DataPlane::lingers(std::string_view flow) const {
  return std::any_of(lingering_.begin(), lingering_.end(),
                     [flow](const auto& l) { return l.first == flow; });
}

void DataPlane::reap_lingering_locked() {
  for (auto l = lingering_.begin(); l != lingering_.end();) {
    if (!let_go(l->first, l->second)) {
      ++l;
      continue;
    }
    finish_removal(l->first, l->second);
    spdlog::info("flow {}: let go at last: removed", l->first);
    l = lingering_.erase(l);
  }
}

}  // namespace daqiri::orchestrator
