// The DPDK side of configuration: interface addresses, buffer sizes against the MTU, the
// catch-all flow, hugepages for the EAL; and the software steering match on real frame bytes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "config/config_loader.hpp"
#include "config/dpdk_address.hpp"
#include "config/dpdk_test_config.hpp"
#include "core/packet_fields.hpp"
#include "daqiri/frame.hpp"
#include "pcap_frames.hpp"

namespace daqiri::config {
namespace {

using ::testing::HasSubstr;

std::string errors_of(const std::string& text, const SystemFacts& f = facts()) {
  Diagnostics diags;
  auto c = parse_config(text, "t.yaml", f, diags);
  EXPECT_FALSE(c.has_value());
  return diags.render();
}

TEST(DpdkConfig, AddressIsAPciDeviceOrAVdev) {
  EXPECT_EQ(parse_dpdk_address("0000:3b:00.1")->pci, true);
  EXPECT_EQ(parse_dpdk_address("3b:00.1")->name, "3b:00.1");
  auto v = parse_dpdk_address("net_pcap0,rx_pcap=/tmp/a.pcap,tx_pcap=/tmp/b.pcap");
  ASSERT_TRUE(v);
  EXPECT_FALSE(v->pci);
  EXPECT_EQ(v->name, "net_pcap0");
  EXPECT_EQ(v->args, "rx_pcap=/tmp/a.pcap,tx_pcap=/tmp/b.pcap");
  EXPECT_FALSE(parse_dpdk_address("eth0"));
  EXPECT_FALSE(parse_dpdk_address("3b:00.9"));
  EXPECT_THAT(errors_of(dpdk_config("eth0")),
              HasSubstr("t.yaml:6:14: error: interfaces[0].address: a dpdk interface names a PCI "
                        "device (0000:3b:00.0) or a DPDK virtual device"));
}

TEST(DpdkConfig, RxBuffersMustHoldAFrameOfTheMtu) {
  EXPECT_THAT(errors_of(dpdk_config("net_null0", 1024)),
              HasSubstr("t.yaml:2:37: error: memory_regions[0].buf_size: buf_size 1024 cannot "
                        "hold a frame of MTU 1500 on DPDK queue p0/q0: it needs 1646"));
}

TEST(DpdkConfig, RxQueuesTakeNoSharedPageRegion) {
  auto text = dpdk_config("net_null0");
  text.replace(text.find("kind: host"), 10, "kind: huge, share_pages: true");
  EXPECT_THAT(errors_of(text),
              HasSubstr("t.yaml:9:31: error: interfaces[0].rx.queues[0].regions: region \"r\" "
                        "shares pages, but a dpdk RX queue's pool is registered with the NIC as "
                        "memory of its own; use a region without share_pages"));
}

TEST(DpdkConfig, PciDevicesNeedHugepages) {
  EXPECT_THAT(errors_of(dpdk_config("0000:3b:00.0", 2048, "", "dpdk: {hugepages: false}\n")),
              HasSubstr("a PCI device needs DMA-able memory"));
}

TEST(DpdkConfig, CatchAllIsOnePerQueueAndOnlyOnDpdk) {
  std::string two =
      "flows:\n"
      "  - {name: a, interface: p0, match: {any: true}}\n"
      "  - {name: b, interface: p0, match: {any: true}}\n";
  EXPECT_THAT(errors_of(dpdk_config("net_null0", 2048, two)),
              HasSubstr("RX queue p0/q0 already has a catch-all flow (\"a\")"));
  // A catch-all beside a specific flow is fine: it takes what the other does not.
  Diagnostics diags;
  auto ok = parse_config(dpdk_config("net_null0", 2048,
                                     "flows:\n"
                                     "  - {name: a, interface: p0, match: {any: true}}\n"
                                     "  - {name: b, interface: p0, match: {udp_dst: 9}}\n"),
                         "t.yaml", facts(), diags);
  EXPECT_TRUE(ok.has_value()) << diags.render();
  std::string socket =
      "memory_regions:\n  - {name: r, kind: host, buf_size: 2048, num_bufs: "
      "4096}\ninterfaces:\n  - name: lo\n    backend: socket\n    address: "
      "127.0.0.1\n    rx:\n      queues:\n        - {name: q0, regions: [r]}\n"
      "flows:\n  - {name: a, interface: lo, match: {any: true}}\n";
  EXPECT_THAT(errors_of(socket), HasSubstr("match any (a queue's catch-all) needs a dpdk "
                                           "interface; \"lo\" is socket"));
  EXPECT_THAT(errors_of(dpdk_config("net_null0", 2048,
                                    "flows:\n  - {name: a, interface: p0, match: {any: true, "
                                    "udp_dst: 4}}\n")),
              HasSubstr("match any is the queue's catch-all and takes no other field"));
}

// TX queues are checked unless the admin says raw; checked needs the address frames come from.
TEST(DpdkConfig, CheckedTxQueuesNeedTheSourceAddress) {
  std::string tx = "    tx: {queues: [{name: t0, regions: [r]}]}\n";
  std::string text = dpdk_config("net_null0") + tx;
  EXPECT_THAT(errors_of(text),
              HasSubstr("interfaces[0].tx.queues[0]: TX queue \"t0\" is checked (the default "
                        "tx_policy): its interface needs source_ipv4"));
  std::string with_source = text;
  with_source.replace(with_source.find("    rx:"), 7, "    source_ipv4: 10.0.0.1\n    rx:");
  Diagnostics diags;
  auto checked = parse_config(with_source, "t.yaml", facts(), diags);
  ASSERT_TRUE(checked.has_value()) << diags.render();
  EXPECT_EQ(sending_ipv4(checked->interfaces[0]), 0x0a000001u);
  std::string raw = dpdk_config("net_null0") +
                    "    tx: {queues: [{name: t0, regions: [r], "
                    "tx_policy: raw}]}\n";
  auto r = parse_config(raw, "t.yaml", facts(), diags);
  ASSERT_TRUE(r.has_value()) << diags.render();
  EXPECT_EQ(r->interfaces[0].tx_queues[0].tx_policy, TxPolicy::kRaw);
  std::string bad = with_source;
  bad.replace(bad.find("10.0.0.1"), 8, "10.0.0.x");
  EXPECT_THAT(errors_of(bad),
              HasSubstr("interfaces[0].source_ipv4: source_ipv4 is an IPv4 address, got "
                        "\"10.0.0.x\""));
  std::string socket =
      "memory_regions:\n  - {name: r, kind: host, buf_size: 2048, num_bufs: 64}\n"
      "interfaces:\n  - {name: lo, backend: socket, address: 127.0.0.1, source_ipv4: 127.0.0.2,"
      " tx: {queues: [{name: t0, regions: [r]}]}}\n";
  EXPECT_THAT(errors_of(socket), HasSubstr("interfaces[0].source_ipv4: socket interfaces send from "
                                           "their address: source_ipv4 is for dpdk ones"));
}

TEST(DpdkConfig, HugepageShortfallForTheEalIsAClearError) {
  EXPECT_THAT(errors_of(dpdk_config("net_null0", 2048, "", "dpdk: {hugepages: true}\n"), facts(64)),
              HasSubstr("DPDK needs 128 hugepages of 2 MiB for dpdk.memory_mb 256 but the machine "
                        "has 64 free"));
  Diagnostics diags;
  auto ok = parse_config(dpdk_config("net_null0", 2048, "", "dpdk: {hugepages: false}\n"), "t.yaml",
                         facts(0), diags);
  EXPECT_TRUE(ok.has_value()) << diags.render();
}

TEST(SoftwareSteering, MatchesTheFieldsOfRealFrames) {
  std::vector<std::byte> f(200);
  frame::write_udp_headers(f, {0x0a000001, 1234}, {0x0a000002, 4096}, 100);
  auto p = core::PacketFields::parse(f.data(), 142);
  ASSERT_TRUE(p.ipv4);
  EXPECT_EQ(p.protocol, core::PacketFields::kUdp);
  EXPECT_EQ(p.src_port, 1234);
  EXPECT_EQ(p.dst_port, 4096);
  EXPECT_EQ(p.payload_offset, 42);
  core::FlowMatch m;
  m.udp_dst = core::PortRange{4000, 4100};
  m.ipv4_src = *core::parse_ipv4_prefix("10.0.0.0/24");
  EXPECT_TRUE(m.matches(p));
  m.ipv4_src = *core::parse_ipv4_prefix("10.0.1.0/24");
  EXPECT_FALSE(m.matches(p));

  // A VLAN tag in front is looked through.
  std::vector<std::byte> tagged(204);
  std::copy(f.begin(), f.begin() + 12, tagged.begin());
  tagged[12] = std::byte{0x81};
  tagged[13] = std::byte{0x00};
  std::copy(f.begin() + 12, f.begin() + 196, tagged.begin() + 16);
  auto t = core::PacketFields::parse(tagged.data(), 146);
  EXPECT_TRUE(t.ipv4);
  EXPECT_EQ(t.dst_port, 4096);
  EXPECT_EQ(t.payload_offset, 46);

  // Truncated or not IP: nothing but a catch-all takes it.
  EXPECT_FALSE(core::PacketFields::parse(f.data(), 30).ipv4);
  std::vector<std::byte> zeros(64);
  auto z = core::PacketFields::parse(zeros.data(), 64);
  EXPECT_FALSE(z.ipv4);
  core::FlowMatch any;
  any.any = true;
  EXPECT_TRUE(any.matches(z));
  m.ipv4_src.reset();
  EXPECT_FALSE(m.matches(z));
}

// A frame the daemon leaves unread (DAQIRI_PAYLOAD_UNREAD) has its payload found by the client
// with abi.h's search; one the daemon steers, by the steering parse. Both must agree.
TEST(PayloadSearch, TheAbisSearchAndSteeringFindTheSamePayload) {
  for (const auto& [f, expected] : test::payload_search_cases(7)) {
    auto length = static_cast<uint32_t>(f.size());
    EXPECT_EQ(daqiri_udp_payload_offset(reinterpret_cast<const uint8_t*>(f.data()), length),
              expected)
        << "frame of " << length << " bytes";
    EXPECT_EQ(core::PacketFields::parse(f.data(), length).payload_offset, expected)
        << "frame of " << length << " bytes";
  }
}

}  // namespace
}  // namespace daqiri::config
