// The smallest useful client: receive a flow's packets and print a line per burst.
//   daqiri-example-rx [FLOW] [SOCKET]
#include <cstdio>

#include "daqiri/client.hpp"

int main(int argc, char** argv) {
  daqiri::ClientOptions options;
  options.name = "example-rx";
  if (argc > 2) options.socket = argv[2];
  auto client = daqiri::Client::connect(options);
  if (!client) {
    std::fprintf(stderr, "connect: %s\n", client.error().message.c_str());
    return 1;
  }
  daqiri::RxOptions rx_options;
  rx_options.flow = argc > 1 ? argv[1] : "stream0";
  auto rx = (*client)->attach_rx(rx_options);
  if (!rx) {
    std::fprintf(stderr, "attach: %s\n", rx.error().message.c_str());
    return 1;
  }
  for (;;) {
    auto burst = (*rx)->wait_burst(std::chrono::seconds(1));
    if (!burst) {
      std::fprintf(stderr, "detached: %s\n", burst.error().message.c_str());
      return 1;
    }
    size_t bytes = 0;
    for (const daqiri::Packet& p : *burst)
      bytes += p.payload.size();
    if (!burst->empty()) std::printf("%zu packets, %zu payload bytes\n", burst->size(), bytes);
    (*rx)->release(*burst);
  }
}
