// The flow filter (flow_filter.bpf.c, built into the daemon) as a kernel program: attached to
// an interface through libxdp's dispatcher, so that other XDP programs there keep running, or
// only loaded, to run packets through it (BPF_PROG_TEST_RUN). Its maps are written here: one
// rule per slot, the AF_XDP socket of each queue; its counters read. Detached on destruction;
// a program of this name left on an interface by a daemon that did not stop is found and
// removed by the next (remove_leftovers), never another program.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "backends/xdp/flow_filter.h"
#include "daqiri/common/result.hpp"

struct bpf_object;
struct xdp_program;

namespace daqiri::backends::xdp {

class XdpProgram {
 public:
  // The program's name on an interface (as `xdp-loader status` and bpftool show it).
  static constexpr const char* kName = "daqiri_flow_filter";

  // Loaded into the kernel and attached to `ifindex` (native mode where the driver has it,
  // else generic): from here on it sees every packet the interface receives.
  static Result<std::unique_ptr<XdpProgram>> attach(int ifindex);
  // Loaded only: packets reach it through run() alone.
  static Result<std::unique_ptr<XdpProgram>> load();
  ~XdpProgram();
  XdpProgram(const XdpProgram&) = delete;
  XdpProgram& operator=(const XdpProgram&) = delete;

  // Slot `slot` (< DAQIRI_XDP_MAX_RULES) matches `rule` from the next packet on.
  Result<> set_rule(uint32_t slot, const daqiri_xdp_rule& rule);
  Result<> clear_rule(uint32_t slot);
  // Matched packets that arrive on queue `queue` go to the AF_XDP socket `fd` (-1: to none).
  Result<> set_socket(uint32_t queue, int fd);
  // A rule's counts summed over the CPUs; slot DAQIRI_XDP_MAX_RULES: packets no rule matched
  // (in `no_socket`).
  [[nodiscard]] daqiri_xdp_counts counts(uint32_t slot) const;
  // The program's verdict (XDP_PASS, XDP_REDIRECT, ...) on `frame`, as arrived on queue 0.
  Result<uint32_t> run(std::span<const uint8_t> frame);
  // "native" or "generic" (attached), "none" (loaded only).
  [[nodiscard]] std::string mode() const;

  // Detaches every program named kName from `ifindex` (a daemon killed before it could), and
  // says how many it removed.
  static Result<int> remove_leftovers(int ifindex);

 private:
  XdpProgram(bpf_object* obj, ::xdp_program* program, int ifindex, int mode);
  Result<> find_maps();
  bpf_object* obj_;         // the embedded object, opened here (libxdp does not own it)
  ::xdp_program* program_;  // null: loaded only, through libbpf
  int ifindex_;             // -1: not attached
  int mode_;                // enum xdp_attach_mode
  int program_fd_ = -1;
  int rules_fd_ = -1;
  int sockets_fd_ = -1;
  int counts_fd_ = -1;
};

}  // namespace daqiri::backends::xdp
