// Where a capture may be written: the part of a requested path beneath an allowed folder,
// decided on the text alone (the open that follows, openat2 with RESOLVE_BENEATH, then makes
// the file system agree). Pure, so that it can be fuzzed (tests/fuzz/fuzz_capture_path.cpp).
#pragma once

#include <string>

namespace daqiri::capture_service {

// The part of `path` beneath `dir`, or empty when it is not beneath it (lexically: no "."
// or ".." component, no empty one).
inline std::string path_beneath(const std::string& path, std::string dir) {
  while (dir.size() > 1 && dir.back() == '/')
    dir.pop_back();
  if (path.size() <= dir.size() + 1 || path.compare(0, dir.size(), dir) != 0 ||
      path[dir.size()] != '/') {
    return {};
  }
  std::string rel = path.substr(dir.size() + 1);
  size_t start = 0;
  while (start <= rel.size()) {
    size_t end = rel.find('/', start);
    if (end == std::string::npos) end = rel.size();
    std::string part = rel.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") return {};
    start = end + 1;
  }
  return rel;
}

}  // namespace daqiri::capture_service
