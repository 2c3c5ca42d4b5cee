// One GPU as the daemon uses it: its driver entry points, its primary context (retained for the
// daemon's life, never a context of its own), its UUID for clients to find it by.
#pragma once

#include <array>
#include <cstdint>
#include <memory>

#include "daqiri/cuda/driver_api.hpp"

namespace daqiri::gpu {

class GpuDevice {
 public:
  // `ordinal` as the CUDA runtime numbers devices in this process.
  static Result<std::unique_ptr<GpuDevice>> open(int ordinal);

  [[nodiscard]] const cuda::DriverApi& api() const { return *api_; }
  [[nodiscard]] int ordinal() const { return ordinal_; }
  [[nodiscard]] CUdevice device() const { return ctx_.device(); }
  [[nodiscard]] CUcontext context() const { return ctx_.get(); }
  [[nodiscard]] const std::array<uint8_t, 16>& uuid() const { return uuid_; }
  // Makes the device current for the runtime API on the calling thread (its primary context).
  [[nodiscard]] Result<> make_current() const;
  // The same on a poller thread, which remembers the device it made current last (a runtime
  // call per poll would be waste): false if cudaSetDevice failed (cudaGetLastError says why).
  [[nodiscard]] bool make_current_on_poller() const;

 private:
  GpuDevice(const cuda::DriverApi* api, int ordinal, cuda::PrimaryContext ctx,
            std::array<uint8_t, 16> uuid)
      : api_(api), ordinal_(ordinal), ctx_(std::move(ctx)), uuid_(uuid) {}

  const cuda::DriverApi* api_;
  int ordinal_;
  cuda::PrimaryContext ctx_;
  std::array<uint8_t, 16> uuid_;
};

// "what: cudaErrorX (text)" for a failed runtime call.
Error runtime_error(int err, const std::string& what);

}  // namespace daqiri::gpu
