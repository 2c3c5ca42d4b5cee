#include "config/user_ids.hpp"

#include <grp.h>
#include <pwd.h>

#include <vector>

namespace daqiri::config {
namespace {

std::optional<uint64_t> numeric(const std::string& s) {
  if (s.empty() || s.size() > 10 || s.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  uint64_t n = std::stoull(s);
  return n < 0xffffffffULL ? std::optional<uint64_t>(n) : std::nullopt;  // (uid_t)-1: none
}

}  // namespace

std::optional<uid_t> user_id(const std::string& name_or_number) {
  if (auto n = numeric(name_or_number)) return static_cast<uid_t>(*n);
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* found = nullptr;
  if (getpwnam_r(name_or_number.c_str(), &pw, buf.data(), buf.size(), &found) != 0 ||
      found == nullptr) {
    return std::nullopt;
  }
  return pw.pw_uid;
}

std::optional<gid_t> group_id(const std::string& name_or_number) {
  if (auto n = numeric(name_or_number)) return static_cast<gid_t>(*n);
  std::vector<char> buf(65536);
  group gr{};
  group* found = nullptr;
  if (getgrnam_r(name_or_number.c_str(), &gr, buf.data(), buf.size(), &found) != 0 ||
      found == nullptr) {
    return std::nullopt;
  }
  return gr.gr_gid;
}

}  // namespace daqiri::config
