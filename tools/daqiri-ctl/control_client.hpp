// The daemon connection of daqiri-ctl and how call failures become messages and exit codes.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <string>

#include "daqiri/v1/control.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace daqiri::ctl {

// Exit codes, documented in docs/daqiri-ctl.md.
enum Exit : int {
  kOk = 0,
  kFailed = 1,      // anything else
  kUsage = 2,       // bad command line
  kNoDaemon = 3,    // nothing listening on the socket
  kDenied = 4,      // PERMISSION_DENIED
  kRejected = 5,    // INVALID_ARGUMENT, NOT_FOUND, ALREADY_EXISTS, FAILED_PRECONDITION
  kNotServing = 6,  // health check: the daemon is draining
};

struct Options {
  std::string socket = "/run/daqiri/daqiri.sock";
  bool json = false;
  double timeout_seconds = 5;
};

class ControlClient {
 public:
  explicit ControlClient(const Options& options);

  // A context whose deadline is the --timeout.
  [[nodiscard]] std::unique_ptr<grpc::ClientContext> context() const;
  v1::Control::Stub& control() { return *control_; }
  grpc::health::v1::Health::Stub& health() { return *health_; }
  // Prints why `status` failed and returns the matching exit code.
  [[nodiscard]] int report(const grpc::Status& status) const;

 private:
  Options options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Control::Stub> control_;
  std::unique_ptr<grpc::health::v1::Health::Stub> health_;
};

}  // namespace daqiri::ctl
