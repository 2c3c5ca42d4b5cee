// The config reader on any text: YAML syntax, both schemas (ours, and DAQIRI's `daqiri: cfg:`),
// and the cross-checks. Whatever the bytes, it returns a Config or says why not; it never
// crashes, hangs, leaks or reads out of bounds.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "config/config_loader.hpp"
#include "config/diagnostics.hpp"

namespace {

// A machine with every backend and enough of everything, so that texts get past the
// cross-checks into what they would configure.
const daqiri::config::SystemFacts& facts() {
  static const daqiri::config::SystemFacts f = [] {
    daqiri::config::SystemFacts s;
    s.usable_cpus = {0, 1, 2, 3, 4, 5, 6, 7};
    s.hugepages_free = s.hugepages_total = 4096;
    s.have_dpdk = s.have_rdma = s.have_cuda = true;
    return s;
  }();
  return f;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  daqiri::config::Diagnostics diags;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto config = daqiri::config::parse_config(text, "fuzz.yaml", facts(), diags);
  // A refusal always says why.
  if (!config && !diags.has_errors()) __builtin_trap();
  if (config && diags.has_errors()) __builtin_trap();
  (void)diags.render();
  return 0;
}
