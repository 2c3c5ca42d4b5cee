// A client's message on the session socket, decided from its bytes alone: the server reads
// it once into private memory and hands it here, where nothing else happens (no lock, no
// send), then acts on what comes back. So the whole protocol check can be fuzzed without a
// socket (tests/fuzz/fuzz_session_message.cpp).
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <variant>

#include "daqiri/abi.h"

namespace daqiri::session {

struct Hello {
  std::string name;  // printable_name() of what it said
};
struct Claim {
  daqiri_msg_claim msg;
};
struct Detach {
  daqiri_msg_detach msg;
};
// The session goes: cut off for a protocol violation (counted), or just ended (`end`).
struct Refusal {
  std::string why;
  bool end = false;
};
using SessionMessage = std::variant<Hello, Claim, Detach, Refusal>;

// `bytes`: one message as received; `fds`: how many descriptors came with it (clients send
// none); `welcomed`: the session has had its HELLO.
SessionMessage decode_session_message(std::span<const std::byte> bytes, size_t fds, bool welcomed);

// A client's name as logs, listings and metric labels show it: up to the first NUL, at most
// 63 bytes, every byte outside printable ASCII (controls, quotes, backslash, UTF-8) as '?'.
std::string printable_name(std::string_view raw);

}  // namespace daqiri::session
