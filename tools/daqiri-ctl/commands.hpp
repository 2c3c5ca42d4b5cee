// One function per daqiri-ctl command: call the daemon, print a table or JSON, return the
// exit code.
#pragma once

#include <string>
#include <vector>

#include <google/protobuf/message.h>

#include "control_client.hpp"

namespace daqiri::ctl {

// A reply as JSON (proto field names, defaults included), for --json.
void print_json(const google::protobuf::Message& msg);
// An enum value's proto name without its prefix, in lower case: ROLE_ADMIN -> admin.
std::string lower_enum(const std::string& name, const std::string& prefix);

struct FlowAddArgs {
  std::string name;
  std::string interface;
  std::string queue;
  std::string udp_src;  // "4096" or "4096-4100"
  std::string udp_dst;
  std::string ipv4_src;  // "10.0.0.1" or "10.0.0.0/24"
  std::string ipv4_dst;
  std::string tcp_dst;                    // TCP streams accepted on this port
  std::string connect;                    // a TCP endpoint the daemon connects to
  bool any = false;                       // DPDK: the queue's catch-all
  bool allow_block = false;               // any client may attach with block backpressure
  std::vector<std::string> block_users;   // or these users
  std::vector<std::string> client_users;  // who may attach (with client_groups); none: all
  std::vector<std::string> client_groups;
};

int run_info(ControlClient& client, const Options& opts);
int run_interfaces(ControlClient& client, const Options& opts);
int run_regions(ControlClient& client, const Options& opts);
int run_queues(ControlClient& client, const Options& opts, const std::string& interface);
int run_flows_list(ControlClient& client, const Options& opts, const std::string& interface);
int run_flows_add(ControlClient& client, const Options& opts, const FlowAddArgs& args);
int run_flows_del(ControlClient& client, const Options& opts, const std::string& name);
int run_sessions(ControlClient& client, const Options& opts);
int run_health(ControlClient& client, const Options& opts);
// watch > 0: redraw every `watch` seconds with rates computed from the deltas, until killed
// (or `frames` frames, when non-zero).
int run_stats(ControlClient& client, const Options& opts, double watch = 0, int frames = 0);

}  // namespace daqiri::ctl
