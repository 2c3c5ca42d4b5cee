// Our error codes and gRPC's, mapped once each way: the daemon answers with to_grpc_code (the
// control API, and the session socket's ERROR messages, which carry a gRPC code), and the
// client library reads the answer back with from_grpc_code.
#pragma once

#include <grpcpp/support/status_code_enum.h>

#include "daqiri/common/result.hpp"

namespace daqiri::v1 {

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

// The way back; codes we never send (OK, CANCELLED, ...) read as kInternal, and a missed
// deadline as kUnavailable, as a daemon that does not answer is.
inline ErrorCode from_grpc_code(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::INVALID_ARGUMENT:
      return ErrorCode::kInvalidArgument;
    case grpc::StatusCode::NOT_FOUND:
      return ErrorCode::kNotFound;
    case grpc::StatusCode::ALREADY_EXISTS:
      return ErrorCode::kAlreadyExists;
    case grpc::StatusCode::PERMISSION_DENIED:
      return ErrorCode::kPermissionDenied;
    case grpc::StatusCode::FAILED_PRECONDITION:
      return ErrorCode::kFailedPrecondition;
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return ErrorCode::kResourceExhausted;
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return ErrorCode::kUnavailable;
    default:
      return ErrorCode::kInternal;
  }
}

}  // namespace daqiri::v1
