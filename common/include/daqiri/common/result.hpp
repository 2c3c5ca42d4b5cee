// Errors as values at every boundary: Result<T> is std::expected<T, Error>.
// The codes mirror the gRPC status codes they are mapped to at the control edge, so a
// module reports what went wrong once and the edge translates it without guessing.
#pragma once

#include <cerrno>
#include <cstring>
#include <expected>
#include <string>
#include <string_view>
#include <utility>

namespace daqiri {

enum class ErrorCode {
  kInvalidArgument,
  kNotFound,
  kAlreadyExists,
  kPermissionDenied,
  kFailedPrecondition,
  kResourceExhausted,
  kUnavailable,
  kInternal,
};

struct Error {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;
  std::string field;  // the request or config field at fault, when one is
};

template <typename T = void>
using Result = std::expected<T, Error>;

inline std::unexpected<Error> fail(ErrorCode code, std::string message, std::string field = {}) {
  return std::unexpected<Error>(Error{code, std::move(message), std::move(field)});
}

// The code for a failed system call's errno: running out of fds, memory, space or buffers is
// exhaustion (a client may retry later, or with less), not a fault of ours.
inline ErrorCode code_of_errno(int err) {
  switch (err) {
    case EACCES:
    case EPERM:
      return ErrorCode::kPermissionDenied;
    case EMFILE:
    case ENFILE:
    case ENOMEM:
    case ENOSPC:
    case ENOBUFS:
      return ErrorCode::kResourceExhausted;
    default:
      return ErrorCode::kInternal;
  }
}

// For a failed system call: "what: strerror(errno)".
inline std::unexpected<Error> fail_errno(std::string_view what, int err = errno) {
  std::string message(what);
  message += ": ";
  message += std::strerror(err);
  return fail(code_of_errno(err), std::move(message));
}

}  // namespace daqiri
