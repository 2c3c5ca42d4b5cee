// Which backends and engines this daqirid was built with, and how each is opened. registry.cpp
// is the one file that knows: adding a backend is a folder under daemon/backends/ and one line
// there (docs/architecture.md, "Adding a backend").
#pragma once

#include <memory>
#include <span>

#include "backends/backend.hpp"
#include "gpu/gpu_engine.hpp"

namespace daqiri::backends {

using OpenBackend = Result<std::unique_ptr<Backend>> (*)(const BackendContext& context);

struct BuiltBackend {
  config::Backend kind;
  OpenBackend open;
};

// The backends built into this daqirid, socket first.
std::span<const BuiltBackend> built_backends();
// Opens the backend of `kind`; FAILED_PRECONDITION when it was not built.
Result<std::unique_ptr<Backend>> open_backend(config::Backend kind, const BackendContext& context);
// The GPU engine; null in a daqirid built without CUDA.
std::unique_ptr<gpu::GpuEngine> make_gpu_engine();

}  // namespace daqiri::backends
