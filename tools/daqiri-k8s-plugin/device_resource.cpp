#include "device_resource.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>

#include "daqiri/common/cdi_spec.hpp"
#include "resource_names.hpp"

namespace daqiri::k8s {
namespace {

constexpr auto kKubeletDeadline = std::chrono::seconds(5);
// A watcher looks at its stream this often even without a change (a cancelled stream ends).
constexpr auto kWatchTick = std::chrono::milliseconds(500);

// After the resource's name (unique, and a qualified name: fit for a file name).
std::string socket_name(const std::string& resource) {
  return "daqiri-" + resource.substr(resource.find('/') + 1) + ".sock";
}

}  // namespace

DeviceResource::DeviceResource(const PluginSettings& settings, Offer offer)
    : settings_(settings),
      offer_(std::move(offer)),
      socket_(settings.plugin_dir + "/" + socket_name(offer_.resource)) {}

Result<std::unique_ptr<DeviceResource>> DeviceResource::start(const PluginSettings& settings,
                                                              Offer offer) {
  std::unique_ptr<DeviceResource> r(new DeviceResource(settings, std::move(offer)));
  std::error_code ec;
  std::filesystem::remove(r->socket_, ec);  // one left by an earlier run
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + r->socket_, grpc::InsecureServerCredentials());
  builder.RegisterService(r.get());
  r->server_ = builder.BuildAndStart();
  if (!r->server_) {
    return fail(ErrorCode::kUnavailable, "cannot serve the device plugin on " + r->socket_);
  }
  if (auto ok = r->register_with_kubelet(); !ok) return std::unexpected(ok.error());
  spdlog::info("{}: registered {} ({} devices) on {}", r->offer_.what, r->offer_.resource,
               r->offer_.capacity, r->socket_);
  return r;
}

DeviceResource::~DeviceResource() {
  // The socket goes first: once a kubelet sees its stream end, it finds no socket to dial
  // again (connections already open are not touched by the unlink).
  std::error_code ec;
  std::filesystem::remove(socket_, ec);
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
}

Result<> DeviceResource::register_with_kubelet() const {
  auto channel = grpc::CreateChannel("unix:" + settings_.plugin_dir + "/kubelet.sock",
                                     grpc::InsecureChannelCredentials());
  auto stub = v1beta1::Registration::NewStub(channel);
  v1beta1::RegisterRequest req;
  req.set_version("v1beta1");
  req.set_endpoint(socket_name(offer_.resource));  // relative to the plugin folder
  req.set_resource_name(offer_.resource);
  v1beta1::Empty resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + kKubeletDeadline);
  grpc::Status status = stub->Register(&ctx, req, &resp);
  if (!status.ok()) {
    return fail(ErrorCode::kUnavailable,
                "the kubelet refused " + offer_.resource + ": " + status.error_message());
  }
  return {};
}

void DeviceResource::set_healthy(bool healthy) {
  {
    std::lock_guard lock(mutex_);
    if (healthy_ == healthy) return;
    healthy_ = healthy;
    ++generation_;
  }
  changed_.notify_all();
}

bool DeviceResource::socket_present() const {
  std::error_code ec;
  return std::filesystem::is_socket(socket_, ec);
}

v1beta1::ListAndWatchResponse DeviceResource::devices(bool healthy) const {
  v1beta1::ListAndWatchResponse resp;
  for (uint32_t i = 0; i < offer_.capacity; ++i) {
    v1beta1::Device* d = resp.add_devices();
    d->set_id(device_id(offer_.device.name, i));
    d->set_health(healthy ? "Healthy" : "Unhealthy");
  }
  return resp;
}

grpc::Status DeviceResource::GetDevicePluginOptions(grpc::ServerContext*, const v1beta1::Empty*,
                                                    v1beta1::DevicePluginOptions*) {
  return grpc::Status::OK;  // no PreStartContainer, no preferred allocation: any hold will do
}

grpc::Status DeviceResource::ListAndWatch(
    grpc::ServerContext* ctx, const v1beta1::Empty*,
    grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) {
  // Every change is sent, the last one (a withdrawn flow's unhealthy devices) before the
  // stream ends with the resource.
  uint64_t sent = UINT64_MAX;
  std::unique_lock lock(mutex_);
  while (!ctx->IsCancelled()) {
    if (sent != generation_) {
      sent = generation_;
      v1beta1::ListAndWatchResponse resp = devices(healthy_);
      lock.unlock();
      if (!writer->Write(resp)) return grpc::Status::OK;  // the kubelet went away
      lock.lock();
      continue;
    }
    if (stopping_) break;
    changed_.wait_for(lock, kWatchTick);
  }
  return grpc::Status::OK;
}

grpc::Status DeviceResource::GetPreferredAllocation(grpc::ServerContext*,
                                                    const v1beta1::PreferredAllocationRequest*,
                                                    v1beta1::PreferredAllocationResponse*) {
  return {grpc::StatusCode::UNIMPLEMENTED, "any devices will do"};
}

grpc::Status DeviceResource::Allocate(grpc::ServerContext*, const v1beta1::AllocateRequest* req,
                                      v1beta1::AllocateResponse* resp) {
  const std::string dir = cdi::socket_dir(settings_.daqiri_socket);
  for (const auto& c : req->container_requests()) {
    for (const auto& id : c.devices_ids()) {
      if (!is_device_of(id, offer_.device.name, offer_.capacity)) {
        return {grpc::StatusCode::INVALID_ARGUMENT,
                "device \"" + id + "\" is not one of " + offer_.resource + "'s"};
      }
    }
    v1beta1::ContainerAllocateResponse* out = resp->add_container_responses();
    out->add_cdi_devices()->set_name(settings_.cdi_kind + "=" + offer_.device.name);
    // The same without CDI (a kubelet or runtime that does not pass CDI devices on).
    (*out->mutable_envs())["DAQIRI_SOCKET"] = settings_.daqiri_socket;
    for (const auto& e : offer_.device.env) {
      size_t eq = e.find('=');
      (*out->mutable_envs())[e.substr(0, eq)] = e.substr(eq + 1);
    }
    v1beta1::Mount* m = out->add_mounts();
    m->set_host_path(dir);
    m->set_container_path(dir);
    m->set_read_only(true);
  }
  return grpc::Status::OK;
}

grpc::Status DeviceResource::PreStartContainer(grpc::ServerContext*,
                                               const v1beta1::PreStartContainerRequest*,
                                               v1beta1::PreStartContainerResponse*) {
  return grpc::Status::OK;
}

}  // namespace daqiri::k8s
