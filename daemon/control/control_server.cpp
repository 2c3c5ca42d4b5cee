#include "control/control_server.hpp"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>
#include <grpcpp/server_posix.h>
#include <spdlog/spdlog.h>

#include <fstream>
#include <set>
#include <sstream>
#include <thread>

namespace daqiri::control {
namespace {

Result<std::string> read_file(const std::string& path, const char* what) {
  std::ifstream in(path);
  if (!in) return fail_errno(std::string("daemon.tcp.") + what + ": cannot read " + path);
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

Result<std::shared_ptr<grpc::ServerCredentials>> tls_credentials(
    const config::TcpListenerConfig& tcp) {
  auto cert = read_file(tcp.cert_file, "cert");
  if (!cert) return std::unexpected(cert.error());
  auto key = read_file(tcp.key_file, "key");
  if (!key) return std::unexpected(key.error());
  grpc::SslServerCredentialsOptions opts;
  opts.pem_key_cert_pairs.push_back({*key, *cert});
  if (!tcp.client_ca_file.empty()) {
    auto ca = read_file(tcp.client_ca_file, "client_ca");
    if (!ca) return std::unexpected(ca.error());
    opts.pem_root_certs = *ca;
    opts.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(opts);
}

}  // namespace

Result<std::unique_ptr<ControlServer>> ControlServer::start(ControlServerOptions options,
                                                            const ControlTargets& targets) {
  std::unique_ptr<ControlServer> s(new ControlServer());
  s->service_ = std::make_unique<ControlService>(targets, s->connections_);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.RegisterService(s->service_.get());
  if (!options.interceptors.empty()) {
    builder.experimental().SetInterceptorCreators(std::move(options.interceptors));
  }
  // TLS is gRPC's, on a loopback port only the gate (tcp_gate.hpp) relays to.
  int tls_port = 0;
  if (options.tcp) {
    auto creds = tls_credentials(*options.tcp);
    if (!creds) return std::unexpected(creds.error());
    builder.AddListeningPort("127.0.0.1:0", *creds, &tls_port);
  }
  s->server_ = builder.BuildAndStart();
  if (!s->server_) return fail(ErrorCode::kInternal, "the gRPC server failed to start");
  if (options.tcp) {
    if (tls_port == 0) return fail(ErrorCode::kUnavailable, "the TLS listener did not start");
    auto gate = TcpGate::start(options.tcp->address, static_cast<uint16_t>(tls_port),
                               options.tcp_limits, s->connections_);
    if (!gate) return fail(ErrorCode::kUnavailable, gate.error().message);
    s->tcp_gate_ = std::move(*gate);
  }

  auto listener = UnixListener::bind(options.socket_path, 0660, options.socket_group);
  if (!listener) return std::unexpected(listener.error());
  s->listener_ = std::move(*listener);
  grpc::Server* server = s->server_.get();
  ConnectionRegistry* connections = &s->connections_;
  auto started = s->listener_->start(
      [server, connections, path = options.socket_path, limit = options.connections_per_user,
       over = std::set<uid_t>{}](UniqueFd fd, PeerIdentity peer) mutable {
        if (limit != 0) {
          if (size_t open = connections->open_for(peer.uid); open >= limit) {
            if (over.insert(peer.uid).second) {  // once a spell
              spdlog::warn(
                  "{}: refused: {} holds {} connections, the most "
                  "daemon.limits.control_connections_per_user allows",
                  path, peer.describe(), open);
            }
            return;  // closing it is the answer: the client sees UNAVAILABLE
          }
          over.erase(peer.uid);
        }
        connections->record(fd.get(), std::move(peer));
        grpc::AddInsecureChannelFromFd(server, fd.release());  // gRPC owns it from here
      });
  if (!started) return std::unexpected(started.error());
  s->set_serving(true);
  spdlog::info("control API on unix:{}{}", options.socket_path,
               options.tcp ? " and tls:" + options.tcp->address : std::string());
  return s;
}

void ControlServer::set_serving(bool serving) {
  if (auto* health = server_ ? server_->GetHealthCheckService() : nullptr) {
    health->SetServingStatus(serving);
  }
}

void ControlServer::shutdown(std::chrono::milliseconds grace) {
  if (shut_down_) return;
  shut_down_ = true;
  if (listener_) listener_->stop();
  if (server_) {
    set_serving(false);
    // Drain the calls being handled; idle connections must not hold the stop up.
    auto deadline = std::chrono::steady_clock::now() + grace;
    while (service_->in_flight() > 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    server_->Shutdown(std::chrono::system_clock::now());
    server_->Wait();
  }
  tcp_gate_.reset();
  listener_.reset();  // removes the socket file
}

ControlServer::~ControlServer() {
  shutdown(std::chrono::milliseconds(0));
}

}  // namespace daqiri::control
