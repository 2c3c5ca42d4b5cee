#include "backends/dpdk/hardware_steering.hpp"

#include <string>

#include "backends/dpdk/hardware_rule_spec.hpp"

namespace daqiri::backends::dpdk {

namespace {

std::string reason(const char* call, const rte_flow_error& error, const char* otherwise) {
  return std::string(call) + ": " + (error.message != nullptr ? error.message : otherwise);
}

// The rule of `s` with `actions` (one of its own), or the PMD's reason for refusing it.
Result<rte_flow*> create(uint16_t port, const HardwareRuleSpec& s, const rte_flow_action* actions) {
  rte_flow_error error{};
  rte_flow* flow = rte_flow_create(port, &s.attr, s.pattern.data(), actions, &error);
  if (flow == nullptr)
    return fail(ErrorCode::kInternal, reason("rte_flow_create", error, "failed"));
  return flow;
}

bool valid(uint16_t port, const HardwareRuleSpec& s, const rte_flow_action* actions,
           rte_flow_error& error) {
  return rte_flow_validate(port, &s.attr, s.pattern.data(), actions, &error) == 0;
}

}  // namespace

Result<std::unique_ptr<HardwareRule>> HardwareRule::install(uint16_t port,
                                                            const core::FlowMatch& match,
                                                            std::span<const uint16_t> queues,
                                                            uint32_t mark,
                                                            rte_flow_item_flex_handle* flex) {
  auto spec = build_hardware_rule(match, queues, mark, flex);
  if (!spec) return std::unexpected(spec.error());
  const HardwareRuleSpec& s = **spec;
  // With the mark first; a PMD that steers but cannot mark gets the queue action alone, unless
  // the rule strips headers: the poller could not tell those frames from others then.
  rte_flow_error error{};
  bool marked = valid(port, s, s.actions.data(), error);
  const rte_flow_action* chosen = marked ? s.actions.data() : s.actions.data() + 1;
  if (!marked && (s.decapsulates || !valid(port, s, chosen, error))) {
    return fail(ErrorCode::kFailedPrecondition, reason("rte_flow_validate", error, "refused"));
  }
  auto flow = create(port, s, chosen);
  if (!flow) return std::unexpected(flow.error());
  return std::unique_ptr<HardwareRule>(new HardwareRule(port, *flow, marked, s.decapsulates));
}

Result<std::unique_ptr<HardwareRule>> HardwareRule::install_egress(uint16_t port,
                                                                   const core::TxFlow& flow) {
  auto spec = build_egress_rule(flow);
  if (!spec) return std::unexpected(spec.error());
  return install_unmarked(port, **spec);
}

Result<std::unique_ptr<HardwareRule>> HardwareRule::install_jump(uint16_t port, uint32_t group) {
  return install_unmarked(port, *build_jump_rule(group));
}

Result<std::unique_ptr<HardwareRule>> HardwareRule::install_unmarked(uint16_t port,
                                                                     const HardwareRuleSpec& s) {
  rte_flow_error error{};
  if (!valid(port, s, s.actions.data(), error)) {
    return fail(ErrorCode::kFailedPrecondition, reason("rte_flow_validate", error, "refused"));
  }
  auto rule = create(port, s, s.actions.data());
  if (!rule) return std::unexpected(rule.error());
  return std::unique_ptr<HardwareRule>(new HardwareRule(port, *rule, false, false));
}

HardwareRule::~HardwareRule() {
  rte_flow_error error{};
  rte_flow_destroy(port_, flow_, &error);
}

Result<> FlexItems::route() {
  if (jump_) return {};
  auto jump = HardwareRule::install_jump(port_, kFlexGroup);
  if (!jump) return std::unexpected(jump.error());
  jump_ = std::move(*jump);
  return {};
}

Result<rte_flow_item_flex_handle*> FlexItems::handle(const core::FlexMatch& flex) {
  if (auto it = items_.find(flex.item_id); it != items_.end()) return it->second;
  auto spec = build_flex_item(flex);
  rte_flow_error error{};
  rte_flow_item_flex_handle* h = rte_flow_flex_item_create(port_, &spec->conf, &error);
  if (h == nullptr) {
    return fail(ErrorCode::kFailedPrecondition,
                reason("rte_flow_flex_item_create", error, "no flex parser"));
  }
  items_.emplace(flex.item_id, h);
  return h;
}

FlexItems::~FlexItems() {
  for (const auto& [id, h] : items_) {
    rte_flow_error error{};
    rte_flow_flex_item_release(port_, h, &error);
  }
}

}  // namespace daqiri::backends::dpdk
