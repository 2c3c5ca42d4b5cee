// A user or group as a configuration or a request names it (a name, or a number) as the id the
// kernel reports for a process: the account database's entry, or the number itself.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

namespace daqiri::config {

std::optional<uid_t> user_id(const std::string& name_or_number);
std::optional<gid_t> group_id(const std::string& name_or_number);

}  // namespace daqiri::config
