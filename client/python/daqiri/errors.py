"""Exceptions: one class per gRPC status code a caller can act on, all of them DaqiriError.

Control calls raise them from the daemon's status (the message is the daemon's reason); the
session socket's ERROR messages carry the same codes.
"""
import grpc


class DaqiriError(Exception):
    """Anything daqirid refused or that broke between us and it. `code` is a grpc.StatusCode."""

    code = grpc.StatusCode.UNKNOWN

    def __init__(self, message, code=None):
        super().__init__(message)
        if code is not None:
            self.code = code


class InvalidArgument(DaqiriError):
    code = grpc.StatusCode.INVALID_ARGUMENT


class NotFound(DaqiriError):
    code = grpc.StatusCode.NOT_FOUND


class AlreadyExists(DaqiriError):
    code = grpc.StatusCode.ALREADY_EXISTS


class PermissionDenied(DaqiriError):
    code = grpc.StatusCode.PERMISSION_DENIED


class FailedPrecondition(DaqiriError):
    code = grpc.StatusCode.FAILED_PRECONDITION


class ResourceExhausted(DaqiriError):
    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class Unavailable(DaqiriError):
    """The daemon is not there, or stopped serving: a stream is detached, the session broke."""

    code = grpc.StatusCode.UNAVAILABLE


class Detached(Unavailable):
    """The daemon stopped serving this stream: flow deleted, client cut off, daemon gone."""


_BY_CODE = {cls.code: cls for cls in (InvalidArgument, NotFound, AlreadyExists, PermissionDenied,
                                      FailedPrecondition, ResourceExhausted, Unavailable)}
_BY_VALUE = {code.value[0]: code for code in grpc.StatusCode}


def from_code(code, message):
    """The exception for a grpc.StatusCode or its integer value."""
    if isinstance(code, int):
        code = _BY_VALUE.get(code, grpc.StatusCode.UNKNOWN)
    return _BY_CODE.get(code, DaqiriError)(message, code)


def from_rpc(error):
    """The exception for a grpc.RpcError raised by a stub."""
    return from_code(error.code(), error.details() or str(error.code()))
