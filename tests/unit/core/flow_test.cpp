// Flow matches and the flow table rules shared by the config and CreateFlow.
#include <gtest/gtest.h>

#include "core/flow_table.hpp"

namespace daqiri::core {
namespace {

FlowMatch dst(uint16_t first, uint16_t last) {
  FlowMatch m;
  m.udp_dst = PortRange{first, last};
  return m;
}

TEST(FlowMatch, PortRangesParse) {
  EXPECT_EQ(*parse_port_range("4096"), (PortRange{4096, 4096}));
  EXPECT_EQ(*parse_port_range("1-65535"), (PortRange{1, 65535}));
  EXPECT_FALSE(parse_port_range("0"));
  EXPECT_FALSE(parse_port_range("65536"));
  EXPECT_FALSE(parse_port_range("10-5"));
  EXPECT_FALSE(parse_port_range("ten"));
  EXPECT_FALSE(parse_port_range("1-"));
  EXPECT_FALSE(parse_port_range(""));
}

TEST(FlowMatch, Ipv4PrefixesParse) {
  auto p = parse_ipv4_prefix("10.1.0.0/16");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->length, 16);
  EXPECT_TRUE(p->contains(0x0a01ffff));
  EXPECT_FALSE(p->contains(0x0a02ffff));
  EXPECT_EQ(p->to_string(), "10.1.0.0/16");
  EXPECT_EQ(parse_ipv4_prefix("0.0.0.0/0")->mask(), 0u);
  EXPECT_FALSE(parse_ipv4_prefix("10.1.0.1/16"));  // host bits
  EXPECT_FALSE(parse_ipv4_prefix("10.1.0.0/33"));
  EXPECT_FALSE(parse_ipv4_prefix("10.1.0"));
}

TEST(FlowMatch, OverlapNeedsEveryDimensionToIntersect) {
  EXPECT_TRUE(dst(100, 200).overlaps(dst(200, 300)));
  EXPECT_FALSE(dst(100, 199).overlaps(dst(200, 300)));
  FlowMatch a = dst(100, 200);
  FlowMatch b = dst(150, 150);
  b.udp_src = PortRange{1, 1};
  EXPECT_TRUE(a.overlaps(b));  // a's unset udp_src matches anything
  a.udp_src = PortRange{2, 2};
  EXPECT_FALSE(a.overlaps(b));
  FlowMatch n1;
  n1.ipv4_dst = *parse_ipv4_prefix("10.0.0.0/8");
  FlowMatch n2;
  n2.ipv4_dst = *parse_ipv4_prefix("10.9.0.0/16");
  EXPECT_TRUE(n1.overlaps(n2));
  n2.ipv4_dst = *parse_ipv4_prefix("11.0.0.0/16");
  EXPECT_FALSE(n1.overlaps(n2));
}

class FlowTableTest : public ::testing::Test {
 protected:
  FlowTable table{RxTopology{{{"lo", {"rx0", "rx1"}}, {"tx_only", {}}}}};
};

TEST_F(FlowTableTest, AssignsLowestFreeIdsAndDefaultsTheQueue) {
  auto a = table.add({"a", "lo", "", dst(1, 1), std::nullopt, FlowOrigin::kApi, {}, {}, {}, {}});
  ASSERT_TRUE(a);
  EXPECT_EQ(a->id, 0u);
  EXPECT_EQ(a->queue, "rx0");
  auto b = table.add({"b", "lo", "rx1", dst(2, 2), 5u, FlowOrigin::kApi, {}, {}, {}, {}});
  ASSERT_TRUE(b);
  EXPECT_EQ(b->id, 5u);
  auto c = table.add({"c", "lo", "", dst(3, 3), std::nullopt, FlowOrigin::kApi, {}, {}, {}, {}});
  EXPECT_EQ(c->id, 1u);
  ASSERT_TRUE(table.remove("a"));
  auto d = table.add({"d", "lo", "", dst(4, 4), std::nullopt, FlowOrigin::kApi, {}, {}, {}, {}});
  EXPECT_EQ(d->id, 0u);  // freed ids are reused
}

TEST_F(FlowTableTest, EachRuleHasItsCodeAndField) {
  ASSERT_TRUE(table.add({"a", "lo", "", dst(10, 20), 1u, FlowOrigin::kApi, {}, {}, {}, {}}));
  auto expect = [&](FlowSpec spec, ErrorCode code, const std::string& field) {
    auto r = table.add(std::move(spec));
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, code) << r.error().message;
    EXPECT_EQ(r.error().field, field) << r.error().message;
  };
  expect({"a", "lo", "", dst(30, 30), {}, {}, {}, {}, {}, {}}, ErrorCode::kAlreadyExists, "name");
  expect({"", "lo", "", dst(30, 30), {}, {}, {}, {}, {}, {}}, ErrorCode::kInvalidArgument, "name");
  expect({"x/y", "lo", "", dst(30, 30), {}, {}, {}, {}, {}, {}}, ErrorCode::kInvalidArgument,
         "name");
  expect({"b", "eth0", "", dst(30, 30), {}, {}, {}, {}, {}, {}}, ErrorCode::kNotFound, "interface");
  expect({"b", "tx_only", "", dst(30, 30), {}, {}, {}, {}, {}, {}}, ErrorCode::kFailedPrecondition,
         "interface");
  expect({"b", "lo", "rx9", dst(30, 30), {}, {}, {}, {}, {}, {}}, ErrorCode::kNotFound, "queue");
  expect({"b", "lo", "", FlowMatch{}, {}, {}, {}, {}, {}, {}}, ErrorCode::kInvalidArgument,
         "match");
  expect({"b", "lo", "", dst(15, 30), {}, {}, {}, {}, {}, {}}, ErrorCode::kAlreadyExists, "match");
  expect({"b", "lo", "", dst(30, 30), 1u, {}, {}, {}, {}, {}}, ErrorCode::kAlreadyExists, "id");
  EXPECT_EQ(table.flows().size(), 1u);  // nothing rejected was kept
}

// An RSS flow names two or more distinct queues of its interface, takes the first as its
// queue, and holds each of them against another catch-all.
TEST_F(FlowTableTest, AnRssFlowSpreadsOverDistinctQueuesItHoldsAgainstCatchAlls) {
  auto spec = [](std::string name, FlowMatch match, std::vector<std::string> queues) {
    FlowSpec s;
    s.name = std::move(name);
    s.interface = "lo";
    s.match = std::move(match);
    s.rss_queues = std::move(queues);
    return s;
  };
  auto refused = [&](FlowSpec s, ErrorCode code, const char* field) {
    auto r = table.add(std::move(s));
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, code) << r.error().message;
    EXPECT_EQ(r.error().field, field) << r.error().message;
  };
  refused(spec("one", dst(1, 1), {"rx1"}), ErrorCode::kInvalidArgument, "queues");
  refused(spec("twice", dst(1, 1), {"rx0", "rx0"}), ErrorCode::kInvalidArgument, "queues");
  refused(spec("unknown", dst(1, 1), {"rx0", "rx7"}), ErrorCode::kNotFound, "queue");
  FlowSpec tcp = spec("tcp", {}, {"rx0", "rx1"});
  tcp.connect = Endpoint{0x0a000001, 6000};
  refused(tcp, ErrorCode::kInvalidArgument, "queues");
  FlowMatch any;
  any.any = true;
  auto spread = table.add(spec("spread", any, {"rx1", "rx0"}));
  ASSERT_TRUE(spread) << spread.error().message;
  EXPECT_EQ(spread->queue, "rx1");
  EXPECT_EQ(spread->queues(), (std::vector<std::string>{"rx1", "rx0"}));
  EXPECT_TRUE(spread->serves("rx0"));
  FlowSpec other = spec("other", any, {});
  other.queue = "rx0";
  refused(other, ErrorCode::kAlreadyExists, "match");
  EXPECT_EQ(table.flows().size(), 1u);
}

// As DAQIRI's: two interfaces may each have a flow 1, the lowest free id is the interface's,
// and an id taken on the interface is refused.
TEST(FlowIds, AreUniqueWithinTheirInterface) {
  FlowTable table{RxTopology{{{"a", {"rx0"}}, {"b", {"rx0"}}}}};
  auto flow = [&](const char* name, const char* itf, std::optional<uint32_t> id, uint16_t port) {
    FlowSpec s;
    s.name = name;
    s.interface = itf;
    s.match = dst(port, port);
    s.id = id;
    return table.add(std::move(s));
  };
  ASSERT_TRUE(flow("a1", "a", 1u, 10));
  auto b1 = flow("b1", "b", 1u, 10);
  ASSERT_TRUE(b1) << b1.error().message;
  auto a_next = flow("a_next", "a", std::nullopt, 11);
  ASSERT_TRUE(a_next);
  EXPECT_EQ(a_next->id, 0u);
  auto b_next = flow("b_next", "b", std::nullopt, 11);
  ASSERT_TRUE(b_next);
  EXPECT_EQ(b_next->id, 0u);
  auto again = flow("a_again", "a", 1u, 12);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().message, "flow id 1 is taken on interface \"a\"");
  EXPECT_EQ(again.error().field, "id");
}

TEST_F(FlowTableTest, RemovingAnUnknownFlowIsNotFound) {
  auto r = table.remove("ghost");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kNotFound);
}

}  // namespace
}  // namespace daqiri::core
