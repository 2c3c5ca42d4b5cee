#include "backends/backend.hpp"

namespace daqiri::backends {

Result<dataplane::Poller*> Backend::queue_poller(const config::InterfaceConfig& itf,
                                                 const config::QueueConfig& q, bool rx) {
  return context_.poller_for(std::string(rx ? "rx:" : "tx:") + itf.name + "/" + q.name, q.core);
}

}  // namespace daqiri::backends
