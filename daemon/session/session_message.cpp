#include "session/session_message.hpp"
#include "daqiri/session_header.hpp"

#include <algorithm>
#include <cstring>

namespace daqiri::session {
namespace {

// The message as `T`, when it is exactly that long.
template <typename T>
bool read_exactly(std::span<const std::byte> bytes, T& out) {
  if (bytes.size() != sizeof out) return false;
  std::memcpy(&out, bytes.data(), sizeof out);
  return true;
}

}  // namespace

SessionMessage decode_session_message(std::span<const std::byte> bytes, size_t fds, bool welcomed) {
  if (fds != 0) return Refusal{"it sent file descriptors"};
  daqiri_msg_header h{};
  if (bytes.size() < sizeof h) return Refusal{"it sent a short message"};
  std::memcpy(&h, bytes.data(), sizeof h);
  if (!abi::header_fits(h, bytes.size())) {
    return Refusal{"it speaks another protocol version (ABI " + std::to_string(h.version) +
                   ", daemon " + std::to_string(DAQIRI_ABI_VERSION) + ")"};
  }
  switch (h.type) {
    case DAQIRI_MSG_HELLO: {
      daqiri_msg_hello hello{};
      if (welcomed || !read_exactly(bytes, hello)) return Refusal{"it sent a malformed HELLO"};
      return Hello{printable_name({hello.name, sizeof hello.name})};
    }
    case DAQIRI_MSG_CLAIM: {
      Claim claim{};
      if (!read_exactly(bytes, claim.msg)) return Refusal{"it sent a malformed CLAIM"};
      return claim;
    }
    case DAQIRI_MSG_DETACH: {
      Detach detach{};
      if (!read_exactly(bytes, detach.msg)) return Refusal{"it sent a malformed DETACH"};
      return detach;
    }
    default:
      return Refusal{"it sent message type " + std::to_string(h.type), true};
  }
}

std::string printable_name(std::string_view raw) {
  raw = raw.substr(0, std::min(raw.find('\0'), sizeof(daqiri_msg_hello::name) - 1));
  std::string out(raw);
  for (char& c : out) {
    bool plain = c >= 0x20 && c < 0x7f && c != '"' && c != '\\';
    if (!plain) c = '?';
  }
  return out;
}

}  // namespace daqiri::session
