// daqirid: command line, configuration, then the Daemon. Exit codes: 0 clean stop or valid
// config, 1 failed to start, 2 invalid configuration or command line, 3 a poller did not stop
// (DataPlane::stop_pollers exits without cleanup).
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>

#include "build_info.hpp"
#include "config/config_loader.hpp"
#include "config/schema_common.hpp"
#include "daemon.hpp"
#include "system/logging.hpp"
#include "system/signal_watch.hpp"

namespace {

using daqiri::config::Config;
using daqiri::config::Diagnostics;

std::string version_text() {
  using namespace daqiri::build;
  std::string out = std::string("daqirid ") + kVersion + "\nbackends: socket";
  if (kHaveDpdk) out += ", dpdk";
  if (kHaveRdma) out += ", rdma";
  if (kHaveXdp) out += ", xdp";
  out += std::string("\n  dpdk: ") + (kHaveDpdk ? "yes, " : "no, ") + kDpdkDetail;
  out += std::string("\n  rdma: ") + (kHaveRdma ? "yes, " : "no, ") + kRdmaDetail;
  out += std::string("\n  cuda: ") + (kHaveCuda ? "yes, " : "no, ") + kCudaDetail;
  out += std::string("\n  xdp: ") + (kHaveXdp ? "yes, " : "no, ") + kXdpDetail;
  if (*kSanitizer) out += std::string("\nsanitizer: ") + kSanitizer;
  return out;
}

std::optional<Config> load(const std::string& path, Diagnostics& diags) {
  auto facts = daqiri::config::SystemFacts::probe();
  if (path.empty()) {
    return daqiri::config::parse_config(daqiri::config::embedded_default_config(),
                                        std::string(daqiri::config::kEmbeddedSource), facts, diags);
  }
  return daqiri::config::load_config_file(path, facts, diags);
}

}  // namespace

int main(int argc, char** argv) {
  daqiri::system::SignalWatch::block_process_signals();  // before any thread exists

  CLI::App app{"daqirid: zero-copy packet I/O for unprivileged processes", "daqirid"};
  std::string config_path;
  std::string check_path;
  std::string socket_path;
  std::optional<std::string> metrics_address;
  std::string log_level;
  bool print_default = false;
  app.add_option("-c,--config", config_path, "YAML configuration (default: the embedded one)")
      ->check(CLI::ExistingFile);
  app.add_option("--check-config", check_path, "validate FILE, print what is wrong, and exit")
      ->type_name("FILE");
  app.add_option(
      "-s,--socket", socket_path,
      "control socket path (overrides daemon.socket; the session socket sits beside it)");
  app.add_option("--metrics", metrics_address,
                 "metrics listener host:port, or off (overrides daemon.metrics)");
  app.add_option("-l,--log-level", log_level, "trace, debug, info, warn, error, critical, off");
  app.add_flag("--print-default-config", print_default, "print the embedded configuration");
  app.set_version_flag("-V,--version", version_text());
  CLI11_PARSE(app, argc, argv);

  if (print_default) {
    std::cout << daqiri::config::embedded_default_config();
    return 0;
  }

  Diagnostics diags;
  if (!check_path.empty()) {
    auto config = load(check_path, diags);
    std::cerr << diags.render();
    if (!config) {
      std::cerr << check_path << ": " << diags.error_count() << " error(s)\n";
      return 2;
    }
    std::cout << check_path << ": valid "
              << (config->schema == daqiri::config::Schema::kDaqiri ? "DAQIRI" : "daqirid")
              << " configuration: " << config->memory_regions.size() << " memory regions, "
              << config->interfaces.size() << " interfaces, " << config->flows.size() << " flows"
              << (config->reorders.empty()
                      ? std::string()
                      : ", " + std::to_string(config->reorders.size()) + " reorders")
              << "\n";
    return 0;
  }

  auto config = load(config_path, diags);
  if (!config) {
    std::cerr << diags.render();
    return 2;
  }
  if (!log_level.empty()) {
    bool found = false;
    for (const auto& [name, level] : daqiri::config::log_level_names()) {
      if (name == log_level) {
        config->daemon.log_level = level;
        found = true;
      }
    }
    if (!found) {
      std::cerr << "--log-level: expected trace, debug, info, warn, error, critical or off, got \""
                << log_level << "\"\n";
      return 2;
    }
  }
  if (!socket_path.empty()) config->daemon.socket_path = socket_path;
  if (metrics_address)
    config->daemon.metrics_address = *metrics_address == "off" ? "" : *metrics_address;

  daqiri::system::setup_logging(config->daemon.log_level);
  for (const auto& d : diags.items())
    spdlog::warn("{}", d.render());

  auto daemon = daqiri::Daemon::start(std::move(*config));
  if (!daemon) {
    spdlog::critical("cannot start: {}", daemon.error().message);
    return 1;
  }
  return (*daemon)->run();
}
