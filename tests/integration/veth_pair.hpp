// A veth pair for tests of backends on a kernel interface (DPDK's net_af_packet and net_af_xdp,
// the xdp backend): the host end for the daemon, the peer in a network namespace of its own,
// created and removed with the object.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "harness.hpp"

namespace daqiri::test {

// A veth pair: one end for the daemon's PMD, the other in a network namespace with an address
// and a static neighbour entry for the daemon's end, where daqiri-gen sends from.
class VethPair {
 public:
  static std::string ip_path() {
    for (const char* p : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
      if (::access(p, X_OK) == 0) return p;
    }
    return "";
  }
  struct Options {
    // The host end has 10.77.0.1/24, so that the host's kernel answers the peer (ARP, ping,
    // TCP) as on a real interface.
    bool host_address = false;
    // RX and TX queues of each end.
    int queues = 1;
  };
  VethPair() : VethPair(Options{}) {}
  explicit VethPair(Options options) {
    std::string tag = std::to_string(::getpid() % 100000);
    ns_ = "dqns" + tag;
    host_ = "dqh" + tag;
    peer_ = "dqp" + tag;
    const std::string q = " numrxqueues " + std::to_string(options.queues) + " numtxqueues " +
                          std::to_string(options.queues);
    sh("ip netns add " + ns_);
    sh("ip link add " + host_ + q + " type veth peer name " + peer_ + q);
    sh("ip link set " + peer_ + " netns " + ns_);
    if (options.host_address) sh("ip addr add 10.77.0.1/24 dev " + host_);
    sh("ip link set " + host_ + " up");
    sh("ip -n " + ns_ + " addr add 10.77.0.2/24 dev " + peer_);
    sh("ip -n " + ns_ + " link set " + peer_ + " up");
    std::ifstream mac("/sys/class/net/" + host_ + "/address");
    mac >> host_mac_;
  }
  ~VethPair() {
    sh("ip link del " + host_);
    sh("ip netns del " + ns_);
  }
  [[nodiscard]] const std::string& host_mac() const { return host_mac_; }
  // The host end's MAC as bytes (what a frame the daemon sends there carries as its source).
  [[nodiscard]] std::array<uint8_t, 6> host_mac_bytes() const {
    std::array<uint8_t, 6> mac{};
    std::sscanf(host_mac_.c_str(), "%hhx:%hhx:%hhx:%hhx:%hhx:%hhx", &mac[0], &mac[1], &mac[2],
                &mac[3], &mac[4], &mac[5]);
    return mac;
  }
  [[nodiscard]] const std::string& peer() const { return peer_; }
  [[nodiscard]] const std::string& netns() const { return ns_; }
  // After the PMD took the interface (af_packet cycles it, which drops neighbour entries).
  void add_neighbour() {
    sh("ip -n " + ns_ + " neigh replace 10.77.0.1 lladdr " + host_mac_ + " dev " + peer_);
  }
  [[nodiscard]] const std::string& host() const { return host_; }
  [[nodiscard]] std::vector<std::string> in_namespace(std::vector<std::string> argv) const {
    argv.insert(argv.begin(), {ip_path(), "netns", "exec", ns_});
    return argv;
  }

 private:
  static void sh(const std::string& cmd) {
    auto r = run({"/bin/sh", "-c", cmd + " 2>&1"});
    if (r.exit_code != 0) ADD_FAILURE() << cmd << ": " << r.out << r.err;
  }
  std::string ns_, host_, peer_, host_mac_;
};

}  // namespace daqiri::test
