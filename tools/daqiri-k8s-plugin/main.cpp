// daqiri-k8s-plugin: a Kubernetes node's device plugin for daqirid's flows (docs/kubernetes.md).
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <csignal>

#include "node_agent.hpp"

namespace {
std::atomic<bool> g_stop{false};
void on_signal(int) {
  g_stop.store(true);
}
}  // namespace

int main(int argc, char** argv) {
  daqiri::k8s::PluginSettings s;
  int poll_ms = 1000;
  CLI::App app{
      "Advertises daqirid's flows and TX queues to the kubelet as extended resources "
      "(DOMAIN/flow-NAME, DOMAIN/tx-INTERFACE-QUEUE)"};
  app.add_option("-s,--socket", s.daqiri_socket, "daqirid's control socket");
  app.add_option("--plugin-dir", s.plugin_dir, "the kubelet's device-plugin folder");
  app.add_option("--cdi-kind", s.cdi_kind, "the CDI kind of the daemon's devices");
  app.add_option("--resource-domain", s.resource_domain, "the resources' domain");
  app.add_option("--capacity", s.capacity, "containers that may hold one flow at once")
      ->check(CLI::Range(1, 64));
  app.add_option("--poll-ms", poll_ms, "how often the flows and queues are read")
      ->check(CLI::Range(10, 60000));
  CLI11_PARSE(app, argc, argv);
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  std::signal(SIGPIPE, SIG_IGN);
  spdlog::info("daqiri-k8s-plugin: flows and TX queues of {} under {}, kubelet at {}",
               s.daqiri_socket, s.resource_domain, s.plugin_dir);
  daqiri::k8s::NodeAgent agent(s, std::chrono::milliseconds(poll_ms));
  agent.run(g_stop);
  spdlog::info("daqiri-k8s-plugin: stopped");
  return 0;
}
