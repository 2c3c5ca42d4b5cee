// Capture paths as clients send them (gRPC StartCapture, `daqiri-ctl capture`): the part
// beneath an allowed folder that the daemon then opens with RESOLVE_BENEATH. The input is
// PATH, a NUL, then the folder. What comes back is relative, has no empty, "." or ".."
// component, and is exactly what follows the folder and a slash in the path.
#include <cstddef>
#include <cstdint>
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
  if (rel.front() == '/' || rel.back() == '/') __builtin_trap();
  for (size_t start = 0; start <= rel.size();) {
    size_t end = rel.find('/', start);
    if (end == std::string::npos) end = rel.size();
    std::string part = rel.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") __builtin_trap();
    start = end + 1;
  }
  return 0;
}
