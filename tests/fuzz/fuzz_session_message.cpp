// Messages on the session socket, as any local process can send them: the decoder the session
// server acts on, over (bytes, descriptors that came along, HELLO seen or not). A message it
// takes is exactly the size of its type, says the protocol's magic and version and its own
// length; a HELLO's name is printable and at most 63 bytes; anything else is refused, with a
// reason.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <variant>
#include <vector>

#include "session/session_message.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace session = daqiri::session;
  if (size < 1) return 0;
  size_t fds = data[0] & 3;
  bool welcomed = (data[0] & 4) != 0;
  std::vector<std::byte> bytes(reinterpret_cast<const std::byte*>(data) + 1,
                               reinterpret_cast<const std::byte*>(data) + size);
  auto m = session::decode_session_message(bytes, fds, welcomed);
  if (auto* r = std::get_if<session::Refusal>(&m)) {
    if (r->why.empty()) __builtin_trap();
    return 0;
  }
  daqiri_msg_header h{};
  if (fds != 0 || bytes.size() < sizeof h) __builtin_trap();
  std::memcpy(&h, bytes.data(), sizeof h);
  if (h.magic != DAQIRI_MSG_MAGIC || h.version != DAQIRI_ABI_VERSION || h.length != bytes.size()) {
    __builtin_trap();
  }
  if (auto* hello = std::get_if<session::Hello>(&m)) {
    if (welcomed || h.type != DAQIRI_MSG_HELLO || bytes.size() != sizeof(daqiri_msg_hello) ||
        hello->name.size() > 63) {
      __builtin_trap();
    }
    for (char c : hello->name) {
      if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') __builtin_trap();
    }
  } else if (std::holds_alternative<session::Claim>(m)) {
    if (h.type != DAQIRI_MSG_CLAIM || bytes.size() != sizeof(daqiri_msg_claim)) __builtin_trap();
  } else if (std::holds_alternative<session::Detach>(m)) {
    if (h.type != DAQIRI_MSG_DETACH || bytes.size() != sizeof(daqiri_msg_detach)) {
      __builtin_trap();
    }
  }
  return 0;
}
