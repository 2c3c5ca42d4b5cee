// What the tests' client programs share: a line of output per event (flushed, so a test reading
// the pipe sees it at once) and a session that exits 3 when it cannot be opened.
#pragma once

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "daqiri/client.hpp"

namespace daqiri::test {

inline void say(const char* fmt, auto... args) {
  std::printf(fmt, args...);
  std::printf("\n");
  std::fflush(stdout);
}

inline std::unique_ptr<Client> connect_or_exit(const std::string& socket, const char* name) {
  auto c = Client::connect({socket, name, std::chrono::seconds(5)});
  if (!c) {
    say("connect failed: %s", c.error().message.c_str());
    std::exit(3);
  }
  return std::move(*c);
}

}  // namespace daqiri::test
