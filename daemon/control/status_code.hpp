// The one mapping from our error codes to gRPC's, used by the control API and by the session
// socket's ERROR messages (which carry a gRPC code).
#pragma once

#include <grpcpp/support/status_code_enum.h>

#include "daqiri/common/result.hpp"

namespace daqiri::control {

inline grpc::StatusCode to_grpc_code(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return grpc::StatusCode::INVALID_ARGUMENT;
    case ErrorCode::kNotFound:
      return grpc::StatusCode::NOT_FOUND;
    case ErrorCode::kAlreadyExists:
      return grpc::StatusCode::ALREADY_EXISTS;
    case ErrorCode::kPermissionDenied:
      return grpc::StatusCode::PERMISSION_DENIED;
    case ErrorCode::kFailedPrecondition:
      return grpc::StatusCode::FAILED_PRECONDITION;
    case ErrorCode::kResourceExhausted:
      return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case ErrorCode::kUnavailable:
      return grpc::StatusCode::UNAVAILABLE;
    case ErrorCode::kInternal:
      return grpc::StatusCode::INTERNAL;
  }
  return grpc::StatusCode::INTERNAL;
}

}  // namespace daqiri::control
