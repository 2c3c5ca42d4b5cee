// The counter tables GetStats, the metrics and daqiri-ctl are written from: every field they
// name is a counter of its message, every family they name is described, and reflection reads
// back what it wrote.
#include "daqiri/v1/stats_counters.hpp"

#include <google/protobuf/descriptor.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "daqiri/v1/control.pb.h"
#include "daqiri/v1/stats_reflection.hpp"

namespace daqiri::v1::stats {
namespace {

template <size_t N, size_t M>
void check(const google::protobuf::Descriptor* message, const Counter (&counters)[N],
           const Family (&families)[M]) {
  for (const Counter& c : counters) {
    if (!c.field.empty()) {
      const auto* f = message->FindFieldByName(std::string(c.field));
      ASSERT_NE(f, nullptr) << message->name() << " has no field " << c.field;
      EXPECT_TRUE(f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_UINT64 ||
                  f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_UINT32)
          << c.field;
    }
    if (!c.family.empty()) {
      EXPECT_TRUE(std::any_of(std::begin(families), std::end(families),
                              [&](const Family& f) { return f.name == c.family; }))
          << c.family << " is not described";
    }
    EXPECT_FALSE(c.field.empty() && c.family.empty()) << "a counter reported nowhere";
  }
}

TEST(StatsCounters, EveryFieldIsACounterOfItsMessageAndEveryFamilyIsDescribed) {
  check(FlowStats::descriptor(), kFlowCounters, kFlowFamilies);
  check(AttachmentStats::descriptor(), kAttachmentCounters, kAttachmentFamilies);
}

TEST(StatsCounters, ReflectionReadsBackWhatItWrote) {
  AttachmentStats a;
  set_counter(a, "kicks", 7);
  set_counter(a, "ring_size", (uint64_t{1} << 32) + 5);  // a uint32 field keeps its low bits
  set_counter(a, "no_such_field", 9);
  EXPECT_EQ(a.kicks(), 7u);
  EXPECT_EQ(counter(a, "kicks"), 7u);
  EXPECT_EQ(a.ring_size(), 5u);
  EXPECT_EQ(counter(a, "no_such_field"), 0u);
}

TEST(StatsCounters, EachAttachmentShowsWhatAppliesToIt) {
  EXPECT_TRUE(applies_to(Applies::kAll, false, false));
  EXPECT_TRUE(applies_to(Applies::kRx, true, false));
  EXPECT_FALSE(applies_to(Applies::kRx, false, false));
  EXPECT_TRUE(applies_to(Applies::kTx, false, false));
  EXPECT_FALSE(applies_to(Applies::kGpu, true, false));
  EXPECT_TRUE(applies_to(Applies::kGpu, true, true));
  EXPECT_FALSE(applies_to(Applies::kReorder, true, false));
  EXPECT_TRUE(applies_to(Applies::kReorder, true, false, true));
}

}  // namespace
}  // namespace daqiri::v1::stats
