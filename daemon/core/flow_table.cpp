#include "core/flow_table.hpp"

#include <algorithm>
#include <set>

namespace daqiri::core {

Result<> check_name(std::string_view what, std::string_view name) {
  if (name.empty() || name.size() > 64) {
    return fail(ErrorCode::kInvalidArgument,
                std::string(what) + " name must be 1 to 64 characters long");
  }
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == ' ' || c == '_' || c == '-' || c == '.' || c == ':';
    if (!ok) {
      return fail(ErrorCode::kInvalidArgument,
                  std::string(what) + " name \"" + std::string(name) +
                      "\" may contain only letters, digits, space, '_', '-', '.' and ':'");
    }
  }
  return {};
}

Result<Flow> FlowTable::add(FlowSpec spec) {
  if (auto ok = check_name("flow", spec.name); !ok) {
    return fail(ok.error().code, ok.error().message, "name");
  }
  if (flows_.contains(spec.name)) {
    return fail(ErrorCode::kAlreadyExists, "a flow named \"" + spec.name + "\" already exists",
                "name");
  }
  auto itf = topology_.rx_queues.find(spec.interface);
  if (itf == topology_.rx_queues.end()) {
    std::string known;
    for (const auto& [name, queues] : topology_.rx_queues)
      known += (known.empty() ? "" : ", ") + name;
    return fail(ErrorCode::kNotFound,
                "no interface named \"" + spec.interface +
                    "\" (interfaces: " + (known.empty() ? "none" : known) + ")",
                "interface");
  }
  const auto& queues = itf->second;
  if (queues.empty()) {
    return fail(ErrorCode::kFailedPrecondition,
                "interface \"" + spec.interface + "\" has no RX queue to steer a flow to",
                "interface");
  }
  auto no_queue = [&](const std::string& name) {
    std::string known;
    for (const auto& q : queues)
      known += (known.empty() ? "" : ", ") + q;
    return fail(ErrorCode::kNotFound,
                "interface \"" + spec.interface + "\" has no RX queue named \"" + name +
                    "\" (RX queues: " + known + ")",
                "queue");
  };
  if (!spec.rss_queues.empty()) {
    if (spec.rss_queues.size() < 2 || spec.rss_queues.size() > kMaxRssQueues) {
      return fail(ErrorCode::kInvalidArgument,
                  "RSS spreads a flow over 2 to " + std::to_string(kMaxRssQueues) +
                      " queues, not " + std::to_string(spec.rss_queues.size()),
                  "queues");
    }
    if (!spec.queue.empty() && spec.queue != spec.rss_queues.front()) {
      return fail(ErrorCode::kInvalidArgument,
                  "a flow names one queue or spreads over several (RSS), not both", "queue");
    }
    for (size_t i = 0; i < spec.rss_queues.size(); ++i) {
      const std::string& q = spec.rss_queues[i];
      if (std::find(queues.begin(), queues.end(), q) == queues.end()) return no_queue(q);
      if (std::find(spec.rss_queues.begin(), spec.rss_queues.begin() + i, q) !=
          spec.rss_queues.begin() + i) {
        return fail(ErrorCode::kInvalidArgument, "RSS queue \"" + q + "\" is listed twice",
                    "queues");
      }
    }
    if (spec.connect) {
      return fail(ErrorCode::kInvalidArgument,
                  "a TCP stream the daemon opens arrives on one queue: no RSS", "queues");
    }
    spec.queue = spec.rss_queues.front();
  }
  if (spec.queue.empty()) {
    spec.queue = queues.front();
  } else if (std::find(queues.begin(), queues.end(), spec.queue) == queues.end()) {
    return no_queue(spec.queue);
  }
  if (spec.connect && !spec.match.empty()) {
    return fail(ErrorCode::kInvalidArgument,
                "a flow either matches packets or connects to a TCP endpoint, not both", "match");
  }
  if (!spec.connect && spec.match.empty()) {
    return fail(ErrorCode::kInvalidArgument,
                "a flow needs a match on at least one of udp_src, udp_dst, ipv4_src, ipv4_dst, "
                "tcp_dst, or a TCP endpoint to connect to",
                "match");
  }
  if (spec.match.any && (spec.match.udp_src || spec.match.udp_dst || spec.match.ipv4_src ||
                         spec.match.ipv4_dst || spec.match.tcp_dst || spec.connect)) {
    return fail(ErrorCode::kInvalidArgument,
                "match any is the queue's catch-all and takes no other field", "match");
  }
  if (spec.match.is_tcp() && (spec.match.udp_src || spec.match.udp_dst)) {
    return fail(ErrorCode::kInvalidArgument, "a match is UDP or TCP, not both", "match");
  }
  std::set<uint32_t> ids;  // of the interface's flows: an id names a flow within its interface
  for (const auto& [name, other] : flows_) {
    if (other.interface == spec.interface) ids.insert(other.id);
    if (spec.match.any && other.match.any && other.interface == spec.interface) {
      for (const auto& q : spec.rss_queues.empty() ? std::vector{spec.queue} : spec.rss_queues) {
        if (!other.serves(q)) continue;
        return fail(ErrorCode::kAlreadyExists,
                    "RX queue " + spec.interface + "/" + q + " already has a catch-all flow (\"" +
                        name + "\")",
                    "match");
      }
    }
    if (spec.match.any || other.match.any) continue;  // a catch-all takes only what is left
    if (other.interface == spec.interface && !spec.connect && !other.connect &&
        other.match.overlaps(spec.match)) {
      return fail(ErrorCode::kAlreadyExists,
                  "match " + spec.match.to_string() + " overlaps flow \"" + name + "\" (" +
                      other.match.to_string() + ") on interface \"" + spec.interface +
                      "\": a packet could belong to both",
                  "match");
    }
  }
  uint32_t id = 0;
  if (spec.id) {
    if (ids.contains(*spec.id)) {
      return fail(ErrorCode::kAlreadyExists,
                  "flow id " + std::to_string(*spec.id) + " is taken on interface \"" +
                      spec.interface + "\"",
                  "id");
    }
    id = *spec.id;
  } else {
    while (ids.contains(id))
      ++id;
  }
  Flow flow{spec.name,
            spec.interface,
            spec.queue,
            spec.match,
            id,
            spec.origin,
            spec.connect,
            spec.allow_block,
            std::move(spec.rss_queues),
            std::move(spec.clients)};
  flows_.emplace(flow.name, flow);
  return flow;
}

Result<> FlowTable::remove(std::string_view name) {
  auto it = flows_.find(name);
  if (it == flows_.end()) {
    return fail(ErrorCode::kNotFound, "no flow named \"" + std::string(name) + "\"");
  }
  flows_.erase(it);
  return {};
}

}  // namespace daqiri::core
