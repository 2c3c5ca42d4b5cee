// Capture paths as clients send them (gRPC StartCapture, `daqiri-ctl capture`): the part
// beneath an allowed folder that the daemon then opens with RESOLVE_BENEATH. The input is
// PATH, a NUL, then the folder. What comes back is exactly what follows the folder and a slash
// in the path, and, read as a path, goes nowhere but down: relative, no empty component (no
// doubled or trailing slash), no "." or "..".
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include "capture/capture_path.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string in(reinterpret_cast<const char*>(data), size);
  size_t nul = in.find('\0');
  if (nul == std::string::npos) return 0;
  std::string path = in.substr(0, nul);
  std::string dir = in.substr(nul + 1);
  std::string rel = daqiri::capture_service::path_beneath(path, dir);
  if (rel.empty()) return 0;
  std::string folder = dir;
  while (folder.size() > 1 && folder.back() == '/')
    folder.pop_back();
  if (path != folder + "/" + rel) __builtin_trap();
  if (rel.front() == '/' || rel.back() == '/' || rel.find("//") != std::string::npos) {
    __builtin_trap();
  }
  for (const auto& part : std::filesystem::path(rel)) {
    if (part == "." || part == "..") __builtin_trap();
  }
  return 0;
}
