// `daqiri-ctl send`: attach to a TX queue as an ordinary client and send daqiri-gen's frames
// (sequence numbers and a checkable payload) through it, so that a `tap --verify` elsewhere can
// prove the whole path, a container's TX device included.
#pragma once

#include <string>

#include "control_client.hpp"

namespace daqiri::ctl {

struct SendArgs {
  std::string interface;  // empty: $DAQIRI_TX_INTERFACE (and its queue, $DAQIRI_TX_QUEUE)
  std::string queue;      // empty: the interface's first TX queue
  std::string dest;       // IPV4:PORT
  std::string dest_mac;   // aa:bb:cc:dd:ee:ff; empty: 00:00:00:00:00:00 (the socket backend's)
  std::string source;     // IPV4[:PORT]; empty: the interface's address, the destination port
  uint32_t size = 1024;   // UDP payload bytes
  uint64_t count = 1;
  double rate = 0;      // frames a second; 0: as fast as the queue takes them
  double timeout = 10;  // --wait: seconds without progress before giving up
};

int run_send(ControlClient& control, const Options& opts, const SendArgs& args);

}  // namespace daqiri::ctl
