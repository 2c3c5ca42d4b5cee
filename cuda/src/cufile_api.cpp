#include "daqiri/cuda/cufile_api.hpp"

#include <dlfcn.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace daqiri::cuda {
namespace {

// Where libcufile may be: the loader's search path first, then the toolkit's usual homes (the
// toolkit's lib folder is often not in ld.so.conf).
Result<void*> open_library(std::string& found) {
  std::string tried;
  std::string candidates[] = {
      std::getenv("DAQIRI_CUFILE_LIBRARY") ? std::getenv("DAQIRI_CUFILE_LIBRARY") : "",
      "libcufile.so.0", "/usr/local/cuda/lib64/libcufile.so.0",
      "/usr/local/cuda/targets/x86_64-linux/lib/libcufile.so.0"};
  for (const std::string& name : candidates) {
    if (name.empty()) continue;
    if (void* h = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      found = name;
      return h;
    }
    tried += std::string(tried.empty() ? "" : "; ") + ::dlerror();
  }
  return fail(ErrorCode::kUnavailable, "no libcufile (GPUDirect Storage): " + tried);
}

template <typename Fn>
Result<> symbol(void* lib, const char* name, Fn& out) {
  void* p = ::dlsym(lib, name);
  if (p == nullptr) return fail(ErrorCode::kUnavailable, std::string("libcufile lacks ") + name);
  out = reinterpret_cast<Fn>(p);
  return {};
}

Result<CuFileApi> load() {
  CuFileApi a;
  auto lib = open_library(a.library);
  if (!lib) return std::unexpected(lib.error());
  Result<> ok;
  auto step = [&](const char* name, auto& fn) {
    if (ok) ok = symbol(*lib, name, fn);
  };
  step("cuFileDriverOpen", a.driver_open);
  step("cuFileHandleRegister", a.handle_register);
  step("cuFileHandleDeregister", a.handle_deregister);
  step("cuFileBufRegister", a.buf_register);
  step("cuFileBufDeregister", a.buf_deregister);
  step("cuFileWrite", a.write);
  if (!ok) return std::unexpected(ok.error());
  if (CuFileApi::Status s = a.driver_open(); s.err != 0) {
    return fail(ErrorCode::kUnavailable, describe(s, "cuFileDriverOpen"));
  }
  struct stat st {};
  a.nvidia_fs = ::stat("/proc/driver/nvidia-fs/stats", &st) == 0;
  return a;
}

// cufile.h's names of the errors a writer meets, and what they usually mean.
const char* error_name(int err) {
  switch (err) {
    case 5001:
      return "CU_FILE_DRIVER_NOT_INITIALIZED";
    case 5007:
      return "CU_FILE_PLATFORM_NOT_SUPPORTED";
    case 5009:
      return "CU_FILE_DEVICE_NOT_SUPPORTED";
    case 5010:
      return "CU_FILE_NVFS_DRIVER_ERROR";
    case 5011:
      return "CU_FILE_CUDA_DRIVER_ERROR";
    case 5018:
      return "CU_FILE_INVALID_FILE_TYPE";
    case 5019:
      return "CU_FILE_INVALID_FILE_OPEN_FLAG";
    case 5020:
      return "CU_FILE_DIO_NOT_SET";
    case 5025:
      return "CU_FILE_PERMISSION_DENIED";
    // libcufile needs the file system's block device and its udev properties (ID_FS_USAGE):
    // tmpfs, and containers without /run/udev, end here. Its cufile.log says which.
    case 5027:
      return "CU_FILE_HANDLE_NOT_REGISTERED: no file system attributes (tmpfs, or no udev data?)";
    case 5030:
      return "CU_FILE_INTERNAL_ERROR";
    default:
      return nullptr;
  }
}

}  // namespace

Result<const CuFileApi*> CuFileApi::get() {
  // Loaded once and kept: dlclose of a library holding driver state is not safe.
  static std::once_flag once;
  static Result<CuFileApi> api = fail(ErrorCode::kInternal, "not loaded");
  std::call_once(once, [] { api = load(); });
  if (!api) return std::unexpected(api.error());
  return &*api;
}

std::string describe(const CuFileApi::Status& s, const std::string& what) {
  std::string text = what + ": cuFile error " + std::to_string(s.err);
  if (const char* name = error_name(s.err)) text += std::string(" ") + name;
  if (s.cu_err != 0) text += " (CUresult " + std::to_string(s.cu_err) + ")";
  return text;
}

std::string describe_write(ssize_t ret, int saved_errno) {
  if (ret == -1) return std::strerror(saved_errno);
  std::string text = "cuFile error " + std::to_string(-ret);
  if (const char* name = error_name(int(-ret))) text += std::string(" ") + name;
  return text;
}

}  // namespace daqiri::cuda
