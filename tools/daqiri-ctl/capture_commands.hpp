// `daqiri-ctl capture`, `captures`, `stop-capture`: recordings the daemon makes (gRPC
// StartCapture and friends), as opposed to `tap --out`, where daqiri-ctl itself records.
#pragma once

#include <cstdint>
#include <string>

#include "control_client.hpp"

namespace daqiri::ctl {

struct CaptureArgs {
  std::string flow;
  std::string queue;  // or INTERFACE/QUEUE: every flow of an RX queue in one file
  std::string out;
  std::string format = "pcap";  // pcap, pcapng, raw
  uint64_t count = 0;           // stop after this many packets
  double duration = 0;          // or after this many seconds
  uint32_t snaplen = 0;
  double rotate_mb = 0;
  bool detach = false;  // start it and return (stop-capture ends it)
};

int run_capture(ControlClient& client, const Options& opts, const CaptureArgs& args);
int run_captures(ControlClient& client, const Options& opts);
int run_stop_capture(ControlClient& client, const Options& opts, uint64_t id);

}  // namespace daqiri::ctl
