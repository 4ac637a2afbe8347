"""The errors of talking to a daemon: a leaf, so that the failover (remote_failover.py) and the remote
client (remote.py) share them without importing each other."""

from __future__ import annotations


class RemoteError(RuntimeError):
    """The daemon answered with an error (`code` is its gRPC status name)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class ServerUnavailable(RemoteError):
    """The daemon could not be reached."""
