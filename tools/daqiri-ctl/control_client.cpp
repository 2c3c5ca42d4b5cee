#include "control_client.hpp"

#include <sys/stat.h>

#include <iostream>

namespace daqiri::ctl {

ControlClient::ControlClient(const Options& options) : options_(options) {
  grpc::ChannelArguments args;
  // Fail fast when nothing listens instead of retrying until the deadline.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  channel_ =
      grpc::CreateCustomChannel("unix:" + options.socket, grpc::InsecureChannelCredentials(), args);
  control_ = v1::Control::NewStub(channel_);
  health_ = grpc::health::v1::Health::NewStub(channel_);
}

std::unique_ptr<grpc::ClientContext> ControlClient::context() const {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(
      std::chrono::system_clock::now() +
      std::chrono::milliseconds(static_cast<int64_t>(options_.timeout_seconds * 1000)));
  return ctx;
}

int ControlClient::report(const grpc::Status& status) const {
  switch (status.error_code()) {
    case grpc::StatusCode::OK:
      return kOk;
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED: {
      struct stat st {};
      if (::stat(options_.socket.c_str(), &st) != 0) {
        std::cerr << "daqiri-ctl: no daqirid is listening on " << options_.socket
                  << " (the socket does not exist; is the service running?)\n";
      } else if (::access(options_.socket.c_str(), R_OK | W_OK) != 0) {
        std::cerr << "daqiri-ctl: permission denied on " << options_.socket
                  << " (join the socket's group, usually `daqiri`)\n";
        return kDenied;
      } else {
        std::cerr << "daqiri-ctl: daqirid on " << options_.socket
                  << " is not answering: " << status.error_message() << '\n';
      }
      return kNoDaemon;
    }
    case grpc::StatusCode::PERMISSION_DENIED:
      std::cerr << "daqiri-ctl: permission denied: " << status.error_message() << '\n';
      return kDenied;
    case grpc::StatusCode::INVALID_ARGUMENT:
      std::cerr << "daqiri-ctl: invalid request: " << status.error_message() << '\n';
      return kRejected;
    case grpc::StatusCode::NOT_FOUND:
      std::cerr << "daqiri-ctl: not found: " << status.error_message() << '\n';
      return kRejected;
    case grpc::StatusCode::ALREADY_EXISTS:
      std::cerr << "daqiri-ctl: already exists: " << status.error_message() << '\n';
      return kRejected;
    case grpc::StatusCode::FAILED_PRECONDITION:
      std::cerr << "daqiri-ctl: cannot do that now: " << status.error_message() << '\n';
      return kRejected;
    default:
      std::cerr << "daqiri-ctl: error " << status.error_code() << ": " << status.error_message()
                << '\n';
      return kFailed;
  }
}

}  // namespace daqiri::ctl
