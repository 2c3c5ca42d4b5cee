// The config parser on valid files and on each class of invalid file, with exact messages.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "config/config_loader.hpp"

namespace daqiri::config {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

SystemFacts test_host() {
  SystemFacts f;
  f.usable_cpus = {0, 1, 2, 3};
  f.hugepage_size = 2u << 20;
  f.hugepages_free = 16;
  f.hugepages_total = 16;
  f.have_dpdk = true;
  f.have_rdma = true;
  f.have_cuda = true;
  f.have_xdp = true;
  return f;
}

struct Parsed {
  std::optional<Config> config;
  Diagnostics diags;
};

Parsed parse(const std::string& text, const SystemFacts& f = test_host()) {
  Parsed p;
  p.config = parse_config(text, "t.yaml", f, p.diags);
  return p;
}

// The one error a file produces, rendered.
std::string only_error(const std::string& text, const SystemFacts& f = test_host()) {
  auto p = parse(text, f);
  EXPECT_FALSE(p.config.has_value());
  std::vector<std::string> errors;
  for (const auto& d : p.diags.items()) {
    if (d.severity == Diagnostic::Severity::kError) errors.push_back(d.render());
  }
  EXPECT_EQ(errors.size(), 1u) << p.diags.render();
  return errors.empty() ? "" : errors.front();
}

const char* kRegion =
    "memory_regions:\n  - {name: r, kind: host, buf_size: 2048, num_bufs: 4096}\n";

std::string with_interface(const std::string& queue_extra = "", const std::string& tail = "") {
  return std::string(kRegion) +
         "interfaces:\n"
         "  - name: lo\n"
         "    backend: socket\n"
         "    address: 127.0.0.1\n"
         "    rx:\n"
         "      queues:\n"
         "        - name: q0\n"
         "          regions: [r]\n" +
         queue_extra + tail;
}

TEST(Config, EmbeddedDefaultIsValid) {
  Diagnostics diags;
  auto c = parse_config(embedded_default_config(), "<embedded default>", test_host(), diags);
  ASSERT_TRUE(c) << diags.render();
  EXPECT_TRUE(diags.items().empty()) << diags.render();
  EXPECT_EQ(c->daemon.socket_path, "/run/daqiri/daqiri.sock");
  ASSERT_EQ(c->interfaces.size(), 1u);
  EXPECT_EQ(c->interfaces[0].backend, Backend::kSocket);
  EXPECT_EQ(c->interfaces[0].address, "127.0.0.1");
  ASSERT_EQ(c->flows.size(), 2u);
  EXPECT_EQ(c->flows[0].name, "stream0");
  EXPECT_EQ(c->flows[0].match.udp_dst, (core::PortRange{4096, 4096}));
  EXPECT_EQ(c->flows[1].name, "stream1");
  EXPECT_EQ(c->flows[1].match.udp_dst, (core::PortRange{4097, 4097}));
  EXPECT_EQ(c->memory_regions[0].kind, RegionKind::kHost);
}

TEST(Config, ReadsEveryKeyOfOurSchema) {
  auto p = parse(
      "daemon:\n"
      "  socket: /tmp/x.sock\n"
      "  socket_group: '0'\n"
      "  metrics: 'off'\n"
      "  log_level: debug\n"
      "  control_cores: [0, 1]\n"
      "  access:\n"
      "    admins: {users: [root], groups: ['0']}\n"
      "    clients: {users: ['1000']}\n"
      "  limits: {sessions_per_user: 4, attachments_per_user: 9, control_connections_per_user: "
      "5, memory_mb_per_user: 64, memory_mb_total: 256, gpu_memory_mb_per_user: 512, "
      "gpu_memory_mb_total: 2048, tcp_connections_per_peer: 3, tcp_connections_total: 7}\n"
      "memory_regions:\n"
      "  - {name: hdr, kind: huge, buf_size: 256, num_bufs: 8192}\n"
      "  - {name: pay, kind: device, buf_size: 8192, num_bufs: 8192, gpu: 0}\n"
      "interfaces:\n"
      "  - name: p0\n"
      "    backend: dpdk\n"
      "    address: 0000:3b:00.0\n"
      "    mtu: 9000\n"
      "    promiscuous: true\n"
      "    flow_isolation: true\n"
      "    rx:\n"
      "      queues:\n"
      "        - {name: q0, id: 0, core: 2, batch_size: 128, ring_size: 2048, regions: [hdr, "
      "pay]}\n"
      "flows:\n"
      "  - name: f\n"
      "    interface: p0\n"
      "    queue: q0\n"
      "    id: 7\n"
      "    match: {udp_src: 1000-2000, udp_dst: 4096, ipv4_src: 10.0.0.0/8, ipv4_dst: 10.1.2.3}\n"
      "dpdk:\n"
      "  main_core: 1\n"
      "  hugepages: true\n"
      "  memory_mb: 16\n"
      "  eal_args: [--log-level=pmd:debug]\n");
  ASSERT_TRUE(p.config) << p.diags.render();
  const Config& c = *p.config;
  EXPECT_EQ(c.daemon.socket_path, "/tmp/x.sock");
  EXPECT_EQ(c.daemon.socket_group, "0");
  EXPECT_EQ(c.daemon.metrics_address, "");
  EXPECT_EQ(c.daemon.log_level, LogLevel::kDebug);
  EXPECT_EQ(c.daemon.control_cores, (std::vector<int>{0, 1}));
  EXPECT_EQ(c.daemon.access.admins.uids, (std::vector<uid_t>{0}));
  EXPECT_EQ(c.daemon.access.clients.uids, (std::vector<uid_t>{1000}));
  EXPECT_FALSE(c.daemon.access.default_clients);
  EXPECT_EQ(c.daemon.limits.sessions_per_user, 4u);
  EXPECT_EQ(c.daemon.limits.attachments_per_user, 9u);
  EXPECT_EQ(c.daemon.limits.control_connections_per_user, 5u);
  EXPECT_EQ(c.daemon.limits.memory_mb_per_user, 64u);
  EXPECT_EQ(c.daemon.limits.memory_mb_total, 256u);
  EXPECT_EQ(c.daemon.limits.gpu_memory_mb_per_user, 512u);
  EXPECT_EQ(c.daemon.limits.gpu_memory_mb_total, 2048u);
  EXPECT_EQ(c.daemon.limits.tcp_connections_per_peer, 3u);
  EXPECT_EQ(c.daemon.limits.tcp_connections_total, 7u);
  EXPECT_EQ(c.memory_regions[1].gpu, 0);
  const auto& q = c.interfaces[0].rx_queues[0];
  EXPECT_EQ(q.id, 0u);
  EXPECT_EQ(q.core, 2);
  EXPECT_EQ(q.batch_size, 128u);
  EXPECT_EQ(q.ring_size, 2048u);
  EXPECT_EQ(q.regions, (std::vector<std::string>{"hdr", "pay"}));
  EXPECT_EQ(c.interfaces[0].mtu, 9000u);
  EXPECT_TRUE(c.interfaces[0].flow_isolation);
  EXPECT_EQ(c.dpdk.main_core, 1);
  EXPECT_TRUE(c.dpdk.hugepages);
  EXPECT_EQ(c.dpdk.memory_mb, 16u);
  EXPECT_EQ(c.dpdk.eal_args, (std::vector<std::string>{"--log-level=pmd:debug"}));
  const auto& f = c.flows[0];
  EXPECT_EQ(f.id, 7u);
  EXPECT_EQ(f.match.to_string(),
            "udp_src=1000-2000 udp_dst=4096 ipv4_src=10.0.0.0/8 ipv4_dst=10.1.2.3");
}

TEST(Config, YamlSyntaxError) {
  EXPECT_EQ(only_error("daemon:\n  socket: [unclosed\n"),
            "t.yaml:3:1: error: invalid YAML: end of sequence flow not found");
}

TEST(Config, UnknownKeySuggestsTheNearest) {
  EXPECT_EQ(only_error(with_interface("          bach_size: 32\n")),
            "t.yaml:11:11: error: interfaces[0].rx.queues[0].bach_size: unknown key; did you mean "
            "\"batch_size\"?");
}

TEST(Config, UnknownKeyFarFromAnyListsTheValidOnes) {
  EXPECT_EQ(
      only_error("zebra: 1\n"),
      "t.yaml:1:1: error: zebra: unknown key; valid keys here: daemon, dpdk, flows, interfaces, "
      "memory_regions, reorders");
}

TEST(Config, WrongTypeSaysWhatWasExpected) {
  EXPECT_EQ(only_error(with_interface("          batch_size: many\n")),
            "t.yaml:11:23: error: interfaces[0].rx.queues[0].batch_size: expected an integer from "
            "1 to 65536, got \"many\"");
  EXPECT_EQ(only_error("memory_regions:\n  - {name: r, kind: gpu, buf_size: 64, num_bufs: 1}\n"),
            "t.yaml:2:21: error: memory_regions[0].kind: expected one of host, huge, pinned, "
            "device, got \"gpu\"");
  EXPECT_EQ(only_error("interfaces: {lo: 1}\n"),
            "t.yaml:1:13: error: interfaces: expected a list, got a map");
}

TEST(Config, MissingRequiredKey) {
  EXPECT_EQ(only_error("memory_regions:\n  - {name: r, kind: host, buf_size: 2048}\n"),
            "t.yaml:2:5: error: memory_regions[0].num_bufs: missing required key");
}

TEST(Config, DuplicateKey) {
  EXPECT_EQ(only_error("daemon:\n  log_level: info\n  log_level: debug\n"),
            "t.yaml:3:3: error: daemon.log_level: duplicate key");
}

TEST(Config, DuplicateNames) {
  EXPECT_EQ(only_error("memory_regions:\n  - {name: r, kind: host, buf_size: 2048, num_bufs: 10}\n"
                       "  - {name: r, kind: host, buf_size: 2048, num_bufs: 10}\n"),
            "t.yaml:3:12: error: memory_regions[1].name: a memory region named \"r\" is already "
            "defined");
}

TEST(Config, ReferenceThatDoesNotResolve) {
  auto text = with_interface();
  text.replace(text.find("regions: [r]"), 12, "regions: [x]");
  EXPECT_EQ(
      only_error(text),
      "t.yaml:10:20: error: interfaces[0].rx.queues[0].regions: no memory region named \"x\"");
}

TEST(Config, FlowOnAMissingInterface) {
  EXPECT_EQ(
      only_error(
          with_interface("", "flows:\n  - {name: f, interface: eth0, match: {udp_dst: 1}}\n")),
      "t.yaml:12:26: error: flows[0].interface: no interface named \"eth0\" (interfaces: lo)");
}

TEST(Config, OverlappingFlows) {
  EXPECT_EQ(only_error(with_interface("",
                                      "flows:\n"
                                      "  - {name: a, interface: lo, match: {udp_dst: 100-200}}\n"
                                      "  - {name: b, interface: lo, match: {udp_dst: 150}}\n")),
            "t.yaml:13:37: error: flows[1].match: match udp_dst=150 overlaps flow \"a\" "
            "(udp_dst=100-200) on interface \"lo\": a packet could belong to both");
}

TEST(Config, EmptyMatch) {
  EXPECT_EQ(only_error(with_interface("", "flows:\n  - {name: a, interface: lo, match: {}}\n")),
            "t.yaml:12:37: error: flows[0].match: a match needs at least one of udp_src, udp_dst, "
            "ipv4_src, ipv4_dst, tcp_dst, or any: true");
}

TEST(Config, BadPortRange) {
  EXPECT_EQ(
      only_error(
          with_interface("", "flows:\n  - {name: a, interface: lo, match: {udp_dst: 9-3}}\n")),
      "t.yaml:12:47: error: flows[0].match.udp_dst: a port range runs from low to high (9 > 3)");
}

TEST(Config, CoreThatDoesNotExist) {
  EXPECT_EQ(only_error(with_interface("          core: 9\n")),
            "t.yaml:11:17: error: interfaces[0].rx.queues[0].core: core 9 is not available to "
            "daqirid (usable cores: 0-3)");
}

// The engine's copy method was a choice once; files that still make it start, told why it no
// longer matters.
TEST(Config, GpuCopyIsIgnoredWithAWarning) {
  auto p = parse(
      "memory_regions:\n"
      "  - {name: r, kind: device, buf_size: 2048, num_bufs: 4096, gpu: 0, gpu_copy: gather}\n");
  ASSERT_TRUE(p.config) << p.diags.render();
  EXPECT_THAT(p.diags.render(),
              HasSubstr("t.yaml:2:79: warning: memory_regions[0].gpu_copy: ignored: the GPU "
                        "engine has one copy method now (copy engines only, docs/gpu.md)"));
}

TEST(Config, PoolTooSmallForItsRing) {
  auto text = with_interface("          ring_size: 4096\n          batch_size: 256\n");
  EXPECT_EQ(only_error(text),
            "t.yaml:2:53: error: memory_regions[0].num_bufs: num_bufs 4096 is too small for queue "
            "lo/q0 (1.5 x ring_size 4096 + batch_size 256): each pool cut from region \"r\" "
            "needs at least 6400");
}

TEST(Config, PoolsAreSizedPerQueueNotSummed) {
  // Two queues on one region: each pool covers its own queue, so 1600 buffers suffice.
  auto text = with_interface("        - name: q1\n          regions: [r]\n");
  text.replace(text.find("num_bufs: 4096"), 14, "num_bufs: 1600");
  auto p = parse(text);
  EXPECT_TRUE(p.config) << p.diags.render();
}

TEST(Config, RingSizeMustBeAPowerOfTwo) {
  EXPECT_EQ(only_error(with_interface("          ring_size: 1000\n")),
            "t.yaml:11:22: error: interfaces[0].rx.queues[0].ring_size: ring_size must be a power "
            "of two, got 1000");
}

TEST(Config, HugepageShortfall) {
  // Two flows on a huge region: a pool each, 8 MiB = 4 pages each.
  auto text = with_interface("",
                             "flows:\n"
                             "  - {name: a, interface: lo, match: {udp_dst: 1}}\n"
                             "  - {name: b, interface: lo, match: {udp_dst: 2}}\n");
  text.replace(text.find("kind: host"), 10, "kind: huge");
  auto f = test_host();
  f.hugepages_free = 6;
  EXPECT_EQ(only_error(text, f),
            "t.yaml:2:21: error: memory_regions[0].kind: huge regions need 8 hugepages of 2 MiB (a "
            "pool per flow and per TX queue's first client, each rounded up to whole pages) but "
            "the machine has 6 free (of 16); reserve more with `echo 18 > "
            "/proc/sys/vm/nr_hugepages` or use kind host");
  f.hugepages_free = 8;
  EXPECT_TRUE(parse(text, f).config);
}

TEST(Config, SharedPagesAreCountedPacked) {
  // Five flows with 400 KiB pools: five pages of their own, or five to one shared page.
  std::string flows = "flows:\n";
  for (int i = 1; i <= 5; ++i) {
    flows += "  - {name: f" + std::to_string(i) +
             ", interface: lo, match: {udp_dst: " + std::to_string(i) + "}}\n";
  }
  auto text = with_interface("", flows);
  text.replace(text.find("kind: host, buf_size: 2048, num_bufs: 4096"), 42,
               "kind: huge, buf_size: 256, num_bufs: 1600");
  auto f = test_host();
  f.hugepages_free = 2;
  EXPECT_THAT(only_error(text, f), HasSubstr("huge regions need 5 hugepages"));
  text.replace(text.find("num_bufs: 1600"), 14, "num_bufs: 1600, share_pages: true");
  f.hugepages_free = 1;
  auto p = parse(text, f);
  EXPECT_TRUE(p.config) << p.diags.render();
  EXPECT_TRUE(p.config->memory_regions.front().share_pages);
}

TEST(Config, TwoRegionsMeanHeaderDataSplitIntoHostHeadersAndDevicePayloads) {
  std::string regions =
      "memory_regions:\n"
      "  - {name: h, kind: host, buf_size: 64, num_bufs: 16}\n"
      "  - {name: r, kind: device, buf_size: 2048, num_bufs: 4096}\n";
  auto text = with_interface();
  text.replace(0, std::string(kRegion).size(), regions);
  text.replace(text.find("regions: [r]"), 12, "regions: [h, r]");
  auto p = parse(text);
  ASSERT_TRUE(p.config) << p.diags.render();  // header slots are not pools: 16 is fine
  EXPECT_EQ(p.config->interfaces[0].rx_queues[0].regions, (std::vector<std::string>{"h", "r"}));

  auto swapped = text;
  swapped.replace(swapped.find("regions: [h, r]"), 15, "regions: [r, h]");
  swapped.replace(swapped.find("num_bufs: 16"), 12, "num_bufs: 4096");
  EXPECT_THAT(only_error(swapped),
              HasSubstr("interfaces[0].rx.queues[0].regions: two regions (\"r\", \"h\") mean "
                        "header-data split: the first region takes the headers"));
}

TEST(Config, SharePagesIsForHugeRegionsOnly) {
  EXPECT_EQ(
      only_error("memory_regions:\n"
                 "  - {name: r, kind: host, buf_size: 2048, num_bufs: 4096, share_pages: true}\n"),
      "t.yaml:2:72: error: memory_regions[0].share_pages: share_pages packs pools into shared "
      "2 MB hugepages: it applies to huge regions, not host");
}

TEST(Config, BusyPollIsAQueueSetting) {
  auto p = parse(with_interface("          busy_poll: true\n"));
  ASSERT_TRUE(p.config) << p.diags.render();
  EXPECT_TRUE(p.config->interfaces[0].rx_queues[0].busy_poll);
  auto q = parse(with_interface());
  ASSERT_TRUE(q.config) << q.diags.render();
  EXPECT_FALSE(q.config->interfaces[0].rx_queues[0].busy_poll);
  EXPECT_THAT(only_error(with_interface("          busy_poll: often\n")), HasSubstr("busy_poll"));
}

// `queues` spreads a flow over several RX queues (RSS): a DPDK port's, whose poller sees the
// frames; a socket interface's queue is the one its socket feeds.
TEST(Config, AFlowSpreadsOverQueuesOfADpdkInterfaceOnly) {
  auto text = with_interface("        - {name: q1, regions: [r]}\n",
                             "flows:\n  - {name: f, interface: lo, queues: [q0, q1], match: "
                             "{udp_dst: 5000}}\ndpdk: {hugepages: false}\n");
  EXPECT_THAT(only_error(text), HasSubstr("RSS across queues needs a dpdk interface; \"lo\" is "
                                          "socket"));
  text.replace(text.find("backend: socket"), 15, "backend: dpdk");
  text.replace(text.find("address: 127.0.0.1"), 18, "address: net_null0");
  auto p = parse(text);
  ASSERT_TRUE(p.config) << p.diags.render();
  EXPECT_EQ(p.config->flows[0].queue, "");  // the flow table takes the first
  EXPECT_EQ(p.config->flows[0].rss_queues, (std::vector<std::string>{"q0", "q1"}));
  text.replace(text.find("queues: [q0, q1]"), 16, "queues: [q1, q1]");
  EXPECT_THAT(only_error(text), HasSubstr("RSS queue \"q1\" is listed twice"));
}

// An xdp interface: a Linux interface by name, RX queues over UMEM chunks of 2048 bytes to a
// page, UDP flows only (what no flow takes is the kernel's), no TX.
TEST(Config, XdpInterfacesTakeUdpFlowsIntoChunksOfAPageAtMost) {
  auto file = [](const std::string& itf_extra, const std::string& flow) {
    return std::string(kRegion) +
           "  - {name: big, kind: host, buf_size: 8192, num_bufs: 2048}\n"
           "interfaces:\n"
           "  - name: nic\n"
           "    backend: xdp\n"
           "    address: eth0\n" +
           itf_extra +
           "    rx:\n"
           "      queues:\n"
           "        - {name: q0, regions: [r]}\n"
           "flows:\n  - {name: f, interface: nic, match: " +
           flow + "}\n";
  };
  auto p = parse(file("", "{udp_dst: 5000, ipv4_src: 10.0.0.0/8}"));
  ASSERT_TRUE(p.config) << p.diags.render();
  EXPECT_EQ(p.config->interfaces[0].backend, Backend::kXdp);
  EXPECT_THAT(only_error(file("", "{tcp_dst: 5000}")),
              HasSubstr("an xdp interface takes UDP flows"));
  EXPECT_THAT(only_error(file("", "{ipv4_src: 10.0.0.1}")),
              HasSubstr("an xdp interface takes UDP flows"));
  auto big = file("", "{udp_dst: 5000}");
  big.replace(big.find("regions: [r]"), 12, "regions: [big]");
  EXPECT_THAT(only_error(big), HasSubstr("AF_XDP chunks are 2048 to 4096 bytes"));
  // TX: checked queues hold frames to source_ipv4; a queue id's TX frames fit its RX chunks.
  const std::string tx = "    tx:\n      queues:\n        - {name: t0, regions: [r]}\n";
  EXPECT_THAT(only_error(file(tx, "{udp_dst: 5000}")),
              HasSubstr("its interface needs source_ipv4"));
  auto sends = parse(file("    source_ipv4: 10.0.0.1\n" + tx, "{udp_dst: 5000}"));
  ASSERT_TRUE(sends.config) << sends.diags.render();
  EXPECT_EQ(sending_ipv4(sends.config->interfaces[0]), 0x0a000001u);
  auto bigger = file("    source_ipv4: 10.0.0.1\n" + tx, "{udp_dst: 5000}");
  bigger.replace(bigger.find("{name: t0, regions: [r]}"), 24, "{name: t0, regions: [big]}");
  EXPECT_THAT(only_error(bigger), HasSubstr("are sent from chunks of the socket of queue id 0, "
                                            "2048 bytes"));
  auto bad_name = file("", "{udp_dst: 5000}");
  bad_name.replace(bad_name.find("address: eth0"), 13, "address: 10.0.0.1/8");
  EXPECT_THAT(only_error(bad_name), HasSubstr("an xdp interface names a Linux network interface"));
  SystemFacts without = test_host();
  without.have_xdp = false;
  EXPECT_THAT(only_error(file("", "{udp_dst: 5000}"), without),
              HasSubstr("backend xdp needs a daqirid built with libxdp and libbpf"));
}

// tx_policy tcp: messages on the connections of a socket interface's TCP flows, whose byte
// stream has no send times; its region holds messages, so may be larger than a frame's.
TEST(Config, TcpTxQueuesWriteToASocketInterfacesConnections) {
  auto file = [](const std::string& backend, const std::string& queue_extra) {
    return std::string(kRegion) +
           "  - {name: big, kind: host, buf_size: 4194304, num_bufs: 2048}\n"
           "interfaces:\n"
           "  - name: lo\n"
           "    backend: " +
           backend +
           "\n"
           "    address: " +
           (backend == "dpdk" ? "net_null0" : "127.0.0.1") +
           "\n"
           "    tx:\n"
           "      queues:\n"
           "        - {name: t0, regions: [" +
           (backend == "dpdk" ? "r" : "big") + "], tx_policy: tcp" + queue_extra + "}\n" +
           (backend == "dpdk" ? "dpdk: {hugepages: false}\n" : "");
  };
  auto p = parse(file("socket", ""));
  ASSERT_TRUE(p.config) << p.diags.render();
  EXPECT_EQ(p.config->interfaces[0].tx_queues[0].tx_policy, TxPolicy::kTcp);
  EXPECT_THAT(only_error(file("socket", ", accurate_send: true")),
              HasSubstr("a tcp TX queue writes into a byte stream"));
  EXPECT_THAT(only_error(file("dpdk", "")),
              HasSubstr("tx_policy tcp writes to the TCP connections of a socket interface's "
                        "flows: this interface is dpdk"));
}

TEST(Config, BackendNotBuiltIn) {
  auto text = with_interface();
  text.replace(text.find("backend: socket"), 15, "backend: dpdk");
  auto f = test_host();
  f.have_dpdk = false;
  EXPECT_EQ(
      only_error(text, f),
      "t.yaml:5:14: error: interfaces[0].backend: backend dpdk needs a daqirid built with DPDK "
      "(DAQIRI_WITH_DPDK)");
}

TEST(Config, ReportsEveryErrorInOneRun) {
  auto p = parse("daemon:\n  socket: relative.sock\n  log_level: loud\nmemory_regions: 3\n");
  EXPECT_FALSE(p.config);
  EXPECT_EQ(p.diags.error_count(), 2u) << p.diags.render();  // type errors stop before cross-checks
  EXPECT_THAT(p.diags.render(), HasSubstr("daemon.log_level: expected one of trace"));
  EXPECT_THAT(p.diags.render(), HasSubstr("memory_regions: expected a list, got \"3\""));
}

TEST(Config, TcpAdminRoleNeedsClientCertificates) {
  EXPECT_EQ(
      only_error(
          "daemon:\n  tcp: {address: '0.0.0.0:7000', cert: c.pem, key: k.pem, role: admin}\n"),
      "t.yaml:2:65: error: daemon.tcp.role: role admin over TCP needs client_ca: callers must "
      "prove who they are");
}

TEST(Config, TcpCallersNeedCertificatesUnlessTheRoleIsAnonymous) {
  EXPECT_EQ(only_error("daemon:\n  tcp: {address: '0.0.0.0:7000', cert: c.pem, key: k.pem}\n"),
            "t.yaml:2:8: error: daemon.tcp: TCP callers must prove who they are: set "
            "client_ca (the CA that signs their certificates), or role: anonymous to let anyone "
            "who reaches the port read as a client");
  EXPECT_EQ(only_error("daemon:\n  tcp: {address: '0.0.0.0:7000', cert: c.pem, key: k.pem, "
                       "client_ca: ca.pem, role: anonymous}\n"),
            "t.yaml:2:84: error: daemon.tcp.role: role anonymous lets callers in without a "
            "certificate; with client_ca they present one: use role client");
}

TEST(Config, LimitsAreCountsOfAtLeastOne) {
  EXPECT_EQ(only_error("daemon:\n  limits:\n    sessions_per_user: 0\n"),
            "t.yaml:3:24: error: daemon.limits.sessions_per_user: expected an integer from 1 to "
            "1048576, got \"0\"");
  EXPECT_EQ(only_error("daemon:\n  limits: {attachments: 3}\n"),
            "t.yaml:2:12: error: daemon.limits.attachments: unknown key; valid keys here: "
            "attachments_per_user, control_connections_per_user, gpu_memory_mb_per_user, "
            "gpu_memory_mb_total, memory_mb_per_user, memory_mb_total, sessions_per_user, "
            "tcp_connections_per_peer, tcp_connections_total");
}

TEST(Config, RelativeSocketPath) {
  EXPECT_EQ(only_error("daemon:\n  socket: relative.sock\n"),
            "t.yaml:2:11: error: daemon.socket: the socket path must be absolute, got "
            "\"relative.sock\"");
}

// A DAQIRI file as DAQIRI's own applications ship them, application keys and all.
const char* kDaqiriFile = R"(%YAML 1.2
---
scheduler:
  worker_thread_number: 5
daqiri:
  cfg:
    version: 1
    manager: "dpdk"
    master_core: 3
    debug: false
    log_level: "info"
    memory_regions:
    - name: "Data_RX_CPU"
      kind: "huge"
      affinity: 0
      num_bufs: 51200
      buf_size: 64
    - name: "Data_RX_GPU"
      kind: "device"
      affinity: 0
      num_bufs: 51200
      buf_size: 1000
    interfaces:
    - name: "rx_port"
      address: 0000:03:00.0
      rx:
        flow_isolation: true
        queues:
        - name: "rx_q_0"
          id: 0
          cpu_core: 2
          batch_size: 10240
          output_port: "bench_rx_out"
          memory_regions:
            - "Data_RX_CPU"
            - "Data_RX_GPU"
        flows:
        - name: "ADC Samples"
          id: 0
          action:
            type: queue
            id: 0
          match:
            udp_src: 4096
            udp_dst: 4096
            ipv4_len: 1050
bench_rx:
  interface_name: "rx_port"
)";

// Enough hugepages for kDaqiriFile: its huge region and the EAL's default dpdk.memory_mb.
SystemFacts daqiri_file_facts() {
  auto f = test_host();
  f.hugepages_free = 4 + 128;
  return f;
}

TEST(DaqiriConfig, MapsOntoOurModel) {
  auto f = daqiri_file_facts();
  auto p = parse(kDaqiriFile, f);
  ASSERT_TRUE(p.config) << p.diags.render();
  const Config& c = *p.config;
  EXPECT_EQ(c.schema, Schema::kDaqiri);
  EXPECT_EQ(c.daemon.control_cores, (std::vector<int>{3}));
  ASSERT_EQ(c.memory_regions.size(), 2u);
  EXPECT_EQ(c.memory_regions[0].kind, RegionKind::kHuge);
  EXPECT_EQ(c.memory_regions[1].kind, RegionKind::kDevice);
  EXPECT_EQ(c.memory_regions[1].gpu, 0);
  ASSERT_EQ(c.interfaces.size(), 1u);
  const auto& itf = c.interfaces[0];
  EXPECT_EQ(itf.backend, Backend::kDpdk);
  EXPECT_EQ(itf.address, "0000:03:00.0");
  EXPECT_TRUE(itf.flow_isolation);
  ASSERT_EQ(itf.rx_queues.size(), 1u);
  EXPECT_EQ(itf.rx_queues[0].core, 2);
  EXPECT_EQ(itf.rx_queues[0].batch_size, 10240u);
  EXPECT_EQ(itf.rx_queues[0].ring_size, 16384u);  // grown to hold a batch
  EXPECT_EQ(itf.rx_queues[0].regions, (std::vector<std::string>{"Data_RX_CPU", "Data_RX_GPU"}));
  ASSERT_EQ(c.flows.size(), 1u);
  EXPECT_EQ(c.flows[0].name, "ADC Samples");
  EXPECT_EQ(c.flows[0].interface, "rx_port");
  EXPECT_EQ(c.flows[0].queue, "rx_q_0");
  EXPECT_EQ(c.flows[0].match.to_string(), "udp_src=4096 udp_dst=4096 ipv4_len=1050");

  // What maps loosely is said, with its place in the file.
  std::string warnings = p.diags.render();
  EXPECT_THAT(warnings, HasSubstr("t.yaml:9:18: warning: daqiri.cfg.master_core: mapped to "
                                  "daemon.control_cores"));
  EXPECT_THAT(warnings, HasSubstr("t.yaml:15:17: warning: daqiri.cfg.memory_regions[0].affinity: "
                                  "NUMA affinity of host regions is not applied"));
  EXPECT_THAT(warnings, HasSubstr("daqiri.cfg.interfaces[0].rx.queues[0].output_port: ignored: "
                                  "Holoscan operator wiring belongs to the application"));
}

TEST(DaqiriConfig, UnknownKeysInsideCfgAreErrors) {
  std::string text = kDaqiriFile;
  text.replace(text.find("batch_size: 10240"), 17, "batchsize: 10240");
  auto f = daqiri_file_facts();
  EXPECT_EQ(only_error(text, f),
            "t.yaml:32:11: error: daqiri.cfg.interfaces[0].rx.queues[0].batchsize: unknown key; "
            "did you mean \"batch_size\"?");
}

TEST(DaqiriConfig, FlowActionMustNameAnRxQueue) {
  std::string text = kDaqiriFile;
  const std::string action_id = "type: queue\n            id: 0";
  text.replace(text.find(action_id), action_id.size(), "type: queue\n            id: 5");
  auto f = daqiri_file_facts();
  EXPECT_EQ(only_error(text, f),
            "t.yaml:41:13: error: daqiri.cfg.interfaces[0].rx.flows[0].action: no RX queue with id "
            "5 on interface rx_port");
}

// DAQIRI trusts its in-process application with the port; a daemon's clients are not, and a
// DAQIRI file names no address to hold them to: its DPDK TX queues are raw, and it says so.
TEST(DaqiriConfig, DpdkTxQueuesAreRawAndSaySo) {
  std::string text = kDaqiriFile;
  text.replace(text.find("bench_rx:"), 9,
               "    - name: \"tx_port\"\n"
               "      address: 0000:03:00.1\n"
               "      tx:\n"
               "        queues:\n"
               "        - name: \"tx_q_0\"\n"
               "          id: 0\n"
               "          memory_regions:\n"
               "            - \"Data_RX_CPU\"\n"
               "bench_rx:");
  auto p = parse(text, daqiri_file_facts());
  ASSERT_TRUE(p.config) << p.diags.render();
  ASSERT_EQ(p.config->interfaces.size(), 2u);
  EXPECT_EQ(p.config->interfaces[1].tx_queues.at(0).tx_policy, TxPolicy::kRaw);
  EXPECT_THAT(p.diags.render(),
              HasSubstr("daqiri.cfg.interfaces[1].tx: DPDK TX queues of a DAQIRI file send frames "
                        "as clients write them (tx_policy: raw)"));
}

TEST(DaqiriConfig, TheOlderAdvancedNetworkNameIsAccepted) {
  std::string text = kDaqiriFile;
  text.replace(text.find("daqiri:"), 7, "advanced_network:");
  auto f = daqiri_file_facts();
  auto p = parse(text, f);
  EXPECT_TRUE(p.config) << p.diags.render();
}

}  // namespace
}  // namespace daqiri::config

namespace daqiri::config {
namespace {

const char* kRdmaInterfaces = R"(memory_regions:
  - {name: r, kind: host, buf_size: 2048, num_bufs: 4096, access: [local, rdma_write]}
interfaces:
  - name: srv
    backend: rdma
    address: 10.0.0.1
    rdma: {mode: server, port: 7471}
    rx: {queues: [{name: q, regions: [r]}]}
  - name: cli
    backend: rdma
    address: 10.0.0.2
    rdma: {mode: client}
    rx: {queues: [{name: q, regions: [r]}]}
flows:
)";

TEST(Config, RdmaServerFlowsMatchPeersAndClientFlowsConnect) {
  std::string good = std::string(kRdmaInterfaces) +
                     "  - {name: any, interface: srv, match: {any: true}}\n"
                     "  - {name: lab, interface: srv, match: {ipv4_src: 10.1.0.0/16}}\n"
                     "  - {name: out, interface: cli, connect: \"10.0.0.1:7471\"}\n";
  auto p = parse(good);
  ASSERT_TRUE(p.config) << p.diags.render();
  EXPECT_EQ(p.config->interfaces[0].rdma->mode, RdmaConfig::Mode::kServer);
  EXPECT_EQ(p.config->interfaces[0].rdma->port, 7471);
  EXPECT_EQ(p.config->memory_regions[0].access, (std::vector<std::string>{"local", "rdma_write"}));

  EXPECT_THAT(only_error(std::string(kRdmaInterfaces) +
                         "  - {name: a, interface: srv, match: {udp_dst: 5000}}\n"),
              HasSubstr("t.yaml:15:38: error: flows[0].match: a flow on an RDMA server "
                        "interface matches its peers: any: true, or ipv4_src"));
  EXPECT_THAT(only_error(std::string(kRdmaInterfaces) +
                         "  - {name: a, interface: cli, match: {any: true}}\n"),
              HasSubstr("connects to an endpoint: connect: HOST:PORT"));
  EXPECT_THAT(only_error(std::string(kRdmaInterfaces) +
                         "  - {name: a, interface: srv, connect: \"10.0.0.9:1\"}\n"),
              HasSubstr("connect is for client interfaces"));
}

TEST(Config, RegionAccessFlagsAreChecked) {
  std::string text = kRdmaInterfaces;
  text.replace(text.find("rdma_write"), 10, "remote_all");
  EXPECT_THAT(only_error(text + "  - {name: any, interface: srv, match: {any: true}}\n"),
              HasSubstr("memory_regions[0].access: unknown access \"remote_all\": expected "
                        "local, rdma_read or rdma_write"));
}

// with_interface()'s socket interface as a dpdk one (net_null, no hugepages).
std::string on_dpdk(std::string text) {
  text.replace(text.find("backend: socket"), 15, "backend: dpdk");
  text.replace(text.find("address: 127.0.0.1"), 18, "address: net_null0");
  return "dpdk: {hugepages: false}\n" + text;
}

TEST(Config, GpudirectRegionsAreDeviceRegionsOnRdmaAndDpdkReceiveQueues) {
  std::string text = kRdmaInterfaces;
  text.replace(text.find("kind: host"), 10, "kind: device, gpudirect: true");
  auto p = parse(text + "  - {name: any, interface: srv, match: {any: true}}\n");
  ASSERT_TRUE(p.config) << p.diags.render();
  EXPECT_TRUE(p.config->memory_regions[0].gpudirect);

  std::string host = kRdmaInterfaces;
  host.replace(host.find("access:"), 7, "gpudirect: true, access:");
  EXPECT_THAT(only_error(host + "  - {name: any, interface: srv, match: {any: true}}\n"),
              HasSubstr("memory_regions[0].gpudirect: gpudirect puts a queue's pool in GPU "
                        "memory: it applies to device regions, not host"));

  std::string socket = with_interface();
  socket.replace(socket.find("kind: host"), 10, "kind: device, gpudirect: true");
  EXPECT_THAT(only_error(socket),
              HasSubstr("interfaces[0].rx.queues[0].regions: region \"r\" is gpudirect, which "
                        "this daqirid drives on RX queues of rdma and dpdk interfaces (the NIC "
                        "writes into GPU memory) and on dpdk TX queues with header-data split"));

  auto d = parse(on_dpdk(socket));
  ASSERT_TRUE(d.config) << d.diags.render();
  EXPECT_TRUE(d.config->memory_regions[0].gpudirect);
}

// Two regions on a queue: headers (not device memory), then payloads in a device region;
// payloads into a gpudirect region only where the NIC can split (dpdk).
TEST(Config, HeaderDataSplitRegionsAreHeadersThenDevicePayloads) {
  std::string text = with_interface();
  text.replace(text.find("regions: [r]"), 12, "regions: [h, p]");
  std::string gpudirect = text;
  gpudirect.replace(
      gpudirect.find("memory_regions:\n"), 16,
      "memory_regions:\n"
      "  - {name: h, kind: host, buf_size: 64, num_bufs: 64}\n"
      "  - {name: p, kind: device, gpudirect: true, buf_size: 2048, num_bufs: 4096}\n");
  // (The socket queue also may not take a gpudirect region at all: a second error.)
  EXPECT_THAT(parse(gpudirect).diags.render(),
              HasSubstr("interfaces[0].rx.queues[0].regions: two regions (\"h\", \"p\") mean "
                        "header-data split: payloads into a gpudirect region need the NIC's "
                        "buffer split (dpdk interfaces)"));
  std::string dpdk = on_dpdk(gpudirect);
  auto d = parse(dpdk);
  EXPECT_TRUE(d.config) << d.diags.render();
  std::string headers_on_gpu = dpdk;
  headers_on_gpu.replace(headers_on_gpu.find("name: h, kind: host"), 19, "name: h, kind: device");
  EXPECT_THAT(only_error(headers_on_gpu),
              HasSubstr("the first region takes the headers: host, huge or pinned, not device"));
}

// A TX queue sends from GPU memory when its region is a device region: whole frames there, or
// with a host header region first (header-data split) the payloads. A tcp queue's messages
// have no headers to split, and a frame must fit what the backend's buffers take.
// A flow's clients: users and groups by name or number, kept as given and as ids; an empty
// list (nobody but admins, by accident) and an unknown name are errors.
TEST(Config, AFlowsClientsAreUsersAndGroupsByNameOrId) {
  auto p = parse(with_interface(
      "",
      "flows:\n  - {name: a, interface: lo, match: {udp_dst: 9}, clients: {users: [root, "
      "4242], groups: [root]}}\n"));
  ASSERT_TRUE(p.config) << p.diags.render();
  const core::ClientList& c = p.config->flows[0].clients;
  EXPECT_EQ(c.users, (std::vector<std::string>{"root", "4242"}));
  EXPECT_EQ(c.uids, (std::vector<uint32_t>{0, 4242}));
  EXPECT_EQ(c.gids, (std::vector<uint32_t>{0}));
  EXPECT_TRUE(c.allows(4242, 100, {}));
  EXPECT_TRUE(c.allows(1000, 1000, {7, 0}));  // a member of group 0
  EXPECT_FALSE(c.allows(1000, 1000, {7}));
  EXPECT_TRUE(core::ClientList{}.allows(1000, 1000, {}));  // no list: every client

  EXPECT_THAT(only_error(with_interface(
                  "", "flows:\n  - {name: a, interface: lo, match: {udp_dst: 9}, clients: {}}\n")),
              HasSubstr("clients names who may attach: at least one of users and groups"));
  EXPECT_THAT(only_error(with_interface("",
                                        "flows:\n  - {name: a, interface: lo, match: "
                                        "{udp_dst: 9}, clients: {users: [no-such-user-x]}}\n")),
              HasSubstr("no user named \"no-such-user-x\" on this machine"));
}

TEST(Config, TxQueuesSendFromGpuMemoryWholeOrSplit) {
  std::string text = with_interface(
      "    tx:\n"
      "      queues:\n"
      "        - {name: split, regions: [h, p]}\n"
      "        - {name: whole, regions: [p]}\n");
  text.replace(text.find("memory_regions:\n"), 16,
               "memory_regions:\n"
               "  - {name: h, kind: host, buf_size: 64, num_bufs: 64}\n"
               "  - {name: p, kind: device, buf_size: 1064, num_bufs: 4096}\n");
  auto p = parse(text);
  ASSERT_TRUE(p.config) << p.diags.render();
  EXPECT_EQ(p.config->interfaces[0].tx_queues[0].regions, (std::vector<std::string>{"h", "p"}));

  std::string tcp = text;
  tcp.replace(tcp.find("{name: whole, regions: [p]}"), 27,
              "{name: whole, regions: [p], tx_policy: tcp}");
  EXPECT_THAT(only_error(tcp), HasSubstr("tx.queues[1].regions: a tcp TX queue sends from the host "
                                         "memory of its one region: region \"p\" is device "
                                         "memory"));
  std::string big = on_dpdk(text);
  big.replace(big.find("buf_size: 1064"), 14, "buf_size: 65500");
  EXPECT_THAT(parse(big).diags.render(),
              HasSubstr("tx.queues[0].regions: frames sent from GPU memory on TX queue \"split\" "
                        "are 65564 bytes (headers and payload buffers), more than its buffers "
                        "hold (65535)"));
}

// A gpudirect payload region on TX: the NIC reads the payloads in place, behind headers the
// daemon copies (a header buffer holds at least the 42 bytes a checked queue checks), so only
// a dpdk queue with header-data split takes one.
TEST(Config, GpudirectTxQueuesSplitHeadersOnDpdk) {
  std::string text = with_interface(
      "    tx:\n"
      "      queues:\n"
      "        - {name: split, regions: [h, p]}\n");
  text.replace(text.find("memory_regions:\n"), 16,
               "memory_regions:\n"
               "  - {name: h, kind: host, buf_size: 64, num_bufs: 64}\n"
               "  - {name: p, kind: device, gpudirect: true, buf_size: 1064, num_bufs: 4096}\n");
  text.replace(text.find("    rx:"), 0, "    source_ipv4: 10.0.0.1\n");
  auto d = parse(on_dpdk(text));
  ASSERT_TRUE(d.config) << d.diags.render();
  EXPECT_EQ(d.config->interfaces[0].tx_queues[0].regions, (std::vector<std::string>{"h", "p"}));

  EXPECT_THAT(parse(text).diags.render(),
              HasSubstr("tx.queues[0].regions: region \"p\" is gpudirect: on TX the NIC reads "
                        "payloads in GPU memory behind headers the daemon copies, which needs a "
                        "dpdk interface and header-data split"));
  std::string whole = on_dpdk(text);
  whole.replace(whole.find("regions: [h, p]"), 15, "regions: [p]");
  EXPECT_THAT(only_error(whole), HasSubstr("tx.queues[0].regions: region \"p\" is gpudirect"));
}

// A DAQIRI socket-stream file with one interface: `socket` is its socket_config body, `extra`
// more interface keys (roce_config), `tx` whether it has a TX queue.
std::string daqiri_socket_file(const std::string& socket, const std::string& extra = "",
                               bool tx = false, const std::string& top = "") {
  std::string text =
      "daqiri:\n  cfg:\n    version: 1\n    stream_type: socket\n" + top +
      "    memory_regions:\n"
      "    - {name: R, kind: host, num_bufs: 4096, buf_size: 2048}\n"
      "    interfaces:\n"
      "    - name: ep\n"
      "      address: 127.0.0.1\n"
      "      socket_config: {" +
      socket + "}\n" + extra +
      "      rx:\n        queues:\n        - {name: rxq, id: 0, cpu_core: 1, batch_size: 1, "
      "memory_regions: [R]}\n";
  if (tx) {
    text +=
        "      tx:\n        queues:\n        - {name: txq, id: 0, cpu_core: 1, batch_size: 1, "
        "memory_regions: [R]}\n";
  }
  return text;
}

TEST(DaqiriConfig, SocketEndpointsBecomeFlowsOnTheSocketBackend) {
  auto udp = parse(daqiri_socket_file(
      "mode: client, local_addr: 'udp://127.0.0.1:5002', remote_addr: 'udp://10.0.0.9:5001'", "",
      true));
  ASSERT_TRUE(udp.config) << udp.diags.render();
  EXPECT_EQ(udp.config->interfaces[0].backend, Backend::kSocket);
  ASSERT_EQ(udp.config->flows.size(), 1u);
  EXPECT_EQ(udp.config->flows[0].name, "ep");
  EXPECT_EQ(udp.config->flows[0].queue, "rxq");
  EXPECT_EQ(udp.config->flows[0].match.to_string(),
            "udp_src=5001 udp_dst=5002 ipv4_src=10.0.0.9 ipv4_dst=127.0.0.1");

  // TX queues of a tcp:// endpoint write to its connections, as DAQIRI's socket engine does.
  auto tcp_server =
      parse(daqiri_socket_file("mode: server, local_addr: 'tcp://127.0.0.1:6001'", "", true));
  ASSERT_TRUE(tcp_server.config) << tcp_server.diags.render();
  EXPECT_EQ(tcp_server.config->flows[0].match.to_string(), "ipv4_dst=127.0.0.1 tcp_dst=6001");
  EXPECT_EQ(tcp_server.config->interfaces[0].tx_queues[0].tx_policy, TxPolicy::kTcp);
  EXPECT_TRUE(tcp_server.config->flows[0].allow_block.anyone);  // TCP loses no byte
  EXPECT_EQ(tcp_server.diags.render(), "");

  // The legacy fields, with the transport from the URI of the other side.
  auto tcp_client = parse(
      daqiri_socket_file("mode: client, local_ip: 127.0.0.1, remote_addr: 'tcp://10.0.0.9:6001'"));
  ASSERT_TRUE(tcp_client.config) << tcp_client.diags.render();
  ASSERT_TRUE(tcp_client.config->flows[0].connect);
  EXPECT_EQ(tcp_client.config->flows[0].connect->to_string(), "10.0.0.9:6001");
}

TEST(DaqiriConfig, RoceEndpointsBecomeRdmaInterfaces) {
  auto server = parse(daqiri_socket_file("mode: server, local_addr: 'roce://127.0.0.1:4096'",
                                         "      roce_config: {transport_mode: UC}\n"));
  ASSERT_TRUE(server.config) << server.diags.render();
  const auto& itf = server.config->interfaces[0];
  EXPECT_EQ(itf.backend, Backend::kRdma);
  ASSERT_TRUE(itf.rdma);
  EXPECT_EQ(itf.rdma->mode, RdmaConfig::Mode::kServer);
  EXPECT_EQ(itf.rdma->port, 4096);
  EXPECT_EQ(itf.rdma->transport, RdmaConfig::Transport::kUc);
  ASSERT_EQ(server.config->flows.size(), 1u);
  EXPECT_TRUE(server.config->flows[0].match.any);
  EXPECT_FALSE(server.config->flows[0].allow_block.anyone);  // UC drops what finds no room

  // A client names no peer: the application adds a dialling flow at runtime.
  auto client = parse(daqiri_socket_file("mode: client, local_addr: 'rdma://127.0.0.1'",
                                         "      roce_config: {transport_mode: RC}\n"));
  ASSERT_TRUE(client.config) << client.diags.render();
  EXPECT_EQ(client.config->interfaces[0].rdma->mode, RdmaConfig::Mode::kClient);
  EXPECT_TRUE(client.config->flows.empty());
  EXPECT_THAT(client.diags.render(), HasSubstr("add a flow with connect: IP:PORT on interface ep"));

  // engine: ibverbs implies RoCE for legacy fields, which carry no scheme.
  auto legacy = parse(daqiri_socket_file("mode: server, local_ip: 127.0.0.1, local_port: 4096",
                                         "      roce_config: {transport_mode: RC}\n", false,
                                         "    engine: ibverbs\n"));
  ASSERT_TRUE(legacy.config) << legacy.diags.render();
  EXPECT_EQ(legacy.config->interfaces[0].backend, Backend::kRdma);
}

// DAQIRI's RDMA example as its configuration reference gives it: buffers of 9,000,000 bytes,
// whole messages. A frame queue's region of that size is refused.
TEST(DaqiriConfig, RdmaQueuesTakeBuffersOfWholeMessages) {
  const std::string file = R"(daqiri:
  cfg:
    version: 1
    stream_type: "socket"
    master_core: 3
    debug: false
    log_level: "info"
    memory_regions:
    - {name: "DATA_TX", kind: "host_pinned", affinity: 0, num_bufs: 20, buf_size: 9000000}
    - {name: "DATA_RX", kind: "host_pinned", affinity: 0, num_bufs: 20, buf_size: 9000000}
    interfaces:
    - name: my_server
      address: 127.0.0.1
      socket_config: {mode: server, local_addr: "roce://127.0.0.1:4096"}
      roce_config: {transport_mode: RC}
      rx:
        queues:
        - {name: "Server_RX_Queue", id: 0, cpu_core: 1, batch_size: 1, memory_regions: [DATA_RX]}
      tx:
        queues:
        - {name: "Server_TX_Queue", id: 0, cpu_core: 1, batch_size: 1, memory_regions: [DATA_TX]}
)";
  auto rdma = parse(file);
  ASSERT_TRUE(rdma.config) << rdma.diags.render();
  EXPECT_EQ(rdma.config->interfaces[0].backend, Backend::kRdma);
  EXPECT_EQ(rdma.config->memory_regions[1].buf_size, 9'000'000u);

  std::string udp = file;
  udp.replace(udp.find("roce://"), 7, "udp://");
  udp.replace(udp.find("      roce_config: {transport_mode: RC}\n"), 40, "");
  auto frames = parse(udp);
  EXPECT_FALSE(frames.config);
  EXPECT_THAT(frames.diags.render(),
              HasSubstr("buf_size 9000000 is more than a queue's buffers hold"));
}

// DAQIRI's RDMA examples name no region on their queues: its engine takes one per message, as
// the application names it. Each queue here draws on the region its name fits (direction, then
// side), with a ring its 20 buffers cover; a raw stream's queue still needs a region.
TEST(DaqiriConfig, RoceQueuesWithoutRegionsDrawOnTheRegionTheirNameFits) {
  const std::string file = R"(daqiri:
  cfg:
    version: 1
    stream_type: "socket"
    memory_regions:
    - {name: "DATA_RX_GPU_SERVER", kind: "host_pinned", num_bufs: 20, buf_size: 9000000}
    - {name: "DATA_TX_GPU_SERVER", kind: "host_pinned", num_bufs: 20, buf_size: 9000000}
    - {name: "DATA_TX_GPU_CLIENT", kind: "host_pinned", num_bufs: 20, buf_size: 9000000}
    - {name: "DATA_RX_GPU_CLIENT", kind: "host_pinned", num_bufs: 20, buf_size: 9000000}
    interfaces:
    - name: my_client
      address: 127.0.0.1
      socket_config: {mode: client, local_addr: "roce://127.0.0.1"}
      roce_config: {transport_mode: RC}
      tx: {queues: [{name: "Client_TX_Queue", id: 0, batch_size: 1, cpu_core: 1}]}
      rx: {queues: [{name: "Client_RX_Queue", id: 0, batch_size: 1, cpu_core: 1}]}
    - name: my_server
      address: 127.0.0.1
      socket_config: {mode: server, local_addr: "roce://127.0.0.1:4096"}
      roce_config: {transport_mode: RC}
      rx: {queues: [{name: "Server_RX_Queue", id: 0, batch_size: 1, cpu_core: 1}]}
      tx: {queues: [{name: "Server_TX_Queue", id: 0, batch_size: 1, cpu_core: 1}]}
)";
  auto p = parse(file);
  ASSERT_TRUE(p.config) << p.diags.render();
  ASSERT_EQ(p.config->flows.size(), 1u);
  EXPECT_TRUE(p.config->flows[0].allow_block.anyone);  // RC holds its sender back
  const auto& client = p.config->interfaces[0];
  const auto& server = p.config->interfaces[1];
  EXPECT_EQ(client.rx_queues[0].regions, std::vector<std::string>{"DATA_RX_GPU_CLIENT"});
  EXPECT_EQ(client.tx_queues[0].regions, std::vector<std::string>{"DATA_TX_GPU_CLIENT"});
  EXPECT_EQ(server.rx_queues[0].regions, std::vector<std::string>{"DATA_RX_GPU_SERVER"});
  EXPECT_EQ(server.tx_queues[0].regions, std::vector<std::string>{"DATA_TX_GPU_SERVER"});
  // 1.5 x 8 + 1 <= 20 < 1.5 x 16 + 1: the regions stay as the file sized them.
  EXPECT_EQ(server.rx_queues[0].ring_size, 8u);
  EXPECT_EQ(p.config->memory_regions[0].num_bufs, 20u);
  std::string said = p.diags.render();
  EXPECT_THAT(said, HasSubstr("interfaces[1].rx.queues[0]: queue Server_RX_Queue names no "
                              "memory_regions (DAQIRI's RDMA engine takes a region per message, "
                              "as its application names it): here its buffers come from "
                              "DATA_RX_GPU_SERVER, the best fit by name"));
  EXPECT_THAT(said, Not(HasSubstr("raised")));

  // With one region for everything, every queue draws on it.
  std::string one = file;
  for (const char* gone : {"DATA_TX_GPU_SERVER", "DATA_TX_GPU_CLIENT", "DATA_RX_GPU_CLIENT"}) {
    auto at = one.find(std::string("    - {name: \"") + gone);
    one.erase(at, one.find('\n', at) + 1 - at);
  }
  auto shared = parse(one);
  ASSERT_TRUE(shared.config) << shared.diags.render();
  EXPECT_EQ(shared.config->interfaces[0].tx_queues[0].regions,
            std::vector<std::string>{"DATA_RX_GPU_SERVER"});

  // No region in the file: a fact about the file, said of the queue.
  std::string none = one;
  auto at = none.find("    - {name: \"DATA_RX_GPU_SERVER\"");
  none.erase(at, none.find('\n', at) + 1 - at);
  none.replace(none.find("    memory_regions:\n"), 20, "");
  EXPECT_THAT(parse(none).diags.render(),
              HasSubstr("queue Client_TX_Queue has no memory region to draw on: the file defines "
                        "none"));

  // A UDP endpoint's queue frames packets into its region's buffers: it must name one.
  std::string udp = daqiri_socket_file("mode: server, local_addr: 'udp://127.0.0.1:5000'");
  udp.replace(udp.find(", memory_regions: [R]"), 21, "");
  EXPECT_THAT(only_error(udp), HasSubstr("a queue needs at least one memory region"));
}

TEST(DaqiriConfig, SocketConfigErrorsSayWhatIsWrong) {
  EXPECT_THAT(only_error(daqiri_socket_file("mode: server, local_addr: 'ftp://127.0.0.1:1'")),
              HasSubstr("unknown endpoint scheme \"ftp\""));
  EXPECT_THAT(only_error(daqiri_socket_file("mode: server, local_addr: 'udp://127.0.0.1'")),
              HasSubstr("needs a port (1 to 65535)"));
  EXPECT_THAT(only_error(daqiri_socket_file("mode: client, local_addr: 'udp://127.0.0.1:5'")),
              HasSubstr("a client needs remote_addr"));
  EXPECT_THAT(only_error(daqiri_socket_file("mode: server, local_ip: 127.0.0.1, local_port: 9")),
              HasSubstr("no transport: write the endpoints as udp://, tcp:// or roce:// URIs"));
  EXPECT_THAT(only_error(daqiri_socket_file(
                  "mode: server, local_addr: 'udp://127.0.0.1:9', local_ip: 127.0.0.1")),
              HasSubstr("give either this URI or local_ip/local_port, not both"));
  EXPECT_THAT(only_error(daqiri_socket_file("mode: server, local_addr: 'roce://127.0.0.1:9'")),
              HasSubstr("a roce:// endpoint needs a roce_config"));
  EXPECT_THAT(only_error(daqiri_socket_file(
                  "mode: client, local_addr: 'udp://127.0.0.1:5', remote_addr: 'tcp://1.2.3.4:5'")),
              HasSubstr("its scheme names another transport"));
}

// DAQIRI raw files run DPDK on hugepages: parsed with enough of them free.
Parsed parse_daqiri(const std::string& text) {
  return parse(text, daqiri_file_facts());
}
std::string only_daqiri_error(const std::string& text) {
  return only_error(text, daqiri_file_facts());
}

// DAQIRI's software-loopback example's shape: one interface, one queue each way.
std::string daqiri_loopback_file(const std::string& loopback, const std::string& address,
                                 const std::string& extra = "") {
  return "daqiri:\n  cfg:\n    version: 1\n    stream_type: raw\n    loopback: \"" + loopback +
         "\"\n"
         "    memory_regions:\n"
         "    - {name: R, kind: host, num_bufs: 4096, buf_size: 2048}\n"
         "    interfaces:\n"
         "    - name: lb\n"
         "      address: \"" +
         address +
         "\"\n"
         "      tx:\n        queues:\n        - {name: txq, id: 0, cpu_core: 1, batch_size: 64, "
         "memory_regions: [R]}\n"
         "      rx:\n        queues:\n        - {name: rxq, id: 0, cpu_core: 1, batch_size: 64, "
         "memory_regions: [R]}\n" +
         extra;
}

TEST(DaqiriConfig, SoftwareLoopbackLoopsAnInterfaceThroughARingDevice) {
  // No flows: like DAQIRI's, the RX queue gets every frame sent, through a catch-all.
  auto bare = parse_daqiri(daqiri_loopback_file("sw", "loopback"));
  ASSERT_TRUE(bare.config) << bare.diags.render();
  const auto& itf = bare.config->interfaces[0];
  EXPECT_EQ(itf.backend, Backend::kDpdk);
  EXPECT_EQ(itf.address, "net_ring0");
  ASSERT_EQ(bare.config->flows.size(), 1u);
  EXPECT_EQ(bare.config->flows[0].name, "lb");
  EXPECT_EQ(bare.config->flows[0].queue, "rxq");
  EXPECT_TRUE(bare.config->flows[0].match.any);

  // The file's flows steer the looped frames; a PCI address is a name only.
  auto steered = parse_daqiri(daqiri_loopback_file(
      "sw", "0000:17:00.0",
      "        flows:\n        - {name: f, action: {type: queue, id: 0}, match: {udp_dst: 9}}\n"));
  ASSERT_TRUE(steered.config) << steered.diags.render();
  EXPECT_EQ(steered.config->interfaces[0].address, "net_ring0");
  ASSERT_EQ(steered.config->flows.size(), 1u);
  EXPECT_EQ(steered.config->flows[0].name, "f");

  // Off: the address is the NIC's.
  auto off = parse_daqiri(daqiri_loopback_file("", "0000:17:00.0"));
  ASSERT_TRUE(off.config) << off.diags.render();
  EXPECT_EQ(off.config->interfaces[0].address, "0000:17:00.0");
}

// DAQIRI's raw_tx_rx_hds shape: TX headers in host buffers, payloads in GPU buffers. Taken,
// with a warning that says the frames cross host memory here.
TEST(DaqiriConfig, TxHeaderDataSplitFromGpuMemoryIsTakenAndSaysHow) {
  std::string text = daqiri_loopback_file("sw", "loopback");
  auto swap = [&](const std::string& from, const std::string& to) {
    text.replace(text.find(from), from.size(), to);
  };
  swap("    - {name: R, kind: host",
       "    - {name: H, kind: host, num_bufs: 64, buf_size: 64}\n"
       "    - {name: G, kind: device, num_bufs: 4096, buf_size: 1984}\n    - {name: R, kind: host");
  swap("memory_regions: [R]}\n      rx:", "memory_regions: [H, G]}\n      rx:");
  auto p = parse_daqiri(text);
  ASSERT_TRUE(p.config) << p.diags.render();
  EXPECT_EQ(p.config->interfaces[0].tx_queues[0].regions, (std::vector<std::string>{"H", "G"}));
  EXPECT_THAT(p.diags.render(),
              HasSubstr("tx.queues[0].memory_regions: frames from GPU memory: daqirid's GPU "
                        "engine copies each frame's GPU bytes into host memory of its own"));
}

TEST(DaqiriConfig, SoftwareLoopbackRefusesWhatDaqiriRefuses) {
  EXPECT_THAT(only_daqiri_error(daqiri_loopback_file("hw", "loopback")),
              HasSubstr("loopback is \"sw\" or \"\" (off), not \"hw\""));
  EXPECT_THAT(only_daqiri_error(daqiri_loopback_file("sw", "net_null0")),
              HasSubstr("address is \"loopback\" (or a PCI address, which is not opened)"));
  EXPECT_THAT(only_daqiri_error(daqiri_loopback_file(
                  "sw", "loopback", "    - name: second\n      address: loopback\n")),
              HasSubstr("software loopback takes a single interface"));
}

// A raw DAQIRI file with one RX queue written as QUEUE, TOP under cfg and RX under rx.
std::string daqiri_raw_file(const std::string& queue, const std::string& top = "",
                            const std::string& rx = "", uint32_t num_bufs = 4096) {
  return "daqiri:\n  cfg:\n    version: 1\n    stream_type: raw\n" + top +
         "    memory_regions:\n"
         "    - {name: R, kind: host, num_bufs: " +
         std::to_string(num_bufs) +
         ", buf_size: 2048}\n"
         "    interfaces:\n"
         "    - name: p\n"
         "      address: net_null0\n"
         "      rx:\n" +
         rx + "        queues:\n        - {name: q, id: 0, memory_regions: [R]" + queue + "}\n";
}

TEST(DaqiriConfig, DirectPollingBecomesAPollerThatNeverParks) {
  auto direct = parse_daqiri(daqiri_raw_file(", poll_mode: direct", "    engine: ibverbs\n"));
  ASSERT_TRUE(direct.config) << direct.diags.render();
  const auto& q = direct.config->interfaces[0].rx_queues[0];
  EXPECT_TRUE(q.busy_poll);
  EXPECT_EQ(q.batch_size, 256u);
  EXPECT_THAT(direct.diags.render(), HasSubstr("the queue's poller never parks (busy_poll)"));

  auto indirect =
      parse_daqiri(daqiri_raw_file(", poll_mode: indirect, cpu_core: 1, batch_size: 32"));
  ASSERT_TRUE(indirect.config) << indirect.diags.render();
  EXPECT_FALSE(indirect.config->interfaces[0].rx_queues[0].busy_poll);

  // DAQIRI's own rules: direct on its raw ibverbs engine only, with no worker fields.
  EXPECT_THAT(only_daqiri_error(daqiri_raw_file(", poll_mode: direct")),
              HasSubstr("poll_mode direct is DAQIRI's raw ibverbs engine's only"));
  EXPECT_THAT(only_daqiri_error(
                  daqiri_raw_file(", poll_mode: direct, batch_size: 8", "    engine: ibverbs\n")),
              HasSubstr("a direct queue omits batch_size"));
}

TEST(DaqiriConfig, DynamicFlowCapacityIsAcceptedAndSaysFlowsComeAtRuntime) {
  auto none = parse_daqiri(daqiri_raw_file("", "", "        dynamic_flow_capacity: 0\n"));
  ASSERT_TRUE(none.config) << none.diags.render();
  EXPECT_THAT(none.diags.render(), Not(HasSubstr("template table")));
  auto some = parse_daqiri(daqiri_raw_file("", "", "        dynamic_flow_capacity: 64\n"));
  ASSERT_TRUE(some.config) << some.diags.render();
  EXPECT_THAT(some.diags.render(), HasSubstr("no template table is reserved"));
}

// DAQIRI's rx.hardware_timestamps becomes the DPDK interface's; a socket interface has no NIC
// to stamp frames.
TEST(DaqiriConfig, HardwareTimestampsAreForDpdkPorts) {
  auto raw = parse_daqiri(daqiri_raw_file("", "", "        hardware_timestamps: true\n"));
  ASSERT_TRUE(raw.config) << raw.diags.render();
  EXPECT_TRUE(raw.config->interfaces[0].hardware_timestamps);
  auto off = parse_daqiri(daqiri_raw_file("", "", "        hardware_timestamps: false\n"));
  ASSERT_TRUE(off.config) << off.diags.render();
  EXPECT_FALSE(off.config->interfaces[0].hardware_timestamps);

  std::string socket = with_interface();
  socket.replace(socket.find("    address: 127.0.0.1\n"), 23,
                 "    address: 127.0.0.1\n    hardware_timestamps: true\n");
  EXPECT_THAT(only_error(socket), HasSubstr("hardware_timestamps is for dpdk ones"));
}

// DAQIRI's RX flow keys: flex items, eCPRI, VLAN pop and tunnel decap in an actions list
// ending in a queue, each read into the flow's match.
TEST(DaqiriConfig, FlowsTakeFlexItemsEcpriAndDecapActions) {
  auto flex = parse_daqiri(daqiri_raw_file("", "", R"(        flex_items:
        - {name: hdr, id: 3, offset: 8, udp_dst_port: 4791}
        flows:
        - name: f
          id: 1
          action: {type: queue, ids: [0]}
          match: {flex_item_id: 3, val: 0x11223344, mask: 0xffff0000}
)"));
  ASSERT_TRUE(flex.config) << flex.diags.render();
  const auto& fm = flex.config->flows.at(0).match;
  ASSERT_TRUE(fm.flex);
  EXPECT_EQ(fm.flex->udp_dst_port, 4791);
  EXPECT_EQ(fm.flex->offset, 8);
  EXPECT_EQ(fm.flex->value, 0x11223344u);
  EXPECT_EQ(fm.flex->mask, 0xffff0000u);

  auto ecpri = parse_daqiri(daqiri_raw_file("", "", R"(        flows:
        - {name: iq, id: 1, action: {type: queue, id: 0}, match: {ecpri: {msg_type: 0, pc_id: 7}}}
        - {name: rtc, id: 2, action: {type: queue, id: 0}, match: {ecpri: {msg_type: 2}}}
)"));
  ASSERT_TRUE(ecpri.config) << ecpri.diags.render();
  EXPECT_EQ(ecpri.config->flows.at(0).match.to_string(), "ecpri=type 0 id 7");
  EXPECT_EQ(ecpri.config->flows.at(1).match.to_string(), "ecpri=type 2");

  auto decap = parse_daqiri(daqiri_raw_file("", "", R"(        flows:
        - name: vx
          id: 1
          actions:
          - type: tunnel_decap
            tunnel: {type: vxlan, outer_eth_src: "02:00:00:00:00:01", outer_eth_dst: "02:00:00:00:00:02",
                     outer_ipv4_src: 192.0.2.1, outer_ipv4_dst: 192.0.2.2, vni: 100}
          - {type: queue, id: 0}
        - name: gre
          id: 2
          actions:
          - {type: tunnel_decap, tunnel_type: gre, outer_eth_src: "02:00:00:00:00:01",
             outer_eth_dst: "02:00:00:00:00:02", outer_ipv4_src: 192.0.2.1,
             outer_ipv4_dst: 192.0.2.2, gre_protocol: 0x0800}
          - {type: queue, id: 0}
          match: {udp_dst: 7000}
        - name: tagged
          id: 3
          actions: [{type: vlan_pop}, {type: queue, id: 0}]
        - name: rest
          id: 4
          action: {type: queue, id: 0}
)"));
  ASSERT_TRUE(decap.config) << decap.diags.render();
  const auto& flows = decap.config->flows;
  ASSERT_EQ(flows.size(), 4u);
  EXPECT_EQ(flows[0].match.to_string(),
            "decap=vxlan vni=100 port=4789 from 192.0.2.1 to 192.0.2.2");
  EXPECT_EQ(flows[1].match.to_string(),
            "udp_dst=7000 decap=gre protocol=0x0800 from 192.0.2.1 to 192.0.2.2");
  EXPECT_EQ(flows[2].match.to_string(), "decap=vlan_pop");
  EXPECT_TRUE(flows[3].match.any);  // no match: DAQIRI's Ethernet-only rule, every frame
  EXPECT_EQ(flows[0].queue, "q");
}

// `ids` naming several queues spreads the flow over them (RSS), in the order given.
TEST(DaqiriConfig, QueueIdsSpreadAFlowOverTheirQueues) {
  const std::string second_queue = "}\n        - {name: q1, id: 1, memory_regions: [R]";
  auto rss = parse_daqiri(daqiri_raw_file(second_queue, "", R"(        flows:
        - {name: spread, id: 1, action: {type: queue, ids: [1, 0]}, match: {udp_dst: 5000}}
)"));
  ASSERT_TRUE(rss.config) << rss.diags.render();
  const auto& f = rss.config->flows.at(0);
  EXPECT_EQ(f.queue, "q1");
  EXPECT_EQ(f.rss_queues, (std::vector<std::string>{"q1", "q"}));
}

TEST(DaqiriConfig, FlowRulesAreDaqirisWithTheirReasons) {
  auto error = [](const std::string& flows, const std::string& flex = "") {
    return only_daqiri_error(daqiri_raw_file("", "", flex + "        flows:\n" + flows));
  };
  EXPECT_THAT(error("        - {name: a, action: {type: queue, id: 0}, match: {udp_dst: 1}}\n"
                    "        - {name: b, action: {type: queue, id: 0}, match: {ecpri: {}}}\n"),
              HasSubstr("flow b matches eCPRI but flow a of interface p matches IPv4/UDP: one "
                        "class of flow per interface, as in DAQIRI"));
  EXPECT_THAT(error("        - {name: a, action: {type: queue, ids: [0, 1]}}\n"),
              HasSubstr("no RX queue with id 1 on interface p"));
  EXPECT_THAT(error("        - {name: a, action: {type: queue, ids: [0, 0]}}\n"),
              HasSubstr("queue id 0 is listed twice"));
  EXPECT_THAT(error("        - {name: a, action: {type: queue, id: 0}, match: {flex_item_id: 1, "
                    "val: 1, mask: 1}}\n"),
              HasSubstr("no flex item with id 1 under this interface's rx.flex_items"));
  EXPECT_THAT(error("        - {name: a, action: {type: queue, id: 0}, match: {flex_item_id: 1, "
                    "val: 1, mask: 1, udp_dst: 5}}\n",
                    "        flex_items: [{name: x, id: 1, offset: 0, udp_dst_port: 9}]\n"),
              HasSubstr("a flex-item match cannot be combined with UDP/IP matching"));
  EXPECT_THAT(error("        - {name: a, action: {type: queue, id: 0}}\n",
                    "        flex_items: [{name: x, id: 1, offset: 6, udp_dst_port: 9}]\n"),
              HasSubstr("a flex item's offset is a multiple of 4 bytes after the UDP header"));
  EXPECT_THAT(
      error("        - {name: a, action: {type: queue, id: 0}, match: {ecpri: {pc_id: 3}}}\n"),
      HasSubstr("matching the eCPRI message id needs a msg_type"));
  EXPECT_THAT(error("        - {name: a, actions: [{type: queue, id: 0}, {type: vlan_pop}]}\n"),
              HasSubstr("an RX flow's actions end with type: queue"));
  EXPECT_THAT(
      error(
          "        - {name: a, actions: [{type: vlan_push, vlan_id: 3}, {type: queue, id: 0}]}\n"),
      HasSubstr("vlan_push transforms outgoing frames: it belongs in tx.flows"));
  EXPECT_THAT(error("        - {name: a, actions: [{type: vlan_pop}, {type: vlan_pop}, {type: "
                    "queue, id: 0}]}\n"),
              HasSubstr("a flow strips one VLAN tag or one tunnel"));
  EXPECT_THAT(
      error("        - {name: a, actions: [{type: tunnel_decap, tunnel: {type: vxlan, "
            "outer_eth_src: 1, outer_eth_dst: \"02:00:00:00:00:02\", outer_ipv4_src: 1.2.3.4, "
            "outer_ipv4_dst: 1.2.3.5}}, {type: queue, id: 0}]}\n"),
      HasSubstr("expected a MAC address like 02:00:00:00:00:01, got \"1\""));
}

// DAQIRI's tx.flows: one vlan_push or tunnel_encap each, on raw (DPDK) streams; the port's MTU
// and RX buffers make room for the outer headers.
TEST(DaqiriConfig, TxFlowsPushTagsOrEncapsulate) {
  auto file = [](const std::string& flows, const std::string& stream = "raw") {
    return "daqiri:\n  cfg:\n    version: 1\n    stream_type: " + stream +
           "\n    memory_regions:\n    - {name: R, kind: host, num_bufs: 4096, buf_size: 2048}\n"
           "    interfaces:\n    - name: p\n      address: net_null0\n      tx:\n"
           "        queues:\n        - {name: q, id: 0, memory_regions: [R]}\n        flows:\n" +
           flows;
  };
  auto ok = parse_daqiri(file(
      "        - {name: a, match: {udp_dst: 1}, actions: [{type: vlan_push, vlan: {vlan_id: 7, "
      "pcp: 3}}]}\n"
      "        - {name: b, match: {udp_dst: 2}, actions: [{type: tunnel_encap, tunnel: {type: "
      "vxlan, outer_eth_src: \"02:00:00:00:00:01\", outer_eth_dst: \"02:00:00:00:00:02\", "
      "outer_ipv4_src: 192.0.2.1, outer_ipv4_dst: 192.0.2.2, vni: 9, outer_ipv4_ttl: 8}}]}\n"));
  ASSERT_TRUE(ok.config) << ok.diags.render();
  const auto& itf = ok.config->interfaces[0];
  ASSERT_EQ(itf.tx_flows.size(), 2u);
  EXPECT_EQ(itf.tx_flows[0].encap.to_string(), "vlan_push vid=7 pcp=3 tpid=0x8100");
  EXPECT_EQ(itf.tx_flows[1].encap.ttl, 8);
  EXPECT_EQ(itf.mtu, 2048u + 50 - 18);  // the frame a buffer holds, in a VXLAN tunnel

  EXPECT_THAT(only_daqiri_error(file("        - {name: a, actions: [{type: queue, id: 0}]}\n")),
              HasSubstr("queue is an RX flow's: a TX flow pushes a tag or encapsulates"));
  EXPECT_THAT(
      only_daqiri_error(file(
          "        - {name: a, match: {udp_dst: 1}, actions: [{type: vlan_push, vlan_id: 1}]}\n"
          "        - {name: b, match: {udp_dst: 1-5}, actions: [{type: vlan_push, vlan_id: "
          "2}]}\n")),
      HasSubstr("TX flow b matches frames TX flow a matches too"));
  EXPECT_THAT(only_daqiri_error(file("        - {name: a, actions: [{type: vlan_push}]}\n")),
              HasSubstr("vlan_id"));
}

// DAQIRI raises a region too small for the ring it feeds to three rings, and says so.
TEST(DaqiriConfig, TooFewBuffersAreRaisedAsDaqiriRaisesThem) {
  auto p = parse_daqiri(daqiri_raw_file(", batch_size: 64", "", "", 1000));
  ASSERT_TRUE(p.config) << p.diags.render();
  EXPECT_EQ(p.config->memory_regions[0].num_bufs, 3072u);
  EXPECT_THAT(p.diags.render(),
              HasSubstr("num_bufs 1000 is too few for queue q's ring of 1024 (1.5x the ring plus "
                        "a batch); raised to 3072, as DAQIRI raises it"));
}

// A reorder in our schema over one flow of lo, with `keys` in its map.
std::string with_reorder(const std::string& keys, const std::string& out_region =
                                                      "  - {name: out, kind: host, buf_size: "
                                                      "4096, num_bufs: 16}\n") {
  std::string text = with_interface("",
                                    "flows:\n  - {name: f, interface: lo, match: {udp_dst: 9000}}\n"
                                    "reorders:\n  - {name: beams, interface: lo, flows: [f], " +
                                        keys + "}\n");
  return text.insert(std::string(kRegion).size(), out_region);
}

TEST(Config, ReadsAReorder) {
  auto p = parse(with_reorder(
      "region: out, payload_offset: 46, sequence: {bit_offset: 336, bit_width: 16}, "
      "packets_per_batch: 8, convert: {input: int4, output: bf16, byte_order: network}, "
      "timeout_us: 250"));
  ASSERT_TRUE(p.config) << p.diags.render();
  ASSERT_EQ(p.config->reorders.size(), 1u);
  const ReorderConfig& r = p.config->reorders[0];
  EXPECT_EQ(r.name, "beams");
  EXPECT_EQ(r.flows, (std::vector<std::string>{"f"}));
  EXPECT_EQ(r.region, "out");
  EXPECT_EQ(r.plan.method, reorder::ReorderPlan::Method::kSeqPacketsPerBatch);
  EXPECT_EQ(r.plan.sequence.bit_offset, 336u);
  EXPECT_EQ(r.plan.sequence.bit_width, 16u);
  EXPECT_EQ(r.plan.packets_per_batch, 8u);
  EXPECT_EQ(r.plan.payload_offset, 46u);
  EXPECT_EQ(r.plan.timeout_ns, 250'000u);
  ASSERT_TRUE(r.plan.format);
  EXPECT_EQ(r.plan.format->input, reorder::SampleType::kInt4);
  EXPECT_EQ(r.plan.format->output, reorder::SampleType::kBf16);
  EXPECT_EQ(r.plan.format->order, reorder::ByteOrder::kNetwork);

  // Numbered batches: 2^16 / 2^12 packets each.
  auto n = parse(
      with_reorder("region: out, sequence: {bit_offset: 0, bit_width: 16}, batch: {bit_offset: 16, "
                   "bit_width: 12}"));
  ASSERT_TRUE(n.config) << n.diags.render();
  EXPECT_EQ(n.config->reorders[0].plan.method, reorder::ReorderPlan::Method::kSeqBatchNumber);
  EXPECT_EQ(n.config->reorders[0].plan.packets_per_batch, 16u);
}

TEST(Config, ReorderErrorsSayWhatIsWrong) {
  const std::string seq = "region: out, sequence: {bit_offset: 0, bit_width: 8}, ";
  EXPECT_THAT(only_error(with_reorder(seq + "packets_per_batch: 6")),
              HasSubstr("packets_per_batch 6 must divide 2^8"));
  EXPECT_THAT(only_error(with_reorder(seq + "batch: {bit_offset: 8, bit_width: 9}")),
              HasSubstr("the batch number's 9 bits must be no more than the sequence number's 8"));
  EXPECT_THAT(only_error(with_reorder(seq + "packets_per_batch: 4, batch: {bit_offset: 8, "
                                            "bit_width: 4}")),
              HasSubstr("numbered (batch) or counted (packets_per_batch), not both"));
  EXPECT_THAT(only_error(with_reorder(seq + "packets_per_batch: 4, convert: {input: fp32, "
                                            "output: fp16}")),
              HasSubstr("input type \"fp32\": expected int4, int8, int16 or int32"));
  EXPECT_THAT(only_error(with_reorder(
                  "region: r, sequence: {bit_offset: 0, bit_width: 8}, packets_per_batch: 4")),
              HasSubstr("region \"r\" is a queue's: a reorder writes its batches into a region "
                        "of its own"));
  EXPECT_THAT(
      only_error(with_reorder(
          "region: out, flows: [g], sequence: {bit_offset: 0, bit_width: 8}, packets_per_batch: "
          "4")),
      HasSubstr("duplicate key"));
  // Larger than a frame buffer holds: a reorder's output only.
  auto big = parse(with_reorder(seq + "packets_per_batch: 4",
                                "  - {name: out, kind: host, buf_size: 2031616, num_bufs: 4}\n"));
  EXPECT_TRUE(big.config) << big.diags.render();
  std::string queue_big = with_interface();
  queue_big.replace(queue_big.find("buf_size: 2048"), 14, "buf_size: 2031616");
  EXPECT_THAT(only_error(queue_big), HasSubstr("is more than a queue's buffers hold (1048576)"));
}

TEST(DaqiriConfig, ReorderConfigsBecomeReordersOfTheFlowsTheyName) {
  std::string file = daqiri_loopback_file(
      "sw", "loopback",
      "        flows:\n"
      "        - {name: f0, id: 0, action: {type: queue, id: 0}, match: {udp_dst: 9}}\n"
      "        - {name: f1, id: 1, action: {type: queue, id: 0}, match: {udp_dst: 10}}\n"
      "        reorder_configs:\n"
      "        - name: ro\n"
      "          reorder_type: gpu\n"
      "          memory_region: OUT\n"
      "          payload_byte_offset: 64\n"
      "          flow_ids: [1, 0]\n"
      "          data_types: {input_type: int16, output_type: fp32, endianness: network}\n"
      "          method:\n"
      "            seq_batch_number:\n"
      "              sequence_number: {bit_offset: 512, bit_width: 20}\n"
      "              batch_number: {bit_offset: 544, bit_width: 10}\n");
  file.replace(file.find("    interfaces:"), 0,
               "    - {name: OUT, kind: host, num_bufs: 8, buf_size: 2031616}\n");
  std::string rxq = "- {name: rxq, id: 0, cpu_core: 1, batch_size: 64, ";
  file.replace(file.find(rxq) + rxq.size(), 0, "timeout_us: 700, ");
  auto p = parse_daqiri(file);
  ASSERT_TRUE(p.config) << p.diags.render();
  EXPECT_THAT(p.diags.render(),
              HasSubstr("reorder_type: reorder_type gpu: daqirid places and converts the "
                        "packets on the CPU"));
  ASSERT_EQ(p.config->reorders.size(), 1u);
  const ReorderConfig& r = p.config->reorders[0];
  EXPECT_EQ(r.name, "ro");
  EXPECT_EQ(r.interface, "lb");
  EXPECT_EQ(r.flows, (std::vector<std::string>{"f1", "f0"}));
  EXPECT_EQ(r.region, "OUT");
  EXPECT_EQ(r.plan.payload_offset, 64u);
  EXPECT_EQ(r.plan.method, reorder::ReorderPlan::Method::kSeqBatchNumber);
  EXPECT_EQ(r.plan.packets_per_batch, 1024u);
  EXPECT_EQ(r.plan.timeout_ns, 700'000u);
  ASSERT_TRUE(r.plan.format);
  EXPECT_EQ(r.plan.format->order, reorder::ByteOrder::kNetwork);

  std::string unknown = file;
  unknown.replace(unknown.find("flow_ids: [1, 0]"), 16, "flow_ids: [1, 7]");
  EXPECT_THAT(only_daqiri_error(unknown), HasSubstr("interface \"lb\" has no flow with id 7"));
}

}  // namespace
}  // namespace daqiri::config
