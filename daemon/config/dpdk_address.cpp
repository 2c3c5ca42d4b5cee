#include "config/dpdk_address.hpp"

#include <cctype>

namespace daqiri::config {
namespace {

bool hex_digits(std::string_view s, size_t n) {
  if (s.size() != n) return false;
  for (char c : s) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// [DDDD:]BB:DD.F
bool is_pci(std::string_view s) {
  if (s.size() == 12) {
    if (!hex_digits(s.substr(0, 4), 4) || s[4] != ':') return false;
    s.remove_prefix(5);
  }
  return s.size() == 7 && hex_digits(s.substr(0, 2), 2) && s[2] == ':' &&
         hex_digits(s.substr(3, 2), 2) && s[5] == '.' && s[6] >= '0' && s[6] <= '7';
}

}  // namespace

std::optional<DpdkAddress> parse_dpdk_address(std::string_view text) {
  if (is_pci(text)) return DpdkAddress{true, std::string(text), {}};
  auto comma = text.find(',');
  std::string_view name = text.substr(0, comma);
  // DPDK's vdev drivers are named net_*, crypto_* ...; an ethdev needs a net_ one.
  if (name.size() <= 4 || name.substr(0, 4) != "net_") return std::nullopt;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return std::nullopt;
  }
  std::string args = comma == std::string_view::npos ? "" : std::string(text.substr(comma + 1));
  return DpdkAddress{false, std::string(name), std::move(args)};
}

}  // namespace daqiri::config
