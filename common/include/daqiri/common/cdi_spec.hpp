// A Container Device Interface spec that hands containers daqirid's flows and TX queues: a
// device per flow (KIND=NAME), per TX queue (KIND=tx.INTERFACE.QUEUE) and one for every flow
// (KIND=all). Each mounts the directory of the daemon's sockets, read-only (a client connects
// to a socket there; it writes nothing), and sets DAQIRI_SOCKET; a flow's device also sets
// DAQIRI_FLOW, a TX queue's DAQIRI_TX_INTERFACE and DAQIRI_TX_QUEUE, which the client
// libraries read when given no flow or queue. Nothing privileged: no device node, capability
// or hook. Whether the container's process may then attach is the daemon's access policy, by
// its uid and groups.
// cdiVersion 0.5.0: podman 4.3 (Debian 12) reads no later one, newer runtimes read it too.
// Shared by daqiri-ctl (cdi generate) and the daemon (daemon.cdi_spec).
#pragma once

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "daqiri/common/result.hpp"

namespace daqiri::cdi {

inline constexpr std::string_view kDefaultKind = "daqiri.io/flow";
inline constexpr std::string_view kAllDevice = "all";

struct TxQueueRef {
  std::string interface;
  std::string queue;
};

struct Spec {
  std::string kind{kDefaultKind};  // vendor/class
  std::string socket;              // the control socket's path, on the host and in containers
  std::vector<std::string> flows;
  std::vector<TxQueueRef> tx_queues;
};

// CDI device names: a letter or digit, then letters, digits, '_', '.', ':' and '-'. A flow whose
// name is not one (flow names may hold spaces), or that is named "all", has no device of its
// own: a container reaches it through KIND=all.
inline bool is_device_name(std::string_view name) {
  auto alnum = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  };
  if (name.empty() || !alnum(name.front()) || name == kAllDevice) return false;
  for (char c : name) {
    if (!alnum(c) && c != '_' && c != '.' && c != ':' && c != '-') return false;
  }
  return true;
}

// A YAML double-quoted scalar.
inline std::string yaml_quoted(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// A TX queue's device: tx.INTERFACE.QUEUE (a flow of that name has no device of its own).
inline std::string tx_device(const TxQueueRef& q) {
  return "tx." + q.interface + "." + q.queue;
}

// The devices of a spec besides KIND=all, each with the environment it sets: a flow's
// (DAQIRI_FLOW) and a TX queue's (DAQIRI_TX_INTERFACE, DAQIRI_TX_QUEUE). Those whose names
// are no device names are left out.
struct Device {
  std::string name;
  std::vector<std::string> env;
};
inline std::vector<Device> devices(const Spec& spec) {
  std::vector<Device> out;
  std::vector<std::string> tx_names;
  tx_names.reserve(spec.tx_queues.size());
  for (const auto& q : spec.tx_queues)
    tx_names.push_back(tx_device(q));
  for (const auto& f : spec.flows) {
    if (!is_device_name(f) || std::find(tx_names.begin(), tx_names.end(), f) != tx_names.end())
      continue;
    out.push_back({f, {"DAQIRI_FLOW=" + f}});
  }
  for (size_t i = 0; i < spec.tx_queues.size(); ++i) {
    const TxQueueRef& q = spec.tx_queues[i];
    if (!is_device_name(tx_names[i])) continue;
    out.push_back(
        {tx_names[i], {"DAQIRI_TX_INTERFACE=" + q.interface, "DAQIRI_TX_QUEUE=" + q.queue}});
  }
  return out;
}

// The folder of the daemon's sockets (the control socket's and the session socket's), which
// containers are given.
inline std::string socket_dir(const std::string& socket) {
  std::string dir = socket.substr(0, socket.find_last_of('/'));
  return dir.empty() ? "/" : dir;
}

inline std::string to_yaml(const Spec& spec) {
  const std::string dir = socket_dir(spec.socket);
  std::string y = "# Written by daqirid's tools: containers given these devices reach daqirid.\n";
  y += "cdiVersion: \"0.5.0\"\nkind: " + yaml_quoted(spec.kind) + "\n";
  y += "containerEdits:\n  env:\n    - " + yaml_quoted("DAQIRI_SOCKET=" + spec.socket) + "\n";
  y += "  mounts:\n    - hostPath: " + yaml_quoted(dir) +
       "\n      containerPath: " + yaml_quoted(dir) + "\n      options: [\"bind\", \"ro\"]\n";
  y += "devices:\n  - name: " + yaml_quoted(kAllDevice) + "\n    containerEdits:\n      env:\n" +
       "        - \"DAQIRI_FLOW=\"\n";
  for (const auto& d : devices(spec)) {
    y += "  - name: " + yaml_quoted(d.name) + "\n    containerEdits:\n      env:\n";
    for (const auto& e : d.env)
      y += "        - " + yaml_quoted(e) + "\n";
  }
  return y;
}

// Writes the spec to `path` whole or not at all (a temporary file beside it, renamed over it),
// so that a runtime reading the directory meanwhile never sees half a spec; readable by all.
inline Result<> write_spec(const std::string& path, const Spec& spec) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path target(path);
  if (target.has_parent_path()) fs::create_directories(target.parent_path(), ec);
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << to_yaml(spec);
    if (!out.flush()) {
      fs::remove(tmp, ec);
      return fail(ErrorCode::kInternal, "cannot write " + tmp);
    }
  }
  fs::permissions(tmp,
                  fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                      fs::perms::others_read,
                  ec);
  fs::rename(tmp, target, ec);
  if (ec) {
    std::string why = ec.message();
    fs::remove(tmp, ec);
    return fail(ErrorCode::kInternal, "cannot put the CDI spec at " + path + ": " + why);
  }
  return {};
}

}  // namespace daqiri::cdi
