#include "backends/xdp/xdp_program.hpp"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>
#include <xdp/libxdp.h>

#include <spdlog/spdlog.h>

#include <array>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string_view>
#include <vector>

namespace daqiri::backends::xdp {

// flow_filter.bpf.c as clang built it (cmake/embed_binary.cmake).
extern const std::span<const unsigned char> kFlowFilterObject;

namespace {

std::string xdp_error(int err) {
  std::array<char, 256> text{};
  libxdp_strerror(err, text.data(), text.size());
  return text.data();
}

// libbpf's and libxdp's own lines (a kernel without the dispatcher's freplace programs, a map
// pinned elsewhere) into the daemon's log at debug: what fails reaches the caller as an error.
int log_line(const char* who, const char* format, va_list args) {
  std::array<char, 512> line{};
  int n = std::vsnprintf(line.data(), line.size(), format, args);
  std::string_view text(line.data());
  while (!text.empty() && text.back() == '\n')
    text.remove_suffix(1);
  spdlog::debug("{}: {}", who, text);
  return n;
}

void route_library_logs() {
  static std::once_flag once;
  std::call_once(once, [] {
    libbpf_set_print(
        [](libbpf_print_level, const char* f, va_list a) { return log_line("libbpf", f, a); });
    libxdp_set_print(
        [](libxdp_print_level, const char* f, va_list a) { return log_line("libxdp", f, a); });
  });
}

Result<bpf_object*> open_object() {
  route_library_logs();
  DECLARE_LIBBPF_OPTS(bpf_object_open_opts, opts, .object_name = XdpProgram::kName);
  bpf_object* obj = bpf_object__open_mem(kFlowFilterObject.data(), kFlowFilterObject.size(), &opts);
  if (obj == nullptr) return fail_errno("opening the XDP flow filter's BPF object");
  return obj;
}

// Why an interface may refuse another program: one attached without libxdp's dispatcher (or a
// kernel that cannot run the dispatcher, where each interface takes one program).
std::string holder_of(int ifindex) {
  xdp_multiprog* mp = xdp_multiprog__get_from_ifindex(ifindex);
  if (libxdp_get_error(mp) != 0 || mp == nullptr) return "";
  std::string why;
  if (xdp_multiprog__is_legacy(mp)) {
    ::xdp_program* main = xdp_multiprog__main_prog(mp);
    if (main != nullptr) {
      why = std::string(" (XDP program ") + xdp_program__name(main) +
            " holds it without libxdp's dispatcher: one program an interface)";
    }
  }
  xdp_multiprog__close(mp);
  return why;
}

}  // namespace

XdpProgram::XdpProgram(bpf_object* obj, ::xdp_program* program, int ifindex, int mode)
    : obj_(obj), program_(program), ifindex_(ifindex), mode_(mode) {}

XdpProgram::~XdpProgram() {
  if (program_ != nullptr) {
    if (ifindex_ >= 0) {
      xdp_program__detach(program_, ifindex_, static_cast<xdp_attach_mode>(mode_), 0);
    }
    xdp_program__close(program_);
  }
  bpf_object__close(obj_);
}

Result<std::unique_ptr<XdpProgram>> XdpProgram::attach(int ifindex) {
  auto obj = open_object();
  if (!obj) return std::unexpected(obj.error());
  ::xdp_program* p = xdp_program__from_bpf_obj(*obj, "xdp");
  if (long err = libxdp_get_error(p); err != 0) {
    bpf_object__close(*obj);
    return fail(ErrorCode::kInternal, "the XDP flow filter: " + xdp_error(static_cast<int>(err)));
  }
  // Native where the driver runs XDP itself; generic (in the kernel's receive path) otherwise.
  int mode = XDP_MODE_NATIVE;
  int err = xdp_program__attach(p, ifindex, XDP_MODE_NATIVE, 0);
  if (err != 0) {
    mode = XDP_MODE_SKB;
    err = xdp_program__attach(p, ifindex, XDP_MODE_SKB, 0);
  }
  std::unique_ptr<XdpProgram> program(new XdpProgram(*obj, p, err == 0 ? ifindex : -1, mode));
  if (err != 0) {
    return fail(ErrorCode::kFailedPrecondition, "attaching the XDP flow filter to interface " +
                                                    std::to_string(ifindex) + ": " +
                                                    xdp_error(err) + holder_of(ifindex));
  }
  if (auto ok = program->find_maps(); !ok) return std::unexpected(ok.error());
  return program;
}

Result<std::unique_ptr<XdpProgram>> XdpProgram::load() {
  auto obj = open_object();
  if (!obj) return std::unexpected(obj.error());
  std::unique_ptr<XdpProgram> program(new XdpProgram(*obj, nullptr, -1, XDP_MODE_UNSPEC));
  if (int err = bpf_object__load(*obj); err != 0) {
    return fail(ErrorCode::kFailedPrecondition,
                std::string("loading the XDP flow filter: ") + std::strerror(-err));
  }
  if (auto ok = program->find_maps(); !ok) return std::unexpected(ok.error());
  return program;
}

Result<> XdpProgram::find_maps() {
  rules_fd_ = bpf_object__find_map_fd_by_name(obj_, "daqiri_rules");
  sockets_fd_ = bpf_object__find_map_fd_by_name(obj_, "daqiri_xsks");
  counts_fd_ = bpf_object__find_map_fd_by_name(obj_, "daqiri_counts");
  bpf_program* prog = bpf_object__find_program_by_name(obj_, kName);
  program_fd_ = prog != nullptr ? bpf_program__fd(prog) : -1;
  if (rules_fd_ < 0 || sockets_fd_ < 0 || counts_fd_ < 0 || program_fd_ < 0) {
    return fail(ErrorCode::kInternal, "the XDP flow filter's maps or program are not loaded");
  }
  return {};
}

Result<> XdpProgram::set_rule(uint32_t slot, const daqiri_xdp_rule& rule) {
  if (slot >= DAQIRI_XDP_MAX_RULES) {
    return fail(ErrorCode::kResourceExhausted, "an interface's XDP filter holds " +
                                                   std::to_string(DAQIRI_XDP_MAX_RULES) + " flows");
  }
  daqiri_xdp_rule r = rule;
  r.in_use = 1;
  if (bpf_map_update_elem(rules_fd_, &slot, &r, BPF_ANY) != 0) {
    return fail_errno("writing the XDP filter's rule");
  }
  return {};
}

Result<> XdpProgram::clear_rule(uint32_t slot) {
  if (slot >= DAQIRI_XDP_MAX_RULES) return {};
  daqiri_xdp_rule none{};
  if (bpf_map_update_elem(rules_fd_, &slot, &none, BPF_ANY) != 0) {
    return fail_errno("clearing the XDP filter's rule");
  }
  return {};
}

Result<> XdpProgram::set_socket(uint32_t queue, int fd) {
  if (queue >= DAQIRI_XDP_MAX_QUEUES) {
    return fail(ErrorCode::kInvalidArgument, "queue " + std::to_string(queue) +
                                                 " is past the XDP filter's " +
                                                 std::to_string(DAQIRI_XDP_MAX_QUEUES));
  }
  int rc = fd >= 0 ? bpf_map_update_elem(sockets_fd_, &queue, &fd, BPF_ANY)
                   : bpf_map_delete_elem(sockets_fd_, &queue);
  if (rc != 0 && !(fd < 0 && errno == ENOENT)) return fail_errno("the XDP filter's socket map");
  return {};
}

daqiri_xdp_counts XdpProgram::counts(uint32_t slot) const {
  daqiri_xdp_counts total{};
  int cpus = libbpf_num_possible_cpus();
  if (cpus <= 0) return total;
  std::vector<daqiri_xdp_counts> per_cpu(static_cast<size_t>(cpus));
  if (bpf_map_lookup_elem(counts_fd_, &slot, per_cpu.data()) != 0) return total;
  for (const auto& c : per_cpu) {
    total.redirected += c.redirected;
    total.no_socket += c.no_socket;
    total.other_queue += c.other_queue;
  }
  return total;
}

Result<uint32_t> XdpProgram::run(std::span<const uint8_t> frame) {
  DECLARE_LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = frame.data(),
                      .data_size_in = static_cast<uint32_t>(frame.size()), .repeat = 1);
  if (bpf_prog_test_run_opts(program_fd_, &opts) != 0) {
    return fail_errno("running a packet through the XDP flow filter");
  }
  return opts.retval;
}

std::string XdpProgram::mode() const {
  if (ifindex_ < 0) return "none";
  return mode_ == XDP_MODE_NATIVE ? "native" : "generic";
}

Result<int> XdpProgram::remove_leftovers(int ifindex) {
  xdp_multiprog* mp = xdp_multiprog__get_from_ifindex(ifindex);
  if (long err = libxdp_get_error(mp); err != 0 || mp == nullptr) {
    // ENOENT: nothing attached there.
    return err == -ENOENT || mp == nullptr
               ? Result<int>(0)
               : fail(ErrorCode::kInternal, "the XDP programs on interface " +
                                                std::to_string(ifindex) + ": " +
                                                xdp_error(static_cast<int>(err)));
  }
  // Ids first: detaching rebuilds the dispatcher under the listing.
  std::vector<uint32_t> ours;
  auto mode = xdp_multiprog__attach_mode(mp);
  if (xdp_multiprog__is_legacy(mp)) {
    ::xdp_program* main = xdp_multiprog__main_prog(mp);
    if (main != nullptr && std::strcmp(xdp_program__name(main), kName) == 0) {
      ours.push_back(xdp_program__id(main));
    }
  } else {
    for (::xdp_program* p = xdp_multiprog__next_prog(nullptr, mp); p != nullptr;
         p = xdp_multiprog__next_prog(p, mp)) {
      if (std::strcmp(xdp_program__name(p), kName) == 0) ours.push_back(xdp_program__id(p));
    }
  }
  xdp_multiprog__close(mp);
  int removed = 0;
  for (uint32_t id : ours) {
    ::xdp_program* p = xdp_program__from_id(id);
    if (libxdp_get_error(p) != 0) continue;
    if (xdp_program__detach(p, ifindex, mode, 0) == 0) ++removed;
    xdp_program__close(p);
  }
  return removed;
}

}  // namespace daqiri::backends::xdp
