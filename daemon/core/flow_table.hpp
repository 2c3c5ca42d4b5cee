// The set of flows of the daemon and the rules a flow must obey, whether it comes from the
// configuration or from CreateFlow: a valid unique name, an interface and RX queue that exist,
// a non-empty match that overlaps no other flow of the same interface, an id unique within the
// interface (as DAQIRI's; a client reads the flows of one interface at a time).
// Not thread-safe: the Model serialises access.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/client_list.hpp"
#include "core/flow_match.hpp"
#include "daqiri/common/result.hpp"

namespace daqiri::core {

enum class FlowOrigin { kConfig, kApi };

// Who may attach to a flow with block backpressure, which makes the flow wait for that client
// (and so every other client of the flow): nobody unless the flow says so, anyone, or the
// users named.
struct BlockPolicy {
  bool anyone = false;
  std::vector<std::string> users;
  [[nodiscard]] bool allows(std::string_view user) const {
    return anyone || std::find(users.begin(), users.end(), user) != users.end();
  }
  [[nodiscard]] bool nobody() const { return !anyone && users.empty(); }
};

struct FlowSpec {
  std::string name;
  std::string interface;
  std::string queue;  // empty: the interface's first RX queue
  FlowMatch match;
  std::optional<uint32_t> id;  // empty: the lowest free id
  FlowOrigin origin = FlowOrigin::kApi;
  std::optional<Endpoint> connect;  // a TCP stream the daemon opens, instead of a match
  BlockPolicy allow_block;
  // RSS: the queues the flow spreads over (two or more, the first in `queue` too); empty: it
  // goes to `queue` alone.
  std::vector<std::string> rss_queues;
  ClientList clients;
};

struct Flow {
  std::string name;
  std::string interface;
  std::string queue;
  FlowMatch match;
  uint32_t id = 0;
  FlowOrigin origin = FlowOrigin::kApi;
  std::optional<Endpoint> connect;
  BlockPolicy allow_block;
  std::vector<std::string> rss_queues;  // as in FlowSpec
  ClientList clients;
  // The RX queues it delivers to: rss_queues, or `queue` alone.
  [[nodiscard]] std::vector<std::string> queues() const {
    return rss_queues.empty() ? std::vector<std::string>{queue} : rss_queues;
  }
  [[nodiscard]] bool serves(std::string_view q) const {
    return rss_queues.empty()
               ? queue == q
               : std::find(rss_queues.begin(), rss_queues.end(), q) != rss_queues.end();
  }
};

// The most queues an RSS flow spreads over (a NIC's RSS table takes far more; this bounds the
// daemon's per-frame hand-off state).
inline constexpr size_t kMaxRssQueues = 16;

// The RX queues flows may target, by interface.
struct RxTopology {
  std::map<std::string, std::vector<std::string>, std::less<>> rx_queues;
};

// Names of interfaces, queues, regions and flows: 1 to 64 printable characters
// (letters, digits, space, '_', '-', '.', ':').
Result<> check_name(std::string_view what, std::string_view name);

class FlowTable {
 public:
  explicit FlowTable(RxTopology topology) : topology_(std::move(topology)) {}

  // Validates and inserts; the error code says which rule failed.
  Result<Flow> add(FlowSpec spec);
  Result<> remove(std::string_view name);
  [[nodiscard]] const std::map<std::string, Flow, std::less<>>& flows() const { return flows_; }

 private:
  RxTopology topology_;
  std::map<std::string, Flow, std::less<>> flows_;
};

}  // namespace daqiri::core
