#include "control/cdi_writer.hpp"

#include <spdlog/spdlog.h>

#include <filesystem>

#include "daqiri/common/cdi_spec.hpp"

namespace daqiri::control {

CdiWriter::CdiWriter(std::string path, std::string socket, const core::Model& model)
    : path_(std::move(path)), socket_(std::move(socket)), model_(model) {
  refresh();
}

CdiWriter::~CdiWriter() {
  std::error_code ec;
  std::filesystem::remove(path_, ec);
}

void CdiWriter::refresh() {
  std::lock_guard lock(mutex_);
  cdi::Spec spec;
  spec.socket = socket_;
  for (const auto& f : model_.flows())
    spec.flows.push_back(f.name);
  for (const auto& itf : model_.config().interfaces) {
    for (const auto& q : itf.tx_queues)
      spec.tx_queues.push_back({itf.name, q.name});
  }
  if (auto ok = cdi::write_spec(path_, spec); !ok) {
    spdlog::warn("daemon.cdi_spec: {}", ok.error().message);
  }
}

}  // namespace daqiri::control
