// The counters of stats_counters.hpp read and written in their messages by field name.
#pragma once

#include <google/protobuf/message.h>

#include <cstdint>
#include <string_view>

namespace daqiri::v1::stats {

// A counter field (uint64 or uint32) of `message`, by name, through reflection: written by the
// daemon, read by daqiri-ctl. An unknown name is a programming error (checked by a unit test).
void set_counter(google::protobuf::Message& message, std::string_view field, uint64_t value);
uint64_t counter(const google::protobuf::Message& message, std::string_view field);

}  // namespace daqiri::v1::stats
