// gRPC requests as a client sends them, decoded from bytes by protobuf and handed to the
// request converters (control::from_proto) the control service calls before anything else. The
// first byte picks the request: CreateFlow or StartCapture. A request is either refused with a
// reason naming its field, or becomes a spec that holds every promise the converter makes.
#include <cmath>
#include <cstddef>
#include <cstdint>

#include <google/protobuf/stubs/logging.h>

#include "control/proto_convert.hpp"
#include "daqiri/v1/control.pb.h"

namespace {

namespace core = daqiri::core;
namespace v1 = daqiri::v1;

void check_range(const std::optional<core::PortRange>& r, bool asked) {
  if (r.has_value() != asked) __builtin_trap();
  if (r && (r->first == 0 || r->first > r->last)) __builtin_trap();
}

void check_prefix(const std::optional<core::Ipv4Prefix>& p, bool asked) {
  if (p.has_value() != asked) __builtin_trap();
  if (p && (p->length > 32 || (p->address & ~p->mask()) != 0)) __builtin_trap();
}

void create_flow(const uint8_t* data, size_t size) {
  v1::CreateFlowRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return;
  auto spec = daqiri::control::from_proto(request);
  if (!spec) {
    if (spec.error().message.empty()) __builtin_trap();
    return;
  }
  if (spec->name.empty() || spec->name != request.name() || spec->interface.empty()) {
    __builtin_trap();
  }
  const auto& m = request.match();
  check_range(spec->match.udp_src, m.has_udp_src());
  check_range(spec->match.udp_dst, m.has_udp_dst());
  check_range(spec->match.tcp_dst, m.has_tcp_dst());
  check_prefix(spec->match.ipv4_src, m.has_ipv4_src());
  check_prefix(spec->match.ipv4_dst, m.has_ipv4_dst());
  if (spec->connect.has_value() == request.connect().empty()) __builtin_trap();
  if (spec->allow_block.users.size() != static_cast<size_t>(request.allow_block_users_size())) {
    __builtin_trap();
  }
}

void start_capture(const uint8_t* data, size_t size) {
  v1::StartCaptureRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return;
  auto spec = daqiri::control::from_proto(request);
  if (!spec) {
    if (spec.error().message.empty()) __builtin_trap();
    return;
  }
  // One flow, or one whole queue: never both, never neither.
  bool queue = !spec->rx_interface.empty() && !spec->rx_queue.empty();
  if (spec->flow.empty() == !queue) __builtin_trap();
  if (spec->snaplen != 0 && (spec->snaplen < 64 || spec->snaplen > 262144)) __builtin_trap();
  double seconds = request.max_seconds();
  if (!(seconds >= 0 && seconds <= 1e9) || spec->limits.max_duration.count() < 0) {
    __builtin_trap();
  }
  if (spec->path != request.path()) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // protobuf logs every string field that is not UTF-8: most inputs, and most of the run's time.
  static const bool quiet = (google::protobuf::SetLogHandler(nullptr), true);
  (void)quiet;
  if (size == 0 || size > (1u << 20)) return 0;
  if (data[0] % 2 == 0) {
    create_flow(data + 1, size - 1);
  } else {
    start_capture(data + 1, size - 1);
  }
  return 0;
}
