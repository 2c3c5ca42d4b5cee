// daqiri-ctl: inspect and change a running daqirid. The command line only; commands.cpp
// does the work. Exit codes are listed in control_client.hpp and docs/daqiri-ctl.md.
#include <CLI/CLI.hpp>

#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "capture_commands.hpp"
#include "cdi_command.hpp"
#include "commands.hpp"
#include "send.hpp"
#include "tap.hpp"

int main(int argc, char** argv) {
  using namespace daqiri::ctl;
  Options opts;
  if (const char* env = std::getenv("DAQIRI_SOCKET")) opts.socket = env;

  CLI::App app{"daqiri-ctl: inspect and change a running daqirid", "daqiri-ctl"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("daqiri-ctl ") + DAQIRI_VERSION);
  // Global options may come after the subcommand too (`flows list --json`): a subcommand hands
  // on what it does not know (each inherits this). Its own options of one name come first.
  app.fallthrough();
  app.add_option("-s,--socket", opts.socket, "daemon control socket (env DAQIRI_SOCKET)")
      ->capture_default_str();
  app.add_flag("--json", opts.json, "print JSON for scripts instead of tables");
  app.add_option("--timeout", opts.timeout_seconds, "seconds to wait for the daemon")
      ->capture_default_str();

  std::function<int(ControlClient&)> action;
  app.add_subcommand("info", "version, build options, GPUs, hugepages, your role")->callback([&] {
    action = [&](ControlClient& c) { return run_info(c, opts); };
  });
  app.add_subcommand("interfaces", "list interfaces")->callback([&] {
    action = [&](ControlClient& c) { return run_interfaces(c, opts); };
  });
  app.add_subcommand("regions", "list memory regions")->callback([&] {
    action = [&](ControlClient& c) { return run_regions(c, opts); };
  });
  std::string queue_itf;
  auto* queues = app.add_subcommand("queues", "list RX and TX queues");
  queues->add_option("-i,--interface", queue_itf, "only this interface");
  queues->callback(
      [&] { action = [&](ControlClient& c) { return run_queues(c, opts, queue_itf); }; });

  CdiArgs cdi_args;
  auto* cdi = app.add_subcommand("cdi", "Container Device Interface specs of the flows");
  cdi->require_subcommand(1);
  auto* cdi_gen = cdi->add_subcommand(
      "generate", "write a CDI spec: a device per flow you may see, and KIND=all");
  cdi_gen->add_option("-o,--output", cdi_args.output,
                      "where (default /var/run/cdi/daqiri.yaml; - for standard output)");
  cdi_gen->add_option("--kind", cdi_args.kind,
                      "the devices' vendor/class (default daqiri.io/flow)");
  cdi_gen->callback(
      [&] { action = [&](ControlClient& c) { return run_cdi_generate(c, opts, cdi_args); }; });
  auto* flows = app.add_subcommand("flows", "list, add or delete flows");
  flows->require_subcommand(1);
  std::string flow_itf;
  auto* flist = flows->add_subcommand("list", "list flows");
  flist->add_option("-i,--interface", flow_itf, "only this interface");
  flist->callback(
      [&] { action = [&](ControlClient& c) { return run_flows_list(c, opts, flow_itf); }; });
  FlowAddArgs add;
  auto* fadd = flows->add_subcommand("add", "add a flow (admin)");
  fadd->add_option("name", add.name, "flow name")->required();
  fadd->add_option("-i,--interface", add.interface, "interface")->required();
  fadd->add_option(
      "-q,--queue", add.queue,
      "RX queue (default: the interface's first); several, comma-separated: RSS across them");
  fadd->add_option("--udp-src", add.udp_src, "UDP source port or range, e.g. 4096-4100");
  fadd->add_option("--udp-dst", add.udp_dst, "UDP destination port or range");
  fadd->add_option("--ipv4-src", add.ipv4_src, "IPv4 source address or prefix, e.g. 10.0.0.0/24");
  fadd->add_option("--ipv4-dst", add.ipv4_dst, "IPv4 destination address or prefix");
  fadd->add_option("--tcp-dst", add.tcp_dst, "TCP port: the daemon accepts streams on it");
  fadd->add_flag("--any", add.any,
                 "DPDK: the queue's catch-all, every frame no other flow takes (no other match)");
  fadd->add_option("--connect", add.connect,
                   "IPV4:PORT: the daemon connects and receives that TCP stream (no match)");
  fadd->add_flag("--allow-block", add.allow_block,
                 "any client may attach with block backpressure (the flow then waits for it)");
  fadd->add_option("--allow-block-user", add.block_users,
                   "this user may attach with block backpressure (repeat for more)");
  fadd->add_option("--client-user", add.client_users,
                   "only this user (and admins, and --client-group's members) may attach; "
                   "repeat for more");
  fadd->add_option("--client-group", add.client_groups,
                   "only this group's members (and admins, and --client-user) may attach; "
                   "repeat for more");
  fadd->callback([&] { action = [&](ControlClient& c) { return run_flows_add(c, opts, add); }; });
  std::string del_name;
  auto* fdel = flows->add_subcommand("del", "delete a flow (admin)");
  fdel->alias("delete");
  fdel->add_option("name", del_name, "flow name")->required();
  fdel->callback(
      [&] { action = [&](ControlClient& c) { return run_flows_del(c, opts, del_name); }; });

  app.add_subcommand("sessions", "list client sessions")->callback([&] {
    action = [&](ControlClient& c) { return run_sessions(c, opts); };
  });
  TapArgs tap;
  auto* tap_cmd =
      app.add_subcommand("tap", "receive a flow as a client: print, count, verify, record");
  if (const char* env = std::getenv("DAQIRI_FLOW")) tap.flow = env;
  tap_cmd->add_option("flow", tap.flow, "flow name (default: env DAQIRI_FLOW)");
  tap_cmd->add_option("-n,--count", tap.count, "stop after N packets; exit 1 if fewer arrive");
  tap_cmd->add_option("-t,--timeout", tap.timeout, "give up after SECONDS");
  tap_cmd->add_flag(
      "--verify", tap.verify,
      "check daqiri-gen's sequence and payload; exit 1 on loss, reordering, corruption");
  tap_cmd->add_flag("-q,--quiet", tap.quiet, "no line per packet, only the summary");
  tap_cmd->add_flag("--block", tap.block,
                    "when this tap falls behind, hold the flow back (kernel buffers) instead of "
                    "dropping");
  tap_cmd->add_flag("--gpu", tap.gpu,
                    "receive in a GPU ring (flows on device or pinned regions); with --out, "
                    "write from GPU memory, by cuFile where libcufile is present");
  tap_cmd->add_flag("!--no-cufile", tap.use_cufile,
                    "with --gpu --out: copy to host memory and write(2), even with libcufile");
  tap_cmd->add_option("-o,--out", tap.out, "record what arrives in FILE (see --format)");
  tap_cmd->add_option("--pcap", tap.out, "the same as --out FILE --format pcap");
  const char* format_help =
      "pcap (nanosecond timestamps), pcapng, or raw (UDP payloads back to back)";
  std::map<std::string, daqiri::capture::Format> formats;
  std::vector<std::string> format_names;
  for (auto [name, format] : daqiri::capture::kFormatNames) {
    formats.emplace(name, format);
    format_names.emplace_back(name);
  }
  tap_cmd->add_option("--format", tap.capture.format, format_help)
      ->transform(CLI::CheckedTransformer(formats));
  tap_cmd->add_option("--snaplen", tap.capture.snaplen, "bytes kept of each frame")
      ->check(CLI::Range(64u, 262144u));
  double rotate_mb = 0, rotate_seconds = 0;
  tap_cmd->add_option("--rotate-mb", rotate_mb, "start a new file (NAME-0001.EXT, ...) past MB");
  tap_cmd->add_option("--rotate-seconds", rotate_seconds, "or once a file is SECONDS old");
  tap_cmd->add_flag("--append", tap.capture.append,
                    "add to an existing file (pcapng: a new section; pcap: same header only)");
  tap_cmd
      ->add_option("--sync", tap.capture.sync,
                   "fsync: never, close (each file as it closes; default), chunk (every 4 MiB)")
      ->transform(CLI::CheckedTransformer(std::map<std::string, daqiri::capture::Sync>{
          {"never", daqiri::capture::Sync::kNever},
          {"close", daqiri::capture::Sync::kOnClose},
          {"chunk", daqiri::capture::Sync::kEveryChunk}}));
  tap_cmd->callback([&] {
    tap.capture.rotate_bytes = static_cast<uint64_t>(rotate_mb * 1024 * 1024);
    tap.capture.rotate_interval =
        std::chrono::nanoseconds(static_cast<int64_t>(rotate_seconds * 1e9));
    action = [&](ControlClient&) { return run_tap(opts, tap); };
  });
  SendArgs send;
  auto* send_cmd = app.add_subcommand(
      "send", "send frames through a TX queue as a client, with daqiri-gen's checkable payload");
  send_cmd->add_option("--dest", send.dest, "destination IPV4:PORT")->required();
  send_cmd->add_option("-i,--interface", send.interface,
                       "interface (default: env DAQIRI_TX_INTERFACE and DAQIRI_TX_QUEUE)");
  send_cmd->add_option("-q,--queue", send.queue, "TX queue (default: the interface's first)");
  send_cmd->add_option("-n,--count", send.count, "frames to send")->capture_default_str();
  send_cmd->add_option("--size", send.size, "UDP payload bytes (at least 24)")
      ->capture_default_str();
  send_cmd->add_option("--rate", send.rate, "frames a second (default: as fast as it goes)");
  send_cmd->add_option("--source", send.source,
                       "source IPV4[:PORT] (default: the interface's address, the dest port)");
  send_cmd->add_option("--dest-mac", send.dest_mac,
                       "destination MAC for NIC backends (default 00:00:00:00:00:00)");
  send_cmd
      ->add_option("--wait", send.timeout,
                   "give up when the queue takes or returns no frame for SECONDS")
      ->capture_default_str();
  send_cmd->callback([&] { action = [&](ControlClient& c) { return run_send(c, opts, send); }; });
  CaptureArgs capture;
  auto* capture_cmd = app.add_subcommand(
      "capture", "have the daemon record a flow to a file beside its clients (and wait)");
  capture_cmd->add_option("flow", capture.flow, "flow name (or --queue)");
  capture_cmd->add_option("--queue", capture.queue,
                          "INTERFACE/QUEUE: every flow of an RX queue, in one file");
  capture_cmd->add_option("-o,--out", capture.out, "file, inside the daemon's capture_dirs")
      ->required();
  capture_cmd->add_option("--format", capture.format, format_help)
      ->check(CLI::IsMember(format_names));
  capture_cmd->add_option("-n,--count", capture.count, "stop after N packets");
  capture_cmd->add_option("-d,--duration", capture.duration, "stop after SECONDS");
  capture_cmd->add_option("--snaplen", capture.snaplen, "bytes kept of each frame")
      ->check(CLI::Range(64u, 262144u));
  capture_cmd->add_option("--rotate-mb", capture.rotate_mb, "a new file past MB");
  capture_cmd->add_flag("--detach", capture.detach,
                        "return once it runs (stop-capture ID ends it)");
  capture_cmd->callback(
      [&] { action = [&](ControlClient& c) { return run_capture(c, opts, capture); }; });
  app.add_subcommand("captures", "captures the daemon runs or ran")->callback([&] {
    action = [&](ControlClient& c) { return run_captures(c, opts); };
  });
  uint64_t capture_id = 0;
  auto* stop_cmd = app.add_subcommand("stop-capture", "end a capture (yours, or any as admin)");
  stop_cmd->add_option("id", capture_id, "capture id")->required();
  stop_cmd->callback(
      [&] { action = [&](ControlClient& c) { return run_stop_capture(c, opts, capture_id); }; });
  double watch = 0;
  int frames = 0;
  auto* stats_cmd = app.add_subcommand("stats", "counters of flows and attachments");
  stats_cmd
      ->add_option("-w,--watch", watch,
                   "redraw every SECONDS with packet and bit rates from the deltas")
      ->expected(0, 1)
      ->default_str("1");
  stats_cmd->add_option("--frames", frames, "with --watch: stop after N frames");
  stats_cmd->callback([&] {
    if (stats_cmd->count("--watch") > 0 && watch <= 0) watch = 1;
    action = [&](ControlClient& c) { return run_stats(c, opts, watch, frames); };
  });
  app.add_subcommand("health", "grpc.health.v1 check: exit 0 when serving")->callback([&] {
    action = [&](ControlClient& c) { return run_health(c, opts); };
  });

  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kUsage;
  }
  ControlClient client(opts);
  return action(client);
}
