"""The service's errors: one class per status, which the transports map to gRPC and HTTP codes."""

from __future__ import annotations

# Characters of a message a caller gets back. gRPC carries the message in a trailer, and a trailer
# past the channel's metadata limit (8 KiB by default, after percent-encoding) turns the answer into
# RESOURCE_EXHAUSTED; a message echoing a huge input (a 70,000-character op name) must not do that.
MAX_MESSAGE = 1500


class ServiceError(Exception):
    """An error a caller gets back; `code` is the gRPC status name, `http_status` the REST one."""

    code = "INTERNAL"
    http_status = 500

    def __init__(self, message: str) -> None:
        if len(message) > MAX_MESSAGE:
            message = f"{message[:MAX_MESSAGE]}... ({len(message) - MAX_MESSAGE} more characters)"
        super().__init__(message)
        self.message = message
        # Set once the error is counted in despina_errors_total, so that a transport that answers
        # with it counts it exactly once, wherever it was raised.
        self.counted = False


class InvalidArgument(ServiceError):
    code, http_status = "INVALID_ARGUMENT", 400


class NotFound(ServiceError):
    code, http_status = "NOT_FOUND", 404


class ResourceExhausted(ServiceError):
    code, http_status = "RESOURCE_EXHAUSTED", 413


class Unauthenticated(ServiceError):
    code, http_status = "UNAUTHENTICATED", 401


class PermissionDenied(ServiceError):
    code, http_status = "PERMISSION_DENIED", 403


class Internal(ServiceError):
    code, http_status = "INTERNAL", 500


class DeadlineExceeded(ServiceError):
    code, http_status = "DEADLINE_EXCEEDED", 504


class Unimplemented(ServiceError):
    code, http_status = "UNIMPLEMENTED", 501


class MethodNotAllowed(ServiceError):
    """An HTTP method the path does not take (gRPC has no such answer: an unknown RPC is UNIMPLEMENTED)."""

    code, http_status = "UNIMPLEMENTED", 405


class Unavailable(ServiceError):
    code, http_status = "UNAVAILABLE", 503


class FailedPrecondition(ServiceError):
    """The request is sound but the caller's setup cannot use the answer (a CUDA driver too old)."""

    code, http_status = "FAILED_PRECONDITION", 400


class Aborted(ServiceError):
    """The work started and was stopped: a kernel that faulted, or whose GPU worker died, on the daemon's GPU."""

    code, http_status = "ABORTED", 409
