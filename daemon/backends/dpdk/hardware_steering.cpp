#include "backends/dpdk/hardware_steering.hpp"

#include <string>

#include "backends/dpdk/hardware_rule_spec.hpp"

namespace daqiri::backends::dpdk {

Result<std::unique_ptr<HardwareRule>> HardwareRule::install(uint16_t port,
                                                            const core::FlowMatch& match,
                                                            std::span<const uint16_t> queues,
                                                            uint32_t mark) {
  auto spec = build_hardware_rule(match, queues, mark);
  if (!spec) return std::unexpected(spec.error());
  HardwareRuleSpec& s = **spec;
  // With the mark first; a PMD that steers but cannot mark gets the queue action alone, unless
  // the rule strips headers: the poller could not tell those frames from others then.
  rte_flow_error error{};
  bool marked = rte_flow_validate(port, &s.attr, s.pattern.data(), s.actions.data(), &error) == 0;
  const rte_flow_action* chosen = marked ? s.actions.data() : s.actions.data() + 1;
  if (!marked &&
      (s.decapsulates || rte_flow_validate(port, &s.attr, s.pattern.data(), chosen, &error) != 0)) {
    return fail(ErrorCode::kFailedPrecondition,
                std::string("rte_flow_validate: ") +
                    (error.message != nullptr ? error.message : "refused"));
  }
  rte_flow* flow = rte_flow_create(port, &s.attr, s.pattern.data(), chosen, &error);
  if (flow == nullptr) {
    return fail(ErrorCode::kInternal, std::string("rte_flow_create: ") +
                                          (error.message != nullptr ? error.message : "failed"));
  }
  return std::unique_ptr<HardwareRule>(new HardwareRule(port, flow, marked, s.decapsulates));
}

Result<std::unique_ptr<HardwareRule>> HardwareRule::install_egress(uint16_t port,
                                                                   const core::TxFlow& flow) {
  auto spec = build_egress_rule(flow);
  if (!spec) return std::unexpected(spec.error());
  HardwareRuleSpec& s = **spec;
  rte_flow_error error{};
  if (rte_flow_validate(port, &s.attr, s.pattern.data(), s.actions.data(), &error) != 0) {
    return fail(ErrorCode::kFailedPrecondition,
                std::string("rte_flow_validate: ") +
                    (error.message != nullptr ? error.message : "refused"));
  }
  rte_flow* rule = rte_flow_create(port, &s.attr, s.pattern.data(), s.actions.data(), &error);
  if (rule == nullptr) {
    return fail(ErrorCode::kInternal, std::string("rte_flow_create: ") +
                                          (error.message != nullptr ? error.message : "failed"));
  }
  return std::unique_ptr<HardwareRule>(new HardwareRule(port, rule, false, false));
}

HardwareRule::~HardwareRule() {
  rte_flow_error error{};
  rte_flow_destroy(port_, flow_, &error);
}

}  // namespace daqiri::backends::dpdk
