// The text of a flow match's ports and addresses, split the one way that the daemon (its
// configuration and the control API) and daqiri-ctl read it. Splitting only: what the numbers
// may be (ports 1 to 65535, a length up to 32, no host bits) is core::FlowMatch's to check,
// with its messages.
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>

namespace daqiri::match_text {

// The whole of `text` as a decimal number.
inline bool whole_number(std::string_view text, uint64_t& out) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return !text.empty() && ec == std::errc() && end == text.data() + text.size();
}

struct Range {
  uint64_t first = 0;
  uint64_t last = 0;
};

// "4096" or "4096-4100"; nullopt unless each side is a whole number.
inline std::optional<Range> port_range(std::string_view text) {
  Range r;
  auto dash = text.find('-');
  bool ok = dash == std::string_view::npos
                ? whole_number(text, r.first) && whole_number(text, r.last)
                : whole_number(text.substr(0, dash), r.first) &&
                      whole_number(text.substr(dash + 1), r.last);
  return ok ? std::optional(r) : std::nullopt;
}

struct Prefix {
  std::string_view address;
  std::optional<uint64_t> length;  // none given: one address
};

// "10.0.0.0/24" or "10.0.0.1"; nullopt when what follows a slash is not a whole number.
inline std::optional<Prefix> ipv4_prefix(std::string_view text) {
  auto slash = text.find('/');
  Prefix p{text.substr(0, slash), std::nullopt};
  if (slash == std::string_view::npos) return p;
  uint64_t length = 0;
  if (!whole_number(text.substr(slash + 1), length)) return std::nullopt;
  p.length = length;
  return p;
}

}  // namespace daqiri::match_text
