// Translation between the model and daqiri.v1 messages, in one place. Requests are checked
// here: a malformed field becomes INVALID_ARGUMENT naming the field.
#pragma once

#include "capture/capture_registry.hpp"
#include "config/config.hpp"
#include "core/flow_table.hpp"
#include "daqiri/v1/control.pb.h"
#include "dataplane/rx_flow_task.hpp"

namespace daqiri::control {

// `steering`: as the data plane reports it; nullopt while the flow is not installed.
void to_proto(const core::Flow& flow, std::optional<dataplane::Steering> steering, v1::Flow& out);
void to_proto(const config::InterfaceConfig& itf, const std::string& state, v1::Interface& out);
void to_proto(const config::MemoryRegionConfig& region, v1::MemoryRegion& out);
void to_proto(const config::InterfaceConfig& itf, const config::QueueConfig& queue,
              v1::Direction direction, v1::Queue& out);
Result<core::FlowSpec> from_proto(const v1::CreateFlowRequest& request);
void to_proto(const capture_service::CaptureStatus& capture, v1::Capture& out);
Result<capture_service::CaptureSpec> from_proto(const v1::StartCaptureRequest& request);

}  // namespace daqiri::control
