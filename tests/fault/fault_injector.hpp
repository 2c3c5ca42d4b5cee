// The test's side of the fault shim: creates and maps the shared state, gives the environment
// that preloads the shim into a daqirid, arms it and reads back what the daemon reached.
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "fault_state.hpp"
#include "harness.hpp"

namespace daqiri::fault {

struct Fault {
  Call call = Call::kCount;
  uint64_t site = 0;  // 0: count uses across every site of the call
  uint64_t nth = 1;
  uint32_t times = 1;
  int error = 0;
};

// A site daqirid used while armed: its call, offset in the executable and number of uses.
struct SiteUse {
  Call call;
  uint64_t offset;
  uint64_t uses;
};

class FaultInjector {
 public:
  explicit FaultInjector(const test::TempDir& dir) : path_(dir.file("fault-state")) {
    int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || ::ftruncate(fd, sizeof(State)) != 0) throw std::runtime_error("fault state");
    void* p = ::mmap(nullptr, sizeof(State), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (p == MAP_FAILED) throw std::runtime_error("fault state: mmap");
    state_ = static_cast<State*>(p);
    state_->call = kNoCall;
  }
  ~FaultInjector() { ::munmap(state_, sizeof(State)); }
  FaultInjector(const FaultInjector&) = delete;
  FaultInjector& operator=(const FaultInjector&) = delete;

  // The environment for a daqirid that takes faults from this injector. A sanitizer runtime
  // wants to come first among the libraries; the shim must come before it to see our calls.
  [[nodiscard]] std::vector<std::string> env() const {
    const char* asan = std::getenv("ASAN_OPTIONS");
    return {
        "LD_PRELOAD=" + test::built_program(DAQIRI_TEST_FAULT_SHIM), "DAQIRI_FAULT_STATE=" + path_,
        "ASAN_OPTIONS=" + std::string(asan != nullptr ? asan : "") + ":verify_asan_link_order=0"};
  }

  // Forgets every count and fault, then counts (and fires `f`, if any) from now on.
  void arm(const Fault& f = {}) {
    disarm();
    for (auto& u : state_->uses)
      u = 0;
    for (auto& s : state_->sites) {
      s.key = 0;
      s.uses = 0;
    }
    state_->fired = 0;
    state_->fired_site = 0;
    state_->call = f.call == Call::kCount ? kNoCall : static_cast<uint32_t>(f.call);
    state_->site = f.site;
    state_->nth = f.nth;
    state_->times = f.times;
    state_->error = f.error;
    state_->armed = 1;
  }
  void disarm() { state_->armed = 0; }

  [[nodiscard]] uint64_t uses(Call c) const { return state_->uses[static_cast<size_t>(c)]; }
  [[nodiscard]] uint64_t fired() const { return state_->fired; }
  [[nodiscard]] uint64_t fired_site() const { return state_->fired_site; }
  [[nodiscard]] std::vector<SiteUse> sites() const {
    std::vector<SiteUse> out;
    for (const auto& s : state_->sites) {
      uint64_t key = s.key;
      if (key != 0) out.push_back({static_cast<Call>(site_call(key)), site_offset(key), s.uses});
    }
    return out;
  }

 private:
  std::string path_;
  State* state_ = nullptr;
};

inline const char* name_of(Call c) {
  return kCallNames[static_cast<size_t>(c)];
}

// "function (file:line)" of an offset in daqirid, through addr2line (slow: remembered).
inline std::string describe_site(uint64_t offset) {
  static std::map<uint64_t, std::string> known;
  if (auto it = known.find(offset); it != known.end()) return it->second;
  char hex[20];  // of the call instruction: the byte before the return address
  std::string at(hex, std::to_chars(hex, hex + sizeof hex, offset - 1, 16).ptr);
  auto r =
      test::run({"/usr/bin/addr2line", "-f", "-C", "-s", "-e", test::daqirid_path(), "0x" + at});
  if (r.exit_code != 0) return "+0x" + at;
  auto nl = r.out.find('\n');
  std::string fn = r.out.substr(0, nl);
  std::string where = nl == std::string::npos ? "" : r.out.substr(nl + 1);
  while (!where.empty() && where.back() == '\n')
    where.pop_back();
  if (fn.size() > 70) fn = fn.substr(0, 70) + "...";
  return known[offset] = fn + " (" + where + ")";
}

}  // namespace daqiri::fault
