#include "daqiri/v1/stats_reflection.hpp"

#include <google/protobuf/descriptor.h>

#include <string>

namespace daqiri::v1::stats {
namespace {

const google::protobuf::FieldDescriptor* field_of(const google::protobuf::Message& message,
                                                  std::string_view field) {
  return message.GetDescriptor()->FindFieldByName(std::string(field));
}

}  // namespace

void set_counter(google::protobuf::Message& message, std::string_view field, uint64_t value) {
  const auto* f = field_of(message, field);
  if (f == nullptr) return;
  const auto* r = message.GetReflection();
  if (f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_UINT32) {
    r->SetUInt32(&message, f, static_cast<uint32_t>(value));
  } else if (f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_UINT64) {
    r->SetUInt64(&message, f, value);
  }
}

uint64_t counter(const google::protobuf::Message& message, std::string_view field) {
  const auto* f = field_of(message, field);
  if (f == nullptr) return 0;
  const auto* r = message.GetReflection();
  if (f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_UINT32) {
    return r->GetUInt32(message, f);
  }
  if (f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_UINT64) {
    return r->GetUInt64(message, f);
  }
  return 0;
}

}  // namespace daqiri::v1::stats
