// cuFile (GPUDirect Storage), loaded at run time from the CUDA toolkit's libcufile.so.0, so that
// daqiri builds and runs where the library is absent (CI, most hosts) and uses it where it is.
// The declarations are ours, matching cufile.h's C ABI (CUfileError_t, CUfileDescr_t, the
// entry points below), which has been stable since GDS 1.0.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>

#include "daqiri/common/result.hpp"

namespace daqiri::cuda {

struct CuFileApi {
  struct Status {  // CUfileError_t
    int err;       // CUfileOpError: 0 success, 5000 + n a cuFile error
    int cu_err;    // CUresult, when err is CU_FILE_CUDA_DRIVER_ERROR
  };
  struct Descr {  // CUfileDescr_t
    int type;     // CUfileFileHandleType: 1 = a Linux fd
    union {
      int fd;
      void* handle;
    } handle;
    const void* fs_ops;
  };
  using Handle = void*;  // CUfileHandle_t
  static constexpr int kHandleTypeFd = 1;

  Status (*driver_open)() = nullptr;
  Status (*handle_register)(Handle*, Descr*) = nullptr;
  void (*handle_deregister)(Handle) = nullptr;
  Status (*buf_register)(const void*, size_t, int) = nullptr;
  Status (*buf_deregister)(const void*) = nullptr;
  ssize_t (*write)(Handle, const void*, size_t, off_t, off_t) = nullptr;

  std::string library;     // the file dlopen found
  bool nvidia_fs = false;  // the nvidia-fs module is loaded: true GPUDirect, not compat mode

  // The process-wide table with the driver opened (once; libcufile closes it at exit).
  // kUnavailable naming why when libcufile is missing or its driver does not open.
  static Result<const CuFileApi*> get();
};

// "what: cuFile error 5011 (...)" for a failed call.
std::string describe(const CuFileApi::Status& s, const std::string& what);
// The error cuFileWrite's negative return means: -1 with errno, or -(cuFile error).
std::string describe_write(ssize_t ret, int saved_errno);

}  // namespace daqiri::cuda
