// `daqiri-ctl tap`: attach to a flow as an ordinary client and print, count, verify or record
// what arrives.
#pragma once

#include <string>

#include "control_client.hpp"
#include "daqiri/capture.hpp"

namespace daqiri::ctl {

struct TapArgs {
  std::string flow;
  uint64_t count = 0;   // stop after this many; 0: until --timeout (or forever)
  double timeout = 0;   // seconds; 0: none
  bool verify = false;  // check daqiri-gen's sequence and pattern
  bool quiet = false;   // no line per packet
  bool block = false;   // backpressure: a full ring holds the flow back instead of dropping
  std::string out;      // record what arrives here (capture.hpp: format, rotation, sync)
  capture::WriterOptions capture;
};

int run_tap(const Options& opts, const TapArgs& args);

}  // namespace daqiri::ctl
