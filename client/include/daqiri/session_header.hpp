// The header every message on the session socket starts with (abi.h), made and checked here
// for the daemon, the client library and the tests alike.
#pragma once

#include <cstddef>
#include <cstdint>

#include "daqiri/abi.h"

namespace daqiri::abi {

inline daqiri_msg_header message_header(daqiri_msg_type type, size_t length) {
  return {DAQIRI_MSG_MAGIC, DAQIRI_ABI_VERSION, static_cast<uint16_t>(type),
          static_cast<uint32_t>(length), 0};
}

// Whether `h` opens a message of this ABI that is exactly the `received` bytes.
inline bool header_fits(const daqiri_msg_header& h, size_t received) {
  return h.magic == DAQIRI_MSG_MAGIC && h.version == DAQIRI_ABI_VERSION && h.length == received;
}

}  // namespace daqiri::abi
