// A CUDA runtime failure as the library's Error: what failed, then CUDA's own words.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "daqiri/common/result.hpp"

namespace daqiri {

inline Error cuda_error(cudaError_t e, const std::string& what) {
  return Error{ErrorCode::kInternal, what + ": " + cudaGetErrorString(e), {}};
}

}  // namespace daqiri
