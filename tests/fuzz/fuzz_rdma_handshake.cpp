// The private data an RDMA peer sends when a connection opens (any program can connect): read
// into our Handshake or refused. A peer without a window gets no access to one.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "backends/rdma/rdma_handshake.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace rdma = daqiri::backends::rdma;
  std::vector<uint8_t> bytes(data, data + size);  // exactly as long as the peer sent
  auto h = rdma::parse_handshake(bytes.empty() ? nullptr : bytes.data(), bytes.size());
  if (!h) return 0;
  if (size < sizeof(rdma::Handshake)) __builtin_trap();
  if (h->magic != rdma::kHandshakeMagic || h->version != rdma::kHandshakeVersion) {
    __builtin_trap();
  }
  if (h->slots == 0 && h->access != 0) __builtin_trap();
  return 0;
}
